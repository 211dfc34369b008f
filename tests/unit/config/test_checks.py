"""The checks Snakemake's start-up runs on a config (ctxvar.config.checks, called from workflow/rules/common.smk),
in process: bad model entries, paths and values stop the run before any job with one readable line;
tests/workflow/test_workflow.py runs two of these through Snakemake. An ``init: archive`` entry names one file,
which holds one version of the model, so ``revision`` or ``revisions`` on it are refused, as on a local model
directory."""

from __future__ import annotations

import copy
import json
import math
import zipfile

import pytest

from ctxvar.config.checks import check_config
from ctxvar.config.entries import models_by_id
from ctxvar.config.schema import check_schema
from ctxvar.corpus.enwik8 import check_file as check_enwik8_file
from ctxvar.errors import ConfigError, CtxvarError
from ctxvar.models.archive import check_archives

from support.enwik8_like import write_enwik8_like
from support.messages import one_line
from support.workflow_runs import DEMO, REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


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


NO_SUCH_ARCHIVE = {"archive": "m.zip", "sha256": {"model.safetensors": "0" * 64}}


def start_up_checks(config: dict, run_folder) -> None:
    """What the workflow checks before any job, in its order: schema, ctxvar's own checks, the model entries."""
    check_schema(config)
    check_config(config)
    check_enwik8_file(config["corpus"])
    check_archives(models_by_id(config), run_folder)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"corpus": {**DEMO["corpus"], "fraction": 0}}, "corpus.fraction: 0 is less than or equal to the minimum of 0"),
        ({"shards": 0}, "shards: 0 is less than the minimum of 1"),
        ({"corpus": {**DEMO["corpus"], "rows": 0}}, "corpus.rows: 0 is less than the minimum of 1"),
        ({"corpus": {**DEMO["corpus"], "rows": 2.0}}, "corpus.rows: 2.0 is not a whole number"),
        ({"corpus": {**DEMO["corpus"], "sampling": "random"}}, "corpus.sampling: 'random' is not allowed"),
        (
            {"corpus": {**DEMO["corpus"], "rows": 128, "fraction": 0.01}},
            "ctxvar error: corpus.rows: 128 and corpus.fraction: 0.01 both set the sample's size; keep rows and remove "
            "fraction (rows needs its default, 1.0), or remove rows",
        ),
        (
            {"corpus": {**DEMO["corpus"], "rows": 128, "sampling": "hash"}},
            "ctxvar error: corpus.rows: sampling hash keeps the rows whose hash falls below corpus.fraction, so it "
            "cannot draw exactly 128; use sampling: paper or python-random with rows, or remove rows",
        ),
        ({"dtype": "fp8"}, "dtype: 'fp8' is not allowed; use one of float32, bfloat16, float16"),
        ({"shards": "eight"}, "ctxvar error: shards: 'eight' is not a whole number"),
        ({"shards": 2.0}, "ctxvar error: shards: 2.0 is not a whole number"),
        (
            {"shards": 2**63},
            "ctxvar error: shards: 9223372036854775808 is greater than the maximum of 10000",
        ),
        (
            {"analysis": {"min_log10_n": 4, "max_log10_n": 2}},
            "ctxvar error: analysis: min_log10_n (4) is above max_log10_n (2)",
        ),
        (
            {"corpus": {**DEMO["corpus"], "source": "csv"}},
            "corpus.source: 'csv' is not allowed; use one of hf, text, parquet, jsonl",
        ),
        (
            {"corpus": {**DEMO["corpus"], "source": "text", "path": "missing.txt"}},
            "corpus.path: file not found: missing.txt",
        ),
        ({"modles": []}, "Additional properties are not allowed ('modles' was unexpected)"),
        (
            {"models": [{"name": "/data/checkpoints/my-bert"}]},  # the README's example path
            "ctxvar error: models[]: entry 'my-bert': /data/checkpoints/my-bert does not exist",
        ),
        (
            {"models": [{"id": "m", "init": "archive", "package": "ctxvar-no-such-package", **NO_SUCH_ARCHIVE}]},
            "ctxvar error: models[]: entry 'm': package 'ctxvar-no-such-package' is not installed",
        ),
        ({"models": DEMO["models"] + DEMO["models"][:1]}, "duplicate model id 'tiny-bert'"),
    ],
)
def test_bad_config_stops_before_any_job_with_a_readable_line(tmp_path, monkeypatch, change, message):
    monkeypatch.chdir(tmp_path)  # relative corpus paths resolve where Snakemake runs
    with pytest.raises(CtxvarError) as error:
        start_up_checks({**DEMO, **change}, tmp_path / "results" / "demo")
    assert message.removeprefix("ctxvar error: ") in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "results").exists()


