"""How much device memory the sums of one pass may take: what is left after the model and one batch.

On a GPU the budget is measured, not assumed: the free memory once the model is
loaded, less one forward pass's activations (:func:`activation_bytes`), the
batch's own buffers (:func:`ctxvar.extraction.accumulator.batch_bytes`), the
shard's padded batches and a reserve for the allocator's fragmentation and the
CUDA libraries' workspaces. :func:`ctxvar.extraction.accumulator.layer_groups`
then fits as many layers' sums per pass as the budget holds. On a CPU there is
no cap: the sums live in host memory like everything else.
"""

from __future__ import annotations

RESERVE_FRACTION = 0.05  # of the device's total memory, kept free
RESERVE_MIN_BYTES = 1 << 30


def activation_bytes(config, n_hidden: int, d: int, batch_tokens: int, width: int, element_bytes: int) -> int:
    """Upper estimate of one forward pass's activations, in bytes, for a padded batch of ``batch_tokens``
    tokens in rows of ``width``, with all hidden states kept (``output_hidden_states``):

        element_bytes · N · (n_hidden · d          the hidden states returned
                             + 6 · d               one layer's q, k, v, attention output, residual, norm
                             + 4 · ffn             its MLP: up to four intermediates at once (GPT-2's
                                                   tanh GELU is a chain of elementwise ops; a gated
                                                   MLP holds gate, up, activation and product)
                             + 2 · heads · width)  eager attention's scores and probabilities

    ``ffn`` and ``heads`` are read from the model's config (``intermediate_size``,
    ``n_inner``, ``ffn_dim``; ``num_attention_heads``, ``n_head``), else 4·d and d/64.
    It holds for the forward pass as :func:`ctxvar.extraction.extract.run_batches` runs
    it: no KV cache, the previous batch's outputs freed (tested against the measured
    peak of encoder and decoder proxies).
    """
    ffn = _first(config, ("intermediate_size", "n_inner", "ffn_dim"), 4 * d)
    heads = _first(config, ("num_attention_heads", "n_head"), max(1, d // 64))
    return element_bytes * batch_tokens * (n_hidden * d + 6 * d + 4 * ffn + 2 * heads * width)


def _first(config, names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return default


def state_budget_bytes(free: int, total: int, *others: int) -> int:
    """Device bytes left for the sums: ``free`` memory less everything else one pass needs (``others``: the
    activations, the batch's buffers, the padded batches) and :func:`reserve_bytes` of ``total``."""
    return free - sum(others) - reserve_bytes(total)


def reserve_bytes(total: int) -> int:
    """Device memory kept free: max(5 % of ``total``, 1 GiB)."""
    return max(int(RESERVE_FRACTION * total), RESERVE_MIN_BYTES)
