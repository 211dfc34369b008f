# embeddings.smk's resources.


def embedding_matrices_mem_mb(wildcards, attempt):
    return estimates.embedding_matrices_mem_mb(
        estimates.model_shape(MODELS[wildcards.model], model_source(wildcards)), attempt
    )
