"""A model's weights are hashed once (rule digest_weights), and each extraction job takes that hash only where it
loaded the model from the very files hashed: a file changed since, or a digest that cannot be read, and the job
hashes what it loaded itself."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from ctxvar.extraction.extract import prepare_shard
from ctxvar.extraction.settings import ExtractionSettings
from ctxvar.files.atomic import MANIFEST
from ctxvar.models import hashing, loading
from ctxvar.models.weight_digest import digest_weights, recorded_sha256

from support.pipeline_runs import shard_of

pytestmark = pytest.mark.integration


def job_hash(tmp_path, source, texts, digest) -> str:
    settings = ExtractionSettings(model={"id": "m"}, source=str(source), device="cpu", progress=False)
    return prepare_shard(shard_of(tmp_path, texts[:20]), settings, weight_digest=digest).weights_hash.result()


def loaded_hash(source) -> str:
    model = loading.load_model({"id": "m"}, str(source), "float32", loading.resolve_device("cpu"))
    return hashing.weights_sha256(hashing.weight_files({"id": "m"}, str(source), model))


def test_the_digest_is_the_jobs_hash_and_a_job_with_it_reads_no_weight_again(
    tmp_path, monkeypatch, tiny_models, corpus_texts
):
    source = Path(tiny_models["gpt2"])
    record = digest_weights({"id": "m"}, str(source), tmp_path / "digest.json", threads=2)
    assert record["weights_sha256"] == loaded_hash(source)
    assert [Path(item["path"]).name for item in record["files"]] == ["model.safetensors"]
    monkeypatch.setattr(hashing, "weights_sha256", lambda *args: pytest.fail("the job hashed the weights again"))
    assert job_hash(tmp_path, source, corpus_texts, tmp_path / "digest.json") == record["weights_sha256"]


@pytest.mark.parametrize("change", ["weights rewritten", "digest damaged"])
def test_a_job_whose_files_changed_since_the_digest_hashes_them_itself(
    tmp_path, caplog, tiny_models, corpus_texts, change
):
    """Rewritten in place with one byte flipped (a new mtime and ctime, the same size and path): the job's hash
    is that of the files it loaded, not the digest's; a digest whose bytes do not match its checksum is not read."""
    source = Path(shutil.copytree(tiny_models["gpt2"], tmp_path / "model", ignore=shutil.ignore_patterns(MANIFEST)))
    record = digest_weights({"id": "m"}, str(source), tmp_path / "digest.json")
    if change == "weights rewritten":
        weights = source / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0x01
        weights.write_bytes(bytes(data))
    else:
        (tmp_path / "digest.json").write_text((tmp_path / "digest.json").read_text().replace('"m"', '"n"'))
    with caplog.at_level(logging.WARNING):
        hashed = job_hash(tmp_path, source, corpus_texts, tmp_path / "digest.json")
    assert hashed == loaded_hash(source)
    assert (hashed != record["weights_sha256"]) is (change == "weights rewritten")
    assert "hashing the weights here" in caplog.text


def test_a_model_the_digest_cannot_hash_gets_a_null_digest_and_its_jobs_hash_it(tmp_path, caplog, tiny_models):
    """A digest that fails (here: the weight file missing) would otherwise block every extraction job of the model,
    though each can hash what it loads; the record says why, and a job reading it hashes its files itself."""
    source = Path(shutil.copytree(tiny_models["gpt2"], tmp_path / "model", ignore=shutil.ignore_patterns(MANIFEST)))
    (source / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    record = digest_weights({"id": "m"}, str(source), tmp_path / "digest.json")
    assert record["weights_sha256"] is None and record["files"] == [] and "model.safetensors" in record["why"]
    (tmp_path / "elsewhere.safetensors").rename(source / "model.safetensors")
    model = loading.load_model({"id": "m"}, str(source), "float32", loading.resolve_device("cpu"))
    with caplog.at_level(logging.INFO):
        assert recorded_sha256(tmp_path / "digest.json", hashing.weight_files({"id": "m"}, str(source), model)) is None
    assert "holds no hash" in caplog.text
