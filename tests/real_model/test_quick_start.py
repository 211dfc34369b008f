"""Real-model tier: the README's quick start, run as the README says, and every number the README quotes from it
checked against the files it writes; and its closing lines, which say where the results are."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pandas as pd
import pytest

import ctxvar
from ctxvar.errors import ModelLoadError

from support.workflow_runs import (
    MINILM,
    REPO,
    RUN_SECONDS,
    end_of_run,
    finished_snakemake,
    quick_start_archive,
    run_seconds,
)

README = " ".join((REPO / "README.md").read_text().split())  # one line: quoted sentences wrap anywhere
FIGURES_DOC = " ".join((REPO / "docs" / "figures.md").read_text().split())
CONSOLE_LINES = 48  # at most four dozen lines before the closing block: start-up, the job table, progress by tenths


@pytest.fixture(scope="module")
def quick_start(started_quick_start):
    """``(run folder, finished process)`` of ``snakemake --cores 2 --configfile config/minilm.yaml``, started with
    the session (``conftest.started_quick_start``); its time is printed under "measured"."""
    try:
        quick_start_archive()
    except ModelLoadError as error:
        pytest.skip(f"{error} (CI installs it with the test extra)")
    workdir, process = started_quick_start
    run = finished_snakemake(workdir, process)
    assert run.returncode == 0, run.stderr[-3000:]
    RUN_SECONDS["config/minilm.yaml, beside other tests"] = run_seconds(workdir, process)
    return workdir / "results" / "minilm", run


def quoted(pattern: str, text: str = README) -> tuple[str, ...]:
    """The groups of ``pattern`` in ``text`` (the README's), which must quote it once."""
    found = re.findall(pattern, text)
    assert len(found) == 1, f"the document should quote {pattern!r} once, found {found}"
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def number(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-").lstrip("+"))


def agrees(text: str, value: float) -> bool:
    """Whether ``value`` rounds to ``text`` as quoted (to its last digit)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(number(text) - value) <= 0.5 * 10**-decimals + 1e-12


@pytest.fixture(scope="module")
def layers(quick_start):
    folder = quick_start[0]
    return {model: pd.read_csv(folder / model / "layers.csv").set_index("layer") for model in (MINILM, "gaussian-null")}


def test_the_corpus_and_job_counts_the_readme_quotes(quick_start):
    folder, run = quick_start
    sentences, tokens, python = quoted(r"\): ([\d,]+) sentences, about ([\d,]+) tokens with Python (\d+\.\d+)")
    if python != f"{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip(f"the README quotes the text of Python {python}'s documentation (this is {sys.version})")
    assert number(sentences) == json.loads((folder / "corpus" / "counts.json").read_text())["sentences"]
    models = pd.read_csv(folder / "summary" / "models.csv").set_index("model")
    assert abs(number(tokens) - models.loc[MINILM, "n_tokens"]) < 500  # "about", to the thousand
    (jobs,) = quoted(r"No network is needed: (\d+) jobs")
    assert f"{jobs} of {jobs} steps (100%) done" in run.stderr


def test_the_repeated_sentences_and_the_types_they_leave_at_v_0_the_readme_quotes(quick_start):
    """counts.json's repeated sentences, and the types with n ≥ 2 whose every occurrence is a copy of one position
    of one sentence: V = 0 exactly at every layer after the embeddings, the same types at each."""
    folder = quick_start[0]
    if quoted(r"with Python (\d+\.\d+) \(")[0] != f"{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip("the README quotes another Python version's documentation")
    repeated, types = quoted(r"([\d,]+) sentences repeat an earlier one verbatim .*? so the ([\d,]+) types seen more")
    assert number(repeated) == json.loads((folder / "corpus" / "counts.json").read_text())["repeated_sentences"]
    tokens = pd.read_parquet(folder / MINILM / "tokens.parquet").query("layer > 0 and n >= 2")
    at_zero = tokens[tokens["V"] == 0].groupby("layer")["token"].agg(frozenset)
    assert len(at_zero) == tokens["layer"].nunique() and len(set(at_zero)) == 1
    assert len(at_zero.iloc[0]) == number(types)


def test_the_layer_statistics_the_readme_quotes(quick_start, layers):
    if quoted(r"with Python (\d+\.\d+) \(")[0] != f"{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip("the README quotes another Python version's documentation")
    minilm, null = layers[MINILM], layers["gaussian-null"]
    types, cv, slope, r2 = quoted(
        r"at layer 2 the C\.V\. of Q\(X_t\) over the ([\d,]+) types with 10 ≤ n_t is ([\d.]+), and V on M has "
        r"slope ([−\d.]+) with R² ([\d.]+)"
    )
    row = minilm.loc[2]
    assert number(types) == row["n_types"] and agrees(cv, row["cv_Q"])
    assert agrees(slope, row["slope_VM"]) and agrees(r2, row["r2_VM"])
    share = minilm["M"] / minilm["Q"]
    first, peak, peak_layer, last = quoted(
        r"M\(X\)/Q\(X\) grows from ([\d.]+) at the embeddings to ([\d.]+) at layer (\d+), and falls back to "
        r"([\d.]+) at the last"
    )
    assert agrees(first, share.iloc[0]) and agrees(last, share.iloc[-1])
    assert int(peak_layer) == share.idxmax() and agrees(peak, share.max())
    slope, r2 = quoted(r"at the last layer it breaks \(slope ([+−\d.]+), R² ([\d.]+)\)")
    assert agrees(slope, minilm["slope_VM"].iloc[-1]) and agrees(r2, minilm["r2_VM"].iloc[-1])
    slope, r2 = quoted(r"The Gaussian null gets slope ([−\d.]+) and R² ([\d.]+)")
    assert agrees(slope, null["slope_VM"].iloc[-1]) and agrees(r2, null["r2_VM"].iloc[-1])


def test_the_layer_statistics_docs_figures_quotes(quick_start, layers):
    """docs/figures.md's reading of the quick start, from the same files."""
    if quoted(r"with Python (\d+\.\d+) \(")[0] != f"{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip("the docs quote another Python version's documentation")
    minilm = layers[MINILM]
    within = minilm["V_W"] / minilm["Q"]
    first, mid, mid_layer, last, dip, dip_layer = quoted(
        r"V_W\(X\)/Q\(X\) grows from ([\d.]+) to ([\d.]+) at layer (\d+) and ([\d.]+) at the last layer, with a dip "
        r"to ([\d.]+) at layer (\d+)",
        FIGURES_DOC,
    )
    assert agrees(first, within.iloc[0]) and agrees(last, within.iloc[-1])
    assert agrees(mid, within.loc[int(mid_layer)]) and agrees(dip, within.loc[int(dip_layer)])
    cv, slope, r2, share = quoted(
        r"at the last layer it breaks: C\.V\. ([\d.]+), slope ([+−\d.]+), R² ([\d.]+), and M\(X\)/Q\(X\) falls back "
        r"to (\d+\.\d+)",
        FIGURES_DOC,
    )
    row = minilm.iloc[-1]
    assert agrees(cv, row["cv_Q"]) and agrees(slope, row["slope_VM"]) and agrees(r2, row["r2_VM"])
    assert agrees(share, row["M"] / row["Q"])
    sentences, types = quoted(r"([\d,]+) sentences give ([\d,]+) filtered types", FIGURES_DOC)
    assert number(types) == minilm.loc[2, "n_types"]
    assert number(sentences) == json.loads((quick_start[0] / "corpus" / "counts.json").read_text())["sentences"]


def test_the_zeroed_layernorm_dimensions_the_readme_quotes(quick_start):
    from safetensors.numpy import load_file

    count, width = quoted(r"γ ≈ 0 in (\w+) of its (\d+) dimensions")
    weights = load_file(quick_start[0] / "models" / MINILM / "model.safetensors")
    gamma = next(value for name, value in weights.items() if re.search(r"layer\.5\.output\.LayerNorm\.weight$", name))
    zeroed = int(count) if count.isdigit() else ["one", "two", "three", "four", "five"].index(count) + 1
    assert len(gamma) == int(width) and (abs(gamma) < 1e-6).sum() == zeroed


def test_the_quick_start_ends_by_saying_where_its_results_are(quick_start):
    folder, run = quick_start
    block, after = end_of_run(run.stderr)
    assert block["banner"].startswith("==== ctxvar: finished; results of run minilm ====")
    assert block["run folder"] == f"{folder}/"
    assert block["tables"] == "summary/ layers.csv, geometry.csv, models.csv"
    assert block["per model"] == "<model>/ tokens.parquet, layers.csv, geometry.csv, figures/ (2 models)"
    assert "--configfile" in block["report"] and block["report"].endswith(f"--report {folder}/report.html")
    loaded = ctxvar.load_results(re.fullmatch(r'import ctxvar; ctxvar\.load_results\("(.+)"\)', block["notebook"])[1])
    assert list(loaded.models["model"]) == [MINILM, "gaussian-null"]
    # after it, only Snakemake's two closing lines (its log's path and the elapsed time)
    assert [line.split(":")[0] for line in after] == ["Complete log(s)", "Elapsed time"], after
    assert max(len(line.replace(str(folder.parents[1]), "")) for line in after) <= 100, after


def test_the_quick_start_prints_a_few_dozen_lines_before_its_closing_block(quick_start):
    """Snakemake's block per job (hundreds of lines for the quick start) stays in its log file; the console
    has the start-up lines, the job table, a progress line per tenth of the jobs (ctxvar.run.console)."""
    lines = quick_start[1].stderr.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("==== ctxvar: "))
    assert start <= CONSOLE_LINES, "\n".join(lines[:start])
    progress = [line for line in lines[:start] if re.fullmatch(r"\d+ of \d+ steps \(\d+%\) done", line)]
    (jobs,) = quoted(r"No network is needed: (\d+) jobs")
    assert 10 <= len(progress) <= 11 and progress[-1] == f"{jobs} of {jobs} steps (100%) done", progress


def test_the_quick_starts_size_is_what_the_readme_quotes(quick_start):
    """The README quotes bench/peak_disk.py's size of this config's results (tests/unit/project/test_readme.py); the
    quick start as the README runs it (2 shards) ends within 10 % of it, the unpacked model aside."""
    folder = quick_start[0]
    (megabytes,) = quoted(r"about \d+ minutes and (\d+) MB beside the unpacked model on 2 cores")
    files = [path for path in folder.rglob("*") if path.is_file() and "models" not in path.relative_to(folder).parts]
    size = sum(path.stat().st_size for path in files)
    assert abs(size / 1e6 - int(megabytes)) <= 0.1 * int(megabytes), f"{folder} holds {size / 1e6:.0f} MB"


def test_the_report_command_it_prints_makes_the_report_without_warnings(quick_start):
    """The closing block's report command, as printed, from where the run was started: the report and Snakemake's
    own lines, none of them a Python warning (Snakemake ≥ 9.25 leaves a coroutine unawaited twice a job,
    snakemake/snakemake#4280, which the workflow filters). Last in this file: the report adds to the folder's size."""
    folder, run = quick_start
    block, _ = end_of_run(run.stderr)
    report = subprocess.run(
        shlex.split(block["report"]), cwd=folder.parents[1], capture_output=True, text=True, timeout=600
    )
    assert report.returncode == 0, report.stderr[-3000:]
    assert (folder / "report.html").is_file()
    assert "Warning" not in report.stdout + report.stderr, report.stderr
