"""Which sums a table was computed from, and the check that tables read together come from the same sums.

Every sums file carries ``config_hash``: the hash of the extraction settings and of the corpus's and the
model's inputs (:func:`ctxvar.config.hashes.extraction_config_hash`). The per-model tables derived from them
(``layers.csv``, ``geometry.csv``) carry it as a column and ``run.json`` as a key, so that a reader that
combines them (the summary, :func:`ctxvar.load_results`) can refuse a mixture: files of one model made
from different sums, as a run stopped half-way (``--until``, a kill, a failed job) leaves them.
"""

from __future__ import annotations

import pandas as pd

from ctxvar.errors import StatisticsError

SUMS_COLUMN = "config_hash"
FINISH = (
    "finish the run (the same snakemake command, without --until, once any failed job is fixed): Snakemake remakes "
    "the outdated files from the current sums"
)


def table_sums(table: pd.DataFrame, path, model: str | None = None) -> set[str]:
    """The sums identities the rows of ``table`` name (those of ``model`` in a summary table with a ``model``
    column); refused when the column is absent."""
    if SUMS_COLUMN not in table.columns:
        raise StatisticsError(f"{path} names no {SUMS_COLUMN} (written by an older ctxvar); {FINISH}")
    rows = table if model is None else table[table["model"].astype(str) == model]
    return set(rows[SUMS_COLUMN].fillna("").astype(str))


def check_same_sums(model: str, sources: dict[str, set[str]]) -> None:
    """Raise :class:`StatisticsError` (one line naming the files) unless every file in ``sources`` (path → the
    sums identities it names) names one and the same."""
    if len(set().union(*sources.values())) <= 1:
        return
    groups: dict[str, list[str]] = {}
    for path, ids in sources.items():
        for identity in sorted(ids):
            groups.setdefault(identity, []).append(str(path))
    described = "; ".join(
        f"{', '.join(paths)} from sums {identity[:16] or '(none)'}" for identity, paths in groups.items()
    )
    raise StatisticsError(f"model {model!r}: its files come from different sums ({described}); {FINISH}")
