"""Running the workflow from tests: Snakemake in a subprocess, as a user would."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
# The demo's first model on a sixth of its corpus, in 4 shards (so the running merges of shards 0..1 and 0..2
# run): the runs that show how jobs are submitted, killed and resumed, where the data's size changes nothing.
SMALL_DEMO = {
    **DEMO,
    "shards": 4,
    "models": DEMO["models"][:1],
    "corpus": {**DEMO["corpus"], "synthetic": {**DEMO["corpus"]["synthetic"], "n_sentences": 1000}},
}
MERGED_SUMS = (  # a model's merged files with the demo's geometry
    "tokens.parquet",
    "sums.parquet",
    "sums.moments.parquet",
    "sums.sample.parquet",
    "sums.words.parquet",
    "sums.sentences.parquet",
)
# What the tests compare across runs of SMALL_DEMO: every merged sum, the layer table, one per-model figure.
SMALL_DEMO_OUTPUTS = [
    *(f"results/demo/tiny-bert/{name}" for name in (*MERGED_SUMS, "layers.csv")),
    "results/demo/tiny-bert/figures/fig05_decomposition.csv",  # plot_model_figure
]
RUN_SECONDS: dict[str, float] = {}  # shipped config → wall-clock seconds of its run, printed after the tests
# The niceness of the runs that go on beside the tests (conftest.BACKGROUND_RUNS), their jobs included: the
# tests that do not wait for them keep the cores they ask for, and the runs take up whatever cores are idle. The
# most: the longer the runs go on beside the tests, the fewer of the tests' one-process stretches (most of a
# workflow test is a chain of single jobs) leave a core idle at the end, when no run is left.
BACKGROUND_NICENESS = 19


# The tiers whose tests read the runs that conftest.BACKGROUND_RUNS start, once per session: none under -n.
ONE_PROCESS_TIERS = ("workflow", "slurm", "real_model")


def one_process_tiers(markexpr: str) -> list[str]:
    """The tiers of :data:`ONE_PROCESS_TIERS` that ``-m markexpr`` selects: all of them for an empty expression,
    none for one pytest cannot read (pytest then says what is wrong with it)."""
    from _pytest.mark.expression import Expression

    if not markexpr:
        return list(ONE_PROCESS_TIERS)
    try:
        expression = Expression.compile(markexpr)
    except Exception:
        return []
    return [tier for tier in ONE_PROCESS_TIERS if expression.evaluate(lambda name, tier=tier, **_: name == tier)]


MINILM = "all-MiniLM-L6-v2"  # the quick start's trained model (config/minilm.yaml)


def quick_start_archive() -> Path:
    """The archive of the quick start's :data:`MINILM` (:class:`ctxvar.errors.ModelLoadError` if its wheel is not
    installed)."""
    from ctxvar.config.entries import models_by_id
    from ctxvar.config.schema import load_config_file
    from ctxvar.models.archive import archive_path

    return archive_path(models_by_id(load_config_file(REPO / "config" / "minilm.yaml"))[MINILM])


def small_demo_inputs(small_demo: Path, workdir: Path) -> None:
    """Into a new ``workdir``: the finished :data:`SMALL_DEMO`'s corpus sample, shards, model and Fig. 1 types,
    with Snakemake's records of them (mtimes kept), and none of its results nor its record of config files: a run
    there of a config with SMALL_DEMO's corpus, shards and model starts at the extractions."""
    results = small_demo / "results" / "demo"

    def left_out(folder: str, names: list[str]) -> list[str]:
        if Path(folder) == results:
            return [name for name in names if name.startswith("config_files.json")]
        if Path(folder) == results / SMALL_DEMO["models"][0]["id"]:
            return [name for name in names if name != "pca"]
        return []

    shutil.copytree(small_demo, workdir, symlinks=True, ignore=left_out)


