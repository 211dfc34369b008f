"""bench/switches.py --quick: every geometry switch measured, its partial files within the free-space check's bound."""

from __future__ import annotations

import pandas as pd

from support.bench_scripts import run_bench_main


def test_quick_switches_benchmark_measures_every_switch(tmp_path):
    run_bench_main("switches.py", tmp_path, "--quick")
    rows = pd.read_csv(tmp_path / "switches.csv").set_index("switch")
    assert list(rows.index) == [
        "core",
        "core + cosine",
        "core + covariance",
        "core + twonn (k = 512, B = 1)",
        "core + twonn (k = 512, B = 4)",
        "core + ethayarajh",
        "defaults (config.schema.yaml)",
    ]
    assert (rows["s_per_M_tokens"] > 0).all() and rows.loc["core", "ratio_to_core"] == 1
    assert rows["core_digest"].nunique() == 1  # each switch adds sums, none changes the paper's
    core = rows.loc["core"]
    assert (rows.drop("core")["state_bytes"] > core["state_bytes"]).all()
    assert (rows["peak_bytes"] > 0).all()
    # the written files: the bound of ctxvar.run.disk holds, and each switch adds its own file(s)
    assert (rows["partial_bytes"] <= rows["partial_bytes_bound"]).all()
    assert (rows["partial_bytes"] > 0.9 * rows["partial_bytes_bound"]).all()
    assert rows.loc["core + covariance", "moments_file_bytes"] >= 3 * 64 * 64 * 8  # L · d² float64
    twonn = rows.filter(like="twonn", axis=0)["sample_file_bytes"].to_numpy()
    assert twonn[1] > 3.9 * twonn[0] and (rows.loc["core + ethayarajh", ["words_file_bytes"]] > 0).all()
    assert rows.loc["core + cosine", "sums_file_bytes"] > 1.9 * core["sums_file_bytes"]
    report = (tmp_path / "switches.md").read_text()
    assert "`python -m bench switches --quick`" in report and "| core + ethayarajh" in report
