rule merge_statistics:
    input:
        unpack(model_partials),
    output:
        stats=results("{model}/stats.parquet"),
        **geometry_files(results("{model}/stats")),
        tokens=results("{model}/tokens.parquet"),
        run=results("{model}/run.json"),
    params:
        config_hash=partial_config_hash,  # refuses partials of another run or config
    log:
        logs("{model}/merge_statistics.log"),
    benchmark:
        benchmarks("{model}/merge_statistics.tsv")
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/merge_statistics.py"
