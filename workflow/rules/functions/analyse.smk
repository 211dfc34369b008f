# analyse.smk's inputs.


def geometry_inputs(wildcards):
    return {"sums": results(f"{wildcards.model}/sums.parquet"), **geometry_files(results(f"{wildcards.model}/sums"))}
