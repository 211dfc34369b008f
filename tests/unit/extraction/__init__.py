"""Unit tests of ctxvar.extraction."""
