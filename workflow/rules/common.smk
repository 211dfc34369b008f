import json
import os
import re
import shlex
import sys
import tempfile
import warnings

from snakemake.utils import validate

# Snakemake ≥ 9.25 leaves the coroutine that sizes a job's input files unawaited while it builds a report (and
# elsewhere, once per job): a harmless warning, printed twice a job (snakemake/snakemake#4280).
warnings.filterwarnings("ignore", r"coroutine '.*_predicated_size_files.*' was never awaited", RuntimeWarning)

try:
    import ctxvar
except ModuleNotFoundError as error:  # Snakemake runs in another environment than the one ctxvar was installed in
    if error.name != "ctxvar":  # ctxvar is there but not one of its dependencies: Snakemake's line names it
        raise
    install = [sys.executable, "-m", "pip", "install", "-e", f"{os.path.realpath(workflow.basedir)}[example]"]
    raise SystemExit(
        "ctxvar is not installed in the Python that runs Snakemake; install it there: "
        f"{shlex.join(install)} (torch first: README, Install)"
    )
from ctxvar.config.checks import check_config
from ctxvar.config.entries import (
    built_in_run,
    checkpoint_families,
    forward_models,
    measured_entry,
    model_source as source_of,
    models_by_id,
    pca_model,
)
from ctxvar.config.hashes import TYPE_KEY_RULE, extraction_geometry
from ctxvar.config.kinds import kind_of
from ctxvar.config.run_name import check_study_named, relative_if_below, run_name, run_named_on_purpose
from ctxvar.config.schema import check_schema, load_config_file
from ctxvar.corpus.enwik8 import check_file as check_enwik8_file
from ctxvar.corpus.shards import start_up_warning
from ctxvar.errors import CtxvarError
from ctxvar.figures.catalogue import FIGURES, PCA, SCOPES, FigureRun, figure_named, figures_of
from ctxvar.models.archive import check_archives
from ctxvar.models.batching import BATCH_TOKENS
from ctxvar.run import resources as estimates
from ctxvar.run.cost import (
    block as cost_block,
    check_rows_drawable,
    large_run,
    plan as cost_plan,
    plan_command,
)
from ctxvar.run.console import repeat_after_dry_run
from ctxvar.run.disk import check_free_space
from ctxvar.run.inputs import resolution_notice, run_inputs, sums_hash_of, sums_hashes
from ctxvar.run.layout import check_results_layout
from ctxvar.run.origin import check_run_origin, config_identity, record_run_origin
from ctxvar.run.resources import check_set_resources
from ctxvar.stats.declarations import sums_files


def set_resources(overwrite_resources):
    """``{rule: {resource: value as written}}`` of --set-resources and the profile's set-resources."""
    return {
        rule_name: {name: getattr(values[name], "raw", values[name]) for name in values}
        for rule_name, values in overwrite_resources.items()
    }


try:  # the whole config contract, before any job: one line and exit status 1 for the first violation
    CONFIG_FILES = {path: load_config_file(path) for path in map(str, workflow.configfiles)}  # refuses duplicate keys
    check_study_named(config, [str(path) for path in workflow.overwrite_configfiles], workflow.basedir)
    check_schema(config)  # the schema ctxvar.config.schema loaded already (workflow/schemas/ links to it)
    validate(config, "../schemas/config.schema.yaml")  # fills in the schema's defaults
    check_config(config)
    if "corpus" in config:  # absent when no model reads it (ctxvar.config.checks)
        check_enwik8_file(config["corpus"])  # a local enwik8 reads as its text (UTF-8, or a zip holding it)
        check_rows_drawable(config["corpus"])  # corpus.rows no more than the source holds, before any download
    check_set_resources(set_resources(workflow.resource_settings.overwrite_resources))
    CLI_CONFIGS = {str(path): CONFIG_FILES[str(path)] for path in workflow.overwrite_configfiles}
    CLI_VALUES = dict(workflow.config_settings.config or {})  # --config KEY=VALUE (overwrite_config merges the files)
    RUN = run_name(config, CLI_CONFIGS, CLI_VALUES)
    RUN_CONFIG = config_identity(list(CONFIG_FILES), "config.yaml")  # the files read: config.yaml without --configfile
    SHARED_RUN = check_run_origin(f"results/{RUN}", RUN_CONFIG, run_named_on_purpose(CLI_CONFIGS, CLI_VALUES))
    if notice := resolution_notice(models_by_id(config)):  # a request per Hub model: say what the start waits for
        print(notice, file=sys.stderr)
    # each model with what identifies its files, the corpus with its inputs, rows: null left out (as the cost plan)
    MODELS, CORPUS = run_inputs(config, f"results/{RUN}")
    check_results_layout(f"results/{RUN}", MODELS)  # refuses merged sums under their older names, stats*.parquet
    check_archives(MODELS, f"results/{RUN}")  # a package or zip to unpack a model from is there
    check_free_space(config, f"results/{RUN}")  # once the corpus is sampled; extraction jobs check again as they start
