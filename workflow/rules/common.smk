import json
import os
import re
import shlex
import shutil
import sys

from snakemake.utils import validate

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
from ctxvar import resources as estimates
from ctxvar.resources import check_set_resources
from ctxvar.config import (
    built_in_run,
    check_config,
    check_schema,
    check_study_named,
    checkpoint_families,
    TYPE_KEY_RULE,
    extraction_config_hash,
    extraction_geometry,
    load_config_file,
    model_source as source_of,
    models_by_id,
    pca_model,
    run_name,
    run_named_on_purpose,
)
from ctxvar.figures.catalogue import (
    CHECKPOINT_FIGURE,
    EMBEDDING_CHECKPOINT_FIGURE,
    EMBEDDING_PROJECTION_FIGURE,
    GEOMETRY_MODEL_FIGURES,
    GEOMETRY_SUMMARY_FIGURES,
    MODEL_FIGURES,
    PCA_FIGURES,
    SUMMARY_FIGURES,
    accumulated,
)
from ctxvar.disk import check_free_space
from ctxvar.models.archive import check_archives
from ctxvar.inputs import corpus_inputs, with_inputs
from ctxvar.run_end import failure_message, outdated_outputs, report_command, success_message
from ctxvar.run_origin import check_run_origin, config_identity, record_run_origin
from ctxvar.errors import CtxvarError
from ctxvar.models.batching import BATCH_TOKENS
from ctxvar.corpus.shards import start_up_warning


def set_resources(overwrite_resources):
    """``{rule: {resource: value as written}}`` of --set-resources and the profile's set-resources."""
    return {
        rule_name: {name: getattr(values[name], "raw", values[name]) for name in values}
        for rule_name, values in overwrite_resources.items()
    }


try:  # the whole config contract, before any job: one line and exit status 1 for the first violation
    CONFIG_FILES = {path: load_config_file(path) for path in map(str, workflow.configfiles)}  # refuses duplicate keys
    check_study_named(config, [str(path) for path in workflow.overwrite_configfiles], workflow.basedir)
    check_schema(config)  # the schema ctxvar.config loaded already (workflow/schemas/ links to it)
    validate(config, "../schemas/config.schema.yaml")  # fills in the schema's defaults
    check_config(config)
    check_set_resources(set_resources(workflow.resource_settings.overwrite_resources))
    CLI_CONFIGS = {str(path): CONFIG_FILES[str(path)] for path in workflow.overwrite_configfiles}
    RUN = run_name(config, CLI_CONFIGS, workflow.config_settings.overwrite_config or {})
    RUN_CONFIG = config_identity(list(CLI_CONFIGS), os.path.join(workflow.basedir, "config.yaml"))
    SHARED_RUN = check_run_origin(
        f"results/{RUN}", RUN_CONFIG, run_named_on_purpose(CLI_CONFIGS, workflow.config_settings.overwrite_config or {})
    )
    MODELS = with_inputs(models_by_id(config), f"results/{RUN}")  # with what identifies their files (ctxvar.inputs)
    CORPUS = {**config["corpus"], "inputs": corpus_inputs(config["corpus"])}
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
PCA_MODEL = pca_model(config)
FAMILIES = checkpoint_families(MODELS)  # {family: [id@revision, …]} from revisions:
WEIGHTED_MODELS = [mid for mid, entry in MODELS.items() if entry.get("init") != "gaussian"]  # with weight matrices
GEOMETRY = config["geometry"]
FEWER_SENTENCES = start_up_warning(config["corpus"], results("corpus/sentences.parquet"), config["shards"])
for warning in (FEWER_SENTENCES, SHARED_RUN):
    if warning:
        print(f"ctxvar warning: {warning}", file=sys.stderr)


wildcard_constraints:
    model="|".join(re.escape(m) for m in MODELS),
    shard=r"\d+",


def success_lines():
    """What Snakemake prints last after a run that succeeded: where the results are (ctxvar.run_end)."""
    moved = workflow.overwrite_workdir is not None  # --directory: the user's shell is elsewhere
    command = report_command(
        [str(path) for path in workflow.overwrite_configfiles],
        results(""),
        str(workflow.overwrite_workdir) if moved else None,
        workflow.main_snakefile,
    )
    outdated = outdated_outputs(final_outputs(), {model: sums_hash(model) for model in MODELS}, results(""))
    return success_message(results(""), list(MODELS), command, moved, outdated)


def failure_lines(snakemake_logs):
    """What Snakemake prints last after a failed run: each failed job's one-line error and its log."""
    logs = [snakemake_logs] if isinstance(snakemake_logs, str) else list(snakemake_logs or [])
    return failure_message(logs, moved=workflow.overwrite_workdir is not None)


