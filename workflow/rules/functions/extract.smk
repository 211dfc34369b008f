# extract.smk's files, inputs, resources and priority, and the hash the sums carry.


def partial_prefix(model, shard):
    """The path prefix of a model × shard's partial sums."""
    return results(f"partials/{model}/{shard}")


def partial_outputs():
    """An extraction job's files, the sums, the geometry sums config asks for and Fig. 1's points (empty but for
    figures.pca.model); deleted once merged and drawn (temp) unless ``keep_partials``."""
    prefix = partial_prefix("{model}", "{shard}")
    files = {"partial": f"{prefix}.parquet", **sums_files(prefix, GEOMETRY), "pca_points": f"{prefix}.pca.parquet"}
    return {name: path if config["keep_partials"] else temp(path) for name, path in files.items()}


def extraction_inputs(wildcards):
    """The shard, the model's weight digest (DIGESTED_MODELS), the model's folder if the run makes one, and, for
    figures.pca.model, the Fig. 1 types whose points the job collects."""
    pca = {"pca_types": results(f"{PCA_MODEL}/pca/types.csv")} if wildcards.model == PCA_MODEL else {}
    digest = (
        {"weight_digest": results(f"{wildcards.model}/weights_digest.json")}
        if wildcards.model in DIGESTED_MODELS
        else {}
    )
    return {
        "shard": results(f"corpus/shards/{wildcards.model}/{wildcards.shard}.parquet"),
        **digest,
        **model_inputs(wildcards),
        **pca,
    }


def extraction_gpus():
    """GPUs per extraction job: 1 with device cuda, or auto on a machine with an NVIDIA driver."""
    return int(estimates.extraction_device(config["device"]) == "cuda")


def extraction_size(wildcards, input):
    """(estimated tokens in the job's shard, the model's shape), known before the job runs."""
    shape = estimates.model_shape(MODELS[wildcards.model], model_source(wildcards))
    return estimates.shard_tokens(input.shard), shape


def extraction_mem_mb(wildcards, input, attempt):
    """An extraction job's host memory, with the geometry sums config asks for."""
    return estimates.extraction_mem_mb(*extraction_size(wildcards, input), attempt, GEOMETRY)


def extraction_runtime(wildcards, input, threads, attempt):
    tokens, shape = extraction_size(wildcards, input)
    return estimates.extraction_runtime_min(tokens, shape, bool(extraction_gpus()), threads, attempt)


def extraction_priority(wildcards):
    """Shards in order (0 first, priority ≤ 0), so that a running merge takes each partial soon after it lands."""
    return -int(wildcards.shard)


def sums_hash(model):
    """The hash the model's sums carry: the config's extraction settings, the corpus's and the model's inputs."""
    return sums_hash_of(config, MODELS[model], CORPUS)


def partial_config_hash(wildcards):
    return sums_hash(wildcards.model)