ARCHIVE = {"id": "zipped", "init": "archive", "archive": "m.zip", "sha256": {"model.safetensors": "0" * 64}}
GGUF = {"id": "quantized", "init": "archive", "gguf": "m.gguf", "sha256": {"m.gguf": "0" * 64}}


@pytest.mark.parametrize("entry", [ARCHIVE, GGUF])
@pytest.mark.parametrize("versions", [{"revision": "v1"}, {"revisions": ["step0", "step100"]}])
def test_a_revision_on_an_archive_is_refused_with_one_line(entry, versions):
    config = {**DEMO, "models": [{**entry, **versions}]}
    check_schema(config)
    with pytest.raises(ConfigError) as error:
        check_config(config)
    message = str(error.value)
    assert f"entry {entry['id']!r}" in message and "holds one version of the model" in message
    assert f"remove {next(iter(versions))}" in message and "\n" not in message


def test_an_archive_without_revisions_passes():
    config = {**DEMO, "models": [ARCHIVE]}
    check_schema(config)
    check_config(config)


@pytest.mark.parametrize("path", [None, "enwik8", "enwik8.zip"])
def test_an_enwik8_corpus_from_the_hub_or_a_local_file_passes(tmp_path, path):
    corpus = {**DEMO["corpus"], "source": "enwik8", "path": path and str(tmp_path / path)}
    if path:
        write_enwik8_like(tmp_path)
    start_up_checks({**DEMO, "corpus": corpus}, tmp_path / "results" / "demo")


@pytest.mark.parametrize(
    "path, message",
    [
        ("no/such/enwik8.zip", "corpus.path: file not found: no/such/enwik8.zip (paths are relative to the working"),
        (["enwik8", "enwik8"], "corpus.path: source enwik8 reads one file, not 2; name one"),
        ("other.zip", "corpus.path: other.zip is a zip without a member named enwik8 (members: enwik9)"),
        ("utf16.txt", "corpus.path: utf16.txt is not UTF-8 text (byte 0: b'\\xff\\xfe"),
    ],
)
def test_a_bad_enwik8_path_is_one_line_at_start_up(tmp_path, monkeypatch, path, message):
    monkeypatch.chdir(tmp_path)  # relative corpus paths resolve where Snakemake runs
    write_enwik8_like(tmp_path)
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as archive:
        archive.writestr("enwik9", "text")
    (tmp_path / "utf16.txt").write_text("text", encoding="utf-16")
    config = {**DEMO, "corpus": {**DEMO["corpus"], "source": "enwik8", "path": path}}
    with pytest.raises(ConfigError) as error:
        start_up_checks(config, tmp_path / "results" / "demo")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


WEIGHTS_ONLY = {"name": "EleutherAI/pythia-70m", "forward": False, "revisions": ["step0", "step1000"]}


def test_a_config_whose_models_need_no_corpus_runs_without_one():
    config = {key: value for key, value in copy.deepcopy(DEMO).items() if key != "corpus"}
    check_config({**config, "models": [WEIGHTS_ONLY, {"name": "gpt2", "forward": False}]})


