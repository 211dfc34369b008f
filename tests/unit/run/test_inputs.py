"""What identifies the files a run reads from outside its config (ctxvar.run.inputs): a change re-runs its jobs.
An ``init: archive`` model whose archive is gone after it was unpacked keeps the inputs it was unpacked from (read
as unknown, they would change the unpack job's params, and Snakemake would delete the unpacked folder and re-run
the job for the missing archive). A Hub revision resolved while the Hub answered is still known offline: ctxvar
downloads a model or dataset by the commit its revision named at start-up, which writes no ``refs/<revision>`` into
the HF cache, and an offline start must not resolve the revision to nothing (every job's params would change, and
``main``, which the cache cannot serve, would be loaded); the run's real start records the commit in its ledger
(``results/{run}/hf_cache.json``), where an offline start reads it, and resolving writes nothing into the cache."""

from __future__ import annotations

import copy
import os
import zipfile
from types import SimpleNamespace

import pytest
import yaml
from huggingface_hub import HfApi, constants

from ctxvar.config.checks import check_config
from ctxvar.config.entries import load_revision
from ctxvar.config.hashes import extraction_config_hash
from ctxvar.errors import ConfigError
from ctxvar.models import hub
from ctxvar.models.files import file_fingerprint
from ctxvar.run.hf_cache import record_cache_ledger
from ctxvar.run.inputs import (
    corpus_inputs,
    hub_datasets,
    local_model_directory,
    model_inputs,
    record_archive_inputs,
    resolution_notice,
    with_inputs,
)

from support.workflow_runs import REPO

DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())


def rewrite(path, data: bytes) -> None:
    """Write ``data`` over ``path`` in place, keeping its mtime (as a careless copy tool would)."""
    status = os.stat(path)
    with open(path, "wb") as handle:
        handle.write(data)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_a_corpus_file_edited_in_place_changes_the_corpus_inputs(tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("one line\nanother line\n")
    corpus = {"source": "text", "path": str(text)}
    before = corpus_inputs(corpus)
    assert corpus_inputs(corpus) == before and before["files"][0] is not None
    rewrite(text, b"one line\n")
    assert corpus_inputs(corpus) != before


def test_the_documentation_corpus_names_its_python():
    import sys

    assert corpus_inputs({"source": "python-docs"})["python"] == sys.version
    assert corpus_inputs({"source": "synthetic"}) == {}


def test_a_model_folder_named_with_a_tilde_is_fingerprinted(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = tmp_path / "models" / "my-bert"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    entry = {"id": "my-bert", "name": "~/models/my-bert"}
    assert local_model_directory(entry["name"]) == str(folder.resolve())
    before = model_inputs(entry)
    assert before["files"] is not None and before == model_inputs({"id": "x", "name": str(folder)})
    rewrite(folder / "model.safetensors", b"other weights")
    assert model_inputs(entry) != before


def test_a_replaced_archive_changes_the_model_inputs_whatever_its_listed_digests(tmp_path):
    archive = tmp_path / "model.zip"
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"model.safetensors": "0" * 64}}
    seen = []
    for eps in ("1e-12", "0.5"):  # the same weights, another config.json
        with zipfile.ZipFile(archive, "w") as handle:
            handle.writestr("model.safetensors", b"weights")
            handle.writestr("config.json", '{"layer_norm_eps": %s}' % eps)
        seen.append(model_inputs(entry))
    assert seen[0]["archive"] is not None and seen[0] != seen[1]


def test_built_models_have_no_outside_inputs():
    models = with_inputs({"tiny": {"id": "tiny", "init": "random", "arch": "bert"}})
    assert "inputs" not in models["tiny"]


