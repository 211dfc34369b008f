"""The study configs: config.yaml (the paper), config/machina_mercer_2024.yaml and config/razzhigaev_2024.yaml each
plan offline, with nothing in the HF cache, and a dry run prints the cost plan before the jobs and again last; a
slice of each (tiny random-init models standing in for the Hub's, and for Razzhigaev et al. a few hundred lines of
generated wiki text standing in for enwik8) runs to the end and draws every figure its study draws, each with its
CSV."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

import ctxvar

from support.enwik8_like import write_enwik8_like
from support.workflow_runs import REPO, scheduled_jobs, snakemake_command

STUDIES = {  # config file: (extraction jobs, embedding-matrix jobs) of its dry run
    "config.yaml": (6 * 8, 6),
    "config/machina_mercer_2024.yaml": (0, 8 * 21 + 2),
    "config/razzhigaev_2024.yaml": (16 + 13, 16 + 13),
}
TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "vocab_size": 300}


def offline(tmp_path) -> dict:
    """An environment with no Hub and an empty HF cache."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hub")}


def run_study(workdir, study: str, overlay: dict | None, env: dict, *args: str) -> subprocess.CompletedProcess:
    """Snakemake in ``workdir`` with the study's config file, and after it ``overlay`` (a slice) when given."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = snakemake_command(workdir, REPO / study, *args)
    if overlay is not None:
        path = workdir.parent / f"{workdir.name}_slice.yaml"
        path.write_text(yaml.safe_dump(overlay))
        command.insert(command.index(str(REPO / study)) + 1, str(path))
    return subprocess.run(command, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("study", STUDIES)
def test_each_study_plans_offline_with_its_cost_plan_before_the_jobs(tmp_path, study):
    run = run_study(tmp_path / "work", study, None, offline(tmp_path), "-n")
    jobs = scheduled_jobs(run)
    assert (jobs.get("extract_statistics", 0), jobs.get("embedding_matrix_statistics", 0)) == STUDIES[study]
    plan = run.stderr[run.stderr.index("cost plan:") :].split("\n\n")[0]
    assert run.stderr.index("cost plan:") < (run.stdout + run.stderr).index("Job stats:") or "Job stats" in run.stdout
    assert "downloads" in plan and "not counted" not in plan, plan  # every Hub model has a shape offline
    assert run.stderr.rstrip().endswith(plan), run.stderr[-2000:]  # and the plan ends the dry run's output
    if jobs.get("extract_statistics"):
        assert "forward tokens" in plan and "GPU-hours" in plan and "HF cache" in plan, plan


def figures_of(run_folder) -> set[str]:
    """Every figure under ``run_folder`` (relative path without extension), each checked to have its CSV."""
    drawn = set()
    for png in run_folder.rglob("figures/**/*.png"):
        assert png.with_suffix(".csv").is_file() and png.with_suffix(".pdf").is_file(), png
        drawn.add(str(png.relative_to(run_folder).with_suffix("")))
    return drawn


def test_a_slice_of_machina_mercer_draws_every_figure_of_the_study(tmp_path):
    families = [
        {"id": "gpt2-tiny", "init": "random", "arch": "gpt2", "forward": False, "revisions": ["step0", "step2"]},
        {"id": "bert-tiny", "init": "random", "arch": "bert", "forward": False, "revisions": ["step0", "step2"]},
    ]
    overlay = {
        "run": "machina_mercer_slice",
        "corpus": {"source": "synthetic", "synthetic": {"n_sentences": 300}},  # the tiny models' training text
        "shards": 1,
        "models": [{**TINY, **family} for family in families],
    }
    run = run_study(tmp_path / "work", "config/machina_mercer_2024.yaml", overlay, offline(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    folder = tmp_path / "work" / "results" / "machina_mercer_slice"
    drawn = figures_of(folder)
    checkpoints = [f"{family['id']}@{step}" for family in families for step in family["revisions"]]
    assert {f"{model}/figures/emb01_projection" for model in checkpoints} <= drawn
    assert {f"figures/checkpoints/embedding_matrices/{family['id']}" for family in families} <= drawn
    assert "figures/across_checkpoints/isotropy_by_step" in drawn  # every family on one figure
    assert "figures/across_checkpoints/twonn_by_step" not in drawn  # no forward pass, no TwoNN
    assert not list(folder.rglob("tokens.parquet")) and not (folder / "corpus" / "shards").exists()  # no forward
    results = ctxvar.load_results(folder)  # a run of embedding matrices alone reads back in a notebook
    assert sorted(set(results.embedding_matrices["model"])) == sorted(checkpoints) and results.tokens.empty


def test_a_slice_of_razzhigaev_draws_every_figure_of_the_study(tmp_path):
    text = write_enwik8_like(tmp_path, pages=60)["raw"]
    assert text.stat().st_size > 128 * 512  # the study's 128 pieces
    models = [
        {"id": "bert-tiny", "init": "random", "arch": "bert"},
        {"id": "pythia-tiny", "init": "random", "arch": "gpt2", "revisions": ["step0", "step2"]},  # the decoders
    ]
    overlay = {
        "run": "razzhigaev_slice",
        "corpus": {"path": str(text)},  # the rest as the study samples enwik8
        "geometry": {"sample_size": 1024},  # of the study's 4096: its 4 batches of TwoNN, at a sixteenth of the pairs
        "models": [{**TINY, **model} for model in models],
    }
    run = run_study(tmp_path / "work", "config/razzhigaev_2024.yaml", overlay, offline(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    folder = tmp_path / "work" / "results" / "razzhigaev_slice"
    assert json.loads((folder / "corpus" / "counts.json").read_text())["rows_sampled"] == 128
    drawn = figures_of(folder)
    assert {
        "figures/geo01_isotropy",
        "figures/geo03_intrinsic_dimension",
        "figures/geo06_anisotropy_encoders_decoders",  # Fig. 1
        "figures/across_checkpoints/twonn_by_step",  # Fig. 2
        "figures/checkpoints/pythia-tiny",  # Figs. 3-4: anisotropy per layer across steps
    } <= drawn
    results = ctxvar.load_results(folder)
    assert set(results.embedding_matrices["model"]) == set(results.models["model"])  # every model has weights
    encoders_decoders = (folder / "figures" / "geo06_anisotropy_encoders_decoders.csv").read_text()
    assert "bert-tiny" in encoders_decoders and "pythia-tiny@step2" in encoders_decoders
