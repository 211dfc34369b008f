"""The study configs' own model lists, run end to end on tiny stand-ins: for each family and layout that
config/razzhigaev_2024.yaml and config/machina_mercer_2024.yaml name, a Hub repository of theirs is a tiny
random-init model of its family in an offline HF cache, under the repository's own id, at a commit of its own, laid
out as the Hub holds it: OPT-350m's last hidden state projected to another width (``word_embed_proj_dim`` <
``hidden_size``), Falcon's blocks returning tuples, ALBERT's one shared block, GPT-J's partial rotary, Llama's grouped
attention, and Pythia's step checkpoints holding only ``pytorch_model.bin``. Each study runs through
``from_pretrained(name, revision=…)`` as it would against the Hub, with its corpus and geometry as configured
(enwik8 stood in by generated wiki text, 32 of its pieces, TwoNN's sample off), its steps cut to the first, as far
as the summary tables; every job finishes and every model has its results."""

from __future__ import annotations

import hashlib

import pytest
import yaml

import ctxvar

from support.enwik8_like import write_enwik8_like
from support.hf_cache import add_snapshot
from support.tiny_models import DECODER_SIZES, DECODERS, ENCODERS, pickled, tiny_model
from support.workflow_runs import REPO, snakemake

OPT_350M = {**DECODERS["opt"], "word_embed_proj_dim": 16}  # facebook/opt-350m: 512 of 1024
FAMILIES = {  # the study's repositories by prefix: (transformers model type, sizes)
    "bert-base-uncased": ("bert", DECODER_SIZES),
    "roberta-base": ("roberta", DECODER_SIZES),
    "albert-base-v2": ("albert", ENCODERS["albert"]),
    "facebook/opt-350m": ("opt", OPT_350M),
    "facebook/opt": ("opt", DECODERS["opt"]),
    "meta-llama/": ("llama", DECODERS["llama"]),
    "gpt2": ("gpt2", dict(n_embd=32, n_layer=3, n_head=4)),
    "EleutherAI/gpt-j": ("gptj", DECODERS["gptj"]),
    "tiiuae/falcon": ("falcon", DECODERS["falcon"]),
    "EleutherAI/pythia": ("gpt_neox", DECODERS["gpt_neox"]),
    "EleutherAI/gpt-neox": ("gpt_neox", DECODERS["gpt_neox"]),
}


def family_of(name: str) -> tuple[str, dict]:
    prefix = next(prefix for prefix in FAMILIES if name.startswith(prefix))
    return FAMILIES[prefix]


def layout_of(name: str) -> tuple:
    """What sets a stand-in apart: its family and sizes, and whether its checkpoint is pickled (Pythia's steps)."""
    family, sizes = family_of(name)
    return family, tuple(sorted(sizes.items())), "pythia" in name


def study_models(study: str) -> list[dict]:
    """The study config's models entries, one for each family and layout it names (the first: OPT-125m stands for
    OPT-1.3b to 13b, whose stand-ins would be the same, OPT-350m for its projection, Pythia-70m for every Pythia
    size), each family's revisions cut to its first (Pythia's ``step0``)."""
    entries, seen = [], set()
    for entry in yaml.safe_load((REPO / study).read_text())["models"]:
        if layout_of(entry["name"]) not in seen:
            seen.add(layout_of(entry["name"]))
            entries.append({**entry, "revisions": entry["revisions"][:1]} if "revisions" in entry else entry)
    return entries


