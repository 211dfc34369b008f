"""A run's name (ctxvar.config.run_name): the config file's ``run``, else its file name, never one inherited from
another config; a study's config file without models: or corpus: is refused, naming what it would have inherited."""

from __future__ import annotations

import pytest
import yaml

from ctxvar.config.run_name import check_study_named, run_name
from ctxvar.errors import ConfigError

from support.workflow_runs import REPO

PAPER = yaml.safe_load((REPO / "config.yaml").read_text())
STUDY = {  # names what it studies and nothing else
    "corpus": {"source": "synthetic"},
    "models": [{"id": "tiny", "init": "random", "arch": "bert", "hidden_size": 32, "num_layers": 2}],
}


def test_a_study_without_models_or_corpus_is_refused_naming_what_it_would_have_inherited(tmp_path, monkeypatch):
    """Outside the project folder (no config.yaml here), the suggested command names the workflow's config.yaml
    by its absolute path: a bare config.yaml raised FileNotFoundError there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        check_study_named({"run": "x", "corpus": {"source": "synthetic"}}, ["studies/x.yaml"], REPO)
    message = str(error.value)
    assert message.startswith("studies/x.yaml has no models: section") and "\n" not in message
    assert "the paper's six Hub models on BookCorpus" in message
    assert message.endswith(f"--configfile {REPO / 'config.yaml'} {tmp_path / 'studies' / 'x.yaml'}")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(PAPER))  # a project folder: its own config.yaml
    with pytest.raises(ConfigError, match=f"--configfile {tmp_path / 'config.yaml'} {tmp_path / 'a.yaml'} "):
        check_study_named({}, ["a.yaml", "b.yaml"], REPO)
    with pytest.raises(ConfigError, match="has no corpus: and models: section"):
        check_study_named({}, ["a.yaml", "b.yaml"], REPO)
    check_study_named(STUDY, ["studies/x.yaml"], REPO)
    check_study_named({}, [], REPO)  # config.yaml itself: the schema requires models, the checks a corpus
    weights_only = {"models": [{"name": "gpt2", "forward": False}]}
    check_study_named(weights_only, ["studies/x.yaml"], REPO)  # no model reads a corpus
    with pytest.raises(ConfigError, match="has no corpus: section"):
        check_study_named({"models": [{"name": "gpt2"}]}, ["studies/x.yaml"], REPO)


@pytest.mark.parametrize("models", [["gpt2"], 3, None])
def test_a_models_section_the_schema_refuses_still_gets_the_one_line_about_the_missing_corpus(models):
    """The check runs before the schema: models: [gpt2] (a name, not an entry) raised AttributeError there."""
    with pytest.raises(ConfigError, match="^x.yaml has no corpus: section"):
        check_study_named({"models": models}, ["x.yaml"], REPO)


def test_run_names_keep_configs_apart():
    assert run_name({"run": "paper"}, {}, {}) == "paper"
    assert run_name({"run": "paper"}, {"config/demo.yaml": {"run": "demo"}}, {}) == "demo"
    assert (
        run_name({"run": "paper"}, {"studies/my_study.yaml": {"models": []}}, {}) == "my_study"
    )  # never inherits paper
    assert run_name({"run": "paper"}, {"a.yaml": {}}, {"run": "other"}) == "other"
    with pytest.raises(ConfigError, match="run: 'my study' cannot name a results folder"):
        run_name({}, {"my study.yaml": {}}, {})
