rule merge_next_shard:  # with incremental_merge: the sums of shards 0..{shard}, deleted once the next step has run
    input:
        unpack(merge_inputs),
    output:
        **{name: temp(path) for name, path in sums_files(results("partials/{model}/through/{shard}"), GEOMETRY).items()},
        stats=temp(results("partials/{model}/through/{shard}.parquet")),
        io=temp(results("partials/{model}/through/{shard}.io.json")),  # bytes read and written so far
        io_checksum=temp(results("partials/{model}/through/{shard}.io.json.sha256")),
    log:
        logs("partials/{model}/through/{shard}.log"),
    benchmark:
        benchmarks("partials/{model}/through/{shard}.tsv")
    priority: MERGE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    params:
        config_hash=partial_config_hash,
    script:
        "../scripts/merge_statistics.py"


rule merge_statistics:
    input:
        unpack(merge_inputs),
    output:
        **sums_files(results("{model}/sums"), GEOMETRY),
        stats=results("{model}/sums.parquet"),
        tokens=results("{model}/tokens.parquet"),
        run=results("{model}/run.json"),
    log:
        logs("{model}/merge_statistics.log"),
    benchmark:
        benchmarks("{model}/merge_statistics.tsv")
    priority: MERGE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    params:
        config_hash=partial_config_hash,  # refuses partials of another run or config
        corpus=canonical(CORPUS),  # the sample's identity in run.json, compared with counts.json's by load_results
    script:
        "../scripts/merge_statistics.py"
