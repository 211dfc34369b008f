"""Integration tests of ctxvar.stats."""
