"""The partition-function isotropy I(W) against a reference written from the study's formula and code, its
log-space stability, the embedding matrices of tied and untied tiny models, geometry.csv's I(W) of the sample,
and the figures drawn from them.

Reference: Machina & Mercer (2024), github.com/anemily-machina/isotropy_transformers at commit
baf98c29bd62c0d6601690dbb7e95d66ca1985c6, src/partition_function.py, ``compute_IW`` and ``calc_isotropy``
(tests/support/machina_mercer_reference.py): the eigenvectors of WᵀW from ``torch.linalg.eigh`` (columns), one sign
each, Z(c) = Σ_rows exp(W c) per eigenvector, I(W) = min Z / max Z; centred = W minus its mean row; the weights
as the model holds them. The both-sign value is the same in torch over ±c (float64, exp without log space).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from ctxvar.errors import InsufficientData, StatisticsError
from ctxvar.figures import embedding_plots
from ctxvar.files.atomic import read_csv
from ctxvar.files.parquet import read_table
from ctxvar.stats.embedding_matrices import embedding_matrix_statistics
from ctxvar.stats.geometry import geometry_columns
from ctxvar.stats.partition_isotropy import (
    eigh_signs_partition_isotropy,
    gram_eigenvectors,
    log_partition,
    mean_cosine_of_rows,
    partition_isotropy,
    svd_projection,
)
from ctxvar.stats.sample_file import points, read_sample_layer
from ctxvar.stats.sample_metrics import PARTITION_COLUMNS, partition_metrics

from support.embedding_matrix_reference import (
    RTOL,
    check_table,
    reference_rows,
    study_eigenvectors,
    study_isotropy,
    study_partition_sums,
)
from support.machina_mercer_reference import machina_mercer_isotropy
from support.tiny_models import untied_gpt2


def matrices(seed: int):
    """Matrices of rows with a common direction (so uncentred and centred differ), n > d and n < d."""
    rng = np.random.default_rng(seed)
    for n, d in ((400, 16), (12, 30), (1, 4)):
        yield rng.standard_normal((n, d)) * 0.3 + rng.standard_normal(d)


@pytest.mark.parametrize("centre", [False, True])
def test_isotropy_equals_the_reference_of_the_study(centre):
    for w in matrices(0):
        if centre and len(w) == 1:
            continue  # one centred row is the zero matrix: every Z(c) = 1, I(W) = 1 (checked below)
        assert partition_isotropy(w, centre=centre)["isotropy"] == pytest.approx(study_isotropy(w, centre), rel=RTOL)
    assert partition_isotropy(np.ones((1, 3)), centre=True)["isotropy"] == 1.0


def test_log_partition_equals_the_study_sums_for_the_same_eigenvectors():
    """The building block, with the study's own eigenvectors (its solver's signs): log Z(c) = log Σ exp(cᵀw)."""
    for w in matrices(1):
        c = study_eigenvectors(torch.from_numpy(w))
        expected = study_partition_sums(torch.from_numpy(w), c).numpy()
        np.testing.assert_allclose(np.exp(log_partition(w, c.numpy())), expected, rtol=RTOL)


def test_both_signs_do_not_depend_on_the_solver_and_bound_the_one_sign_value():
    """numpy's and torch's eigh return other signs; with ±c the value is the same, and never above the
    study's one-sign value for either solver."""
    for w in matrices(2):
        ours = partition_isotropy(w)["isotropy"]
        flipped = gram_eigenvectors(w) * np.where(np.arange(w.shape[1]) % 2, -1.0, 1.0)
        log_z = np.concatenate([log_partition(w, flipped), log_partition(w, -flipped)])
        assert np.exp(log_z.min() - log_z.max()) == pytest.approx(ours, rel=RTOL)
        assert ours <= machina_mercer_isotropy(w, centred=False) * (1 + RTOL)


@pytest.mark.parametrize("centre", [False, True])
def test_eigh_signs_isotropy_equals_the_study_code(centre):
    """One sign per eigenvector, torch.linalg.eigh's, as compute_IW takes them; its log is the log of the value,
    and on rows with a shared direction it differs from the both-sign value."""
    for w in matrices(9):
        if centre and len(w) == 1:
            continue
        value = eigh_signs_partition_isotropy(w, centre=centre)
        expected = machina_mercer_isotropy(w, centred=centre)
        assert value["isotropy"] == pytest.approx(expected, rel=RTOL)
        assert value["log_isotropy"] == pytest.approx(np.log(expected), rel=RTOL, abs=RTOL)
    w = next(matrices(9))
    assert eigh_signs_partition_isotropy(w)["isotropy"] > 2 * partition_isotropy(w)["isotropy"]


