rule sample_corpus:
    output:
        sentences=results("corpus/sentences.parquet"),
        counts=results("corpus/counts.json"),
    log:
        logs("corpus/sample_corpus.log"),
    benchmark:
        benchmarks("corpus/sample_corpus.tsv")
    conda:
        "../../envs/extract.yaml"
    params:
        corpus=canonical(CORPUS),  # with its files' fingerprints: a file edited in place re-samples
    script:
        "../scripts/sample_corpus.py"


rule split_corpus:  # per model: its tokenizer plans the batches over the whole corpus
    input:
        unpack(model_inputs),
        sentences=results("corpus/sentences.parquet"),
    output:
        shards=expand(results("corpus/shards/{{model}}/{shard}.parquet"), shard=SHARDS),
    log:
        logs("corpus/shards/{model}.log"),
    benchmark:
        benchmarks("corpus/shards/{model}.tsv")
    conda:
        "../../envs/extract.yaml"
    params:
        model=model_entry,
        source=model_source,
        n_shards=config["shards"],  # existing files 0…n−1 of another shard count must be rewritten
    script:
        "../scripts/split_corpus.py"
