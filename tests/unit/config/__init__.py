"""Unit tests of ctxvar.config."""
