# pca.smk's inputs and resources.


def pca_points(wildcards):
    return expand(results("{model}/pca/points/{shard}.parquet"), model=wildcards.model, shard=SHARDS)


def pca_points_mem_mb(wildcards, input, attempt):
    """A PCA-points job's host memory: an extraction's, without geometry sums."""
    return estimates.extraction_mem_mb(*extraction_size(wildcards, input), attempt)
