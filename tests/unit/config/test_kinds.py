"""ctxvar.config.kinds: every model kind declared once, read by the config checks, the entries, the estimates, the
builders and the workflow's model rules; and docs/architecture.md's recipe for a new kind followed with a kind
whose every block returns its input."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from ctxvar.config import kinds
from ctxvar.config.checks import KIND_CHECKS, check_config
from ctxvar.config.entries import built_in_run, model_source, models_by_id, reads_corpus
from ctxvar.config.schema import SCHEMA, SCHEMA_PATH, check_schema
from ctxvar.errors import ConfigError
from ctxvar.models import build
from ctxvar.run import resources

from support.pipeline_runs import run_pipeline
from support.workflow_runs import REPO

MODEL_KEYS = SCHEMA["properties"]["models"]["items"]["properties"]
CONFIG = {
    "corpus": {"source": "synthetic"},
    "analysis": {"min_log10_n": 0, "max_log10_n": 6},
    "figures": {"pca": {"model": None}},
}


def test_the_schema_lists_every_kind_and_each_kind_the_run_makes_has_its_builder_and_rule():
    assert MODEL_KEYS["init"]["enum"] == [kind.init for kind in kinds.MODEL_KINDS]
    assert set(build.BUILDERS) == {kind.init for kind in kinds.MODEL_KINDS if kind.made_by}
    rules = re.findall(r"^rule (\w+):", (REPO / "workflow" / "rules" / "models.smk").read_text(), flags=re.M)
    assert {kind.made_by for kind in kinds.MODEL_KINDS if kind.made_by} <= set(rules)
    declared_keys = {key for kind in kinds.MODEL_KINDS for key in (*kind.own_keys, *dict(kind.required))}
    assert declared_keys <= set(MODEL_KEYS)
    assert {kind.revisions for kind in kinds.MODEL_KINDS} <= set(kinds.REVISIONS)
    assert set(KIND_CHECKS) <= {kind.init for kind in kinds.MODEL_KINDS}
    own_keys = [key for kind in kinds.MODEL_KINDS for key in kind.own_keys]
    assert len(own_keys) == len(set(own_keys))  # a key only one kind takes


def test_the_rules_that_make_models_get_what_their_kinds_need():
    """build_random_model reads the corpus's sentences and the run's type keying; unpack_model reads neither."""
    for kind in kinds.MODEL_KINDS:
        assert kind.reads_corpus == (kind.made_by == "build_random_model"), kind.init
        assert not kind.type_keyed or kind.made_by == "build_random_model", kind.init
        assert not kind.packaged or kind.made_by == "unpack_model", kind.init


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"id": "p", "name": "gpt2", "mean_scale": 1.0}, "sets mean_scale, which only init: gaussian uses"),
        ({"id": "r", "init": "random", "arch": "bert", "sha256": {}}, "sets sha256, which only init: archive uses"),
        ({"id": "r", "init": "random"}, "has init: random and needs 'arch' (bert | roberta | gpt2)"),
        ({"id": "g", "init": "gaussian", "revision": "v1"}, "init: gaussian holds one version of the model"),
        ({"id": "g", "init": "gaussian", "forward": False}, "has init: gaussian and forward: false"),
        ({"id": "r", "init": "random", "arch": "gpt2", "revision": "v2"}, "revision 'v2' of an init: random model"),
        ({"id": "x", "init": "nonesuch"}, "init 'nonesuch' is not a model kind; use one of pretrained, random"),
    ],
)
def test_what_a_kind_refuses_is_one_line(entry, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config({**CONFIG, "models": [entry]})


@pytest.mark.parametrize("revision", ["main", "step100"])
def test_a_random_entry_takes_the_default_revision_and_a_step(revision):
    check_config({**CONFIG, "models": [{"id": "r", "init": "random", "arch": "gpt2", "revision": revision}]})


def build_identity(entry: dict, out_dir, texts, merge_markers: bool) -> None:
    """A GPT-2 of the entry's sizes whose blocks' attention and MLP output projections are zero, so that each
    block returns its input (x + 0 + 0); its final LayerNorm's γ and β random."""
    import torch
    from transformers import AutoModel

    from ctxvar.models.random_init import model_config, randomise_layer_norms, save_model, train_tokenizer

    spec = kinds.random_spec(entry)
    tokenizer = train_tokenizer("gpt2", texts, spec["vocab_size"])
    torch.manual_seed(spec["seed"])
    model = AutoModel.from_config(model_config("gpt2", spec, tokenizer))
    randomise_layer_norms(model, torch.Generator().manual_seed(spec["seed"]))
    with torch.no_grad():
        for block in model.h:
            for projection in (block.attn.c_proj, block.mlp.c_proj):
                projection.weight.zero_()
                projection.bias.zero_()
    save_model(model, tokenizer, out_dir)


IDENTITY = kinds.ModelKind(
    "identity",
    made_by="build_random_model",
    reads_corpus=True,
    blocks=lambda entry: kinds.random_spec(entry)["num_layers"],
    revisions="none",
)
IDENTITY_ENTRY = {"id": "same", "init": "identity", "hidden_size": 32, "num_layers": 3, "num_heads": 2}


@pytest.fixture
def identity_kind(monkeypatch, tmp_path):
    """The recipe's three steps: the declaration, the builder and the schema's init value (a schema file). Skips
    where a kind of that name is declared already: the page's example was adopted."""
    if any(kind.init == IDENTITY.init for kind in kinds.MODEL_KINDS):
        pytest.skip(f"init: {IDENTITY.init} declared already: follow the recipe with a kind not declared yet")
    monkeypatch.setattr(kinds, "MODEL_KINDS", (*kinds.MODEL_KINDS, IDENTITY))
    monkeypatch.setitem(build.BUILDERS, "identity", build_identity)
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    schema["properties"]["models"]["items"]["properties"]["init"]["enum"].append("identity")
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    return tmp_path / "schema.yaml"


@pytest.mark.integration
def test_a_kind_added_by_the_recipe_is_checked_estimated_built_and_extracted(identity_kind, tmp_path, corpus_texts):
    config = {**CONFIG, "models": [IDENTITY_ENTRY]}
    with pytest.raises(ConfigError, match="'identity' is not allowed"):
        check_schema(config)  # before its init value is in the schema
    check_schema(config, identity_kind)
    check_config(config)
    with pytest.raises(ConfigError, match="init: identity holds one version"):
        check_config({**config, "models": [{**IDENTITY_ENTRY, "revision": "v1"}]})
    entry = models_by_id(config)["same"]
    assert built_in_run(entry) and reads_corpus(entry)
    assert model_source(entry, tmp_path / "run") == str(tmp_path / "run" / "models" / "same")
    assert resources.known_model_shape(entry, "") == resources.ModelShape(4, 32, 2000)
    assert not resources.digested(entry, n_shards=8, removed_after_use=False)  # built, far below 100 M parameters

    texts = corpus_texts[:80]
    build.build_model(entry, tmp_path / "model", texts)
    assert (tmp_path / "model" / "SHA256SUMS").is_file()
    (tmp_path / "run").mkdir()
    tokens = run_pipeline(tmp_path / "run", tmp_path / "model", texts, 2, "same")[0]
    q = tokens.pivot(index="token", columns="layer", values="Q")
    for layer in (1, 2):  # every block returns its input: hidden states 1 and 2 are the embeddings
        np.testing.assert_allclose(q[layer], q[0], rtol=1e-6)
    assert not np.allclose(q[3], q[0])  # the last is GPT-2's final LayerNorm of them
