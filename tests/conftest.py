"""Shared, session-scoped, read-only fixtures: a synthetic corpus, tiny random-init models, the demo's run, the
runs started with the session's first test (:func:`background_runs`); and each test's tier marker, from the folder
it is in.

Every test lives in one tier's folder, and the folder gives its marker (``-m workflow`` etc.): ``unit`` (none),
``integration``, ``workflow``, ``real_model``, ``slurm``, ``bench``. The fast tier, ``python -m pytest``, is the
unit and integration folders. A file in ``unit`` may still mark single tests ``integration`` itself.

The models' LayerNorm γ and β are randomised (:func:`support.tiny_models.random_model`, which builds them as
ctxvar.models.random_init does for ``init: random``), so Q varies across types and a wrong statistic cannot pass by
accident.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

from ctxvar.corpus.sources import synthetic_sentences
from ctxvar.extraction import devices

from support.slurm_cluster import CAN_RUN as SLURM_CAN_RUN
from support.slurm_cluster import cluster, slurm_runs  # noqa: F401  (session fixtures, started by background_runs)
from support.tiny_models import random_model

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One CPU thread per process, as Snakemake gives each job its rule's `threads` (1 by default): the suite runs
# processes side by side on the machine's cores (background runs, benchmark steps, workflow jobs), and with
# torch's default of one thread per core two 100-step trainings side by side on 2 cores took 36 s each against
# 15 s with one thread each. Torch here, and the processes the tests start, which inherit the variables (numpy's
# BLAS here read them when torch imported it); a value set in the environment wins.
for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
if os.environ["OMP_NUM_THREADS"].isdigit():  # not an OpenMP list such as "4,2"
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
# Compiled modules cached (__pycache__, ignored by git) whatever PYTHONDONTWRITEBYTECODE says: the session starts
# some 500 Python processes (Snakemake, its jobs, the benchmarks) that import the package, and without the cache
# each compiled its modules anew (0.4 s by `python -X importtime`).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

TESTS = Path(__file__).resolve().parent
TIER_MARKERS = {
    "unit": None,
    "integration": "integration",
    "workflow": "workflow",
    "real_model": "real_model",
    "slurm": "slurm",
    "bench": "bench",
}  # folder → marker


def pytest_configure(config):
    """``-n`` (pytest-xdist) only for the fast tier: the tiers that read the runs of :data:`BACKGROUND_RUNS` need
    one process, or each worker would start every run again (and a second SLURM cluster on the same ports)."""
    if not getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):  # not xdist's controller
        return
    from support.workflow_runs import one_process_tiers

    expression = config.option.markexpr
    one_process = one_process_tiers(expression)
    if one_process:
        raise pytest.UsageError(
            f"-m {expression!r} selects the {', '.join(one_process)} tiers, which run in one process (they share "
            "the demo's, the small demo's, the quick start's and the SLURM runs, each started once): leave out -n"
        )


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items):
    """Give each test its folder's tier marker (a test file outside the tier folders is an error); then run last
    the tests that wait for a run of :data:`BACKGROUND_RUNS`, so that every other test goes on while those runs
    take up the cores it leaves idle: first those whose runs end first (:data:`BACKGROUND_ENDS`), so that they go
    on while the longest run ends, each group in its order."""
    for item in items:
        folder = Path(item.path).resolve().relative_to(TESTS).parts[0]
        if folder not in TIER_MARKERS:
            raise pytest.UsageError(f"{item.path}: a test file belongs in one of tests/{{{','.join(TIER_MARKERS)}}}/")
        if TIER_MARKERS[folder]:
            item.add_marker(TIER_MARKERS[folder])
    items[:] = sorted(items, key=lambda item: max(waits(name) for name in ("", *item.fixturenames)))  # stable


def waits(fixture: str) -> int:
    """0 for a fixture that is no run of :data:`BACKGROUND_RUNS`, else 1 + its place in :data:`BACKGROUND_ENDS`."""
    return BACKGROUND_ENDS.index(fixture) + 1 if fixture in BACKGROUND_ENDS else 0


@pytest.fixture(autouse=True)
def gpu_claim_ends_with_its_test():
    """A test that prepares a shard on a GPU (``CTXVAR_TEST_DEVICE=cuda``) holds the process's GPU claim, as a job
    holds it until its sums are in host memory; given up after the test, or the workflow tier's jobs, in other
    processes, wait on it for the rest of the session."""
    yield
    devices.release_gpu()


# Started in the background, at workflow_runs.BACKGROUND_NICENESS: the runs that take up the cores the tests leave
# idle (a cluster's polling, chains of single jobs, and, with one thread per test process, every in-process test).
BACKGROUND_RUNS = ("slurm_runs", "started_small_demo", "started_demo", "started_quick_start")  # in starting order
# The same runs in the order they end: the small demo (13 jobs) long before the cluster's and the quick start's,
# the demo (71 jobs) last.
BACKGROUND_ENDS = ("started_small_demo", "slurm_runs", "started_quick_start", "started_demo")
assert set(BACKGROUND_ENDS) == set(BACKGROUND_RUNS)
SYNTHETIC = {"n_sentences": 300, "vocab_size": 300, "zipf_exponent": 1.1, "mean_words": 10}


# Where Hugging Face libraries keep an offline flag read from the environment when they are imported.
OFFLINE_FLAGS = (
    ("huggingface_hub.constants", "HF_HUB_OFFLINE"),
    ("datasets.config", "HF_HUB_OFFLINE"),
    ("datasets.config", "HF_DATASETS_OFFLINE"),
    ("transformers.utils.hub", "_is_offline_mode"),
)


@pytest.fixture
def hub_online(monkeypatch):
    """The Hub treated as reachable-if-up, whatever offline variables the machine's environment sets (a GPU
    machine often sets HF_HUB_OFFLINE=1): the variables and each library's flag read at import are cleared."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for module, flag in OFFLINE_FLAGS:
        loaded = importlib.import_module(module)
        if hasattr(loaded, flag):
            monkeypatch.setattr(loaded, flag, False)


