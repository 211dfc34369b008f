"""Models: load pretrained ones, build random-init and Gaussian null models, train checkpoints locally; the paper's
input format for a model's tokenizer (token types, ``[bos] + s + [eos]``) and its token-budget batches."""