def stand_in_cache(cache, folder, tokenizer_dir, entries: list[dict]) -> list[str]:
    """Each entry's repository at each revision (``main`` without one) as a snapshot of a commit of its own in the
    HF cache ``cache``: a tiny model of its family, Pythia's as ``pytorch_model.bin`` alone. The ids the run
    gives them."""
    ids = []
    for entry in entries:
        name = entry["name"]
        family, sizes = family_of(name)
        for revision in entry.get("revisions", ["main"]):
            commit = hashlib.sha1(f"{name}@{revision}".encode()).hexdigest()
            seed = int(commit[:6], 16) % 1000
            model = folder / f"{name.replace('/', '--')}@{revision}"
            if not model.exists():
                head = "masked" if family in ("bert", "roberta", "albert") else True  # as the Hub's are saved
                tiny_model(model, family, tokenizer_dir, seed, head=head, norms_seed=seed, **sizes)
                if "pythia" in name:
                    pickled(model)
                add_snapshot(cache, name, commit, model, revision)
            base = name.replace("/", "--")
            ids.append(f"{base}@{revision}" if "revisions" in entry else base)
    return ids


@pytest.fixture(scope="module")
def offline_hub(tmp_path_factory, tiny_models):
    """``(environment, tmp folder)``: an HF cache holding both studies' repositories, offline."""
    root = tmp_path_factory.mktemp("hub")
    for study in ("config/razzhigaev_2024.yaml", "config/machina_mercer_2024.yaml"):
        stand_in_cache(root / "hub", root / "models", tiny_models["gpt2"], study_models(study))
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf"), "HF_HUB_CACHE": str(root / "hub")}
    return env, root


SUMMARY = ("models.csv", "layers.csv", "geometry.csv", "embedding_matrices.csv")


def run_models(tmp_path, study: str, env: dict, overlay: dict, summary=SUMMARY) -> ctxvar.results.Results:
    """The study with ``overlay`` on top, as far as its summary tables (every model's jobs; the figures are the
    slices' of test_study_configs.py); its results, once every job has finished."""
    config = yaml.safe_load((REPO / study).read_text())
    for key, value in overlay.items():  # one level deep: the corpus keeps the study's settings but its path
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    targets = [f"results/{overlay['run']}/summary/{name}" for name in summary]
    run = snakemake(tmp_path / "work", path, *targets, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    return ctxvar.load_results(tmp_path / "work" / "results" / overlay["run"])


def test_every_model_razzhigaev_et_al_name_runs_end_to_end(tmp_path, offline_hub, tiny_models):
    env, root = offline_hub
    entries = study_models("config/razzhigaev_2024.yaml")
    ids = stand_in_cache(root / "hub", root / "models", tiny_models["gpt2"], entries)
    text = write_enwik8_like(tmp_path, pages=60)["raw"]
    corpus = {"path": str(text), "rows": 32}  # of the study's 128 pieces: the jobs are what is tried here
    overlay = {"run": "razzhigaev_models", "corpus": corpus, "geometry": {"twonn": False}, "models": entries}
    results = run_models(tmp_path, "config/razzhigaev_2024.yaml", env, overlay)
    assert sorted(results.models["model"]) == sorted(ids)
    assert sorted(set(results.geometry["model"])) == sorted(ids)
    assert sorted(set(results.embedding_matrices["model"])) == sorted(ids)
    assert results.provenance["facebook--opt-350m"]["last_width"] == 16  # its projected last layer, at its width
    assert results.tokens.query("model == 'facebook--opt-350m'")["layer"].max() == 3
    pythia = results.provenance["EleutherAI--pythia-2.8b@step0"]  # pytorch_model.bin alone
    assert pythia["weights_sha256"] and results.geometry.query("model == 'EleutherAI--pythia-2.8b@step0'").shape[0]


def test_every_model_machina_and_mercer_name_runs_end_to_end(tmp_path, offline_hub, tiny_models):
    env, root = offline_hub
    entries = study_models("config/machina_mercer_2024.yaml")
    ids = stand_in_cache(root / "hub", root / "models", tiny_models["gpt2"], entries)
    overlay = {"run": "machina_mercer_models", "models": entries}
    results = run_models(tmp_path, "config/machina_mercer_2024.yaml", env, overlay, ["embedding_matrices.csv"])
    assert sorted(set(results.embedding_matrices["model"])) == sorted(ids)
    assert results.embedding_matrices["isotropy"].notna().all()
