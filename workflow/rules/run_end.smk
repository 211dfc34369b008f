# The run's targets (rule all) and its last lines (the Snakefile's onsuccess and onerror).
from ctxvar.run.console import quiet_job_lines
from ctxvar.run.end import failure_message, outdated_outputs, report_command, success_message


def final_outputs():
    weights = [
        *expand(results("{model}/embedding_matrices.csv"), model=WEIGHTED_MODELS),
        *([results("summary/embedding_matrices.csv")] if WEIGHTED_MODELS else []),
        *expand(results("{model}/hf_cache_release.json"), model=RELEASED_MODELS),  # hf_cache.remove_after_use
    ]
    figures = figure_files()  # each figure for the models or families that have what it needs (ctxvar.figures.scopes)
    if not FORWARD_MODELS:  # every model forward: false: the embedding matrices, and summary tables of no model
        return [results("summary/models.csv"), *weights, *figures]
    return [
        *expand(results("{model}/tokens.parquet"), model=FORWARD_MODELS),
        *expand(results("{model}/layers.csv"), model=FORWARD_MODELS),
        results("summary/layers.csv"),
        results("summary/models.csv"),
        *expand(results("{model}/table2.{ext}"), model=PCA_MODEL, ext=("csv", "tex")),
        *expand(results("{model}/geometry.csv"), model=FORWARD_MODELS),
        results("summary/geometry.csv"),
        *weights,
        *figures,
    ]


def success_lines():
    """What Snakemake prints last after a run that succeeded: where the results are (ctxvar.run.end)."""
    moved = workflow.overwrite_workdir is not None  # --directory: the user's shell is elsewhere
    command = report_command(
        [str(path) for path in workflow.overwrite_configfiles],
        results(""),
        str(workflow.overwrite_workdir) if moved else None,
        workflow.main_snakefile,
    )
    outdated = outdated_outputs(final_outputs(), {model: sums_hash(model) for model in FORWARD_MODELS}, results(""))
    return success_message(results(""), list(MODELS), command, moved, outdated)


def failure_lines(snakemake_logs):
    """What Snakemake prints last after a failed run: each failed job's one-line error and its log."""
    logs = [snakemake_logs] if isinstance(snakemake_logs, str) else list(snakemake_logs or [])
    return failure_message(logs, moved=workflow.overwrite_workdir is not None)