def test_eigh_signs_log_isotropy_survives_activations_past_exp_range():
    """Rows ±a_i e_i: Z(e_i) = Z(−e_i), so one sign gives the same log I(W) = a_min − a_max as both."""
    a = np.array([1000.0, 2000.0, 3000.0])
    result = eigh_signs_partition_isotropy(np.concatenate([np.diag(a), -np.diag(a)]))
    assert result["log_isotropy"] == pytest.approx(a.min() - a.max(), rel=1e-12)
    assert result["isotropy"] == 0.0


def test_isotropic_rows_score_near_one_and_a_shared_direction_near_zero():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20_000, 8)) * 0.2
    assert partition_isotropy(x)["isotropy"] > 0.97
    assert partition_isotropy(x + 5.0)["isotropy"] < 1e-3
    assert partition_isotropy(x + 5.0, centre=True)["isotropy"] > 0.97


def test_log_space_survives_activations_past_exp_range():
    """Rows ±a_i e_i (distinct a_i): WᵀW = diag(2a_i²), eigenvectors ±e_i, Z(±e_i) = e^{a_i} + e^{−a_i} + 2(d−1),
    so log I(W) = a_min − a_max exactly in float64 for a_i in the thousands; the study's exp overflows."""
    a = np.array([1000.0, 2000.0, 3000.0])
    w = np.concatenate([np.diag(a), -np.diag(a)])
    with np.errstate(over="ignore"), torch.no_grad():
        naive = study_isotropy(w, centre=False)
    assert not (np.isfinite(naive) and naive > 0)  # exp overflows: inf/inf = NaN
    result = partition_isotropy(w)
    assert result["log_isotropy"] == pytest.approx(a.min() - a.max(), rel=1e-12)
    assert result["isotropy"] == 0.0  # e^−2000 underflows; log_isotropy keeps the value


def test_massive_activation_in_a_few_rows_gives_a_finite_log_isotropy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((500, 32))
    x[:5, 7] = 4000.0  # a decoder's massive activation: one channel, a few positions
    for centre in (False, True):
        value = partition_isotropy(x, centre=centre)
        assert np.isfinite(value["log_isotropy"]) and value["log_isotropy"] < -100


def test_bad_matrices_are_refused_in_one_line():
    for bad in (np.zeros((0, 4)), np.array([1.0, 2.0]), np.array([[np.nan, 1.0]])):
        with pytest.raises(StatisticsError) as error:
            partition_isotropy(bad)
        assert "\n" not in str(error.value)


def test_mean_cosine_of_rows_equals_all_pairs():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((50, 6)) + 1.0
    w[3] = 0.0
    kept = np.delete(w, 3, axis=0)
    unit = kept / np.linalg.norm(kept, axis=1, keepdims=True)
    cos = unit @ unit.T
    n = len(kept)
    expected = (cos.sum() - np.trace(cos)) / (n * (n - 1))
    value, zero_rows = mean_cosine_of_rows(w)
    assert value == pytest.approx(expected, rel=1e-12) and zero_rows == 1


def test_svd_projection_is_the_rows_on_the_top_two_right_singular_vectors():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((200, 10)) * np.linspace(3, 0.1, 10) + 2.0
    for centre in (False, True):
        rows = w - w.mean(0) if centre else w
        u, s, _ = np.linalg.svd(rows, full_matrices=False)
        xy = svd_projection(w, centre=centre)
        np.testing.assert_allclose(np.abs(xy), np.abs(u[:, :2] * s[:2]), rtol=1e-9, atol=1e-12)
        assert (w.mean(0) @ np.linalg.lstsq(rows, xy, rcond=None)[0] >= -1e-9).all()  # the signs' convention


# --- embedding matrices of tiny models ------------------------------------------------------------------------


