# analyse.smk's inputs.


def geometry_inputs(wildcards):
    return {
        "sums": results(f"{wildcards.model}/sums.parquet"),
        **sums_files(results(f"{wildcards.model}/sums"), GEOMETRY),
    }
