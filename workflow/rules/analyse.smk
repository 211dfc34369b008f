rule layer_statistics:
    input:
        sums=results("{model}/sums.parquet"),
    output:
        layers=results("{model}/layers.csv"),
    log:
        logs("{model}/layer_statistics.log"),
    benchmark:
        benchmarks("{model}/layer_statistics.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/layer_statistics.py"


rule geometry_statistics:
    input:
        unpack(geometry_inputs),
    output:
        geometry=results("{model}/geometry.csv"),
    log:
        logs("{model}/geometry_statistics.log"),
    benchmark:
        benchmarks("{model}/geometry_statistics.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        analysis=canonical(config["analysis"]),
        spectrum_k=GEOMETRY["spectrum_k"],
        seed=GEOMETRY["seed"],
        sample_size=GEOMETRY["sample_size"],
        batches=GEOMETRY["batches"],
    script:
        "../scripts/geometry_statistics.py"


rule summarise_models:
    input:
        layers=expand(results("{model}/layers.csv"), model=FORWARD_MODELS),
        geometry=expand(results("{model}/geometry.csv"), model=FORWARD_MODELS),
        runs=expand(results("{model}/run.json"), model=FORWARD_MODELS),
    output:
        layers=results("summary/layers.csv"),
        geometry=results("summary/geometry.csv"),
        models=results("summary/models.csv"),
    log:
        logs("summary/summarise_models.log"),
    benchmark:
        benchmarks("summary/summarise_models.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        models=FORWARD_MODELS,
        families={model: MODELS[model].get("family") for model in FORWARD_MODELS},
    script:
        "../scripts/summarise_models.py"
