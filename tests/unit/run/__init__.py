"""Unit tests of ctxvar.run."""
