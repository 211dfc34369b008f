"""Integration tests of ctxvar.models."""
