"""Unit tests of ctxvar.corpus."""
