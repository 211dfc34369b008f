"""ctxvar: exact, sharded statistics of contextualized token embeddings.

Per (layer, token type t) the pipeline keeps the mergeable sums
n_t, Σx and Σ‖x‖², from which Q = mean ‖x‖², M = ‖mean x‖² and V = Q − M
follow exactly (Yamagiwa & Shimodaira, COLING 2025).
"""

__version__ = "0.1.0"

__all__ = ["Results", "load_results", "__version__"]


def __getattr__(name: str):
    """``Results`` and ``load_results`` from :mod:`ctxvar.results` (and the module itself), imported on first use:
    every workflow job imports a ctxvar module, and most never read results with pandas and scipy."""
    if name in ("Results", "load_results", "results"):
        import importlib

        results = importlib.import_module("ctxvar.results")
        return results if name == "results" else getattr(results, name)
    raise AttributeError(f"module 'ctxvar' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "results"})
