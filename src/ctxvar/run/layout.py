"""The names of a run's result files: a results folder written under older names is refused with what to do.

A model's merged sums are ``sums.parquet`` and, with the geometry switches, ``sums.moments.parquet``,
``sums.sample.parquet``, ``sums.words.parquet`` and ``sums.sentences.parquet``. Older versions named them
``stats*.parquet``; the workflow would not see them and would merge the model again beside them, so it stops
first. Renaming them does not bring such a folder up to date: those versions recorded no corpus sample
(``corpus_hash``) in ``corpus/counts.json`` and ``run.json``, and Snakemake, which holds no record of a renamed
file, re-runs neither the sampling nor the merge, only the jobs whose inputs were named ``stats*`` and the jobs
after them (the tables, Fig. 1's projection, the figures); :func:`ctxvar.load_results` then refuses the folder.
So the remedy is a fresh run folder: every file made again.
"""

from __future__ import annotations

import glob
import os

from ctxvar.errors import IntegrityError

MERGED_SUMS = "sums"  # {model}/sums.parquet, {model}/sums.{kind}.parquet
OLD_MERGED_SUMS = "stats"


def old_sums_files(run_folder, model_ids) -> list[str]:
    """The merged sums files of the models ``model_ids`` in ``run_folder`` that carry the older name, sorted."""
    found = []
    for model in model_ids:
        pattern = os.path.join(glob.escape(os.path.join(run_folder, model)), f"{OLD_MERGED_SUMS}*.parquet")
        found += sorted(glob.glob(pattern))
    return found


def current_name(path) -> str:
    """The current name of a merged sums file named ``stats*.parquet``: ``sums*.parquet`` in the same folder."""
    folder, name = os.path.split(path)
    return os.path.join(folder, MERGED_SUMS + name[len(OLD_MERGED_SUMS) :])


def check_results_layout(run_folder, model_ids) -> None:
    """Raise :class:`IntegrityError` (one line: the first such file, and what to do) if a model's merged sums in
    ``run_folder`` carry the older name ``stats*.parquet``: a fresh run folder (renaming them does not bring the
    folder up to date, see the module's docstring), or, where the current name is taken too (a later version
    merged the model again), deleting them."""
    old = old_sums_files(run_folder, model_ids)
    both = [path for path in old if os.path.lexists(current_name(path))]
    if both:  # a rename would write over the merged sums under the current name
        others = f" and {len(both) - 1} more in {run_folder}" if len(both) > 1 else ""
        raise IntegrityError(
            f"{both[0]}{others}: merged sums under the older name {OLD_MERGED_SUMS}*.parquet beside the same file "
            f"under the current name, {os.path.basename(current_name(both[0]))}, which the workflow reads; delete "
            f"the {OLD_MERGED_SUMS}*.parquet files (renaming them would write over the current ones)"
        )
    if old:
        others = f" and {len(old) - 1} more in {run_folder}" if len(old) > 1 else ""
        raise IntegrityError(
            f"{old[0]}{others}: merged sums are named {MERGED_SUMS}*.parquet now, not {OLD_MERGED_SUMS}*.parquet, "
            "and these come from an older ctxvar that did not record their corpus sample (renamed, load_results "
            f"still refuses them); move {run_folder} aside or delete it, and the run makes every file again"
        )
