"""Which config a run uses: config.yaml without --configfile, else only the given files (and schema defaults)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
import yaml

from ctxvar.stats.declarations import keeps_moments

from support.workflow_runs import REPO, scheduled_jobs

PAPER = yaml.safe_load((REPO / "config.yaml").read_text())
NO_GEOMETRY = {"covariance": False, "cosine": False, "twonn": False}
# Whether a run of NO_GEOMETRY writes moments files all the same: for a per-layer sum declared and kept always.
MOMENTS_WITHOUT_GEOMETRY = keeps_moments(NO_GEOMETRY)
STUDY = {  # names what it studies and nothing else
    "corpus": {"source": "synthetic"},
    "models": [{"id": "tiny", "init": "random", "arch": "bert", "hidden_size": 32, "num_layers": 2}],
}


@pytest.fixture
def workdir(tmp_path):
    """A working directory whose config.yaml is the paper's with 5 shards and no geometry: what a user's
    edited config.yaml looks like, and distinguishable from the schema's defaults (8 shards, geometry on)."""
    work = tmp_path / "work"
    work.mkdir()
    edited = {**PAPER, "shards": 5, "geometry": NO_GEOMETRY}
    (work / "config.yaml").write_text(yaml.safe_dump(edited))
    studies = work / "studies"
    studies.mkdir()
    return work


def dry_run(workdir, *configfiles: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``snakemake -n`` in ``workdir`` with these ``--configfile`` files; with none, as ``snakemake --cores 8`` runs."""
    files = ["--configfile", *configfiles] if configfiles else []
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *files, "--cores", "2", "-n"]
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env={**os.environ, **(env or {})})


def test_without_configfile_the_run_is_config_yaml(workdir):
    run = dry_run(workdir)
    jobs = scheduled_jobs(run)
    assert jobs["extract_statistics"] == 6 * 5 and ("moments.parquet" in run.stdout) is MOMENTS_WITHOUT_GEOMETRY
    assert "results/paper/bert-base-uncased/tokens.parquet" in run.stdout


def test_a_configfile_stands_on_its_own(workdir):
    (workdir / "studies" / "my_study.yaml").write_text(yaml.safe_dump(STUDY))
    run = dry_run(workdir, "studies/my_study.yaml")
    jobs = scheduled_jobs(run)
    assert jobs["extract_statistics"] == 8, "shards must be the schema's default, not config.yaml's 5"
    assert "moments.parquet" in run.stdout, "geometry must be the schema's default (on), not config.yaml's (off)"
    assert "results/my_study/tiny/tokens.parquet" in run.stdout, "run: comes from the file's name"
    assert "bert-base-uncased" not in run.stdout + run.stderr


def test_a_configfile_without_models_fails_at_start_up_with_one_line(workdir):
    (workdir / "studies" / "corpus_only.yaml").write_text(yaml.safe_dump({"corpus": STUDY["corpus"]}))
    run = dry_run(workdir, "studies/corpus_only.yaml")
    assert run.returncode == 1
    errors = [line for line in run.stderr.splitlines() if line.startswith("ctxvar error:")]
    assert errors == [
        "ctxvar error: studies/corpus_only.yaml has no models: section: a --configfile stands on its own and does "
        "not inherit config.yaml's (the paper's six Hub models on BookCorpus); add it, or extend the paper's "
        f"setup on purpose with --configfile {workdir / 'config.yaml'} {workdir / 'studies' / 'corpus_only.yaml'}"
    ]
    assert "Traceback" not in run.stderr


def hiding(tmp_path, module: str) -> dict:
    """The environment of a Python in which ``module`` (and its submodules) cannot be imported."""
    hidden = tmp_path / f"without_{module}"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == {module!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")]))}


def test_snakemake_in_a_python_without_ctxvar_fails_at_start_up_with_one_line(workdir, tmp_path):
    """As when Snakemake comes from another environment than the one ctxvar was installed in; a missing dependency
    of ctxvar is named as itself, not as ctxvar missing."""
    run = dry_run(workdir, env=hiding(tmp_path, "ctxvar"))
    assert run.returncode == 1
    line = run.stderr.splitlines()[-1]
    prefix, suffix = "ctxvar is not installed in the Python that runs Snakemake; install it there: ", " (torch first:"
    assert line.startswith(prefix) and line.endswith(f"{suffix} README, Install)")
    python, *install = shlex.split(line[len(prefix) : line.index(suffix)])
    assert os.path.samefile(python, sys.executable)  # Snakemake's own Python, here the tests' one
    assert install == ["-m", "pip", "install", "-e", f"{REPO.resolve()}[example]"]
    assert "Traceback" not in run.stdout + run.stderr and "ModuleNotFoundError" not in run.stdout + run.stderr

    run = dry_run(workdir, env=hiding(tmp_path, "pyarrow"))
    assert run.returncode == 1  # Snakemake prints its error on stdout
    assert "No module named 'pyarrow'" in run.stdout and "ctxvar is not installed" not in run.stdout + run.stderr


def test_the_suggested_command_runs_from_outside_the_project_folder(tmp_path):
    """From a folder without config.yaml, the suggestion extends the workflow's own config.yaml, and runs."""
    study = tmp_path / "studies" / "corpus_only.yaml"
    study.parent.mkdir()
    study.write_text(yaml.safe_dump({"corpus": STUDY["corpus"]}))
    snakefile = ["snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2", "-n"]
    run = subprocess.run(
        [*snakefile, "--configfile", "studies/corpus_only.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 1, run.stderr[-3000:]
    suggested = run.stderr.split("extend the paper's setup on purpose with ")[1].split()
    assert suggested == ["--configfile", str(REPO / "config.yaml"), str(study)]
    again = subprocess.run([*snakefile, *suggested], capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "results/corpus_only/bert-base-uncased/tokens.parquet" in again.stdout, "its own run, not the paper's"


def test_naming_config_yaml_first_extends_it_but_never_takes_its_run(workdir):
    """The run is the last file's: config.yaml's run: paper would have put the study into the paper's folder."""
    (workdir / "studies" / "one_model.yaml").write_text(yaml.safe_dump({"models": [{"name": "gpt2"}]}))
    run = dry_run(workdir, "config.yaml", "studies/one_model.yaml")
    jobs = scheduled_jobs(run)
    assert jobs["extract_statistics"] == 5, "config.yaml's keys apply"
    assert ("moments.parquet" in run.stdout) is MOMENTS_WITHOUT_GEOMETRY, "config.yaml's geometry applies"
    assert "results/one_model/gpt2/" in run.stdout and "results/paper/" not in run.stdout
    (workdir / "studies" / "other.yaml").write_text(yaml.safe_dump(STUDY))
    run = dry_run(workdir, "studies/other.yaml")
    assert "results/other/tiny/" in run.stdout and "results/paper/" not in run.stdout


def test_a_corpus_no_model_runs_over_gives_no_warning_about_its_shards(workdir):
    """Models with forward: false are not sharded: a corpus smaller than shards: is no matter for them."""
    weights_only = {
        "corpus": {"source": "synthetic", "rows": 2},
        "shards": 8,
        "models": [{"id": "tiny", "init": "random", "arch": "bert", "forward": False}],
    }
    (workdir / "studies" / "weights_only.yaml").write_text(yaml.safe_dump(weights_only))
    run = dry_run(workdir, "studies/weights_only.yaml")
    assert run.returncode == 0, run.stderr
    assert "ctxvar warning" not in run.stderr, run.stderr
    assert "extract_statistics" not in scheduled_jobs(run)
    assert scheduled_jobs(run)["summarise_models"] == 1, "the summary of no model, over an earlier forward pass's"
