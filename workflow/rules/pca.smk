# Fig. 1, Fig. 8, Table 2: a second pass over the corpus for a few token types of one model.


rule select_pca_tokens:
    input:
        sums=results("{model}/sums.parquet"),
        tokens=results("{model}/tokens.parquet"),
    output:
        selection=results("{model}/pca/selection.csv"),
        components=results("{model}/pca/components.csv"),
    log:
        logs("{model}/pca/select_pca_tokens.log"),
    benchmark:
        benchmarks("{model}/pca/select_pca_tokens.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        pca=canonical(config["figures"]["pca"]),
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/select_pca_tokens.py"


rule collect_pca_points:
    input:
        unpack(extraction_inputs),
        selection=results("{model}/pca/selection.csv"),
        components=results("{model}/pca/components.csv"),
    output:
        points=results("{model}/pca/points/{shard}.parquet"),
    log:
        logs("{model}/pca/points/{shard}.log"),
    benchmark:
        benchmarks("{model}/pca/points/{shard}.tsv")
    conda:
        "../../envs/extract.yaml"
    threads: 1
    resources:
        gpu=extraction_gpus(),
        mem_mb=pca_points_mem_mb,
        runtime=extraction_runtime,
        batch_tokens=BATCH_TOKENS,
    params:
        model=model_entry,
        source=model_source,
        dtype=config["dtype"],
        tokens=canonical(config["tokens"]),
    script:
        "../scripts/collect_pca_points.py"


rule plot_pca:
    input:
        points=pca_points,
        selection=results("{model}/pca/selection.csv"),
        tokens=results("{model}/tokens.parquet"),
    output:
        fig01=report(
            results("{model}/figures/fig01_pca.png"),
            caption="../report/fig01.rst",
            category="{model}",
            subcategory=PCA_FIGURES["fig01_pca"].group,
        ),
        fig01_pdf=results("{model}/figures/fig01_pca.pdf"),
        fig01_data=results("{model}/figures/fig01_pca.csv"),
        fig08=report(
            results("{model}/figures/fig08_selected_tokens.png"),
            caption="../report/fig08.rst",
            category="{model}",
            subcategory=PCA_FIGURES["fig08_selected_tokens"].group,
        ),
        fig08_pdf=results("{model}/figures/fig08_selected_tokens.pdf"),
        fig08_data=results("{model}/figures/fig08_selected_tokens.csv"),
        table2=results("{model}/table2.csv"),
        table2_tex=results("{model}/table2.tex"),
    log:
        logs("{model}/pca/plot_pca.log"),
    benchmark:
        benchmarks("{model}/pca/plot_pca.tsv")
    conda:
        "../../envs/analysis.yaml"
    params:
        captions={name: spec.caption for name, spec in PCA_FIGURES.items()},
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/plot_pca.py"