def final_outputs():
    return [
        *expand(results("{model}/tokens.parquet"), model=MODELS),
        *expand(results("{model}/layers.csv"), model=MODELS),
        results("summary/layers.csv"),
        results("summary/models.csv"),
        *expand(results("{model}/figures/{figure}.{ext}"), model=MODELS, figure=MODEL_FIGURES, ext=FIGURE_FILES),
        *expand(results("figures/{figure}.{ext}"), figure=SUMMARY_FIGURES, ext=FIGURE_FILES),
        *expand(results("{model}/figures/{figure}.{ext}"), model=PCA_MODEL, figure=PCA_FIGURES, ext=FIGURE_FILES),
        *expand(results("{model}/table2.{ext}"), model=PCA_MODEL, ext=("csv", "tex")),
        *expand(results("{model}/geometry.csv"), model=MODELS),
        results("summary/geometry.csv"),
        *expand(
            results("{model}/figures/{figure}.{ext}"),
            model=MODELS,
            figure=accumulated(GEOMETRY_MODEL_FIGURES, GEOMETRY),
            ext=FIGURE_FILES,
        ),
        *expand(
            results("figures/{figure}.{ext}"), figure=accumulated(GEOMETRY_SUMMARY_FIGURES, GEOMETRY), ext=FIGURE_FILES
        ),
        *expand(results("figures/checkpoints/{family}.{ext}"), family=FAMILIES, ext=FIGURE_FILES),
        *expand(results("{model}/embedding_matrices.csv"), model=WEIGHTED_MODELS),
        *expand(results("{model}/figures/emb01_projection.{ext}"), model=WEIGHTED_MODELS, ext=FIGURE_FILES),
        *expand(results("figures/checkpoints/embedding_matrices/{family}.{ext}"), family=FAMILIES, ext=FIGURE_FILES),
    ]


def partial_outputs():
    """An extraction job's files, the sums and the geometry sums config asks for; deleted once merged (temp)
    unless ``keep_partials``."""
    prefix = partial_prefix("{model}", "{shard}")
    files = {"partial": f"{prefix}.parquet", **geometry_files(prefix)}
    return {name: path if config["keep_partials"] else temp(path) for name, path in files.items()}


def geometry_files(prefix):
    """The extra sums files of ``prefix`` (a partial or a merged model) that config geometry asks for."""
    files = {"moments": f"{prefix}.moments.parquet"} if GEOMETRY["covariance"] else {}
    if GEOMETRY["ethayarajh"]:
        files = {**files, "words": f"{prefix}.words.parquet", "sentences": f"{prefix}.sentences.parquet"}
    return {**files, "sample": f"{prefix}.sample.parquet"} if GEOMETRY["twonn"] else files


FIGURE_FILES = ("png", "pdf", "csv")  # the picture, for papers, and the numbers drawn


def figure_spec(wildcards):
    return {**MODEL_FIGURES, **SUMMARY_FIGURES, **GEOMETRY_MODEL_FIGURES, **GEOMETRY_SUMMARY_FIGURES}[wildcards.figure]


def figure_group(wildcards):
    """The report's subcategory: the figure type."""
    return figure_spec(wildcards).group


def figure_caption(wildcards):
    return figure_spec(wildcards).caption


def figure_needs(wildcards):
    return figure_spec(wildcards).needs


def model_figure_inputs(wildcards):
    """Only what the figure draws, so that a change elsewhere does not re-plot it."""
    inputs = {
        name: results(f"{wildcards.model}/{file}")
        for name, file in (("layers", "layers.csv"), ("tokens", "tokens.parquet"), ("geometry", "geometry.csv"))
    }
    return {name: path for name, path in inputs.items() if name in figure_needs(wildcards)}


def summary_figure_inputs(wildcards):
    """Only what the figure draws, so that e.g. Fig. 9 (corpus only) does not re-run when models change."""
    inputs = {
        "layers": results("summary/layers.csv"),
        "geometry": results("summary/geometry.csv"),
        "tokens": expand(results("{model}/tokens.parquet"), model=MODELS),
        "sentences": results("corpus/sentences.parquet"),
    }
    return {name: path for name, path in inputs.items() if name in figure_needs(wildcards)}


def figure_models(wildcards):
    """The model ids, for figures drawn from per-model files (their order sets legends and panels)."""
    return list(MODELS) if {"layers", "geometry", "tokens"} & set(figure_needs(wildcards)) else []


def figure_analysis(wildcards):
    """The frequency filter, for figures that apply it themselves (those drawn from tokens.parquet)."""
    return canonical(config["analysis"]) if "tokens" in figure_needs(wildcards) else {}


def pca_points(wildcards):
    return expand(results("{model}/pca/points/{shard}.parquet"), model=wildcards.model, shard=SHARDS)


def canonical(value):
    """``value`` with dict keys sorted, so that reordering config keys does not look like a params change."""
    return json.loads(json.dumps(value, sort_keys=True))


def extraction_gpus():
    """GPUs per extraction job: 1 with device cuda, or auto on a machine with an NVIDIA driver."""
    if config["device"] == "auto":
        return int(shutil.which("nvidia-smi") is not None)
    return int(config["device"] == "cuda")


