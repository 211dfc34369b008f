"""Workflow tier: the demo's figures, tables and report, and that what they draw agrees with the statistics."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from html import unescape
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxvar.figures import scopes
from ctxvar.figures.catalogue import FIGURES, SCOPES, figure_named, figures_of
from ctxvar.figures.plotting import grid_layers, middle_layer

from support.workflow_runs import DEMO, REPO, end_of_run, project_copy, scheduled_jobs, snakemake

MODELS = ["tiny-bert", "tiny-roberta", "trained-gpt2@step0"]  # the random-init models with 5 hidden states
ALL_MODELS = [
    "tiny-bert",
    "tiny-roberta",
    "gaussian-null",
    "trained-gpt2@step0",
    "trained-gpt2@step100",
    "trained-gpt2@step400",
]
MIDDLE = 2  # the demo's models have 5 hidden states


def names(scope) -> list[str]:
    return [figure.name for figure in figures_of(scope)]


def figure_files(demo):
    folder = demo / "results" / "demo"
    for model in ALL_MODELS:
        yield from (folder / model / "figures" / name for name in names(scopes.MODEL))
    yield from (folder / "figures" / name for name in names(scopes.SUMMARY) + names(scopes.CORPUS))
    yield from (folder / "tiny-bert" / "figures" / name for name in names(scopes.PCA))
    yield from (folder / model / "figures" / "emb01_projection" for model in ALL_MODELS if model != "gaussian-null")
    yield folder / "figures" / "checkpoints" / "trained-gpt2"
    yield folder / "figures" / "checkpoints" / "embedding_matrices" / "trained-gpt2"
    yield from (folder / "figures" / "across_checkpoints" / name for name in names(scopes.ACROSS_CHECKPOINTS))


def test_every_figure_is_written_as_png_pdf_and_data(demo):
    for stem in figure_files(demo):
        image = matplotlib.image.imread(stem.with_suffix(".png"))
        assert image.shape[0] > 300 and image.shape[1] > 300 and image.std() > 0.05, stem  # not blank
        assert stem.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
        assert len(pd.read_csv(stem.with_suffix(".csv"))) > 0, stem


def layers(demo, model):
    return pd.read_csv(demo / "results" / "demo" / model / "layers.csv")


def test_fig2_annotates_the_layer_statistics_slope_and_r2(demo):
    drawn = pd.read_csv(demo / "results" / "demo" / "figures" / "fig02_variance_on_mean.csv")
    assert list(drawn["model"]) == ALL_MODELS
    for row in drawn.itertuples():
        table = layers(demo, row.model)
        assert row.layer == middle_layer(len(table))
        expected = table.loc[row.layer]
        np.testing.assert_allclose(
            [row.slope, row.r2, row.n_fit], [expected.slope_VM, expected.r2_VM, expected.n_types], rtol=1e-9
        )


def test_fig5_bars_are_the_decomposition_and_stack_to_one(demo):
    for model in MODELS:
        drawn = pd.read_csv(demo / "results" / "demo" / model / "figures" / "fig05_decomposition.csv")
        np.testing.assert_allclose(drawn[["M_over_Q", "V_W_over_Q", "V_B_over_Q"]].sum(axis=1), 1.0, rtol=1e-9)
        table = layers(demo, model)
        np.testing.assert_allclose(drawn["M_over_Q"], table["M"] / table["Q"], rtol=1e-12)


def test_fig11_slopes_equal_the_log_frequency_regressions(demo):
    for model in MODELS:
        drawn = pd.read_csv(demo / "results" / "demo" / model / "figures" / "fig11_frequency_grid.csv")
        table = layers(demo, model).set_index("layer")
        assert sorted(drawn["layer"].unique()) == grid_layers(5)
        for row in drawn.itertuples():
            column = "slope_VM" if row.y == "V" else f"slope_log{row.y[-2]}"  # log10(1+Q) → slope_logQ
            np.testing.assert_allclose(row.slope, table.loc[row.layer, column], rtol=1e-9)


def test_layer_curves_draw_the_summary_table(demo):
    summary = pd.read_csv(demo / "results" / "demo" / "summary" / "layers.csv")
    fig4 = pd.read_csv(demo / "results" / "demo" / "figures" / "fig04_cv_slope_r2.csv")
    pd.testing.assert_frame_equal(
        fig4[["model", "layer", "cv_Q", "slope_VM", "r2_VM"]], summary[["model", "layer", "cv_Q", "slope_VM", "r2_VM"]]
    )
    fig6 = pd.read_csv(demo / "results" / "demo" / "figures" / "fig06_within_share.csv")
    np.testing.assert_allclose(fig6["V_W_over_V"], summary["V_W"] / summary["V"], rtol=1e-12)


def test_histograms_count_every_type(demo):
    models = pd.read_csv(demo / "results" / "demo" / "summary" / "models.csv").set_index("model")
    fig10 = pd.read_csv(demo / "results" / "demo" / "figures" / "fig10_frequency_histogram.csv")
    assert fig10.groupby("model")["count"].sum().to_dict() == models["n_types"].to_dict()
    sentences = pq.read_metadata(demo / "results" / "demo" / "corpus" / "sentences.parquet").num_rows
    assert pd.read_csv(demo / "results" / "demo" / "figures" / "fig09_sentence_lengths.csv")["count"].sum() == sentences
    for model in MODELS:
        fig14 = pd.read_csv(demo / "results" / "demo" / model / "figures" / "fig14_histograms.csv")
        counts = fig14.groupby(["layer", "statistic"])["count"].sum().unstack()
        for statistic in ("Q", "M", "V"):
            np.testing.assert_array_equal(counts[statistic], layers(demo, model)["n_types"])


def test_pca_pass_collects_every_occurrence_and_table2_matches_the_statistics(demo):
    folder = demo / "results" / "demo" / "tiny-bert"
    selection = pd.read_csv(folder / "pca" / "selection.csv", keep_default_na=False)
    fig1 = pd.read_csv(folder / "figures" / "fig01_pca.csv", keep_default_na=False).set_index("token")
    np.testing.assert_array_equal(fig1.loc[selection["token"], "points"], selection["n"])
    np.testing.assert_allclose(fig1.loc[selection["token"], "mean_sq_norm"], selection["Q"], rtol=1e-5)
    tokens = pd.read_parquet(folder / "tokens.parquet").query(f"layer == {MIDDLE}").set_index("token")
    table = pd.read_csv(folder / "table2.csv", keep_default_na=False)
    assert table["n"].is_monotonic_decreasing and set(table["token"]) == set(selection["token"])
    np.testing.assert_allclose(table[["Q", "M", "V"]], tokens.loc[table["token"], ["Q", "M", "V"]], rtol=1e-12)
    latex = (folder / "table2.tex").read_text()
    assert latex.count(r"\\") >= len(table) and "tiny-bert, layer 2" in latex


def test_report_holds_every_figure_grouped_by_model(demo_run):
    """Made by the command the demo's last lines give."""
    demo, finished = demo_run
    command = end_of_run(finished.stderr)[0]["report"]
    run = subprocess.run(shlex.split(command), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    html = (demo / "results" / "demo" / "report.html").read_text()
    for stem in figure_files(demo):
        assert f"{stem.name}.png" in html, stem.name
    for model in [*ALL_MODELS, "All models"]:
        assert json.dumps(model) in html
    # each picture with its own figure's caption, though one job draws several (the data the report embeds)
    (embedded,) = re.findall(r"var results = (\{.*?\});\n", html)
    of_rule = {scope.rule: figures_of(scope) for scope in SCOPES}
    for path, entry in json.loads(embedded).items():
        figures = of_rule[entry["job_properties"]["rule"]]
        figure = figures[0] if len(figures) == 1 else figure_named(Path(path).stem)
        caption = " ".join(unescape(re.sub(r"<[^>]+>", " ", entry["caption"])).split())
        assert caption == " ".join(figure.caption.split()), path


def test_geometry_twonn_off_asks_for_no_intrinsic_dimension_figure(tmp_path):
    """Without the sample, geo03 has nothing to draw (it failed in matplotlib), nor the TwoNN figure across
    checkpoints; the other figures stay."""
    run = snakemake(tmp_path, {**DEMO, "geometry": {**DEMO["geometry"], "twonn": False}}, "-n")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "geo03_intrinsic_dimension" not in run.stdout and "twonn_by_step" not in run.stdout
    assert "figures/geo01_isotropy.png" in run.stdout and "figures/checkpoints/trained-gpt2.png" in run.stdout
    assert "figures/across_checkpoints/isotropy_by_step.png" in run.stdout


def test_a_run_without_checkpoints_asks_for_no_figure_across_them(tmp_path):
    run = snakemake(tmp_path, {**DEMO, "models": DEMO["models"][:3]}, "-n")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "across_checkpoints" not in run.stdout and "figures/geo06_anisotropy_encoders_decoders.png" in run.stdout


def test_models_csv_tells_encoders_from_decoders_and_the_figure_draws_them_apart(demo):
    """The random-init BERT and RoBERTa are encoders, the GPT-2's checkpoints decoders, the Gaussian null neither:
    Razzhigaev et al.'s Fig. 1 draws the summary's anisotropy of each in its group, and leaves the null out."""
    models = pd.read_csv(demo / "results" / "demo" / "summary" / "models.csv").set_index("model")["attention"]
    assert models.to_dict() == {
        "tiny-bert": "bidirectional",
        "tiny-roberta": "bidirectional",
        "gaussian-null": "none",
        "trained-gpt2@step0": "causal",
        "trained-gpt2@step100": "causal",
        "trained-gpt2@step400": "causal",
    }
    drawn = pd.read_csv(demo / "results" / "demo" / "figures" / "geo06_anisotropy_encoders_decoders.csv")
    groups = drawn.groupby("group")["model"].unique().map(list).to_dict()
    assert groups == {"encoders": ["tiny-bert", "tiny-roberta"], "decoders": ALL_MODELS[3:]}
    summary = pd.read_csv(demo / "results" / "demo" / "summary" / "geometry.csv").set_index(["model", "layer"])
    np.testing.assert_array_equal(
        drawn["anisotropy"], summary.loc[list(zip(drawn["model"], drawn["layer"])), "anisotropy"]
    )


def test_the_figures_across_checkpoints_draw_each_checkpoint_s_numbers(demo):
    """One line for the demo's one family: the mean TwoNN dimension over each checkpoint's 5 hidden states, and
    the I(W) of each checkpoint's input matrix (saved without its head), at steps 0, 100 and 400."""
    folder = demo / "results" / "demo"
    twonn = pd.read_csv(folder / "figures" / "across_checkpoints" / "twonn_by_step.csv")
    assert list(twonn["model"]) == ALL_MODELS[3:] and list(twonn["step"]) == [0, 100, 400]
    for row in twonn.itertuples():
        layers = pd.read_csv(folder / row.model / "geometry.csv")["twonn"]
        assert row.family == "trained-gpt2" and row.n_layers == 5 and row.layers == "0-4"
        np.testing.assert_allclose(row.twonn_mean_over_layers, layers.mean(), rtol=1e-12)
    isotropy = pd.read_csv(folder / "figures" / "across_checkpoints" / "isotropy_by_step.csv")
    assert set(isotropy["matrix"]) == {"input"} and len(isotropy) == 2 * 3
    for row in isotropy.itertuples():
        matrices = pd.read_csv(folder / row.model / "embedding_matrices.csv").set_index(["matrix", "centred"])
        assert row.isotropy == matrices.loc[(row.matrix, row.centred), "isotropy"]


# docs/architecture.md's recipe for a figure in a new scope, followed in a copy of the project: the scope declared in
# ctxvar/figures/scopes.py with its call, the figure in FIGURES, its function in a drawing module, and nothing else.
NEW_SCOPE = '''

def layers_by_step(figure, inputs: dict, params: dict) -> Plot:
    """{id: layers.csv} of a family's checkpoints, and the family."""
    return figure.draw(read_each("layers", inputs["layers"], params["steps"]), params["family"])


LAYERS_BY_STEP = Scope(
    "plot_layers_by_step",
    "figures/checkpoints/layers/{family}",
    "family",
    {"layers": "{model}/layers.csv"},
    layers_by_step,
)
'''
NEW_FIGURE = """    Figure(
        "layers_by_step",
        LAYERS_BY_STEP,
        "Training checkpoints",
        "Q(X) per layer, one line per checkpoint.",
        ("layers",),
        draw=geometry_plots.q_by_step,
    ),
"""
NEW_FUNCTION = '''

@paper_style
def q_by_step(tables: dict[str, pd.DataFrame], family: str) -> Plot:
    """Q(X) per layer, one line per checkpoint of ``family`` ({id: its layers.csv})."""
    figure, axes = panels(1, 1)
    data = pd.concat([table.assign(model=model) for model, table in tables.items()], ignore_index=True)
    for model, part in data.groupby("model", sort=False):
        axes[0, 0].plot(part["layer"], part["Q"], label=model)
    axes[0, 0].set(xlabel="layer", ylabel="$Q(X)$", title=family)
    return Plot(figure, data[["model", "layer", "Q"]])
'''


def follow_the_recipe(project: Path) -> None:
    figures = project / "src" / "ctxvar" / "figures"
    source = (figures / "scopes.py").read_text()
    source = source.replace("\nSCOPES = (", NEW_SCOPE + "SCOPES = (", 1).replace(
        "ACROSS_CHECKPOINTS)", "ACROSS_CHECKPOINTS, LAYERS_BY_STEP)", 1
    )
    (figures / "scopes.py").write_text(source)
    source = (figures / "catalogue.py").read_text().replace("    MODEL,\n", "    LAYERS_BY_STEP,\n    MODEL,\n", 1)
    (figures / "catalogue.py").write_text(
        source.replace("\n)\n\n\ndef figure_named", f"\n{NEW_FIGURE})\n\n\ndef figure_named", 1)
    )
    with open(figures / "geometry_plots.py", "a") as module:
        module.write(NEW_FUNCTION)


def test_a_figure_in_a_new_scope_by_the_recipe_is_a_rule_of_its_own_and_draws_in_a_finished_run(demo, tmp_path):
    """Every scope is a rule with the jobs its scope declares; the new one draws from the finished demo's tables."""
    if "layers_by_step" in {figure.name for figure in FIGURES}:  # the page's example was adopted
        pytest.skip("layers_by_step declared already: follow the recipe with a figure not declared yet")
    project = project_copy(tmp_path / "project")
    follow_the_recipe(project)
    edited = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout
    assert sorted(line[3:] for line in edited.splitlines()) == [
        "src/ctxvar/figures/catalogue.py",
        "src/ctxvar/figures/geometry_plots.py",
        "src/ctxvar/figures/scopes.py",
    ]
    env = {"PYTHONPATH": str(project / "src")}
    workdir = tmp_path / "run"
    shutil.copytree(demo, workdir, symlinks=True)
    config = REPO / "config" / "demo.yaml"  # the finished run's
    dry = snakemake(workdir, config, "-n", "--forceall", "-s", str(project / "Snakefile"), env=env)
    jobs = scheduled_jobs(dry)
    assert jobs["plot_layers_by_step"] == 1 and "figures/checkpoints/layers/trained-gpt2.png" in dry.stdout
    assert {scope.rule for scope in SCOPES} <= set(jobs)
    target = str(Path("results", "demo", "figures", "checkpoints", "layers", "trained-gpt2.csv"))
    run = snakemake(workdir, config, target, "-s", str(project / "Snakefile"), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "plot_layers_by_step" in run.stderr and scheduled_jobs(run) == {"plot_layers_by_step": 1}
    drawn = pd.read_csv(workdir / target)
    assert list(drawn["model"].unique()) == ALL_MODELS[3:]
    for model, part in drawn.groupby("model"):
        np.testing.assert_array_equal(part["Q"], layers(demo, model)["Q"])
