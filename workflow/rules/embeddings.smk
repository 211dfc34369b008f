rule embedding_matrix_statistics:
    input:
        unpack(model_inputs),
    output:
        matrices=results("{model}/embedding_matrices.csv"),
        projection=results("{model}/embedding_projection.parquet"),
    log:
        logs("{model}/embedding_matrix_statistics.log"),
    benchmark:
        benchmarks("{model}/embedding_matrix_statistics.tsv")
    wildcard_constraints:
        model="|".join(re.escape(m) for m in WEIGHTED_MODELS) or "(?!)",
    conda:
        "../../envs/extract.yaml"
    resources:
        mem_mb=embedding_matrices_mem_mb,  # estimated from the model's shape
    params:
        model=model_entry,  # with its inputs: a changed folder, archive or Hub commit re-runs it
        source=model_source,
        dtype=config["dtype"],
    script:
        "../scripts/embedding_matrix_statistics.py"


rule summarise_embedding_matrices:
    input:
        matrices=expand(results("{model}/embedding_matrices.csv"), model=WEIGHTED_MODELS),
    output:
        matrices=results("summary/embedding_matrices.csv"),
    log:
        logs("summary/summarise_embedding_matrices.log"),
    benchmark:
        benchmarks("summary/summarise_embedding_matrices.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        models=WEIGHTED_MODELS,
    script:
        "../scripts/summarise_embedding_matrices.py"
