"""Integration tier: the sweep over every model type of the installed transformers with a base model
(:mod:`ctxvar.extraction.architectures`): no type crashes the driver, every type it runs layer-major gives the whole
model's hidden states bit for bit on a second batch, the study families run layer-major, and docs/architectures.md
is the sweep's table."""

from __future__ import annotations

import re

import pytest
import transformers

from ctxvar.extraction import architectures

from support.workflow_runs import REPO

# The families the seed studies and the paper name, in transformers' model types.
STUDY_FAMILIES = [
    "opt", "llama", "gptj", "falcon", "gpt_neox", "bert", "roberta", "albert", "gpt2", "mistral", "qwen2", "gemma2",
    "bloom", "deberta-v2", "mpt",
]  # fmt: skip


@pytest.fixture(scope="module")
def swept():
    """Each type's verdict, or the error the driver raised on it."""
    verdicts, crashes = [], {}
    for model_type in architectures.base_model_types():
        try:
            verdicts.append(architectures.check_type(model_type))
        except Exception as error:
            crashes[model_type] = f"{type(error).__name__}: {error}"
    return verdicts, crashes


def test_no_model_type_crashes_the_driver_and_every_layer_major_one_is_bit_for_bit(swept):
    verdicts, crashes = swept
    assert not crashes, crashes
    paths = {verdict.path for verdict in verdicts}
    assert paths <= set(architectures.PATHS) and len(verdicts) >= 400
    assert sum(verdict.path == "layer-major" for verdict in verdicts) >= 150


def test_the_study_families_run_layer_major(swept):
    by_type = {verdict.model_type: verdict for verdict in swept[0]}
    assert {family: by_type[family].path for family in STUDY_FAMILIES} == dict.fromkeys(STUDY_FAMILIES, "layer-major")


def test_whole_model_verdicts_give_the_reason_a_job_logs(swept):
    whole = [verdict for verdict in swept[0] if verdict.path == "whole model"]
    assert whole and all(verdict.reason and "\n" not in verdict.reason for verdict in whole)


def test_the_docs_table_is_the_sweep_of_the_transformers_it_names(swept):
    """docs/architectures.md is written by ``python -m ctxvar.extraction.architectures --write``; it is compared
    where the installed transformers is the one it was made with (the locked version)."""
    text = (REPO / "docs" / "architectures.md").read_text()
    made_with = re.search(r"base model in transformers (\S+) ", text).group(1)
    if made_with != transformers.__version__:
        pytest.skip(f"docs/architectures.md was made with transformers {made_with}, {transformers.__version__} runs")
    assert text == architectures.table(swept[0]), "python -m ctxvar.extraction.architectures --write"