@pytest.fixture(scope="session")
def corpus_texts() -> list[str]:
    return synthetic_sentences(SYNTHETIC, seed=7)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, corpus_texts) -> dict[str, str]:
    """Directories of saved tiny models, by architecture, each of :data:`support.tiny_models.RANDOM_SIZES`."""
    return {
        arch: random_model(tmp_path_factory.mktemp("models") / arch, arch, corpus_texts, seed)
        for seed, arch in enumerate(["bert", "roberta", "gpt2"])
    }


@pytest.fixture(scope="session")
def oracles(tiny_models, corpus_texts):
    """``arch → (keys, X)`` of :func:`oracle.brute_force_embeddings`, each computed once per session."""
    from support.oracle import brute_force_embeddings

    cache = {}

    def embeddings(arch: str):
        if arch not in cache:
            cache[arch] = brute_force_embeddings(tiny_models[arch], corpus_texts)
        return cache[arch]

    return embeddings


@pytest.fixture(scope="module")
def oracle(oracles, arch):
    """The session's brute-force embeddings for the module's ``arch`` fixture."""
    return oracles(arch)


@pytest.fixture(scope="session", autouse=True)
def background_runs(request):
    """Start, with the session's first test, the runs of :data:`BACKGROUND_RUNS` that a selected test reads, so
    they go beside the tiers before the tests that wait for them, on the cores those tiers leave idle."""
    wanted = set().union(*(item.fixturenames for item in request.session.items))
    if hasattr(request.config, "workerinput") and wanted & set(BACKGROUND_RUNS):  # past pytest_configure's check
        raise pytest.UsageError(f"{', '.join(sorted(wanted & set(BACKGROUND_RUNS)))}: run in one process, without -n")
    for name in BACKGROUND_RUNS:
        if name in wanted and (name != "slurm_runs" or SLURM_CAN_RUN):
            try:
                request.getfixturevalue(name)
            except Exception:  # raised again to the tests that read the run, not to every test of the session
                pass