def tied_with_head(directory, base_dir) -> str:
    """The tiny base model of ``base_dir`` saved again with its language-modelling head (GPT-2's causal LM,
    BERT's masked LM), whose output matrix is its input matrix (tie_word_embeddings, transformers' default)."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    config = AutoConfig.from_pretrained(base_dir)
    head_class = AutoModelForCausalLM if config.model_type == "gpt2" else AutoModelForMaskedLM
    torch.manual_seed(0)
    model = head_class.from_config(config)
    model.base_model.load_state_dict(AutoModel.from_pretrained(base_dir).state_dict(), strict=False)
    model.save_pretrained(directory)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(directory)
    return str(directory)


@pytest.mark.integration
@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_a_tied_model_has_one_matrix_measured_as_the_study_does(tiny_models, tmp_path, arch):
    csv, projection = tmp_path / "m.csv", tmp_path / "p.parquet"
    source = tied_with_head(tmp_path / arch, tiny_models[arch])
    embedding_matrix_statistics({"id": arch}, source, "float32", csv, projection)
    weights = load_file(f"{source}/model.safetensors")
    w = next(t for name, t in weights.items() if name.endswith(("wte.weight", "word_embeddings.weight")))
    check_table(read_csv(csv), reference_rows("tied", w.double().numpy(), True))
    points_table = read_table(projection).to_pandas()
    assert len(points_table) == 2 * len(w) and set(points_table["matrix"]) == {"tied"}


@pytest.mark.integration
def test_an_untied_model_has_its_input_and_output_matrices(tiny_models, tmp_path):
    source = untied_gpt2(tmp_path / "untied", tiny_models["gpt2"], head=True)
    csv, projection = tmp_path / "m.csv", tmp_path / "p.parquet"
    embedding_matrix_statistics({"id": "untied"}, source, "float32", csv, projection)
    weights = load_file(f"{source}/model.safetensors")
    w_in = weights["transformer.wte.weight"].double().numpy()
    w_out = weights["lm_head.weight"].double().numpy()
    assert not np.array_equal(w_in, w_out)
    check_table(read_csv(csv), reference_rows("input", w_in, False) + reference_rows("output", w_out, False))
    assert set(read_table(projection).to_pandas()["matrix"]) == {"input", "output"}


@pytest.mark.integration
@pytest.mark.parametrize("saved", ["bert", "gpt2", "untied gpt2"])
def test_a_model_saved_without_its_head_has_its_input_matrix_alone(tiny_models, tmp_path, saved):
    """A base model's files (BertModel, GPT2Model: a sentence encoder's) hold no output matrix, even where the
    config ties one to the input matrix: the input matrix alone is measured, not a matrix transformers builds."""
    if saved == "untied gpt2":
        source = untied_gpt2(tmp_path / "base", tiny_models["gpt2"], head=False)
    else:
        source = tiny_models[saved]
    embedding_matrix_statistics({"id": "base"}, source, "float32", tmp_path / "m.csv", tmp_path / "p.parquet")
    table = read_csv(tmp_path / "m.csv")
    assert list(table["matrix"]) == ["input", "input"] and not table["tied"].any()
    assert set(read_table(tmp_path / "p.parquet").to_pandas()["matrix"]) == {"input"}


# --- geometry.csv: I(W) of the sampled contextual embeddings ---------------------------------------------------


def test_partition_metrics_of_a_sample_equal_the_reference():
    x = np.random.default_rng(7).standard_normal((300, 12)).astype(np.float32) + 1.0
    row = partition_metrics(x)
    assert list(row) == PARTITION_COLUMNS
    check_partition_columns(row, x)
    assert np.isnan(list(partition_metrics(np.zeros((0, 12), np.float32)).values())).all()


def test_partition_metrics_solve_and_multiply_once_per_centring(monkeypatch):
    """The both-sign and the one-sign I(W) of a layer share one eigendecomposition of WᵀW and one product W c,
    the costly steps (k · d² and d³ per layer; V · d² for an embedding matrix of V rows)."""
    import torch

    solved = []
    for module, eigh in ((np.linalg, np.linalg.eigh), (torch.linalg, torch.linalg.eigh)):
        monkeypatch.setattr(module, "eigh", lambda matrix, *args, eigh=eigh, **kw: solved.append(1) or eigh(matrix))
    x = np.random.default_rng(7).standard_normal((300, 12)).astype(np.float32) + 1.0
    row = partition_metrics(x)
    assert len(solved) == 2  # uncentred and centred
    check_partition_columns(row, x)


@pytest.mark.integration
def test_geometry_table_has_the_sample_isotropy_per_layer(tmp_path, tiny_models, corpus_texts):
    from support.pipeline_runs import GEOMETRY_SPECTRUM_K as SPECTRUM_K
    from support.pipeline_runs import run_geometry

    table, sample_path = run_geometry(tmp_path, tiny_models["gpt2"], corpus_texts, 1)
    assert list(table.columns) == geometry_columns(SPECTRUM_K)
    for layer in table["layer"]:
        check_partition_columns(table.loc[layer], points(read_sample_layer(sample_path, layer)))
    one_sign, both_signs = table["partition_isotropy_eigh_signs"], table["partition_isotropy"]
    assert (one_sign > 1.01 * both_signs).any()  # the two columns are not one number on these points


def check_partition_columns(row, x: np.ndarray) -> None:
    """The sample's I(W) columns of one layer: both signs against the torch reference, one sign against the
    study's code, uncentred and centred; each log column the log of its value."""
    for centre, centring in ((False, ""), (True, "_centred")):
        expected = {
            f"partition_isotropy{centring}": study_isotropy(x, centre),
            f"partition_isotropy{centring}_eigh_signs": machina_mercer_isotropy(x, centred=centre),
        }
        for column, value in expected.items():
            assert row[column] == pytest.approx(value, rel=RTOL), column
            assert row[f"log_{column}"] == pytest.approx(np.log(value), rel=RTOL, abs=RTOL), column


