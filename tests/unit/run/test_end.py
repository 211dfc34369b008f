"""The run's last lines (ctxvar.run.end), on files laid out as a run leaves them; the workflow tier checks them on
the demo's and the quick start's own output."""

from __future__ import annotations

import pytest

from ctxvar.run.end import failed_jobs, failure_message, job_error, report_command, success_message

SNAKEMAKE_LOG = """\
[Tue Nov 24 17:00:35 2026]
Finished jobid: 16 (Rule: plot_summary_figure)
2 of 31 steps (6%) done
RuleException:
CalledProcessError in file "/repo/workflow/rules/corpus.smk", line 34:
Command 'set -euo pipefail;  python3.11 /run/.snakemake/scripts/tmp6v.split_corpus.py' returned non-zero exit status 1.
[Tue Nov 24 17:00:39 2026]
Error in rule split_corpus:
    message: None
    jobid: 3
    input: results/fail/corpus/sentences.parquet
    output: results/fail/corpus/shards/bert/0.parquet, results/fail/corpus/shards/bert/1.parquet
    log: logs/fail/corpus/shards/bert.log (check log file(s) for error details)
[Tue Nov 24 17:00:41 2026]
Error in rule extract_statistics:
    message: None
    jobid: 7
    log: logs/fail/partials/tiny/0.log (check log file(s) for error details)
Shutting down, this might take some time.
Exiting because a job execution failed. Look above for error messages
"""


def test_failed_jobs_are_read_from_snakemakes_log_with_their_job_logs():
    assert failed_jobs(SNAKEMAKE_LOG) == [
        ("split_corpus", "logs/fail/corpus/shards/bert.log"),
        ("extract_statistics", "logs/fail/partials/tiny/0.log"),
    ]


@pytest.mark.parametrize(
    "log_text, expected",
    [
        (
            "2026-11-24 17:00:38,001 INFO ctxvar.x: loading\n"
            "2026-11-24 17:00:39,120 ERROR root: model 'bert' (bert) is not in the HF cache\nTraceback (most "
            "recent call last):\n  File \"x.py\", line 1\nctxvar.errors.ModelLoadError: model 'bert' (bert) is not\n",
            "ctxvar error: model 'bert' (bert) is not in the HF cache",
        ),
        (
            "2026-11-24 17:00:39,120 ERROR root: unexpected error (a bug: please report it with this log)\n"
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'layer'\n",
            "KeyError: 'layer' (a bug: please report it with this log)",
        ),
        ("2026-11-24 17:00:38,001 INFO ctxvar.x: 12 of 80 batches\n", "its log records no error"),
        (None, "the job wrote no log"),
    ],
    ids=["ctxvar-error", "bug", "killed", "no-log"],
)
def test_the_error_of_a_failed_job_is_its_logs_one_line(tmp_path, log_text, expected):
    job_log = None
    if log_text is not None:
        job_log = tmp_path / "job.log"
        job_log.write_text(log_text)
    assert job_error(job_log).startswith(expected)


def test_a_failed_run_ends_with_each_error_and_its_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs" / "fail" / "corpus" / "shards").mkdir(parents=True)
    (tmp_path / "logs" / "fail" / "corpus" / "shards" / "bert.log").write_text(
        "2026-11-24 17:00:39,120 ERROR root: corpus: no sentence kept of 3 sampled rows\n"
    )
    (tmp_path / "snakemake.log").write_text(SNAKEMAKE_LOG)
    lines = failure_message([str(tmp_path / "snakemake.log")]).splitlines()
    assert lines[0].startswith("==== ctxvar: the run failed ====")
    assert lines[1:] == [
        "  split_corpus: ctxvar error: corpus: no sentence kept of 3 sampled rows",
        "  log: logs/fail/corpus/shards/bert.log",
        "  extract_statistics: the job wrote no log (it did not start: see Snakemake's messages above)",
        "  log: logs/fail/partials/tiny/0.log",
    ]
    moved = failure_message([str(tmp_path / "snakemake.log")], moved=True).splitlines()
    assert moved[2] == f"  log: {tmp_path}/logs/fail/corpus/shards/bert.log"  # --directory: the shell is elsewhere


def finished_run(folder, models, summary=True):
    (folder / "figures").mkdir(parents=True)
    for model in models:
        (folder / model).mkdir()
        (folder / model / "tokens.parquet").write_bytes(b"")
    if summary:
        (folder / "summary").mkdir()
        for name in ("layers.csv", "geometry.csv", "models.csv"):
            (folder / "summary" / name).write_text("")


def test_a_finished_run_says_where_its_results_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Snakefile").write_text("")
    (tmp_path / "config").mkdir()
    finished_run(tmp_path / "results" / "minilm", ["all-MiniLM-L6-v2", "gaussian-null"])
    command = report_command([str(tmp_path / "config" / "minilm.yaml")], "results/minilm", None, "Snakefile")
    assert command == "snakemake --configfile config/minilm.yaml --report results/minilm/report.html"
    lines = success_message("results/minilm", ["all-MiniLM-L6-v2", "gaussian-null"], command).splitlines()
    assert lines == [
        "==== ctxvar: finished; results of run minilm " + "=" * 33,
        "  run folder  results/minilm/",
        "  tables      summary/ layers.csv, geometry.csv, models.csv",
        "  per model   <model>/ tokens.parquet, layers.csv, geometry.csv, figures/ (2 models)",
        "  figures     figures/ (all models), <model>/figures/: PNG, PDF and the CSV drawn",
        "  report      snakemake --configfile config/minilm.yaml --report results/minilm/report.html",
        '  notebook    import ctxvar; ctxvar.load_results("results/minilm")',
    ]
    assert max(map(len, lines)) <= 100


def test_a_partial_run_lists_only_what_exists_and_names_paths_for_another_directory(tmp_path, monkeypatch):
    workdir = tmp_path / "qs"
    finished_run(workdir / "results" / "demo", ["tiny-bert"], summary=False)
    monkeypatch.chdir(workdir)
    command = report_command([str(tmp_path / "demo.yaml")], "results/demo", str(workdir), "/repo/Snakefile")
    assert command == (
        f"snakemake -s /repo/Snakefile --directory {workdir} --configfile {tmp_path}/demo.yaml "
        f"--report {workdir}/results/demo/report.html"
    )
    text = success_message("results/demo", ["tiny-bert", "tiny-gpt2"], command, moved=True)
    assert f"  run folder  {workdir}/results/demo/" in text and "  per model   tiny-bert/ tokens.parquet" in text
    assert "tables" not in text and "load_results" not in text  # no summary yet: nothing to load
