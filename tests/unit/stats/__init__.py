"""Unit tests of ctxvar.stats."""
