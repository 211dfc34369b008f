"""Integration tests of ctxvar.extraction."""
