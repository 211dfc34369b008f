rule build_random_model:
    input:
        sentences=results("corpus/sentences.parquet"),
    output:
        model=directory(results("models/{model}")),
    params:
        entry=model_entry,
        merge_markers=type_keying,
    log:
        logs("models/{model}.log"),
    benchmark:
        benchmarks("models/{model}.tsv")
    conda:
        "../../envs/extract.yaml"
    script:
        "../scripts/build_random_model.py"
