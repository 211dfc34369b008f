rule layer_statistics:
    input:
        stats="results/{model}/stats.parquet",
    output:
        layers="results/{model}/layers.csv",
    params:
        analysis=canonical(config["analysis"]),
    log:
        "logs/{model}/layer_statistics.log",
    benchmark:
        "benchmarks/{model}/layer_statistics.tsv"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/layer_statistics.py"


rule summarise_models:
    input:
        layers=expand("results/{model}/layers.csv", model=MODELS),
        runs=expand("results/{model}/run.json", model=MODELS),
    output:
        layers="results/summary/layers.csv",
        models="results/summary/models.csv",
    params:
        models=list(MODELS),
    log:
        "logs/summary/summarise_models.log",
    benchmark:
        "benchmarks/summary/summarise_models.tsv"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/summarise_models.py"
