"""The cost plans docs/performance.md quotes (Cost plans of the studies) are ``python -m ctxvar.run.cost``'s output
for each study config, made from the committed benchmark's rates: in the bench tier, beside the benchmarks, since
a plan's disk numbers follow the declared sums, which docs/architecture.md's recipe for a new sum changes."""

from __future__ import annotations

import pytest

from support.workflow_runs import REPO

PERFORMANCE = (REPO / "docs" / "performance.md").read_text()


@pytest.mark.parametrize("config", ["config.yaml", "config/machina_mercer_2024.yaml", "config/razzhigaev_2024.yaml"])
def test_the_cost_plans_of_the_studies_are_the_commands_output(config, tmp_path, monkeypatch, capsys):
    """Each study's plan as ``python -m ctxvar.run.cost`` prints it with nothing in the HF cache and nothing run, on
    a machine without an NVIDIA driver (``device: auto`` extracts on the CPU: the plan gives its time too)."""
    from huggingface_hub import constants

    from ctxvar.run import cost, resources

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(resources, "nvidia_driver", lambda: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(REPO)
    cost.main([config, "--results", str(tmp_path / "results")])
    printed = capsys.readouterr().out.rstrip()
    section = PERFORMANCE[PERFORMANCE.index("## Cost plans of the studies") :]
    quoted = section[section.index(f"`python -m ctxvar.run.cost {config}`") :]
    assert quoted.split("```text\n", 1)[1].split("\n```", 1)[0] == printed


def test_the_disk_estimate_is_within_3x_of_the_measured_slice_as_docs_performance_quotes():
    """bench/disk_types.py's slice shaped as Razzhigaev et al.'s run: the plan's disk estimate, before and after
    its corpus is sampled, within 3× of the bytes measured, each model's and the peak; the fit and the peak's
    ratios as docs/performance.md quotes them."""
    import pandas as pd

    from ctxvar.run.disk import TOKEN_TYPES

    measured = pd.read_csv(REPO / "bench" / "results" / "disk_estimate.csv")
    for column in ("estimate_before_sampling_over_measured", "estimate_after_sampling_over_measured"):
        assert measured[column].between(1 / 3, 3).all(), measured[["what", column]]
    peak = measured[measured.what.str.startswith("peak")].iloc[0]
    section = PERFORMANCE[PERFORMANCE.index("## Cost plans of the studies") :]
    quoted = (
        f"{peak.estimate_before_sampling_over_measured}× the measured peak before the corpus is sampled and "
        f"{peak.estimate_after_sampling_over_measured}× after, the bound {peak.bound_over_measured}×"
    )
    assert quoted in " ".join(section.split())
    assert f"U = {TOKEN_TYPES.k} · N^{TOKEN_TYPES.beta}" in section
