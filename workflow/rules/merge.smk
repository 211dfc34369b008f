rule merge_statistics:
    input:
        unpack(model_partials),
    output:
        **geometry_files(results("{model}/stats")),
        stats=results("{model}/stats.parquet"),
        tokens=results("{model}/tokens.parquet"),
        run=results("{model}/run.json"),
    log:
        logs("{model}/merge_statistics.log"),
    benchmark:
        benchmarks("{model}/merge_statistics.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        config_hash=partial_config_hash,  # refuses partials of another run or config
    script:
        "../scripts/merge_statistics.py"
