"""The errors that reach the user as one line (ctxvar.errors): every one is a CtxvarError, which the entry scripts
print without a traceback; an exception's first line for the messages that quote a library's error; byte counts in
the decimal unit that shows three significant digits."""

from __future__ import annotations

import inspect

import pytest

from ctxvar import errors


def test_every_error_of_the_module_is_a_ctxvar_error():
    classes = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if cls.__module__ == errors.__name__]
    assert errors.CtxvarError in classes and errors.InsufficientData in classes
    assert all(issubclass(cls, errors.CtxvarError) for cls in classes)
    assert issubclass(errors.CtxvarError, Exception) and not issubclass(errors.CtxvarError, OSError)


def test_first_line_is_the_messages_first_line_or_the_type_without_one():
    assert errors.first_line(ValueError("bad header\n  at byte 12\n")) == "bad header"
    assert errors.first_line(OSError("\n  indented first\nsecond")) == "indented first"
    assert errors.first_line(KeyError()) == "KeyError"
    assert errors.first_line(RuntimeError("   ")) == "RuntimeError"


@pytest.mark.parametrize(
    "n_bytes, text",
    [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1 kB"),
        (412_345, "412 kB"),
        (1_254_000_000, "1.25 GB"),
        (3.5e12, "3.5 TB"),
        (-2_000_000, "-2 MB"),
    ],
)
def test_size_text_takes_the_largest_decimal_unit_and_three_significant_digits(n_bytes, text):
    assert errors.size_text(n_bytes) == text
