"""The shape of an error's message: one line, no traceback, as every error ctxvar raises for a user's input is."""

from __future__ import annotations

import pytest


def one_line(error: pytest.ExceptionInfo) -> str:
    """The message of the exception ``error`` caught, checked to be one line holding no traceback."""
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message
