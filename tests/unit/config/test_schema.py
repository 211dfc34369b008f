"""The config's schema (ctxvar.config.schema, workflow/schemas/config.schema.yaml). A number or boolean that reaches the
config as text says so, and why: Snakemake reads the values inside a ``--config`` mapping with YAML's BaseLoader, which
keeps every scalar as text, so ``--config geometry='{batches: 8}'`` must not be refused as "'8' is not a whole number
(no decimal point)". Every integer key has a maximum; a key that appears twice in a config file is refused."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from ctxvar.config.schema import check_schema, load_config_file
from ctxvar.errors import ConfigError

from support.messages import one_line
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


def test_the_schema_loaded_by_libyaml_is_what_the_pure_python_loader_reads():
    from ctxvar.config.schema import SCHEMA, SCHEMA_PATH

    assert repr(SCHEMA) == repr(yaml.safe_load(SCHEMA_PATH.read_text()))  # repr: 1 and 1.0, True and 1 differ


def integer_keys(properties: dict, prefix: str = ""):
    """Dotted paths of every integer key of the schema (``models[].`` for keys of each models entry)."""
    for name, spec in properties.items():
        kinds = spec.get("type") if isinstance(spec.get("type"), list) else [spec.get("type")]
        if "integer" in kinds:
            yield f"{prefix}{name}"
        yield from integer_keys(spec.get("properties", {}), f"{prefix}{name}.")
        yield from integer_keys(spec.get("items", {}).get("properties", {}), f"{prefix}{name}[].")


INTEGER_KEYS = list(integer_keys(yaml.safe_load(open("workflow/schemas/config.schema.yaml"))["properties"]))


@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_an_absurd_integer_is_refused_at_start_up_naming_the_maximum(key):
    """2⁶³ overflows numpy's int64 (chunk_sentences raised OverflowError in split_corpus); every integer key
    has a maximum that keeps it within numpy and memory."""
    assert {"shards", "geometry.sample_size", "models[].hidden_size"} <= set(INTEGER_KEYS)
    config = copy.deepcopy(DEMO)
    *parents, name = key.replace("[]", ".0").split(".")
    target = config
    for parent in parents:
        target = target[int(parent)] if parent.isdigit() else target.setdefault(parent, {})
    target[name] = 2**63
    with pytest.raises(
        ConfigError,
        match=f"^{re.escape(key.replace('[]', '.0'))}: 9223372036854775808 is greater than the maximum of [0-9]+$",
    ) as error:
        check_schema(config)
    assert "\n" not in str(error.value)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("corpus:\n  source: synthetic\n  fraction: 1.0\n  fraction: 0.5\nmodels: []\n")
    with pytest.raises(ConfigError, match="study.yaml: line 4: key 'fraction' appears twice") as error:
        load_config_file(path)
    one_line(error)