def snakemake(
    workdir: Path, config: dict | Path, *args: str, env: dict | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Run the workflow with ``config`` in ``workdir``; returns the finished process (not checked).

    No time limit by default: a busy 2-core machine can take far longer than usual, and
    Snakemake ends on its own. A dict ``config`` without ``run`` runs as ``run: test``.
    """
    return subprocess.run(
        snakemake_command(workdir, config_file(workdir, config), *args),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def console_files(workdir: Path) -> tuple[Path, Path]:
    """Where a run of :func:`start_snakemake` in ``workdir`` writes its stdout and stderr: beside ``workdir``."""
    return workdir.parent / f"{workdir.name}.out", workdir.parent / f"{workdir.name}.err"


def start_snakemake(workdir: Path, config: dict | Path, *args: str, niceness: int = 0) -> subprocess.Popen:
    """:func:`snakemake` started in a process group of its own and not waited for, its stdout and stderr in
    :func:`console_files`, at ``niceness`` (its jobs too): runs that mostly wait, such as a cluster's, can go side
    by side; :func:`stop_snakemake` ends one with its jobs, :func:`finished_snakemake` waits for one."""
    workdir.mkdir(parents=True, exist_ok=True)
    out, err = console_files(workdir)
    command = snakemake_command(workdir, config_file(workdir, config), *args)
    with open(out, "w") as stdout, open(err, "w") as stderr:  # the child keeps its own copies of the files
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,  # a background process group that read the terminal would be stopped
            stdout=stdout,
            stderr=stderr,
            text=True,
            preexec_fn=lambda: own_process_group(niceness),
        )
    process.started = time.time()  # for run_seconds
    return process


def own_process_group(niceness: int) -> None:
    """In a child before it runs its command: a process group of its own (so that :func:`stop_snakemake` can end
    it with its jobs) in the parent's session, and ``niceness``. Not a session of its own: Linux's autogroups
    share the CPU between sessions whatever their niceness, and a run in its own session took as much CPU as all
    the tests beside it."""
    os.setpgid(0, 0)
    os.nice(niceness)


def stop_snakemake(process: subprocess.Popen, grace: float = 60) -> None:
    """End a run of :func:`start_snakemake` that is still going: SIGTERM, on which Snakemake cancels its cluster
    jobs, then after ``grace`` seconds SIGKILL to its whole process group."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_seconds(workdir: Path, process: subprocess.Popen) -> float:
    """Wall-clock seconds of a finished run of :func:`start_snakemake`: from its start to its last console line."""
    return max(path.stat().st_mtime for path in console_files(workdir)) - process.started


def finished_snakemake(workdir: Path, process: subprocess.Popen) -> subprocess.CompletedProcess:
    """The run of :func:`start_snakemake` in ``workdir`` once it has ended, with its console output."""
    process.wait()
    stdout, stderr = (path.read_text() for path in console_files(workdir))
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def config_file(workdir: Path, config: dict | Path) -> Path:
    """``config`` itself if a path; a dict written to a new file beside ``workdir`` (which stays as a user's
    checkout would be), ``run: test`` unless it names a run."""
    if not isinstance(config, dict):
        return config
    workdir.mkdir(parents=True, exist_ok=True)
    handle, path = tempfile.mkstemp(suffix=".yaml", dir=workdir.parent)
    os.write(handle, yaml.safe_dump({"run": "test", **config}).encode())
    os.close(handle)
    return Path(path)


def snakemake_command(workdir: Path, config_path, *args: str) -> list[str]:
    """The command line that runs the workflow in ``workdir`` with the config file ``config_path`` on 2 cores."""
    return [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_path),
        "--cores",
        "2",
        *args,
    ]  # a later -s in args wins


def scheduled_jobs(dry_run: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule → job count from a dry-run's 'Job stats' table."""
    assert dry_run.returncode == 0, dry_run.stderr + dry_run.stdout
    table = (dry_run.stdout + dry_run.stderr).split("Job stats:")[-1]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M) if rule != "total"}


def end_of_run(output: str) -> tuple[dict[str, str], list[str]]:
    """The run's closing block (ctxvar.run.end) as ``{label: text}``, and the lines Snakemake prints after it."""
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("==== ctxvar: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    block = {"banner": lines[start]}
    for line in lines[start + 1 : end]:
        label, _, text = line.strip().partition("  ")
        block[label] = text.strip()
    return block, lines[end:]


def project_copy(folder: Path) -> Path:
    """The project's files as git knows them (tracked, and new ones not ignored), in a fresh git checkout under
    ``folder``: a recipe followed there shows what it edited (``git status``)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_symlink():  # profiles/ links to workflow/profiles/: a link to a folder, kept a link
            os.symlink(os.readlink(REPO / name), folder / name)
        elif (REPO / name).is_file():
            shutil.copy2(REPO / name, folder / name)
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the project as it is"]):
        subprocess.run(
            ["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *command], cwd=folder, check=True
        )
    return folder
