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
        corpus=canonical(config["corpus"]),
    script:
        "../scripts/sample_corpus.py"


rule split_corpus:
    input:
        sentences=results("corpus/sentences.parquet"),
    output:
        shards=expand(results("corpus/shards/{shard}.parquet"), shard=SHARDS),
    log:
        logs("corpus/split_corpus.log"),
    benchmark:
        benchmarks("corpus/split_corpus.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        chunk_sentences=config["chunk_sentences"],
        n_shards=config["shards"],  # existing files 0…n−1 of another shard count must be rewritten
    script:
        "../scripts/split_corpus.py"