def test_a_hub_revision_resolves_to_the_commit_the_cache_holds(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("a" * 40)
    entry = {"id": "org--model", "name": "org/model"}
    assert model_inputs(entry) == {"commit": "a" * 40}
    assert load_revision({**entry, **with_inputs({"m": entry})["m"]}) == "a" * 40
    assert hub.cached_commit("org/model", "b" * 40) == "b" * 40  # a commit names itself
    assert hub.cached_commit("org/model", "v2") is None and load_revision(entry) == "main"


def test_the_sums_hash_follows_the_model_and_corpus_inputs():
    config = copy.deepcopy(DEMO)
    entry = {"id": "m", "name": "org/model", "inputs": {"commit": "a" * 40}}
    before = extraction_config_hash(config, entry, [])
    assert extraction_config_hash(config, {**entry, "inputs": {"commit": "b" * 40}}, []) != before
    config["corpus"] = {**config["corpus"], "inputs": {"files": ["x"]}}
    assert extraction_config_hash(config, entry, []) != before


@pytest.mark.parametrize("key", ["revision", "revisions"])
def test_a_local_folder_with_a_revision_is_refused(tmp_path, key):
    value = "v2" if key == "revision" else ["step0", "step1"]
    config = {**copy.deepcopy(DEMO), "models": [{"name": str(tmp_path), key: value}]}
    with pytest.raises(ConfigError, match=f"is a local directory, which holds one version of the model, so {key}"):
        check_config(config)


@pytest.mark.parametrize(
    "lines, message",
    [
        ('{"text": "a b"}\n{"text": "c d"\n', r"line 2 is not JSON \(Expecting ',' delimiter\); each line must be one"),
        ('{"text": "a b"}\n\n["c", "d"]\n', "line 3 is a JSON list, not an object"),
    ],
)
def test_a_bad_json_lines_row_is_named_with_its_line_and_cause(tmp_path, lines, message):
    from ctxvar.corpus.sources import load_source
    from ctxvar.errors import CorpusError

    path = tmp_path / "rows.jsonl"
    path.write_text(lines)
    with pytest.raises(CorpusError, match=f"^corpus.path: {path} {message}"):
        with load_source({"source": "jsonl", "path": str(path), "text_column": "text"}):
            pass


def test_a_config_with_return_dict_false_still_gives_hidden_states():
    import torch
    from transformers import BertConfig, BertModel

    from ctxvar.extraction.passes import forward_options

    config = BertConfig(
        vocab_size=20,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        return_dict=False,
    )
    model = BertModel(config).eval()
    ids = torch.tensor([[1, 2, 3]])
    assert isinstance(model(input_ids=ids, output_hidden_states=True), tuple)  # what the forward loop saw
    output = model(
        input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True, **forward_options(model)
    )
    assert len(output.hidden_states) == 3


def test_a_misspelt_path_below_a_local_folder_is_refused_at_start_up(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints" / "my-bert").mkdir(parents=True)
    config = {**copy.deepcopy(DEMO), "models": [{"name": "checkpoints/my-bertt"}]}
    with pytest.raises(ConfigError, match="checkpoints/my-bertt does not exist .*correct the path"):
        check_config(config)
    check_config({**config, "models": [{"name": "checkpoints/my-bert"}]})
    check_config({**config, "models": [{"name": "org/model"}]})  # a Hub id: no folder org/ here


def test_a_second_config_of_the_same_file_name_stops_before_writing_into_the_first_ones_run(tmp_path):
    from ctxvar.run.origin import check_run_origin, config_identity, record_run_origin

    folder = tmp_path / "results" / "study"
    first = config_identity([str(tmp_path / "a" / "study.yaml")], "config.yaml")
    second = config_identity([str(tmp_path / "b" / "study.yaml")], "config.yaml")
    assert check_run_origin(folder, first, named_on_purpose=False) is None  # a new folder
    record_run_origin(folder, first)
    with pytest.raises(ConfigError, match="sets the same run name and would write over them"):
        record_run_origin(folder, second)  # the first record stays
    assert check_run_origin(folder, first, named_on_purpose=False) is None
    with pytest.raises(ConfigError, match="holds the results of .*a/study.yaml.*set run: to a name of its own"):
        check_run_origin(folder, second, named_on_purpose=False)
    assert "a real run stops before its first job" in check_run_origin(folder, second, named_on_purpose=True)


def test_the_tokenizer_hash_covers_its_normalizer_not_only_its_vocabulary():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from ctxvar.models.hashing import tokenizer_sha256

    def tokenizer(normalizer):
        backend = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        if normalizer is not None:
            backend.normalizer = normalizer
        return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")

    plain, lowered = tokenizer(None), tokenizer(normalizers.Lowercase())
    assert plain.get_vocab() == lowered.get_vocab() and plain.tokenize("A") != lowered.tokenize("A")
    assert tokenizer_sha256(plain) != tokenizer_sha256(lowered)
    assert tokenizer_sha256(plain) == tokenizer_sha256(tokenizer(None))


def test_sizes_print_in_the_unit_that_shows_them():
    from ctxvar.errors import size_text

    assert [size_text(n) for n in (0, 999, 412_345, 1_250_000_000, 3.2e12)] == [
        "0 B",
        "999 B",
        "412 kB",
        "1.25 GB",
        "3.2 TB",
    ]


def test_a_full_disk_in_a_job_is_one_line_not_a_bug(tmp_path, capsys):
    import pyarrow as pa

    from ctxvar.run.job_log import job_log

    with pytest.raises(SystemExit) as stopped:
        with job_log(tmp_path / "job.log"):
            raise pa.ArrowIOError("Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert stopped.value.code == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("ctxvar error: disk full while this job wrote its outputs") and "\n" not in line
    with pytest.raises(FileNotFoundError):  # any other OSError is still a bug's traceback
        with job_log(tmp_path / "job.log"):
            open(tmp_path / "missing")


def test_a_users_own_folder_with_a_stale_manifest_is_not_advised_away(tmp_path):
    from ctxvar.errors import IntegrityError
    from ctxvar.files.atomic import MANIFEST, file_sha256, verify_manifest

    folder = tmp_path / "my-bert"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / MANIFEST).write_text(f"{file_sha256(folder / 'config.json')}  config.json\n")
    (folder / "config.json").write_text('{"layer_norm_eps": 0.5}')
    with pytest.raises(IntegrityError, match="restore the file, or if the change is meant, write SHA256SUMS") as error:
        verify_manifest(folder, made_by_run=False)
    assert "delete" not in str(error.value)
    with pytest.raises(IntegrityError, match="delete .* and re-run: Snakemake builds it again"):
        verify_manifest(folder)


def test_an_archive_gone_after_unpacking_keeps_its_fingerprint(tmp_path):
    archive, run_folder = tmp_path / "model.zip", tmp_path / "results" / "run"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("config.json", "{}")
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"config.json": "0" * 64}}
    unpacked = with_inputs({"zipped": entry}, str(run_folder))["zipped"]
    assert unpacked["inputs"]["archive"] is not None
    (run_folder / "models" / "zipped").mkdir(parents=True)  # what the unpack job makes, then records
    record_archive_inputs(unpacked, run_folder / "models" / "zipped")
    archive.unlink()
    assert with_inputs({"zipped": entry}, str(run_folder))["zipped"] == unpacked
    assert model_inputs(entry) == {"archive": None}  # no run folder: nothing to go by


