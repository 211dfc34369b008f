"""Corpus: load a source, sample it as the paper does, decode and filter sentences, split into shards."""
