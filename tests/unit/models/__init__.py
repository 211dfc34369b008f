"""Unit tests of ctxvar.models."""
