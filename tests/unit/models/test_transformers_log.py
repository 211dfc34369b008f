"""transformers' own messages during a block go to the job log, not the console (ctxvar.models.transformers_log):
each is one INFO line of ctxvar's logger naming transformers' logger, and transformers' handlers come back after
the block, an error in it included."""

from __future__ import annotations

import logging

import pytest

from ctxvar.models.transformers_log import transformers_into_log


class Kept(logging.Handler):
    """A handler that keeps the records it is given, as a console would show them."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_transformers_messages_become_info_lines_of_ctxvar_during_the_block(caplog):
    library = logging.getLogger("transformers")
    console = Kept()
    library.addHandler(console)
    try:
        with caplog.at_level(logging.INFO, logger="ctxvar.models.transformers_log"):
            with transformers_into_log():
                logging.getLogger("transformers.modeling_utils").warning("Some weights were not initialized")
        assert console.records == [], "nothing reached transformers' own handlers"
        assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
            (
                "ctxvar.models.transformers_log",
                logging.INFO,
                "transformers.modeling_utils: Some weights were not initialized",
            )
        ]
        logging.getLogger("transformers.modeling_utils").warning("after the block")
        assert [r.getMessage() for r in console.records] == ["after the block"]
    finally:
        library.removeHandler(console)


def test_transformers_handlers_come_back_after_an_error_in_the_block():
    library = logging.getLogger("transformers")
    handlers, propagate = library.handlers[:], library.propagate
    with pytest.raises(RuntimeError):
        with transformers_into_log():
            raise RuntimeError("loading failed")
    assert library.handlers == handlers and library.propagate == propagate
