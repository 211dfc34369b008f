"""Integration tests of ctxvar.files."""
