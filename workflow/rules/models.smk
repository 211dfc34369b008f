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
        model=models_made_by("build_random_model"),
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
        model=models_made_by("unpack_model"),
    conda:
        "../../envs/extract.yaml"
    params:
        entry=model_entry,
    script:
        "../scripts/unpack_model.py"


rule digest_weights:  # once per model, on a CPU: its extraction jobs take the hash where the files are unchanged
    input:
        unpack(model_inputs),
    output:
        digest=results("{model}/weights_digest.json"),
    log:
        logs("{model}/digest_weights.log"),
    benchmark:
        benchmarks("{model}/digest_weights.tsv")
    wildcard_constraints:
        model="|".join(re.escape(m) for m in DIGESTED_MODELS) or "(?!)",
    conda:
        "../../envs/extract.yaml"
    threads: 4  # hashlib releases the GIL: the files hash a tensor a thread
    resources:
        mem_mb=digest_mem_mb,  # a pickled checkpoint is unpickled whole
        runtime=digest_runtime,  # the download of a Hub checkpoint, then one read of its files
    params:
        model=model_entry,
        source=model_source,
    script:
        "../scripts/digest_weights.py"
