"""Results follow a corpus replaced outside the config, through Snakemake: a file moved over the corpus, and a link
to the corpus pointed at another file, each of the old file's size and modification time, re-sample."""

from __future__ import annotations

import os

import yaml

from support.workflow_runs import scheduled_jobs, snakemake


def test_a_corpus_replaced_by_a_rename_or_a_relinked_path_re_samples(tmp_path):
    original = tmp_path / "sentences.txt"
    original.write_text("".join(f"sentence number {i} of the corpus\n" for i in range(40)))
    link = tmp_path / "corpus.txt"
    link.symlink_to(original)
    config = tmp_path / "study.yaml"
    entry = {"source": "text", "path": str(link)}
    config.write_text(yaml.safe_dump({"corpus": entry, "models": [{"id": "m", "init": "random", "arch": "bert"}]}))
    workdir = tmp_path / "work"
    ran = snakemake(workdir, config, "--until", "sample_corpus")
    assert ran.returncode == 0, ran.stderr
    assert scheduled_jobs(snakemake(workdir, config, "-n", "--until", "sample_corpus")) == {}

    status = os.stat(original)
    for replacement, replace in [
        (tmp_path / "moved.txt", lambda path: os.replace(path, original)),  # moved over the corpus
        (tmp_path / "other.txt", lambda path: (link.unlink(), link.symlink_to(path))),  # the link pointed elsewhere
    ]:
        replacement.write_text("".join(f"sentence number {i} of the CORPUS\n" for i in range(40)))  # same size
        os.utime(replacement, ns=(status.st_atime_ns, status.st_mtime_ns))
        replace(replacement)
        assert os.path.getsize(link) == status.st_size and os.stat(link).st_mtime_ns == status.st_mtime_ns
        assert scheduled_jobs(snakemake(workdir, config, "-n", "--until", "sample_corpus")) == {"sample_corpus": 1}
        ran = snakemake(workdir, config, "--until", "sample_corpus")  # the next replacement starts from its run
        assert ran.returncode == 0, ran.stderr
        assert scheduled_jobs(snakemake(workdir, config, "-n", "--until", "sample_corpus")) == {}
