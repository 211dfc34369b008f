"""Through Snakemake: a project folder moved after its run (its study and corpus inside) runs on with
nothing re-made; a second config file that extends its study (``--configfile A B``, B adding a model) plans
and runs only the new model's jobs; a second config that sets another's run: on purpose stops before its first
job with one line (a dry run shows its plan with a warning); the first config edited in place runs; each
model's run.json names the corpus sample its sums come from, as counts.json does (ctxvar.load_results compares
them)."""

from __future__ import annotations

import json
import os
import subprocess

import yaml

from support.workflow_runs import scheduled_jobs, snakemake, snakemake_command

MODEL = {"id": "m", "init": "random", "arch": "bert", "hidden_size": 32, "num_layers": 2}


def study(path, max_words: int = 64) -> str:
    """A study of the project's own corpus (named relative to the working directory, as a user writes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"source": "text", "path": "sentences.txt", "max_words": max_words}
    path.write_text(yaml.safe_dump({"run": "X", "corpus": entry, "models": [MODEL], "shards": 1}))
    return str(path)


def stamps(folder) -> dict[str, int]:
    """Every file under ``folder`` → its modification time: what a run re-made."""
    return {str(path): path.stat().st_mtime_ns for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_moved_project_and_an_extended_study_run_on_and_another_config_stops(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "sentences.txt").write_text(
        "".join(f"sentence number {i} of the corpus{' and more' * (i % 2)}\n" for i in range(40))
    )
    ran = snakemake(project, study(project / "a" / "study.yaml"), "results/X/m/run.json")
    assert ran.returncode == 0, ran.stderr[-3000:]

    workdir = tmp_path / "moved"
    os.rename(project, workdir)  # mv project moved: its record named /…/project/a/study.yaml
    folder, first = workdir / "results" / "X", str(workdir / "a" / "study.yaml")
    made = stamps(folder)
    dry = snakemake(workdir, first, "-n", "results/X/m/run.json")
    assert dry.returncode == 0 and "ctxvar warning" not in dry.stderr, dry.stderr[-3000:]
    assert scheduled_jobs(dry) == {}, "nothing of the moved project is re-made"
    run = json.loads((folder / "m" / "run.json").read_text())
    assert run["corpus_hash"] == json.loads((folder / "corpus" / "counts.json").read_text())["corpus_hash"]

    extra = workdir / "studies" / "extra.yaml"  # the study extended in its folder: one more model
    extra.parent.mkdir()
    extra.write_text(yaml.safe_dump({"run": "X", "models": [MODEL, {**MODEL, "id": "m2"}]}))
    command = snakemake_command(workdir, first, "results/X/m/run.json", "results/X/m2/run.json")
    command.insert(command.index(first) + 1, str(extra))  # --configfile a/study.yaml studies/extra.yaml
    plan = scheduled_jobs(subprocess.run([*command, "-n"], capture_output=True, text=True))
    assert plan["extract_statistics"] == 1 and "sample_corpus" not in plan and max(plan.values()) == 1, plan
    extended = subprocess.run([*command, "--until", "build_random_model"], capture_output=True, text=True)
    assert extended.returncode == 0, extended.stderr[-3000:]  # a real run: its record accepts the extension
    assert "a/study.yaml studies/extra.yaml extends them with studies/extra.yaml" in extended.stderr
    assert (folder / "models" / "m2").is_dir()
    assert {path: stamp for path, stamp in stamps(folder).items() if path in made} == made, "only m2 was made"

    second = study(workdir / "b" / "other.yaml", max_words=7)
    dry = snakemake(workdir, second, "-n", "--until", "sample_corpus")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "sets the same run name and would write over them; a real run stops before its first job" in dry.stderr
    counts = (folder / "corpus" / "counts.json").read_bytes()
    real = snakemake(workdir, second, "--until", "sample_corpus")
    assert real.returncode == 1
    last = real.stderr.strip().splitlines()[-1]
    assert last.startswith("ctxvar error: results/X holds the results of a/study.yaml; b/other.yaml sets the same run")
    assert (folder / "corpus" / "counts.json").read_bytes() == counts, "no job ran"

    study(workdir / "a" / "study.yaml", max_words=7)  # the first config edited in place
    edited = snakemake(workdir, first, "--until", "sample_corpus")
    assert edited.returncode == 0, edited.stderr[-3000:]
    assert (folder / "corpus" / "counts.json").read_bytes() != counts
