# analyse.smk's inputs.


def geometry_inputs(wildcards):
    return {"stats": results(f"{wildcards.model}/stats.parquet"), **geometry_files(results(f"{wildcards.model}/stats"))}
