"""hf_cache.remove_after_use through Snakemake: a sweep over two revisions of one Hub repo ends with the revision the
run downloaded gone from the HF cache and the one the user had there still in it; with the setting off nothing is
removed.

The cache is a folder of the test's, in huggingface_hub's layout. The run cannot download, so the download is
simulated where it happens in a real sweep: before the run's first start the cache holds step0's snapshot (the
user's) and nothing of step1; that first start (a real run, as far as the corpus sample) can reach a Hub (one on
this machine, ``support.hf_cache.hub_naming``, which names each revision's commit), so it may judge step1 the run's,
and writes the ledger; step1's snapshot is then put into the cache, files and links as a download by its commit
leaves them (no ref), and the later starts, offline (``HF_HUB_OFFLINE=1``), read the checkpoints from there and
step1's commit from the ledger. Those starts find step1 in the cache and must still take it for the run's. After the
release the user's step0 loads offline, huggingface_hub's ``scan_cache_dir`` reads the repo, and an offline start
still knows step1's commit and re-runs nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from ctxvar.files.atomic import read_json

from support.hf_cache import add_snapshot, blobs_of, hub_naming, loads_offline, repo_folder, scan_warnings
from support.tiny_models import random_model
from support.workflow_runs import REPO, scheduled_jobs, snakemake

HUB_REPO = "org/tiny"
COMMITS = {"step0": "a0" * 20, "step1": "b1" * 20}
IDS = {revision: f"org--tiny@{revision}" for revision in COMMITS}
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")  # set to 0: online


CONFIG = {
    "run": "sweep",
    "corpus": {"source": "synthetic", "synthetic": {"n_sentences": 200, "vocab_size": 300, "mean_words": 8}},
    "shards": 1,
    "models": [{"name": HUB_REPO, "revisions": list(COMMITS)}],
    "device": "cpu",
    "geometry": {"covariance": False, "cosine": False, "twonn": False, "ethayarajh": False},
}
TEXTS = [f"word{i % 37} piece{i % 11} token{i % 5} sentence number {i}" for i in range(200)]


def model_readers() -> set[str]:
    """The rules whose jobs read a model's own files: those given its source (model_source) to load it from."""
    rules = (REPO / "workflow" / "rules").glob("*.smk")
    return {
        block.split(":", 1)[0]
        for path in rules
        for block in re.split(r"^rule ", path.read_text(), flags=re.M)[1:]
        if "source=model_source" in block
    }


def write_config(path: Path, remove_after_use: bool) -> Path:
    """The study's one config file, edited in place between starts (the run folder is that file's)."""
    path.write_text(yaml.safe_dump({**CONFIG, "hf_cache": {"remove_after_use": remove_after_use}}))
    return path


