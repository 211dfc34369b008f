"""The hashes a job's params carry (ctxvar.config.hashes): the config hash follows the science, not the other models
or the device. Extraction's geometry params are the same text whatever the order of the config's keys: Snakemake
compares a job's params as text, so a reordered config.yaml must not re-run extraction. corpus.rows at null, its
default, leaves the sampling's params and both hashes as configs without the key have them; any number of rows
changes them, so the corpus is sampled again; so do corpus.revision and corpus.data_dir."""

from __future__ import annotations

import copy

from ctxvar.config.entries import measured_entry, models_by_id
from ctxvar.config.hashes import corpus_hash, corpus_settings, extraction_config_hash, extraction_geometry

from support.workflow_runs import DEMO

GEOMETRY = {  # the schema's defaults, in the schema's order
    "covariance": True,
    "cosine": True,
    "ethayarajh": False,
    "twonn": True,
    "sample_size": 4096,
    "batches": 1,
    "spectrum_k": 10,
    "seed": 0,
}


def test_geometry_params_do_not_follow_the_configs_key_order():
    reordered = dict(reversed(list(GEOMETRY.items())))
    assert str(extraction_geometry({"geometry": reordered})) == str(extraction_geometry({"geometry": GEOMETRY}))


def test_geometry_params_keep_the_text_of_runs_made_before_new_switches():
    params = extraction_geometry({"geometry": GEOMETRY})
    assert str(params) == str(
        {"covariance": True, "cosine": True, "twonn": True, "sample_size": 4096, "seed": 0, "ethayarajh": False}
    )


def test_a_new_switch_enters_the_params_after_the_others():
    params = extraction_geometry({"geometry": {**GEOMETRY, "batches": 4, "fourth_power": True}})
    assert list(params) == [
        "covariance",
        "cosine",
        "twonn",
        "sample_size",
        "seed",
        "ethayarajh",
        "fourth_power",
        "batches",
    ]


def test_config_hash_tracks_science_not_other_models():
    config = copy.deepcopy(DEMO)
    models = models_by_id(config)
    before = extraction_config_hash(config, models["tiny-bert"], [])
    config["models"].append({"id": "extra", "init": "random", "arch": "gpt2"})
    config["device"] = "cpu"
    assert extraction_config_hash(config, models["tiny-bert"], []) == before
    config["dtype"] = "bfloat16"
    assert extraction_config_hash(config, models["tiny-bert"], []) != before


def test_corpus_rows_at_null_keeps_the_hashes_of_configs_without_it_and_a_number_changes_them():
    config = copy.deepcopy(DEMO)
    assert "rows" not in config["corpus"]
    entry = models_by_id(config)["tiny-bert"]
    with_null = {**config, "corpus": {**config["corpus"], "rows": None}}
    with_rows = {**config, "corpus": {**config["corpus"], "rows": 128}}
    assert corpus_settings(with_null["corpus"]) == config["corpus"]
    assert corpus_hash(with_null["corpus"]) == corpus_hash(config["corpus"]) != corpus_hash(with_rows["corpus"])
    before = extraction_config_hash(config, entry, [])
    assert extraction_config_hash(with_null, entry, []) == before != extraction_config_hash(with_rows, entry, [])
    assert corpus_settings(with_rows["corpus"])["rows"] == 128


def test_corpus_revision_and_data_dir_at_null_keep_the_hashes_of_configs_without_them():
    """The schema writes revision: null and data_dir: null into every corpus: runs made before the keys keep their
    sample and sums; the Parquet export of a Hub dataset (a revision, a data_dir) is another corpus."""
    config = copy.deepcopy(DEMO)
    assert not {"revision", "data_dir"} & set(config["corpus"])
    entry = models_by_id(config)["tiny-bert"]
    with_null = {**config, "corpus": {**config["corpus"], "revision": None, "data_dir": None}}
    export = {**config, "corpus": {**config["corpus"], "revision": "refs/convert/parquet", "data_dir": "plain_text"}}
    assert corpus_settings(with_null["corpus"]) == config["corpus"]
    assert corpus_hash(with_null["corpus"]) == corpus_hash(config["corpus"]) != corpus_hash(export["corpus"])
    before = extraction_config_hash(config, entry, [])
    assert extraction_config_hash(with_null, entry, []) == before != extraction_config_hash(export, entry, [])


def test_forward_leaves_the_extraction_hash_as_entries_without_the_key_have_it():
    """The schema writes forward: true into every entry: the hash (and the jobs' params, which hold the same
    entry) must stay those of runs made before the key, or every finished model would be extracted again; and
    setting forward: false on a model, then removing it, re-uses its sums."""
    config = copy.deepcopy(DEMO)
    entry = models_by_id(config)["tiny-bert"]
    assert "forward" not in entry
    before = extraction_config_hash(config, entry, [])
    for forward in (True, False):
        assert extraction_config_hash(config, {**entry, "forward": forward}, []) == before
    assert measured_entry({**entry, "forward": False}) == entry
