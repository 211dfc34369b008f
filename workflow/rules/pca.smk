# Fig. 1, Fig. 8, Table 2: a few token types of one model, chosen before extraction; the extraction jobs collect
# their points in their own pass (extract.smk), projected once the merged sums give the components.


rule select_pca_types:  # the selection needs only n_t: the shards, tokenized as the extraction jobs tokenize them
    input:
        unpack(model_inputs),
        shards=expand(results("corpus/shards/{{model}}/{shard}.parquet"), shard=SHARDS),
    output:
        types=results("{model}/pca/types.csv"),
    log:
        logs("{model}/pca/select_pca_types.log"),
    benchmark:
        benchmarks("{model}/pca/select_pca_types.tsv")
    conda:
        "../../envs/extract.yaml"
    params:
        model=model_entry,
        source=model_source,
        tokens=canonical(config["tokens"]),
        pca=canonical(config["figures"]["pca"]),
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/select_pca_types.py"


rule select_pca_tokens:
    input:
        sums=results("{model}/sums.parquet"),
        tokens=results("{model}/tokens.parquet"),
        types=results("{model}/pca/types.csv"),
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


rule merge_pca_points:  # the shards' points are temporary; the figures can be redrawn from these
    input:
        points=pca_points,
    output:
        points=results("{model}/pca/points.parquet"),
    log:
        logs("{model}/pca/merge_pca_points.log"),
    benchmark:
        benchmarks("{model}/pca/merge_pca_points.tsv")
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/merge_pca_points.py"


rule plot_pca:
    input:
        points=results("{model}/pca/points.parquet"),
        selection=results("{model}/pca/selection.csv"),
        components=results("{model}/pca/components.csv"),
        tokens=results("{model}/tokens.parquet"),
    output:
        fig01=report(
            results("{model}/figures/fig01_pca.png"),
            **report_entry(PCA, figure_named("fig01_pca")),
        ),
        fig01_pdf=results("{model}/figures/fig01_pca.pdf"),
        fig01_data=results("{model}/figures/fig01_pca.csv"),
        fig08=report(
            results("{model}/figures/fig08_selected_tokens.png"),
            **report_entry(PCA, figure_named("fig08_selected_tokens")),
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
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/plot_pca.py"