def extraction_size(wildcards, input):
    """(estimated tokens in the job's shard, the model's shape), known before the job runs."""
    shape = estimates.model_shape(MODELS[wildcards.model], model_source(wildcards))
    return estimates.shard_tokens(input.shard), shape


def extraction_mem_mb(wildcards, input, attempt):
    """An extraction job's host memory, with the geometry sums config asks for."""
    return estimates.extraction_mem_mb(*extraction_size(wildcards, input), attempt, GEOMETRY)


def pca_points_mem_mb(wildcards, input, attempt):
    """A PCA-points job's host memory: an extraction's, without geometry sums."""
    return estimates.extraction_mem_mb(*extraction_size(wildcards, input), attempt)


def embedding_matrices_mem_mb(wildcards, attempt):
    return estimates.embedding_matrices_mem_mb(
        estimates.model_shape(MODELS[wildcards.model], model_source(wildcards)), attempt
    )


def extraction_runtime(wildcards, input, threads, attempt):
    tokens, shape = extraction_size(wildcards, input)
    return estimates.extraction_runtime_min(tokens, shape, bool(extraction_gpus()), threads, attempt)


def model_entry(wildcards):
    return canonical(MODELS[wildcards.model])


def type_keying(wildcards):
    """tokens.merge_markers and the rule that keys token types (a new rule rebuilds the model), for the Gaussian
    null, whose per-type means follow the types."""
    if MODELS[wildcards.model].get("init") != "gaussian":
        return None
    return {"merge_markers": config["tokens"]["merge_markers"], "rule": TYPE_KEY_RULE}


def model_source(wildcards):
    """Where extraction loads the model from: the run's models/{model} folder, or the Hub id / local path."""
    return source_of(MODELS[wildcards.model], results(""))


def model_inputs(wildcards):
    """The run's models/{model} folder, for models a rule makes there; nothing for the others."""
    return {"model": results(f"models/{wildcards.model}")} if built_in_run(MODELS[wildcards.model]) else {}


def extraction_inputs(wildcards):
    return {"shard": results(f"corpus/shards/{wildcards.model}/{wildcards.shard}.parquet"), **model_inputs(wildcards)}


def models_made_by(*inits):
    """A wildcard constraint matching the ids of the models with one of ``inits`` (and nothing when none has)."""
    ids = [mid for mid, entry in MODELS.items() if entry.get("init") in inits]
    return "|".join(map(re.escape, ids)) or "(?!)"


def embedding_checkpoint_inputs(wildcards):
    return {"matrices": expand(results("{model}/embedding_matrices.csv"), model=FAMILIES[wildcards.family])}


def sums_hash(model):
    """The hash the model's sums carry: the config's extraction settings, the corpus's and the model's inputs."""
    return extraction_config_hash({**config, "corpus": CORPUS}, MODELS[model])


def partial_config_hash(wildcards):
    return sums_hash(wildcards.model)


MERGE_PRIORITY = 1  # a merge step before more extraction, so that partials are deleted as soon as they can be


def extraction_priority(wildcards):
    """Shards in order (0 first, priority ≤ 0), so that a running merge takes each partial soon after it lands."""
    return -int(wildcards.shard)


def merge_inputs(wildcards):
    """The sums files a merge adds, in shard order. With incremental_merge, a step adds shard k's partial to the
    sums of shards 0..k-1 (shard 0's partial, or the step before), so partials do not pile up on disk; without,
    the model's merge adds every shard's partial. ``{shard}``: the step's last shard (the model's last, if none)."""
    last = int(wildcards.get("shard", len(SHARDS) - 1))
    if config["incremental_merge"]:
        prefixes = [
            *([sums_through(wildcards.model, last - 1)] if last > 0 else []),
            partial_prefix(wildcards.model, last),
        ]
    else:
        prefixes = [partial_prefix(wildcards.model, shard) for shard in range(last + 1)]
    files = {"partials": [f"{prefix}.parquet" for prefix in prefixes]}
    for name in geometry_files(""):
        files[name] = [geometry_files(prefix)[name] for prefix in prefixes]
    record = f"{sums_through(wildcards.model, last - 1)}.io.json"  # the I/O record of the step before, if any
    files["io"] = [record, f"{record}.sha256"] if config["incremental_merge"] and last > 1 else []
    return files


def partial_prefix(model, shard):
    """The path prefix of a model × shard's partial sums."""
    return results(f"partials/{model}/{shard}")


def sums_through(model, shard):
    """The path prefix of the sums of shards 0..``shard``: shard 0's partial, or a step of the running merge."""
    return partial_prefix(model, 0) if shard == 0 else results(f"partials/{model}/through/{shard}")


def geometry_inputs(wildcards):
    return {"stats": results(f"{wildcards.model}/stats.parquet"), **geometry_files(results(f"{wildcards.model}/stats"))}


def checkpoint_inputs(wildcards):
    members = FAMILIES[wildcards.family]
    return {
        "layers": expand(results("{model}/layers.csv"), model=members),
        "geometry": expand(results("{model}/geometry.csv"), model=members),
    }
