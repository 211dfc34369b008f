"""Workflow tier: Snakemake in a subprocess on the shipped configs and on local inputs."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from safetensors.torch import load_file, save_file

import ctxvar
from ctxvar.config.schema import load_config_file
from ctxvar.files.parquet import FOOTER_READ_BYTES, read_metadata
from ctxvar.run.disk import planned_bytes
from ctxvar.stats.declarations import kept_sums, token_columns
from ctxvar.stats.layers import COLUMNS

from support.oracle import assert_tokens_match, brute_force_embeddings, brute_force_tokens
from support.workflow_runs import (
    DEMO,
    MERGED_SUMS,
    REPO,
    SMALL_DEMO,
    SMALL_DEMO_OUTPUTS,
    end_of_run,
    scheduled_jobs,
    small_demo_inputs,
    snakemake,
    snakemake_command,
)


def test_paper_config_dry_run_fans_out_models_times_shards(tmp_path):
    jobs = scheduled_jobs(snakemake(tmp_path, REPO / "config.yaml", "-n"))
    assert jobs == {
        "sample_corpus": 1,
        "split_corpus": 6,  # per model: its tokenizer plans the batches
        "digest_weights": 6,  # per model: its weights hashed once for its 8 extraction jobs
        "extract_statistics": 48,
        "merge_next_shard": 6 * 6,  # shards 1..6 of 0..7 added to a running merge; the 7th by merge_statistics
        "merge_statistics": 6,
        "layer_statistics": 6,
        "geometry_statistics": 6,
        "embedding_matrix_statistics": 6,  # the weights alone: I(W) of the embedding matrices
        "plot_embedding_projection": 6,
        "summarise_models": 1,
        "summarise_embedding_matrices": 1,
        "plot_model_figure": 6,  # one job a model draws its figures
        "plot_summary_figure": 1,  # one job draws those across the models
        "plot_corpus_figure": 1,  # Fig. 9, of the corpus alone
        "select_pca_types": 1,
        "select_pca_tokens": 1,
        "merge_pca_points": 1,
        "plot_pca": 1,
        "all": 1,
    }


def test_default_profile_is_picked_up_without_flags(tmp_path):
    run = snakemake(tmp_path, REPO / "config" / "demo.yaml", "-n", "results/demo/partials/tiny-bert/0.parquet")
    assert (
        "workflow specific profile" in run.stderr and "mem_mb=2000" in run.stdout and "batch_tokens=16384" in run.stdout
    )


def test_a_max_state_mb_that_snakemake_would_round_to_no_cap_stops_at_start_up(tmp_path):
    """Whole megabytes are honoured on every device (docs/troubleshooting.md); 0.4 became 0, no cap, silently."""
    run = snakemake(tmp_path, DEMO, "-n", "--set-resources", "extract_statistics:max_state_mb=0.4")
    assert run.returncode == 1
    assert [line for line in run.stderr.splitlines() if line.startswith("ctxvar error:")] == [
        "ctxvar error: --set-resources extract_statistics:max_state_mb=0.4: Snakemake rounds resources to whole "
        "numbers, so this would be 0; give whole megabytes (0: the default budget, no cap on a CPU)"
    ]
    assert "Traceback" not in run.stderr
    honoured = snakemake(tmp_path, DEMO, "-n", "--set-resources", "extract_statistics:max_state_mb=3")
    assert honoured.returncode == 0 and "max_state_mb=3" in honoured.stdout


@pytest.mark.parametrize("device, gpus", [("cuda", 1), ("cpu", 0)])
def test_extraction_asks_for_a_gpu_only_on_cuda(tmp_path, device, gpus):
    run = snakemake(tmp_path, {**DEMO, "device": device}, "-n", "results/demo/partials/tiny-bert/0.parquet")
    assert f"gpu={gpus}," in run.stdout, run.stdout[-2000:]


@pytest.mark.parametrize(
    "change, message",
    [  # one of the schema, one of ctxvar's own checks; tests/unit/config/test_checks.py checks every case in process
        ({"modles": []}, "Additional properties are not allowed ('modles' was unexpected)"),
        (
            {"models": [{"name": "/data/checkpoints/my-bert"}]},  # the README's example path
            "ctxvar error: models[]: entry 'my-bert': /data/checkpoints/my-bert does not exist",
        ),
    ],
)
def test_bad_config_stops_before_any_job_with_a_readable_line(tmp_path, change, message):
    run = snakemake(tmp_path, {**DEMO, **change}, "-n")
    assert run.returncode != 0 and message in run.stderr + run.stdout
    assert "Traceback" not in run.stderr and 'File "' not in run.stderr
    assert not (tmp_path / "results").exists()


N_MODELS = 6  # demo: 2 random-init encoders, the Gaussian null, 3 checkpoints of a decoder
DEMO_SUMS = kept_sums(DEMO["geometry"])  # the per-type sums the demo keeps (with geometry.cosine)


def test_demo_writes_every_documented_output(demo):
    for model in ("tiny-bert", "tiny-roberta", "trained-gpt2@step0"):
        tokens = pd.read_parquet(demo / "results" / "demo" / model / "tokens.parquet")
        assert list(tokens.columns) == ["layer", "token", "n", *(column.name for column in token_columns(DEMO_SUMS))]
        assert (tokens["V"] >= 0).all() and (tokens["n"] >= 1).all()
        layers = pd.read_csv(demo / "results" / "demo" / model / "layers.csv")
        assert list(layers.columns) == COLUMNS and len(layers) == 5
        np.testing.assert_allclose(layers["V"], layers["V_W"] + layers["V_B"], rtol=1e-9)
    summary = pd.read_csv(demo / "results" / "demo" / "summary" / "layers.csv")
    assert (
        list(summary["model"].unique())[:4] == ["tiny-bert", "tiny-roberta", "gaussian-null", "trained-gpt2@step0"]
        and summary["model"].nunique() == N_MODELS
    )
    models = pd.read_csv(demo / "results" / "demo" / "summary" / "models.csv")
    assert (models["n_tokens"] > 100_000).all() and list(models["n_layers"]) == [5, 5, 2, 5, 5, 5]
    for name in (
        "sums.moments.parquet",
        "sums.sample.parquet",
        "sums.words.parquet",
        "sums.sentences.parquet",
        "geometry.csv",
    ):
        assert (demo / "results" / "demo" / "tiny-bert" / name).exists()


def test_the_demo_ends_by_saying_where_its_results_are(demo_run):
    workdir, run = demo_run
    block, after = end_of_run(run.stderr)
    assert block["banner"].startswith("==== ctxvar: finished; results of run demo ====")
    assert block["run folder"] == f"{workdir}/results/demo/"  # absolute: the tests run with --directory
    assert block["tables"] == "summary/ layers.csv, geometry.csv, models.csv"
    assert block["per model"] == f"<model>/ tokens.parquet, layers.csv, geometry.csv, figures/ ({N_MODELS} models)"
    assert block["figures"].startswith("figures/ (all models), <model>/figures/")
    folder = re.fullmatch(r'import ctxvar; ctxvar\.load_results\("(.+)"\)', block["notebook"]).group(1)
    assert len(ctxvar.load_results(folder).models) == N_MODELS
    # after it, only Snakemake's two closing lines (its log's path and the elapsed time)
    assert [line.split(":")[0] for line in after] == ["Complete log(s)", "Elapsed time"], after
    assert max(len(line.replace(str(workdir), "")) for line in after) <= 100, after


def test_the_readme_quotes_the_demos_corpus_and_job_count(demo_run):
    workdir, run = demo_run
    readme = " ".join((REPO / "README.md").read_text().split())
    (sentences,) = re.findall(r"Zipf corpus \(([\d,]+) sentences\)", readme)
    counts = json.loads((workdir / "results" / "demo" / "corpus" / "counts.json").read_text())
    assert int(sentences.replace(",", "")) == counts["rows_in_source"]
    ((jobs, shards),) = re.findall(r"(\d+) jobs over (\d+) shards", readme)
    assert f"{jobs} of {jobs} steps (100%) done" in run.stderr and int(shards) == DEMO["shards"]
    (megabytes,) = re.findall(r"`results/demo/` \((\d+) MB at the end\)", readme)
    files = [path for path in (workdir / "results" / "demo").rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files if path.name != "report.html")  # made later, on request
    assert abs(size / 1e6 - int(megabytes)) <= 0.1 * int(megabytes), f"results/demo/ holds {size / 1e6:.0f} MB"


def test_the_performance_doc_quotes_the_demos_disk_estimate(tmp_path, demo):
    """docs/performance.md's estimate for the demo is what the start-up disk check computes from its sampled
    corpus before any model has run, to 2 % (a sum declared later moves it by less, and the page is re-measured
    when the files change more)."""
    corpus = tmp_path / "results" / "demo" / "corpus"
    corpus.mkdir(parents=True)
    shutil.copy(demo / "results" / "demo" / "corpus" / "sentences.parquet", corpus)
    peak, all_at_once = planned_bytes(load_config_file(REPO / "config" / "demo.yaml"), corpus.parent)
    doc = " ".join((REPO / "docs" / "performance.md").read_text().split())
    pattern = r"For the demo the estimate is (\d+) MB one model at a time and (\d+) MB all at once"
    ((one_model, every_model),) = re.findall(pattern, doc)
    assert abs(int(one_model) - peak / 1e6) <= 0.02 * peak / 1e6, f"{peak / 1e6:.0f} MB one model at a time"
    assert abs(int(every_model) - all_at_once / 1e6) <= 0.02 * all_at_once / 1e6, f"{all_at_once / 1e6:.0f} MB"


def test_every_model_output_records_its_provenance(demo):
    for model, revision in (("tiny-bert", "main"), ("tiny-roberta", "main"), ("trained-gpt2@step0", "step0")):
        run = json.loads((demo / "results" / "demo" / model / "run.json").read_text())
        for source in (run, read_metadata(demo / "results" / "demo" / model / "tokens.parquet")):
            assert (
                source["revision"] == revision
                and len(source["weights_sha256"]) == 64
                and len(source["config_hash"]) == 16
            )
            assert {"torch", "transformers", "ctxvar", "python"} <= set(source["versions"])
            assert source["shards"] == list(range(DEMO["shards"]))


def merged_files(model_folder) -> list:
    return [*model_folder.glob("sums*.parquet"), model_folder / "tokens.parquet"]


PARTIAL_FILES = 1 + sum(DEMO["geometry"][key] for key in ("covariance", "twonn")) + 2 * DEMO["geometry"]["ethayarajh"]


def assert_io_as_documented(io: dict, shards: int, incremental: bool, merged: list) -> None:
    """docs/performance.md, "Bytes per model": each shard's partial is PARTIAL_FILES files (3 with the default
    geometry; the demo's Ethayarajh sums add 2), each written once and read once; with incremental_merge so is
    each running merge of shards 0..k (1 ≤ k ≤ shards − 2); the merged files are written once; reading a file
    costs its bytes and, on opening, its footer again."""
    running = PARTIAL_FILES * (shards - 2) if incremental else 0
    expected = (PARTIAL_FILES * shards, running, len(merged))
    assert (io["partial_files"], io["running_merge_files"], io["merged_files"]) == expected
    assert io["merged_bytes"] == sum(path.stat().st_size for path in merged)
    assert io["bytes_written"] == io["partial_bytes"] + io["running_merge_bytes"] + io["merged_bytes"]
    assert io["files_opened"] == io["partial_files"] + io["running_merge_files"]
    read_once = io["partial_bytes"] + io["running_merge_bytes"]
    assert 0 <= io["bytes_read"] - read_once <= FOOTER_READ_BYTES * io["files_opened"]


def test_run_json_gives_the_bytes_the_merges_read_and_wrote(demo, small_demo):
    runs = sorted((demo / "results" / "demo").glob("*/run.json"))
    assert len(runs) == N_MODELS
    for path in runs:
        io = json.loads(path.read_text())["io"]
        assert_io_as_documented(io, DEMO["shards"], incremental=True, merged=merged_files(path.parent))
    model = small_demo / "results" / "demo" / "tiny-bert"
    io = json.loads((model / "run.json").read_text())["io"]
    assert_io_as_documented(io, SMALL_DEMO["shards"], incremental=True, merged=merged_files(model))
    assert io["running_merge_bytes"] > io["merged_bytes"]  # shards 0..1 and 0..2: more than once the merged sums


def test_run_json_gives_the_bytes_without_incremental_merge_as_the_partials_on_disk(tmp_path, small_demo):
    workdir = tmp_path / "run"
    small_demo_inputs(small_demo, workdir)
    config = {**copy.deepcopy(SMALL_DEMO), "incremental_merge": False, "keep_partials": True}
    run = snakemake(workdir, config, "results/demo/tiny-bert/run.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sample_corpus" not in scheduled_jobs(run), "the small demo's inputs are made again"
    io = json.loads((workdir / "results" / "demo" / "tiny-bert" / "run.json").read_text())["io"]
    assert_io_as_documented(
        io, SMALL_DEMO["shards"], incremental=False, merged=merged_files(workdir / "results/demo/tiny-bert")
    )
    folder = workdir / "results" / "demo" / "partials" / "tiny-bert"
    partials = [path for path in folder.glob("*.parquet") if not path.name.endswith(".pca.parquet")]
    assert len(partials) == PARTIAL_FILES * SMALL_DEMO["shards"]
    assert io["partial_bytes"] == sum(p.stat().st_size for p in partials)
    assert len(list(folder.glob("*.pca.parquet"))) == SMALL_DEMO["shards"]  # Fig. 1's points, read by no merge


WIDE_MODEL = {"id": "tiny-gpt2-wide", "init": "random", "arch": "gpt2", "hidden_size": 96, "seed": 4}


@dataclass
class RunOnTheDemo:
    workdir: Path  # the finished demo, or a writable copy of it
    before: dict  # a copy's results before its run (results_digests); empty for a dry run on the demo
    run: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def runs_on_the_demo(demo, tmp_path_factory) -> dict[str, RunOnTheDemo]:
    """This module's runs on the finished demo, two at a time, the longest first. On two writable copies of it
    (results, logs and Snakemake's metadata, mtimes kept; each run locks its own copy): the paper config on a
    machine without the Hub, and the demo's config after a byte of tiny-bert's merged sums is flipped. On the demo
    itself, dry runs (a dry run takes no lock and writes no result): of config/demo.yaml, of the same config with
    its keys in another order, with one more model, with each of :data:`CONFIG_CHANGES`, and of config/demo.yaml
    through a copy of the workflow before and after an edit of an analysis script."""
    copies = {name: tmp_path_factory.mktemp("demo-copy") / "demo" for name in ("paper", "flipped byte")}
    for copied in copies.values():
        shutil.copytree(demo, copied, symlinks=True)
    sums = copies["flipped byte"] / "results" / "demo" / "tiny-bert" / "sums.parquet"
    data = bytearray(sums.read_bytes())
    data[len(data) // 3] ^= 0x01  # inside the data pages
    sums.write_bytes(bytes(data))
    reordered = tmp_path_factory.mktemp("reordered") / "reordered.yaml"
    reordered.write_text(yaml.safe_dump(DEMO, sort_keys=True))
    workflows = {name: tmp_path_factory.mktemp("workflow") for name in ("copied workflow", "edited workflow")}
    for root in workflows.values():
        shutil.copytree(REPO / "workflow", root / "workflow")
        shutil.copy(REPO / "Snakefile", root)
        (root / "profiles").symlink_to("workflow/profiles")
    with open(workflows["edited workflow"] / "workflow" / "scripts" / "layer_statistics.py", "a") as script:
        script.write("# an edit\n")
    demo_yaml = REPO / "config" / "demo.yaml"
    runs = {  # name → workdir, config, arguments, environment
        "paper": (copies["paper"], REPO / "config.yaml", (), {"HF_HUB_OFFLINE": "1"}),
        "flipped byte": (copies["flipped byte"], demo_yaml, ("--keep-going",), None),
        "same config": (demo, demo_yaml, ("-n",), None),
        "reordered": (demo, reordered, ("-n",), None),
        "one more model": (demo, {**copy.deepcopy(DEMO), "models": [*DEMO["models"], WIDE_MODEL]}, ("-n",), None),
        **{
            name: (demo, {**copy.deepcopy(DEMO), **change}, ("-n",), None)
            for name, (change, _) in CONFIG_CHANGES.items()
        },
        **{name: (demo, demo_yaml, ("-s", str(root / "Snakefile"), "-n"), None) for name, root in workflows.items()},
    }
    before = {name: results_digests(copied) for name, copied in copies.items()}
    with ThreadPoolExecutor(2) as pool:
        started = {
            name: pool.submit(snakemake, workdir, config, *arguments, env=env)
            for name, (workdir, config, arguments, env) in runs.items()
        }
        return {
            name: RunOnTheDemo(runs[name][0], before.get(name, {}), future.result()) for name, future in started.items()
        }


def test_rerun_with_the_same_config_does_nothing(runs_on_the_demo):
    run = runs_on_the_demo["same config"].run
    assert run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr


def test_reordering_config_keys_does_not_rerun(runs_on_the_demo):
    run = runs_on_the_demo["reordered"].run
    assert run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr


def test_adding_a_model_schedules_only_its_jobs_and_the_summary(runs_on_the_demo):
    run = runs_on_the_demo["one more model"].run
    assert DEMO["shards"] == 2  # so no running merge (merge_next_shard)
    assert scheduled_jobs(run) == {
        "build_random_model": 1,
        "split_corpus": 1,  # no digest_weights: a random model this small is hashed in its extraction jobs
        "extract_statistics": DEMO["shards"],
        "merge_statistics": 1,
        "layer_statistics": 1,
        "geometry_statistics": 1,
        "embedding_matrix_statistics": 1,
        "plot_embedding_projection": 1,
        "summarise_models": 1,
        "summarise_embedding_matrices": 1,
        "plot_model_figure": 1,
        "plot_summary_figure": 1,
        "all": 1,
    }  # not plot_corpus_figure: Fig. 9 draws the corpus alone
    assert set(re.findall(r"wildcards: model=([\w.-]+)", run.stdout)) == {"tiny-gpt2-wide"}


# A change to the demo's config → the jobs its dry run on the finished demo schedules.
CONFIG_CHANGES = {
    "device": ({"device": "cpu"}, {}),
    "analysis": (
        {"analysis": {"min_log10_n": 0.5, "max_log10_n": 5}},  # self-similarity averages over the filtered types
        {
            "select_pca_types": 1,  # the frequency filter chooses Fig. 1's types, whose points the
            "extract_statistics": 2,  # extraction of figures.pca.model (tiny-bert) collects
            "merge_statistics": 1,
            "layer_statistics": 6,
            "geometry_statistics": 6,
            "summarise_models": 1,
            "plot_model_figure": 6,
            "plot_summary_figure": 1,
            "plot_checkpoints": 1,
            "plot_across_checkpoints": 1,  # twonn_by_step: the checkpoints' geometry.csv
            "select_pca_tokens": 1,
            "merge_pca_points": 1,
            "plot_pca": 1,
            "all": 1,
        },
    ),
    "remove-model": (
        {"models": DEMO["models"][:2]},
        {"summarise_models": 1, "summarise_embedding_matrices": 1, "plot_summary_figure": 1, "all": 1},
    ),
    "shards": (
        {"shards": 4},
        {
            "split_corpus": 6,
            "extract_statistics": 24,
            "merge_next_shard": 12,
            "merge_statistics": 6,
            "layer_statistics": 6,
            "geometry_statistics": 6,
            "summarise_models": 1,
            "plot_model_figure": 6,
            "plot_summary_figure": 1,
            "plot_checkpoints": 1,
            "plot_across_checkpoints": 1,  # twonn_by_step: the checkpoints' geometry.csv
            "select_pca_types": 1,
            "select_pca_tokens": 1,
            "merge_pca_points": 1,
            "plot_pca": 1,
            "all": 1,
        },
    ),
    "pca-model": (
        {"figures": {"pca": {"model": "tiny-roberta", "seed": 4}}},
        {  # the points come from the extraction of figures.pca.model: tiny-roberta's collects them, tiny-bert's not
            "select_pca_types": 1,
            "extract_statistics": 4,
            "merge_statistics": 2,
            "layer_statistics": 2,
            "geometry_statistics": 2,
            "summarise_models": 1,
            "plot_model_figure": 2,
            "plot_summary_figure": 1,
            "select_pca_tokens": 1,
            "merge_pca_points": 1,
            "plot_pca": 1,
            "all": 1,
        },
    ),
    "spectrum-k": (
        {"geometry": {**DEMO["geometry"], "spectrum_k": 5}},  # an analysis choice: no extraction
        {
            "geometry_statistics": 6,
            "summarise_models": 1,
            "plot_model_figure": 6,
            "plot_summary_figure": 1,
            "plot_checkpoints": 1,
            "plot_across_checkpoints": 1,
            "all": 1,
        },
    ),
    "cosine-off": (
        {"geometry": {**DEMO["geometry"], "cosine": False}},  # changes what extraction accumulates
        {
            "extract_statistics": 12,
            "merge_statistics": 6,
            "layer_statistics": 6,
            "geometry_statistics": 6,
            "summarise_models": 1,
            "plot_model_figure": 6,
            "plot_summary_figure": 1,  # geo02, the cosine figure, not among its outputs
            "plot_checkpoints": 1,
            "plot_across_checkpoints": 1,
            "select_pca_tokens": 1,
            "merge_pca_points": 1,
            "plot_pca": 1,
            "all": 1,
        },
    ),
}


@pytest.mark.parametrize("change", CONFIG_CHANGES)
def test_config_changes_schedule_the_minimum(runs_on_the_demo, change):
    assert scheduled_jobs(runs_on_the_demo[change].run) == CONFIG_CHANGES[change][1]


def test_the_cosine_switched_off_leaves_its_figure_out_of_the_summary_figures_job(runs_on_the_demo):
    stdout = runs_on_the_demo["cosine-off"].run.stdout
    assert "figures/geo02_cosine" not in stdout and "figures/geo01_isotropy.png" in stdout


def test_changing_analysis_code_never_reruns_extraction(runs_on_the_demo):
    assert "Nothing to be done" in runs_on_the_demo["copied workflow"].run.stdout  # the copy itself changes nothing
    run = runs_on_the_demo["edited workflow"].run
    # the jobs of Fig. 5 (each model's figures), of the checkpoint figure and of those drawn from the summary tables
    # (summarise_models writes them)
    assert scheduled_jobs(run) == {
        "layer_statistics": 6,
        "summarise_models": 1,
        "plot_model_figure": 6,
        "plot_summary_figure": 1,
        "plot_checkpoints": 1,
        "all": 1,
    }


def core_partials(partials):
    """The sums partials (not their .moments / .sample companions)."""
    return [p for p in partials.glob("*/*.parquet") if re.fullmatch(r"\d+\.parquet", p.name)]


def test_killed_run_resumes_only_unfinished_jobs_with_bit_identical_results(tmp_path, small_demo):
    """A model's extractions and merges (the demo's first, on a smaller corpus), killed with SIGKILL once 3 of its 4
    partials are written: the resumed run re-runs only the unfinished extractions, leaves no temporaries, and its
    merged sums are those of an uninterrupted run, bit for bit (the tables and figures after them are functions
    of these files, checked on the demo itself). It starts from the uninterrupted run's corpus sample, shards and
    model (the SLURM tier's run makes them anew and compares its files with that run's)."""
    workdir, config = tmp_path / "killed", tmp_path / "one-model.yaml"
    small_demo_inputs(small_demo, workdir)  # the corpus sample, shards and model: the extractions are what is killed
    # partials kept, to see which jobs re-run
    config.write_text(yaml.safe_dump({**SMALL_DEMO, "keep_partials": True}))
    targets = [f"results/demo/tiny-bert/{f}" for f in MERGED_SUMS]
    assert set(targets) <= set(SMALL_DEMO_OUTPUTS)  # what the uninterrupted run wrote
    command = snakemake_command(workdir, config, *targets)
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partials = workdir / "results" / "demo" / "partials"
    deadline = time.monotonic() + 600
    while len(core_partials(partials)) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)  # Snakemake and its running jobs, as a cluster would
    process.wait()
    # A job that wrote its file just before the kill is still marked incomplete: it re-runs too.
    marked = {base64.b64decode(p.name).decode() for p in (workdir / ".snakemake" / "incomplete").glob("*")}
    finished = {p: p.stat().st_mtime_ns for p in core_partials(partials) if str(p.relative_to(workdir)) not in marked}
    assert 1 <= len(finished) < SMALL_DEMO["shards"]

    assert snakemake(workdir, config, "--unlock").returncode == 0
    dry_run = snakemake(workdir, config, *targets, "-n", "--rerun-incomplete")
    assert scheduled_jobs(dry_run)["extract_statistics"] == SMALL_DEMO["shards"] - len(finished)
    resumed = snakemake(workdir, config, *targets, "--rerun-incomplete")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert {path: path.stat().st_mtime_ns for path in finished} == finished, "finished jobs re-ran"
    assert not list(workdir.glob("results/demo/**/.*.tmp")), "temporaries of killed jobs were left"
    for output in targets:
        assert (workdir / output).read_bytes() == (small_demo / output).read_bytes(), output


def test_a_study_like_the_readmes_runs_every_shard_and_follows_its_weights(tmp_path, tiny_models, corpus_texts):
    """A local model directory and a local text file of about 2,500 sentences, shards left at the default (8):
    no warning, every shard gets sentences, and the statistics are those of brute force. Weights changed in place
    afterwards re-run the model's jobs, even with the old modification time put back (as ``cp -p`` does).

    It runs as far as the model's token and layer tables (sampling, splitting, extraction, merges, layer
    statistics): the shards are what this study is about; a whole run's tables and figures are the demo's and the
    quick start's."""
    texts = corpus_texts * 9  # 2,700 lines in the tiny models' words
    text_file = tmp_path / "sentences.txt"
    text_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
    model_dir = tmp_path / "local-bert"
    shutil.copytree(tiny_models["bert"], model_dir)
    config = {
        "corpus": {"source": "text", "path": str(text_file), "fraction": 1.0, "max_words": 30},
        "models": [{"id": "local-bert", "name": str(model_dir)}],
        "device": "cpu",
    }
    workdir = tmp_path / "run"
    targets = ["results/test/local-bert/tokens.parquet", "results/test/local-bert/layers.csv"]
    run = snakemake(workdir, config, *targets, env={"HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "warning" not in run.stderr.lower(), run.stderr[-3000:]
    kept = pd.read_parquet(workdir / "results" / "test" / "corpus" / "sentences.parquet")["text"].tolist()
    assert 2400 < len(kept) < len(texts), "max_words must drop some sentences here"
    shards = sorted((workdir / "results" / "test" / "corpus" / "shards" / "local-bert").glob("*.parquet"))
    assert len(shards) == 8 and all(len(pd.read_parquet(shard)) > 0 for shard in shards)
    tokens = pd.read_parquet(workdir / "results" / "test" / "local-bert" / "tokens.parquet")
    assert_tokens_match(tokens, brute_force_tokens(*brute_force_embeddings(tiny_models["bert"], kept)))

    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(snakemake(workdir, config, *targets, "-n"))
    weights = model_dir / "model.safetensors"
    status = weights.stat()
    tensors = load_file(weights)
    tensors["encoder.layer.2.output.LayerNorm.weight"] *= 2
    save_file(tensors, weights, metadata={"format": "pt"})
    os.utime(weights, ns=(status.st_atime_ns, status.st_mtime_ns))
    jobs = scheduled_jobs(snakemake(workdir, config, *targets, "-n"))
    assert jobs["extract_statistics"] == 8 and jobs["layer_statistics"] == 1 and jobs["split_corpus"] == 1


def test_uncached_hub_model_fails_its_job_with_one_line(tmp_path):
    config = {**DEMO, "models": [{"name": "bert-base-uncased"}]}
    run = snakemake(tmp_path, config, "results/demo/partials/bert-base-uncased/0.parquet", env={"HF_HUB_OFFLINE": "1"})
    assert run.returncode != 0
    assert "ctxvar error: model 'bert-base-uncased' (bert-base-uncased) is not in the HF cache" in run.stderr
    assert "Traceback" not in run.stderr


def results_digests(workdir) -> dict:
    """Every file of the demo's results under ``workdir`` → the SHA-256 of its bytes."""
    files = (path for path in (workdir / "results" / "demo").rglob("*") if path.is_file())
    return {path.relative_to(workdir): hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def test_a_failing_paper_run_leaves_the_demo_intact(runs_on_the_demo):
    """The README's order on a machine without the Hub: demo, then the paper config, which fails."""
    paper = runs_on_the_demo["paper"]
    offline = r"ctxvar error: (corpus:|model '[\w.-]+' \([\w./-]+\) is not in the HF cache and HF_HUB_OFFLINE is set)"
    assert paper.run.returncode != 0 and re.search(offline, paper.run.stderr), paper.run.stderr[-2000:]
    assert results_digests(paper.workdir) == paper.before
    again = snakemake(paper.workdir, REPO / "config" / "demo.yaml", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_a_flipped_byte_in_merged_sums_fails_every_reader_naming_the_file(runs_on_the_demo):
    flipped = runs_on_the_demo["flipped byte"]
    assert flipped.run.returncode != 0
    stderr = flipped.run.stderr
    assert "ctxvar error: results/demo/tiny-bert/sums.parquet" in stderr and "delete it and re-run" in stderr
    layers = Path("results") / "demo" / "tiny-bert" / "layers.csv"
    assert results_digests(flipped.workdir)[layers] == flipped.before[layers], "a corrupt input became a new table"


def test_a_corpus_too_small_for_fig1_still_gives_every_core_output(tmp_path):
    config = {**copy.deepcopy(DEMO), "models": DEMO["models"][:1], "shards": 1}
    config["corpus"]["synthetic"] = {**config["corpus"]["synthetic"], "n_sentences": 3}
    run = snakemake(tmp_path, config)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ctxvar warning: figures fig01_pca and fig08_selected_tokens not drawn" in run.stderr
    results = tmp_path / "results" / "demo"
    for output in (
        "tiny-bert/tokens.parquet",
        "tiny-bert/layers.csv",
        "tiny-bert/geometry.csv",
        "summary/layers.csv",
        "figures/fig02_variance_on_mean.png",
        "tiny-bert/table2.csv",
    ):
        assert (results / output).exists(), output
    assert "corpus is too small" in pd.read_csv(results / "tiny-bert" / "figures" / "fig01_pca.csv")["not_drawn"][0]
    assert pd.read_parquet(results / "tiny-bert" / "tokens.parquet")["n"].sum() > 0


def test_a_model_whose_every_sentence_is_too_long_fails_its_merge_and_nothing_after_it(tmp_path):
    """tokens.long_sentences: skip with every sentence longer than the model's positions: one line from the
    model's final merge, and no later step runs on empty sums (geometry_statistics raised LinAlgError)."""
    config = {**copy.deepcopy(DEMO), "shards": 1, "device": "cpu"}
    # sentences of ~50 words (at least 6 with near certainty) cannot fit 8 positions with [CLS] and [SEP]
    config["corpus"]["synthetic"] = {**config["corpus"]["synthetic"], "n_sentences": 60, "mean_words": 50}
    config["models"] = [
        {
            "id": "short",
            "init": "random",
            "arch": "bert",
            "hidden_size": 16,
            "num_layers": 2,
            "num_heads": 2,
            "intermediate_size": 32,
            "vocab_size": 100,
            "max_positions": 8,
        }
    ]
    run = snakemake(tmp_path, config, "--keep-going")
    assert run.returncode != 0
    assert re.search(
        r"^ctxvar error: model 'short': every one of the corpus's \d+ sentences is longer than its 8 positions and "
        r"was skipped \(tokens.long_sentences: skip\), so it has no token to analyse; lower corpus.max_words or set "
        r"tokens.long_sentences: split \(traceback in logs/demo/short/merge_statistics.log\)$",
        run.stderr,
        flags=re.M,
    ), run.stderr[-3000:]
    assert re.findall(r"^Error in rule (\w+):", run.stderr + run.stdout, flags=re.M) == ["merge_statistics"]
    assert "Traceback" not in run.stderr