def test_a_sweep_removes_the_checkpoint_it_downloaded_and_keeps_the_users(tmp_path):
    cache, workdir = tmp_path / "hub", tmp_path / "work"
    checkpoints = {
        revision: random_model(tmp_path / revision, "bert", TEXTS, seed) for seed, revision in enumerate(COMMITS)
    }
    user = add_snapshot(cache, HUB_REPO, COMMITS["step0"], checkpoints["step0"], "step0")
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    config = write_config(tmp_path / "sweep.yaml", remove_after_use=False)
    release_records = [f"results/sweep/{mid}/hf_cache_release.json" for mid in IDS.values()]

    with hub_naming(COMMITS) as endpoint:  # the run's first start, which could download
        online = {**env, "HF_ENDPOINT": endpoint, **dict.fromkeys(OFFLINE_VARIABLES, "0")}
        first = snakemake(workdir, config, "--until", "sample_corpus", env=online)
    assert first.returncode == 0, first.stderr[-3000:]
    assert not (repo_folder(cache, HUB_REPO) / "refs" / "step1").exists()  # the start writes no ref
    ledger = read_json(workdir / "results" / "sweep" / "hf_cache.json")["snapshots"]
    assert {key: entry["in_cache_before_run"] for key, entry in ledger.items()} == {
        f"{HUB_REPO}@{COMMITS['step0']}": True,
        f"{HUB_REPO}@{COMMITS['step1']}": False,
    }
    downloaded = add_snapshot(cache, HUB_REPO, COMMITS["step1"], checkpoints["step1"])  # what the run's download leaves
    shared = blobs_of(user) & blobs_of(downloaded)
    own = blobs_of(downloaded) - shared
    weights = {Path(os.path.realpath(link)) for link in downloaded.glob("*.safetensors")}
    assert shared and weights <= own, "the checkpoints share their tokenizer's files, not their weights"

    # Off: the jobs that read the checkpoints run, and both stay.
    assert "release_hf_cache" not in scheduled_jobs(snakemake(workdir, config, "-n", env=env))
    readers = [
        f"results/sweep/{mid}/{name}" for mid in IDS.values() for name in ("tokens.parquet", "embedding_matrices.csv")
    ]
    off = snakemake(workdir, config, *readers, env=env)
    assert off.returncode == 0, off.stderr[-3000:]
    assert user.is_dir() and downloaded.is_dir() and all(blob.is_file() for blob in blobs_of(downloaded))

    # On: a release per checkpoint joins the run's targets, after every job that reads its files.
    write_config(config, remove_after_use=True)
    assert scheduled_jobs(snakemake(workdir, config, "-n", env=env))["release_hf_cache"] == 2
    assert scheduled_jobs(snakemake(workdir, config, "-n", *release_records, env=env)) == {"release_hf_cache": 2}
    fresh = scheduled_jobs(snakemake(tmp_path / "fresh", config, "-n", *release_records, env=env))
    assert model_readers() == {
        "split_corpus",
        "digest_weights",
        "select_pca_types",
        "extract_statistics",
        "embedding_matrix_statistics",
    }
    assert {rule: fresh.get(rule) for rule in model_readers() | {"merge_statistics"}} == {
        "split_corpus": 2,
        "digest_weights": None,  # checkpoints removed after use are hashed by their jobs: no download ahead of them
        "select_pca_types": 1,  # figures.pca.model's (step0's) only
        "extract_statistics": 2,
        "merge_statistics": 2,  # its merged sums: the extraction jobs' partials are temporary
        "embedding_matrix_statistics": 2,
    }
    on = snakemake(workdir, config, *release_records, env=env)
    assert on.returncode == 0, on.stderr[-3000:]

    assert not downloaded.exists() and not any(blob.exists() for blob in weights)
    assert all(blob.exists() for blob in own - weights)  # small files keep their blobs (ctxvar.run.hf_cache)
    assert all(blob.is_file() for blob in blobs_of(user)) and {p.name for p in user.iterdir()} == {
        p.name for p in Path(checkpoints["step0"]).iterdir()
    }
    records = {
        revision: read_json(workdir / "results" / "sweep" / mid / "hf_cache_release.json")
        for revision, mid in IDS.items()
    }
    assert records["step0"]["removed"] == [] and "(the user's): kept" in records["step0"]["why"]
    assert records["step1"]["why"] == "downloaded by the run: removed"
    assert records["step1"]["bytes_freed"] == weights_bytes(checkpoints["step1"]) > 0
    assert loads_offline(cache, HUB_REPO, "step0", checkpoints["step0"]) and not scan_warnings(cache)
    again = snakemake(workdir, config, "-n", *release_records, env=env)  # offline: step1's commit from the ledger
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # forward: false: a release waits for the embedding matrices alone, and no corpus is needed.
    alone = {
        "run": "alone",
        "models": [{**CONFIG["models"][0], "forward": False}],
        "hf_cache": {"remove_after_use": True},
    }
    targets = [record.replace("sweep", "alone") for record in release_records]
    planned = scheduled_jobs(snakemake(tmp_path / "alone", alone, "-n", *targets, env=env))
    assert planned == {"embedding_matrix_statistics": 2, "release_hf_cache": 2}


def weights_bytes(folder) -> int:
    """The bytes of ``folder``'s weight files (what a removal frees besides the snapshot's links)."""
    return sum(path.stat().st_size for path in Path(folder).glob("*.safetensors"))
