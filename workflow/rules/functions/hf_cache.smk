# hf_cache.smk's inputs and params: the Hub models, and what the jobs that read their files leave once they end.
from ctxvar.run.hf_cache import hub_snapshots, record_cache_ledger
from ctxvar.run.inputs import hub_datasets

HUB_SNAPSHOTS = hub_snapshots(MODELS)  # model id → its Hub repo, revision and commit (Hub models only)
RELEASED_MODELS = list(HUB_SNAPSHOTS) if config["hf_cache"]["remove_after_use"] else []


def hub_snapshot(wildcards):
    return canonical(HUB_SNAPSHOTS[wildcards.model])


def model_readers_outputs(model):
    """What the jobs that read ``model``'s files (tokenizer, configuration, weights) leave once they have ended:
    its shards (split_corpus), its merged sums (every extraction job, whose partials the merge reads and deletes),
    its embedding matrices (embedding_matrix_statistics) and, for figures.pca.model, Fig. 1's types
    (select_pca_types); a model with forward: false, its embedding matrices alone."""
    forward = [
        *expand(results("corpus/shards/{model}/{shard}.parquet"), model=model, shard=SHARDS),
        results(f"{model}/sums.parquet"),
        *sums_files(results(f"{model}/sums"), GEOMETRY).values(),
        results(f"{model}/tokens.parquet"),
        results(f"{model}/run.json"),
    ]
    return [
        *(forward if model in FORWARD_MODELS else []),
        results(f"{model}/embedding_matrices.csv"),
        results(f"{model}/embedding_projection.parquet"),
        *([results(f"{model}/pca/types.csv")] if model == PCA_MODEL else []),
    ]


def release_inputs(wildcards):
    """The model's readers' outputs, and those of every other model that loads the same snapshot (revisions that
    name one commit): the snapshot leaves the cache once all of them have ended."""
    snapshot = HUB_SNAPSHOTS[wildcards.model]
    sharing = [
        model
        for model, other in HUB_SNAPSHOTS.items()
        if snapshot["commit"] is not None and (other["repo"], other["commit"]) == (snapshot["repo"], snapshot["commit"])
    ]
    return {"readers": [path for model in sharing or [wildcards.model] for path in model_readers_outputs(model)]}