except CtxvarError as error:
    sys.exit(f"ctxvar error: {error}")


def results(path):
    """``path`` in this run's results folder: runs with different ``run`` names never touch each other's files."""
    return f"results/{RUN}/{path}"


def logs(path):
    return f"logs/{RUN}/{path}"


def benchmarks(path):
    return f"benchmarks/{RUN}/{path}"


SHARDS = [str(i) for i in range(config["shards"])]
FORWARD_MODELS = forward_models(MODELS)  # those that run over the corpus; the others: embedding matrices alone
PCA_MODEL = pca_model(config)  # None when no model runs over the corpus
FAMILIES = checkpoint_families(MODELS)  # {family: [id@revision, …]} from revisions:
FORWARD_FAMILIES = {family: ids for family, ids in FAMILIES.items() if ids[0] in FORWARD_MODELS}
WEIGHTED_MODELS = [mid for mid, entry in MODELS.items() if kind_of(entry).has_weights]  # with weight matrices
GEOMETRY = config["geometry"]
REMOVE_AFTER_USE = config["hf_cache"]["remove_after_use"]
# Whose weights digest_weights hashes once for all their extraction jobs (estimates.digested): the models of several
# shards, but Hub checkpoints the run removes after use (a digest would download them all at the start) and models
# the run builds too small to gain from it; the others' jobs hash their weights themselves
DIGESTED_MODELS = [mid for mid in FORWARD_MODELS if estimates.digested(MODELS[mid], len(SHARDS), REMOVE_AFTER_USE)]
FEWER_SENTENCES = (  # only shards make it matter: a corpus no model runs over (forward: false) is not sharded
    CORPUS
    and FORWARD_MODELS
    and start_up_warning(config["corpus"], results("corpus/sentences.parquet"), config["shards"])
)
for warning in (FEWER_SENTENCES, SHARED_RUN):
    if warning:
        print(f"ctxvar warning: {warning}", file=sys.stderr)


DRY_RUN_PLAN = []  # the plan a dry run printed first, printed again as its last lines


def run_targets(wildcards):
    """The default target's input: :func:`final_outputs`; in a dry run, which runs no hooks, the cost plan is
    printed first and, once Snakemake has listed the jobs, last (a real run prints it in onstart, when the run is
    large)."""
    if workflow.dryrun and not DRY_RUN_PLAN:
        DRY_RUN_PLAN.append(cost_plan_block(only_large=False))
        repeat_after_dry_run(DRY_RUN_PLAN[0])
    return final_outputs()


def cost_plan_block(only_large):
    """The run's cost plan (ctxvar.run.cost) as the block to print, or None (``only_large``: for a small run). The
    plan is advice: a fault in it is one warning line, never the end of the run."""
    try:
        planned = cost_plan(config, results(""), sums_hashes(config, MODELS, CORPUS))
        if only_large and not large_run(planned):
            return None
        files = [relative_if_below(path) for path in workflow.overwrite_configfiles] or ["config.yaml"]
        return cost_block(planned, config, REMOVE_AFTER_USE, plan_command(files, CLI_VALUES))
    except Exception as error:  # noqa: BLE001 - any fault of the estimate, reported and passed over
        return f"ctxvar warning: no cost plan ({type(error).__name__}: {error}); the run itself is not affected"


wildcard_constraints:
    model="|".join(re.escape(m) for m in MODELS),
    shard=r"\d+",


def canonical(value):
    """``value`` with dict keys sorted, so that reordering config keys does not look like a params change."""
    return json.loads(json.dumps(value, sort_keys=True))


def model_entry(wildcards):
    """The model's entry as its jobs' params hold it: without ``forward`` (ctxvar.config.entries.measured_entry)."""
    return canonical(measured_entry(MODELS[wildcards.model]))


def model_source(wildcards):
    """Where extraction loads the model from: the run's models/{model} folder, or the Hub id / local path."""
    return source_of(MODELS[wildcards.model], results(""))


def model_inputs(wildcards):
    """The run's models/{model} folder, for models a rule makes there; nothing for the others."""
    return {"model": results(f"models/{wildcards.model}")} if built_in_run(MODELS[wildcards.model]) else {}
