"""Results follow inputs outside the config, through Snakemake: a corpus file edited in place re-samples, and a
second config of the same file name stops before it writes into the first one's run folder. corpus.rows set
re-samples; at null, its default, it does not."""

from __future__ import annotations

import os

import yaml

from support.workflow_runs import scheduled_jobs, snakemake


def study(folder, corpus) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"  # no run: the run is named after the file
    corpus_entry = {"source": "text", "path": str(corpus)}
    path.write_text(yaml.safe_dump({"corpus": corpus_entry, "models": [{"id": "m", "init": "random", "arch": "bert"}]}))
    return str(path)


def test_an_edited_corpus_re_samples_and_a_namesake_config_stops(tmp_path):
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"sentence number {i} of the corpus\n" for i in range(40)))
    workdir, first = tmp_path / "work", study(tmp_path / "a", corpus)
    ran = snakemake(workdir, first, "--until", "sample_corpus")
    assert ran.returncode == 0, ran.stderr
    assert (workdir / "results" / "study" / "config_files.json").is_file()
    assert scheduled_jobs(snakemake(workdir, first, "-n", "--until", "sample_corpus")) == {}

    status = os.stat(corpus)
    corpus.write_text("".join(f"sentence number {i} of the corpus\n" for i in range(20)))  # cut in place
    os.utime(corpus, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert scheduled_jobs(snakemake(workdir, first, "-n", "--until", "sample_corpus")) == {"sample_corpus": 1}

    second = snakemake(workdir, study(tmp_path / "b", corpus), "-n")
    assert second.returncode == 1
    assert (
        second.stderr.strip()
        .splitlines()[-1]
        .startswith(f"ctxvar error: results/study holds the results of {os.path.realpath(first)}")
    )


def test_corpus_rows_re_samples_and_rows_null_does_not(tmp_path):
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"sentence number {i} of the corpus\n" for i in range(40)))
    workdir, config = tmp_path / "work", tmp_path / "study.yaml"
    models = [{"id": "m", "init": "random", "arch": "bert"}]

    def with_rows(**rows) -> str:
        entry = {"source": "text", "path": str(corpus), "sampling": "python-random", **rows}
        config.write_text(yaml.safe_dump({"corpus": entry, "models": models}))
        return str(config)

    ran = snakemake(workdir, with_rows(), "--until", "sample_corpus")
    assert ran.returncode == 0, ran.stderr
    assert scheduled_jobs(snakemake(workdir, with_rows(rows=None), "-n", "--until", "sample_corpus")) == {}
    dry_run = snakemake(workdir, with_rows(rows=20), "-n", "--until", "sample_corpus")
    assert scheduled_jobs(dry_run) == {"sample_corpus": 1}
