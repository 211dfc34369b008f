import copy
import re

import pytest
import yaml

from ctxvar.config.checks import check_config
from ctxvar.config.entries import model_id, models_by_id
from ctxvar.config.hashes import extraction_config_hash
from ctxvar.config.schema import check_schema
from ctxvar.errors import ConfigError

from support.workflow_runs import REPO

DEMO = yaml.safe_load(open("config/demo.yaml"))


def test_model_id_derived_from_name_and_revision():
    assert model_id({"name": "EleutherAI/pythia-70m"}) == "EleutherAI--pythia-70m"
    assert model_id({"name": "EleutherAI/pythia-70m", "revision": "step1000"}) == "EleutherAI--pythia-70m@step1000"
    assert model_id({"name": "gpt2", "revision": "main"}) == "gpt2"
    assert model_id({"id": "mine", "name": "gpt2"}) == "mine"


@pytest.mark.parametrize(
    "models, message",
    [
        ([{"name": "gpt2"}, {"name": "gpt2"}], "duplicate model id 'gpt2'"),
        ([{"id": "summary", "name": "gpt2"}], "reserved"),
        ([{"id": "x", "init": "random"}], "needs 'arch'"),
        ([{"id": "x"}], "needs 'name'"),
    ],
)
def test_bad_model_entries_fail_with_one_line(models, message):
    config = {**copy.deepcopy(DEMO), "models": models}
    with pytest.raises(ConfigError, match=message) as error:
        check_config(config)
    assert "\n" not in str(error.value)


def test_missing_local_corpus_file_is_named():
    config = copy.deepcopy(DEMO)
    config["corpus"].update(source="text", path="no/such/file.txt")
    with pytest.raises(ConfigError, match="file not found: no/such/file.txt"):
        check_config(config)


@pytest.mark.parametrize("name", ["/data/checkpoints/my-bert", "./checkpoints/my-bert", "../my-bert", "~/my-bert"])
def test_a_model_path_that_does_not_exist_is_named_with_its_entry(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = {**copy.deepcopy(DEMO), "models": [{"name": name}]}
    with pytest.raises(ConfigError) as error:
        check_config(config)
    assert str(error.value).startswith(f"models[]: entry 'my-bert': {name} does not exist")
    assert "\n" not in str(error.value)


def test_a_model_path_that_exists_passes_and_a_file_is_not_a_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my-bert").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"")
    for name in (str(tmp_path / "my-bert"), "~/my-bert", "bert-base-uncased", "EleutherAI/pythia-70m"):
        check_config({**copy.deepcopy(DEMO), "models": [{"name": name}]})
    with pytest.raises(ConfigError, match="weights.bin is not a directory"):
        check_config({**copy.deepcopy(DEMO), "models": [{"name": str(tmp_path / "weights.bin")}]})


def test_a_corpus_path_that_is_a_directory_is_named(tmp_path):
    config = copy.deepcopy(DEMO)
    config["corpus"].update(source="text", path=str(tmp_path))
    with pytest.raises(ConfigError, match=f"corpus.path: is a directory, not a file: {tmp_path}"):
        check_config(config)


def test_config_hash_tracks_science_not_other_models():
    config = copy.deepcopy(DEMO)
    models = models_by_id(config)
    before = extraction_config_hash(config, models["tiny-bert"])
    config["models"].append({"id": "extra", "init": "random", "arch": "gpt2"})
    config["device"] = "cpu"
    assert extraction_config_hash(config, models["tiny-bert"]) == before
    config["dtype"] = "bfloat16"
    assert extraction_config_hash(config, models["tiny-bert"]) != before


def test_the_configuration_reference_is_generated_from_the_schema():
    """config/README.md is the schema's descriptions and defaults; regenerate with python -m ctxvar.config.reference."""

    from ctxvar.config.reference import REFERENCE, SCHEMA, markdown

    assert (REPO / REFERENCE).read_text() == markdown(yaml.safe_load((REPO / SCHEMA).read_text()))


def test_the_schema_loaded_by_libyaml_is_what_the_pure_python_loader_reads():
    from ctxvar.config.schema import SCHEMA, SCHEMA_PATH

    assert repr(SCHEMA) == repr(yaml.safe_load(SCHEMA_PATH.read_text()))  # repr: 1 and 1.0, True and 1 differ


def test_required_keys_have_no_default_and_the_reference_says_required():
    """A default on a required key would be documented but never used (corpus.source once read "hf")."""

    from ctxvar.config.reference import SCHEMA, markdown

    schema = yaml.safe_load((REPO / SCHEMA).read_text())
    reference = markdown(schema)
    for key, spec in (("corpus", schema), ("corpus.source", schema["properties"]["corpus"])):
        name = key.rsplit(".", 1)[-1]
        assert name in spec["required"] and "default" not in spec["properties"][name], key
        row = next(line for line in reference.splitlines() if line.startswith(f"| `{key}` |"))
        assert row.split(" | ")[2] == "*required*", row


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
