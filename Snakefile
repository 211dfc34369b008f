# ctxvar: layer-by-layer statistics of contextualized token embeddings.
# Data flow: corpus → (models) → extract (with Fig. 1's points) → merge → analyse → figures. See README.md.
# Beside it: models → embedding matrices (the weights alone, no corpus).
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the paper's setup. A --configfile stands on its own: schema defaults plus what it says.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"  # validates config against workflow/schemas/config.schema.yaml
include: "workflow/rules/corpus.smk"
include: "workflow/rules/functions/models.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/functions/embeddings.smk"
include: "workflow/rules/embeddings.smk"
include: "workflow/rules/functions/extract.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/functions/merge.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/functions/analyse.smk"
include: "workflow/rules/analyse.smk"
include: "workflow/rules/functions/pca.smk"
include: "workflow/rules/functions/figures.smk"  # before pca.smk: its plot_pca captions figures as figures.smk does
include: "workflow/rules/pca.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/functions/hf_cache.smk"
include: "workflow/rules/hf_cache.smk"  # Hub checkpoints the run downloaded leave the HF cache after use
include: "workflow/rules/run_end.smk"  # the run's targets and its last lines


# Second-long summary and figure jobs run where Snakemake runs, never as separate cluster submissions (the rules of
# workflow/rules/figures.smk say so themselves: localrule: True).
localrules:
    all,
    summarise_models,
    summarise_embedding_matrices,
    select_pca_tokens,
    plot_pca,
    release_hf_cache,


rule all:
    default_target: True
    input:
        run_targets,


onstart:  # a real run (not a dry run) records the config files its results folder belongs to, or stops if another's
    try:
        record_run_origin(results(""), RUN_CONFIG)
        # whose each Hub checkpoint is (in the HF cache before the run, or not) and the commit each revision names
        record_cache_ledger(results(""), MODELS, hub_datasets(CORPUS))
    except CtxvarError as error:
        sys.exit(f"ctxvar error: {error}")
    if (plan := cost_plan_block(only_large=True)) is not None:
        print(plan, file=sys.stderr)
    if getattr(workflow, "local_exec", True):  # on a cluster each job's block names its job id there: kept
        quiet_job_lines()  # the console shows progress by tenths, warnings and errors, not a block per job


onsuccess:  # the run's last lines: where its results are
    print(success_lines(), file=sys.stderr)


onerror:  # or the error that stopped it, and the log that holds it
    print(failure_lines(log), file=sys.stderr)
