"""Unit tests of ctxvar.files."""
