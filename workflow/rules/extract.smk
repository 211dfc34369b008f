rule extract_statistics:
    input:
        unpack(extraction_inputs),
    output:
        **partial_outputs(),
    log:
        logs("partials/{model}/{shard}.log"),
    benchmark:
        benchmarks("partials/{model}/{shard}.tsv")
    wildcard_constraints:
        model="|".join(re.escape(m) for m in FORWARD_MODELS) or "(?!)",  # forward: false models read no corpus
    priority: extraction_priority
    conda:
        "../../envs/extract.yaml"
    threads: 1
    resources:
        gpu=extraction_gpus(),
        mem_mb=extraction_mem_mb,  # estimated from the shard's words and the model's shape
        runtime=extraction_runtime,
        batch_tokens=BATCH_TOKENS,  # padded tokens per forward pass; override in a profile's set-resources
        max_state_mb=0,  # cap on the sums' memory, whole MB, any device; 0: what the GPU has left (no cap on CPU)
        max_device_mb=0,  # device memory for the weights, whole MB, any device; 0: the GPU's free (none on CPU)
    params:
        model=model_entry,
        source=model_source,
        dtype=config["dtype"],
        tokens=canonical(config["tokens"]),
        geometry=extraction_geometry(config),
        config_hash=partial_config_hash,
    script:
        "../scripts/extract_statistics.py"
