rule build_random_model:
    input:
        sentences=results("corpus/sentences.parquet"),
    output:
        model=directory(results("models/{model}")),
    log:
        logs("models/{model}.log"),
    benchmark:
        benchmarks("models/{model}.tsv")
    wildcard_constraints:
        model=models_made_by("random", "gaussian"),
    conda:
        "../../envs/extract.yaml"
    params:
        entry=model_entry,
        type_keying=type_keying,
    script:
        "../scripts/build_random_model.py"


rule unpack_model:
    output:
        model=directory(results("models/{model}")),
    log:
        logs("models/{model}.log"),
    benchmark:
        benchmarks("models/{model}.tsv")
    wildcard_constraints:
        model=models_made_by("archive"),
    conda:
        "../../envs/extract.yaml"
    params:
        entry=model_entry,
    script:
        "../scripts/unpack_model.py"
