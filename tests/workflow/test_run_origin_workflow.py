"""Through Snakemake: a second config that sets another's run: on purpose stops before its first job with one
line (a dry run shows its plan with a warning), the first config edited in place runs; each model's run.json
names the corpus sample its sums come from, as counts.json does (ctxvar.load_results compares them)."""

from __future__ import annotations

import json

import yaml

from workflow_runs import snakemake


def study(path, corpus, max_words: int = 64) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"source": "text", "path": str(corpus), "max_words": max_words}
    model = {"id": "m", "init": "random", "arch": "bert", "hidden_size": 32, "num_layers": 2}
    path.write_text(yaml.safe_dump({"run": "X", "corpus": entry, "models": [model], "shards": 1}))
    return str(path)


def test_a_second_config_with_the_same_run_stops_and_the_first_edited_in_place_runs(tmp_path):
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"sentence number {i} of the corpus{' and more' * (i % 2)}\n" for i in range(40)))
    workdir, first = tmp_path / "work", study(tmp_path / "a" / "study.yaml", corpus)
    ran = snakemake(workdir, first, "results/X/m/run.json")
    assert ran.returncode == 0, ran.stderr[-3000:]
    folder = workdir / "results" / "X"
    run = json.loads((folder / "m" / "run.json").read_text())
    assert run["corpus_hash"] == json.loads((folder / "corpus" / "counts.json").read_text())["corpus_hash"]

    second = study(tmp_path / "b" / "other.yaml", corpus, max_words=7)
    dry = snakemake(workdir, second, "-n", "--until", "sample_corpus")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "sets the same run name and would write over them; a real run stops before its first job" in dry.stderr
    counts = (folder / "corpus" / "counts.json").read_bytes()
    real = snakemake(workdir, second, "--until", "sample_corpus")
    assert real.returncode == 1
    last = real.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ctxvar error: results/X holds the results of {first}; {second} sets the same run name")
    assert (folder / "corpus" / "counts.json").read_bytes() == counts, "no job ran"

    study(tmp_path / "a" / "study.yaml", corpus, max_words=7)  # the first config edited in place
    edited = snakemake(workdir, first, "--until", "sample_corpus")
    assert edited.returncode == 0, edited.stderr[-3000:]
    assert (folder / "corpus" / "counts.json").read_bytes() != counts
