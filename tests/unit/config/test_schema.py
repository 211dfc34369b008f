"""A number or boolean that reaches the config as text says so, and why: Snakemake reads the values inside a
``--config`` mapping with YAML's BaseLoader, which keeps every scalar as text, so ``--config
geometry='{batches: 8}'`` was refused as "'8' is not a whole number (no decimal point)"."""

from __future__ import annotations

import copy

import pytest

from ctxvar.config.schema import check_schema
from ctxvar.errors import ConfigError

from support.workflow_runs import DEMO


@pytest.mark.parametrize(
    "key, text", [("batches", "8"), ("sample_size", "64"), ("cosine", "false"), ("ethayarajh", "true")]
)
def test_a_quoted_number_or_boolean_names_the_cause(key, text):
    config = copy.deepcopy(DEMO)
    config["geometry"] = {**config.get("geometry", {}), key: text}
    with pytest.raises(ConfigError) as error:
        check_schema(config)
    message = str(error.value)
    assert message.startswith(f"geometry.{key}: {text!r} is not ") and " but text (" in message
    assert "--config" in message and "\n" not in message


def test_other_text_keeps_the_plain_message():
    config = {**copy.deepcopy(DEMO), "shards": "eight"}
    with pytest.raises(ConfigError) as error:
        check_schema(config)
    assert str(error.value) == "shards: 'eight' is not a whole number (no decimal point)"
