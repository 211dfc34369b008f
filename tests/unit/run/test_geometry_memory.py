"""An extraction job's memory request counts the geometry sums it holds: the sample grows with
geometry.batches (4 · L · B · k · d bytes), and Σ x/‖x‖ per type (cosine) and per raw token id (ethayarajh)
each match the core sums. Left out, the request of a job with geometry.batches: 64 fell far short of the
sample alone, which a cluster's memory limit enforces."""

from __future__ import annotations

from ctxvar.run import resources

BERT_BASE = resources.ModelShape(13, 768, 30_522)
TOKENS = 1_550_000
DEFAULTS = {"covariance": True, "cosine": True, "ethayarajh": False, "twonn": True, "sample_size": 4096, "batches": 1}


def test_the_request_covers_the_sample_of_every_batch():
    heavy = {**DEFAULTS, "batches": 64, "ethayarajh": True}
    sample = 4 * 13 * 64 * 4096 * 768
    assert resources.extraction_mem_mb(TOKENS, BERT_BASE, geometry=heavy) * 2**20 > 1.5 * sample
    assert (
        resources.geometry_host_bytes(TOKENS, BERT_BASE, heavy)
        - resources.geometry_host_bytes(TOKENS, BERT_BASE, {**heavy, "batches": 1})
        == 4 * 13 * 63 * 4096 * 768
    )


def test_each_switch_adds_its_sums_and_the_sample_stops_at_the_tokens():
    off = {key: False for key in ("covariance", "cosine", "ethayarajh", "twonn")}
    assert resources.geometry_host_bytes(TOKENS, BERT_BASE, off) == 0
    per_type = 8 * 30_522 * 13 * 768
    assert resources.geometry_host_bytes(TOKENS, BERT_BASE, {**off, "cosine": True}) == per_type
    assert resources.geometry_host_bytes(TOKENS, BERT_BASE, {**off, "ethayarajh": True}) == per_type
    assert resources.geometry_host_bytes(TOKENS, BERT_BASE, {**off, "covariance": True}) == 8 * 13 * 768**2
    few = resources.geometry_host_bytes(1000, BERT_BASE, {**DEFAULTS, "cosine": False, "covariance": False})
    assert few == 4 * 13 * 1000 * 768
    assert resources.extraction_mem_mb(TOKENS, BERT_BASE) < resources.extraction_mem_mb(
        TOKENS, BERT_BASE, geometry=DEFAULTS
    )
