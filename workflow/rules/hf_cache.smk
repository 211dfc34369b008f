# hf_cache.remove_after_use: each Hub checkpoint the run downloaded leaves the HF cache once every job that reads its
# files has ended; those that were in the cache at the run's first start (the ledger, results/{run}/hf_cache.json,
# written by the Snakefile's onstart) stay.


rule release_hf_cache:
    input:
        unpack(release_inputs),
    output:
        record=results("{model}/hf_cache_release.json"),
    log:
        logs("{model}/release_hf_cache.log"),
    benchmark:
        benchmarks("{model}/release_hf_cache.tsv")
    wildcard_constraints:
        model="|".join(re.escape(m) for m in RELEASED_MODELS) or "(?!)",
    conda:
        "../../envs/analysis.yaml"
    params:
        snapshot=hub_snapshot,  # repo, revision and commit: another commit is another snapshot, downloaded anew
    script:
        "../scripts/release_hf_cache.py"