@pytest.mark.parametrize(
    "models, message",
    [
        ([WEIGHTS_ONLY, {"name": "gpt2"}], "models 'gpt2' read the corpus"),
        ([{"id": "r", "init": "random", "arch": "bert", "forward": False}], "models 'r' read the corpus"),
    ],
)
def test_without_a_corpus_a_model_that_reads_it_is_named_in_one_line(models, message):
    config = {key: value for key, value in copy.deepcopy(DEMO).items() if key != "corpus"}
    with pytest.raises(ConfigError, match=message) as error:
        check_config({**config, "models": models})
    assert "\n" not in str(error.value) and "forward: false" in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"models": [{"id": "null", "init": "gaussian", "forward": False}]}, "has no weights"),
        ({"figures": {"pca": {"model": "gpt2"}}}, "figures.pca.model: 'gpt2' has forward: false"),
    ],
)
def test_forward_false_where_nothing_would_be_computed_is_one_line(change, message):
    config = copy.deepcopy(DEMO)
    config["models"] = [*config["models"], {"name": "gpt2", "forward": False}]
    for key, value in change.items():
        config[key] = {**config[key], **value} if key == "figures" else value
    with pytest.raises(ConfigError, match=message):
        check_config(config)


def demo_with(**changes) -> dict:
    config = json.loads(json.dumps(DEMO))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        target = config
        for parent in parents:
            target = target[int(parent)] if parent.isdigit() else target[parent]
        target[key] = value
    return config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"models__0__id": "tiny-bert\n"}, "models.0.id: 'tiny-bert\\\\n'|id 'tiny-bert\\\\n' is not usable"),
        ({"models__0__id": "../escape"}, "not usable"),
        ({"analysis__min_log10_n": 3, "analysis__max_log10_n": 2}, "min_log10_n \\(3\\) is above max_log10_n \\(2\\)"),
        ({"corpus__fraction": math.nan}, "corpus.fraction: nan is not a finite number"),
        ({"corpus__synthetic__zipf_exponent": math.inf}, "zipf_exponent: inf is not a finite number"),
        ({"analysis__max_log10_n": -math.inf}, "max_log10_n: -inf is not a finite number"),
        ({"corpus__seed": 2**32}, "corpus.seed: 4294967296 is greater than the maximum"),
        ({"corpus__seed": -1}, "corpus.seed: -1 is less than the minimum"),
        ({"models__0__seed": 2**40}, "models.0.seed: .* is greater than the maximum"),
        ({"figures__pca__seed": 2**33}, "figures.pca.seed"),
        ({"shards": 2.0}, "shards: 2.0 is not a whole number"),
        ({"shards": True}, "shards: True is not a whole number"),
        ({"shards": "8"}, "shards: '8' is not a whole number"),
        ({"shards": 0}, "shards: 0 is less than the minimum"),
        ({"geometry__sample_size": 1e9}, "sample_size: 1000000000.0 is not a whole number"),
        ({"models__0__hidden_size": 66}, "hidden_size 66 is not a multiple of num_heads 4"),
        ({"models__3__revisions": ["step0", "step10\n"]}, "revision 'step10\\\\n' is not usable|revisions"),
        ({"run": "my run"}, "run: 'my run' is not usable"),
        ({"device": "gpu"}, "device: 'gpu' is not allowed; use one of auto, cuda, cpu"),
        ({"models__0__init": "archive"}, "init: archive and needs 'archive' \\(the .zip\\) and 'sha256'"),
        ({"models__0__sha256": {"model.safetensors": "0" * 64}}, "sets sha256, which only init: archive uses"),
        (
            {"models__0__init": "archive", "models__0__archive": "m.zip", "models__0__sha256": {"w": "AB" * 32}},
            "sha256",
        ),
        ({"models__0__init": "archive", "models__0__archive": "m.zip", "models__0__sha256": {}}, "sha256"),
    ],
)
def test_bad_config_values_fail_at_start_with_one_line(changes, message):
    config = demo_with(**changes)
    with pytest.raises(ConfigError, match=message) as error:
        check_schema(config, SCHEMA)
        check_config(config)
        models_by_id(config)
    one_line(error)


def test_a_model_name_with_a_trailing_newline_is_refused():
    config = demo_with(models=[{"name": "gpt2\n"}])
    with pytest.raises(ConfigError, match="name 'gpt2\\\\n' has leading or trailing spaces or control characters"):
        check_config(config)