def test_without_the_unpacked_folder_the_record_is_not_used(tmp_path):
    archive, run_folder = tmp_path / "model.zip", tmp_path / "results" / "run"
    entry = {"id": "zipped", "init": "archive", "archive": str(archive), "sha256": {"config.json": "0" * 64}}
    (run_folder / "models").mkdir(parents=True)
    record_archive_inputs({**entry, "inputs": {"archive": "f" * 64}}, run_folder / "models" / "zipped")
    assert model_inputs(entry, str(run_folder)) == {"archive": None}  # the start then names the missing archive


COMMIT = "c" * 40


@pytest.fixture
def hub_answers(tmp_path, monkeypatch):
    """An HF cache in ``tmp_path`` and a Hub that can be reached and names COMMIT for every revision."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub, "unavailable_reason", lambda: None)
    monkeypatch.setattr(HfApi, "repo_info", lambda self, repo_id, **options: SimpleNamespace(sha=COMMIT))
    return tmp_path


def go_offline(monkeypatch):
    monkeypatch.setattr(hub, "unavailable_reason", lambda: "HF_HUB_OFFLINE is set")


def known_offline(corpus: dict, cache, monkeypatch) -> None:
    """The corpus's Hub dataset resolved online, its commit recorded by the run's real start, is resolved to the
    same commit offline; nothing was written into the HF cache."""
    run = cache / "results" / "run"
    online = corpus_inputs(corpus, str(run))
    record_cache_ledger(run, {}, hub_datasets({**corpus, "inputs": online}))
    go_offline(monkeypatch)
    assert corpus_inputs(corpus, str(run)) == online == {"commit": COMMIT}
    assert not any(path.name.startswith("datasets--") for path in cache.iterdir())


def test_a_model_revision_resolved_online_is_known_offline(hub_answers, monkeypatch):
    run = hub_answers / "results" / "run"
    entry = {"id": "m", "name": "org/model", "revision": "v1"}
    models = with_inputs({"m": entry}, str(run))
    assert models["m"]["inputs"] == {"commit": COMMIT}
    record_cache_ledger(run, models)
    go_offline(monkeypatch)
    assert model_inputs(entry, str(run)) == {"commit": COMMIT}
    assert model_inputs(entry) == {"commit": None}  # another run, whose ledger has not seen it
    assert not (hub_answers / "models--org--model").exists()


def test_a_dataset_revision_resolved_online_is_known_offline(hub_answers, monkeypatch):
    known_offline({"source": "hf", "name": "org/texts", "revision": None}, hub_answers, monkeypatch)


def test_a_commit_writes_no_ref(hub_answers):
    assert hub.resolved_commit("org/model", "d" * 40) == "d" * 40
    assert not (hub_answers / "models--org--model").exists()


def test_enwik8_without_a_path_is_its_hub_exports_commit_known_offline(hub_answers, monkeypatch):
    known_offline({"source": "enwik8", "path": None}, hub_answers, monkeypatch)


def test_a_datasets_parquet_export_is_the_commit_its_branch_names_known_offline(hub_answers, monkeypatch):
    corpus = {"source": "hf", "name": "bookcorpus/bookcorpus", "revision": "refs/convert/parquet"}
    known_offline(corpus, hub_answers, monkeypatch)


def test_enwik8_from_a_local_file_is_its_fingerprint(tmp_path):
    path = tmp_path / "enwik8.zip"
    path.write_bytes(b"PK")
    assert corpus_inputs({"source": "enwik8", "path": str(path)}) == {"files": [file_fingerprint(str(path))]}


def test_one_failed_connection_stands_for_the_starts_other_revisions_and_the_start_says_so(hub_online, monkeypatch):
    """170 revisions of Machina & Mercer's config, the Hub's name not resolving: one try, not 170 (36 s of
    resolver timeouts), and one line before them naming what the start waits for."""
    tries = []
    monkeypatch.setattr(hub, "hub_reachable", lambda: tries.append(1) or False)
    monkeypatch.setattr(hub, "unreachable_since", None)
    models = {f"m{i}": {"id": f"m{i}", "name": f"someone/model-{i}"} for i in range(170)}
    notice = resolution_notice(models)
    assert notice.startswith("ctxvar: the Hugging Face Hub cannot be reached; the revisions of 170 Hub models")
    with_inputs(models)
    assert len(tries) == 1
    monkeypatch.setattr(hub.time, "monotonic", lambda: hub.unreachable_since + hub.UNREACHABLE_KEPT_S + 1)
    hub.unavailable_reason()
    assert len(tries) == 2  # a later start, or a minute on: asked again
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolution_notice(models) is None
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "unreachable_since", None)
    monkeypatch.setattr(hub, "hub_reachable", lambda: True)
    assert resolution_notice(models).startswith("ctxvar: asking the Hub which commit the revisions of 170 Hub models")
    assert resolution_notice({"r": {"id": "r", "init": "random", "arch": "gpt2"}}) is None
