# merge.smk's inputs: the partials a merge adds, in shard order, and the running merge's steps.


MERGE_PRIORITY = 1  # a merge step before more extraction, so that partials are deleted as soon as they can be


def sums_through(model, shard):
    """The path prefix of the sums of shards 0..``shard``: shard 0's partial, or a step of the running merge."""
    return partial_prefix(model, 0) if shard == 0 else results(f"partials/{model}/through/{shard}")


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
    for name in sums_files("", GEOMETRY):
        files[name] = [sums_files(prefix, GEOMETRY)[name] for prefix in prefixes]
    record = f"{sums_through(wildcards.model, last - 1)}.io.json"  # the I/O record of the step before, if any
    files["io"] = [record, f"{record}.sha256"] if config["incremental_merge"] and last > 1 else []
    return files
