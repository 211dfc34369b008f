"""ctxvar: exact, sharded statistics of contextualized token embeddings.

Per (layer, token type t) the pipeline keeps the mergeable sums
n_t, Σx and Σ‖x‖², from which Q = mean ‖x‖², M = ‖mean x‖² and V = Q − M
follow exactly (Yamagiwa & Shimodaira, COLING 2025).
"""

__version__ = "0.1.0"

from ctxvar.results import Results, load_results

__all__ = ["Results", "load_results", "__version__"]