@pytest.fixture(scope="session")
def started_demo(tmp_path_factory):
    """``(workdir, process)``: config/demo.yaml started, not waited for; stopped at the end if still running."""
    from support.workflow_runs import BACKGROUND_NICENESS, REPO, start_snakemake, stop_snakemake

    workdir = tmp_path_factory.mktemp("demo")
    process = start_snakemake(workdir, REPO / "config" / "demo.yaml", niceness=BACKGROUND_NICENESS)
    yield workdir, process
    stop_snakemake(process)


@pytest.fixture(scope="session")
def demo_run(started_demo):
    """``(workdir, finished process)`` of a local run of config/demo.yaml (read-only), its output kept; its time
    is printed under "measured"."""
    from support.workflow_runs import RUN_SECONDS, finished_snakemake, run_seconds

    workdir, process = started_demo
    run = finished_snakemake(workdir, process)
    assert run.returncode == 0, run.stderr[-3000:]
    RUN_SECONDS["config/demo.yaml, beside other tests"] = run_seconds(workdir, process)
    return workdir, run


@pytest.fixture(scope="session")
def demo(demo_run):
    """A finished local run of config/demo.yaml (read-only)."""
    return demo_run[0]


@pytest.fixture(scope="session")
def started_small_demo(tmp_path_factory):
    """``(workdir, process)``: :data:`workflow_runs.SMALL_DEMO` as far as :data:`workflow_runs.SMALL_DEMO_OUTPUTS`,
    started, not waited for."""
    from support.workflow_runs import (
        BACKGROUND_NICENESS,
        SMALL_DEMO,
        SMALL_DEMO_OUTPUTS,
        start_snakemake,
        stop_snakemake,
    )

    workdir = tmp_path_factory.mktemp("small-demo")
    process = start_snakemake(workdir, SMALL_DEMO, *SMALL_DEMO_OUTPUTS, niceness=BACKGROUND_NICENESS)
    yield workdir, process
    stop_snakemake(process)


@pytest.fixture(scope="session")
def small_demo(started_small_demo):
    """The finished run of :func:`started_small_demo` (read-only): what the SLURM run and the killed-and-resumed
    run must equal, byte for byte."""
    from support.workflow_runs import finished_snakemake

    run = finished_snakemake(*started_small_demo)
    assert run.returncode == 0, run.stderr[-3000:]
    return started_small_demo[0]


@pytest.fixture(scope="session")
def started_quick_start(tmp_path_factory):
    """``(workdir, process)``: the README's quick start, ``snakemake --cores 2 --configfile config/minilm.yaml``,
    started, not waited for; ``None`` without the all-MiniLM-L6-v2 wheel (its tests then skip, saying why)."""
    from ctxvar.errors import ModelLoadError

    from support.workflow_runs import BACKGROUND_NICENESS, REPO, quick_start_archive, start_snakemake, stop_snakemake

    try:
        quick_start_archive()
    except ModelLoadError:
        yield None
        return
    workdir = tmp_path_factory.mktemp("quick-start")
    process = start_snakemake(workdir, REPO / "config" / "minilm.yaml", niceness=BACKGROUND_NICENESS)
    yield workdir, process
    stop_snakemake(process)


def pytest_terminal_summary(terminalreporter):
    """Print what tests measured with ``record_property`` (the real-model tier's agreement with brute force) and
    how long the runs of shipped configs took (:data:`workflow_runs.RUN_SECONDS`), each on this machine."""
    from support.workflow_runs import RUN_SECONDS

    measured = [
        (report.nodeid.split("::")[-1], name, value)
        for report in terminalreporter.stats.get("passed", [])
        for name, value in report.user_properties
    ]
    if measured or RUN_SECONDS:
        terminalreporter.section("measured")
        for test, name, value in measured:
            terminalreporter.write_line(f"{name} = {value:.3g}  ({test})")
        for config, seconds in RUN_SECONDS.items():
            minutes, rest = divmod(round(seconds), 60)
            terminalreporter.write_line(f"snakemake --cores 2 --configfile {config}: {minutes} min {rest} s")