# --- figures ---------------------------------------------------------------------------------------------------


def test_projection_figure_draws_every_matrix_and_centring():
    rng = np.random.default_rng(8)
    frames = [
        pd.DataFrame(
            {
                "matrix": name,
                "centred": centre,
                "row": np.arange(30),
                "x": rng.normal(size=30),
                "y": rng.normal(size=30),
            }
        )
        for name in ("output", "input")
        for centre in (False, True)
    ]
    plot = embedding_plots.projection(pd.concat(frames, ignore_index=True), "m")
    axes = plot.figure.get_axes()
    assert [ax.get_title() for ax in axes] == [
        "input, uncentred",
        "input, centred",
        "output, uncentred",
        "output, centred",
    ]
    reach = np.abs(frames[2][["x", "y"]].to_numpy()).max()
    assert axes[0].get_xlim() == pytest.approx((-reach, reach))
    with pytest.raises(InsufficientData):
        embedding_plots.projection(pd.DataFrame(columns=["matrix", "centred", "x", "y"]), "m")


def test_checkpoint_figure_draws_isotropy_against_step():
    tables = {}
    for step in (0, 100, 400):
        tables[f"f@step{step}"] = pd.DataFrame(
            [
                {
                    "matrix": "tied",
                    "tied": True,
                    "rows": 5,
                    "dim": 2,
                    "centred": c,
                    "isotropy": 0.5 + step / 1000,
                    "log_isotropy": 0.0,
                    "mean_cosine": 0.1,
                    "zero_rows": 0,
                }
                for c in (False, True)
            ]
        )
    steps = {model: int(model.split("step")[1]) for model in tables}
    table = embedding_plots.checkpoint_table(steps, tables)
    plot = embedding_plots.checkpoints(table, "f")
    line = plot.figure.get_axes()[0].get_lines()[0]
    assert list(line.get_xdata()) == [0, 100, 400]
    assert list(line.get_ydata()) == pytest.approx([0.5, 0.6, 0.9])
    assert len(plot.data) == 6


def test_the_embedding_job_memory_covers_the_weights_and_the_float64_work():
    from ctxvar.run.resources import ModelShape, embedding_matrices_mem_mb

    shape = ModelShape(n_layers=37, d=5120, vocab_size=50_688)  # Pythia-12B
    weights_mb = 4 * (shape.parameters + shape.vocab_size * shape.d) / 2**20
    float64_matrix_mb = 8 * shape.vocab_size * shape.d / 2**20
    assert embedding_matrices_mem_mb(shape) > weights_mb + 4 * float64_matrix_mb
    assert embedding_matrices_mem_mb(shape, attempt=2) == 2 * embedding_matrices_mem_mb(shape)


class TwoMatrices(torch.nn.Module):
    """A stand-in for a language model: an input embedding and an output projection, tied by storage or not."""

    def __init__(self, share: bool, equal: bool):
        super().__init__()
        self.embed = torch.nn.Embedding(7, 3)
        self.head = torch.nn.Linear(3, 7, bias=False)
        if share:
            self.head.weight = self.embed.weight
        elif equal:
            self.head.weight.data.copy_(self.embed.weight.data)

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.head


def test_tying_is_detected_by_storage_or_by_equal_values():
    from ctxvar.stats.embedding_matrices import embedding_matrices

    assert list(embedding_matrices(TwoMatrices(share=True, equal=False))) == ["tied"]
    assert list(embedding_matrices(TwoMatrices(share=False, equal=True))) == ["tied"]
    assert list(embedding_matrices(TwoMatrices(share=False, equal=False))) == ["input", "output"]
    assert list(embedding_matrices(TwoMatrices(share=False, equal=False), ["head.weight"])) == ["input"]
