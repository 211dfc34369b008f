"""Unit tests of ctxvar.figures."""
