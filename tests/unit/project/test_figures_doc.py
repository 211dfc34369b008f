"""Every number docs/figures.md quotes from the run of config/encoder_vs_decoder.yaml agrees with the run's files
kept beside its figures (docs/figures/encoder_vs_decoder/: the summary's geometry.csv, and the sentence-start
token's rows of tokens.parquet with its share of Σ‖x‖²), and the figures it shows are there."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from support.workflow_runs import REPO

FOLDER = REPO / "docs" / "figures" / "encoder_vs_decoder"
ENCODER, DECODER = "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def section() -> str:
    """docs/figures.md's section on the run, as one line (quoted sentences wrap anywhere)."""
    text = (REPO / "docs" / "figures.md").read_text()
    body = text.split("## What an encoder and a decoder show", 1)[1].split("\n## ", 1)[0]
    return " ".join(body.split())


@pytest.fixture(scope="module")
def geometry() -> dict[str, pd.DataFrame]:
    table = pd.read_csv(FOLDER / "geometry.csv")
    return {model: rows.set_index("layer") for model, rows in table.groupby("model")}


@pytest.fixture(scope="module")
def start() -> pd.DataFrame:
    return pd.read_csv(FOLDER / "sentence_start.csv").set_index("layer")


def quoted(pattern: str, text: str) -> tuple[str, ...]:
    found = re.findall(pattern, text)
    assert len(found) == 1, f"the section should quote {pattern!r} once, found {found}"
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def agrees(text: str, value: float) -> bool:
    """Whether ``value`` rounds to ``text`` as quoted (to its last digit)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-decimals + 1e-12


def test_the_figures_and_files_the_section_names_are_there(section):
    for name in ("geo01_isotropy.png", "geo03_intrinsic_dimension.png", "geometry.csv", "sentence_start.csv"):
        assert f"figures/encoder_vs_decoder/{name}" in section and (FOLDER / name).is_file()


def test_the_anisotropy_profiles_the_section_quotes(section, geometry):
    encoder, decoder = geometry[ENCODER]["anisotropy"], geometry[DECODER]["anisotropy"]
    low, high = quoted(r"λ₁/tr C stays between ([\d.]+) and ([\d.]+) at every layer", section)
    assert agrees(low, encoder.min()) and agrees(high, encoder.max())
    embeddings, first = quoted(r"decoder's is ([\d.]+) at the embeddings and ([\d.]+) at layer 1", section)
    assert agrees(embeddings, decoder[0]) and agrees(first, decoder[1])
    (third,) = quoted(r"rises to ([\d.]+) at layer 3", section)
    (floor,) = quoted(r"stays above ([\d.]+) to layer 8", section)
    assert agrees(third, decoder[3]) and decoder[3:9].min() > float(floor) > decoder[3:9].min() - 0.01
    tenth, eleventh = quoted(r"falls to ([\d.]+) and ([\d.]+) at layers 10 and 11", section)
    assert agrees(tenth, decoder[10]) and agrees(eleventh, decoder[11])
    (plateau,) = quoted(r"is at least ([\d.]+) from layer 12 to layer 28", section)
    assert decoder[12:29].min() >= float(plateau) > decoder[12:29].min() - 0.001
    before, after = quoted(r"It is ([\d.]+) at layer 29 and ([\d.]+) after the final norm", section)
    assert agrees(before, decoder[29]) and agrees(after, decoder[30])
    decoder_std, encoder_std = quoted(r"standard deviation is at most ([\d.]+) \(decoder\) and ([\d.]+)", section)
    assert agrees(decoder_std, geometry[DECODER]["anisotropy_batch_std"].max())
    assert agrees(encoder_std, geometry[ENCODER]["anisotropy_batch_std"].max())


def test_the_sentence_start_shares_the_section_quotes(section, start):
    (tokens,) = quoted(r"`<\|im_start\|>`, ([\d.]+) % of the tokens", section)
    assert agrees(tokens, 100 * start["n"][0] / start["tokens"][0])
    share = start["share"]
    (third,) = quoted(r"It is ([\d.]+) at layer 3 and", section)
    tenth, eleventh = quoted(r"at layer 3 and ([\d.]+) and ([\d.]+) at layers 10 and 11", section)
    assert agrees(third, share[3]) and agrees(tenth, share[10]) and agrees(eleventh, share[11])
    (plateau,) = quoted(r"It is at least ([\d.]+) from layer 12 to 28", section)
    assert share[12:29].min() >= float(plateau) > share[12:29].min() - 0.001
    before, after = quoted(r"to 28, ([\d.]+) at layer 29, and ([\d.]+) after the final norm", section)
    assert agrees(before, share[29]) and agrees(after, share[30])


def test_the_intrinsic_dimensions_the_section_quotes(section, geometry):
    encoder, decoder = geometry[ENCODER], geometry[DECODER]
    start, peak, last = quoted(
        r"rises from ([\d.]+) at the encoder's embeddings to ([\d.]+) at its layer 5, then falls to ([\d.]+)", section
    )
    assert (
        agrees(start, encoder["twonn"][0]) and agrees(peak, encoder["twonn"][5]) and agrees(last, encoder["twonn"][6])
    )
    first, final = quoted(r"the decoder it rises from ([\d.]+) at layer 1, almost steadily, to ([\d.]+)", section)
    assert agrees(first, decoder["twonn"][1]) and agrees(final, decoder["twonn"][30])
    embeddings, points = quoted(r"embedding layer reads ([\d.]+), on only ([\d,]+) distinct points", section)
    assert agrees(embeddings, decoder["twonn"][0]) and int(points.replace(",", "")) == decoder["twonn_points"][0]
    reference = quoted(r"read (\d+) to (\d+) \(encoder\) and (\d+) to (\d+) \(decoder\)", section)
    for (low, high), rows in zip((reference[:2], reference[2:]), (encoder, decoder)):
        assert agrees(low, rows["twonn_gaussian"].min()) and agrees(high, rows["twonn_gaussian"].max())
    encoder_std, decoder_std = quoted(r"deviations are at most ([\d.]+) \(encoder\) and ([\d.]+)", section)
    assert agrees(encoder_std, encoder["twonn_batch_std"].max())
    assert agrees(decoder_std, decoder["twonn_batch_std"].max())


def test_the_run_the_section_describes_is_the_shipped_config(section, geometry):
    from ctxvar.config.schema import load_config_file

    config = load_config_file(REPO / "config" / "encoder_vs_decoder.yaml")
    assert [entry["id"] for entry in config["models"]] == [ENCODER, DECODER]
    (batches,) = quoted(r"`geometry.batches: (\d+)`", section)
    assert int(batches) == config["geometry"]["batches"] == geometry[DECODER]["sample_batches"][1]
    assert len(geometry[ENCODER]) == 7 and len(geometry[DECODER]) == 31
