# pca.smk's inputs.


def pca_points(wildcards):
    """Fig. 1's points: the file each extraction job of the model wrote beside its partial sums."""
    return [f"{partial_prefix(wildcards.model, shard)}.pca.parquet" for shard in SHARDS]
