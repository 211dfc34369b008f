"""The demo writes what docs/outputs.md says a run writes: every documented file (for each model it is documented
for), no file the docs do not name, and in each table the documented columns, no more (the sums files: with the
layout table's Parquet types). The docs' tables are read as tests/support/documented_outputs.py describes."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq

from support.documented_outputs import (
    TABLE_SUFFIXES,
    column_differences,
    documented_columns,
    file_rows,
    layout_rows,
    matches,
    parquet_type,
    run_files,
    table_columns,
    undocumented_files,
)
from support.workflow_runs import DEMO

RUN = DEMO["run"]
# Documented files the demo does not write: partials and running merges are deleted once merged
# (keep_partials: false), and no entry is an init: archive.
# partials are deleted once merged; no demo model is an archive; the sampling's corpus copies are removed when it ends
NOT_IN_THE_DEMO = (
    "results/{run}/partials/",
    "results/{run}/models/{id}.archive.json",
    "results/{run}/corpus/.ctxvar-",
    "results/{run}/hf_cache.json",  # Hub models only
    "results/{run}/{id}/hf_cache_release.json",
    "results/{run}/{id}/weights_digest.json",  # the demo's models are built in the run, too small to need one
)
PCA_ONLY = ("/pca/", "/fig01_pca.", "/fig08_selected_tokens.", "/table2.")  # figures.pca.model: the first model
WEIGHTED_ONLY = ("/embedding_matrices.csv", "/embedding_projection.parquet", "/emb01_projection.")  # not gaussian


def demo_models(demo) -> list[str]:
    return pd.read_csv(demo / "results" / RUN / "summary" / "models.csv")["model"].tolist()


def models_documented_for(pattern: str, models: list[str]) -> list[str]:
    """The demo models a documented per-model file is written for."""
    if any(part in pattern for part in PCA_ONLY):
        return models[:1]
    if any(part in pattern for part in WEIGHTED_ONLY):
        return [model for model in models if not model.startswith("gaussian")]
    return models


def documented_patterns() -> list[str]:
    return [path for row in file_rows() for path in row.paths]


def test_the_demo_writes_every_documented_file_for_each_model_it_is_documented_for(demo):
    models, missing = demo_models(demo), []
    assert "gaussian-null" in models
    for pattern in documented_patterns():
        found = matches(demo, RUN, pattern)
        if pattern.startswith(NOT_IN_THE_DEMO):
            assert found == {}, f"{pattern} is documented as not written by the demo, which wrote {found}"
        elif "{id}" in pattern:
            expected = models_documented_for(pattern, models)
            missing += [f"{pattern} for {model}" for model in expected if model not in found]
            assert set(found) <= set(expected), f"{pattern} written for {sorted(found)}, documented for {expected}"
        elif not found:
            missing.append(pattern)
    assert missing == [], f"documented in docs/outputs.md, not written by the demo: {missing}"


def test_every_file_the_demo_writes_is_documented(demo):
    assert len(run_files(demo, RUN)) > 100
    assert undocumented_files(demo, RUN, file_rows()) == []


def test_every_csv_json_and_tex_output_has_its_sha256_beside_it(demo):
    """As docs/outputs.md's Integrity paragraph says (a model folder has SHA256SUMS instead)."""
    results = demo / "results" / RUN
    outputs = [p for p in results.rglob("*") if p.suffix in (".csv", ".json", ".tex")]
    outputs = [p for p in outputs if "models" not in p.relative_to(results).parts[:1]]
    assert outputs and [str(p) for p in outputs if not p.with_name(p.name + ".sha256").is_file()] == []
    models = [p for p in (results / "models").iterdir() if p.is_dir()]
    assert models and all((p / "SHA256SUMS").is_file() for p in models)


def test_each_table_holds_the_documented_columns_and_no_other(demo):
    rows, differences, checked = file_rows(), [], 0
    for row in rows:
        tables = [path for path in row.paths if path.endswith(TABLE_SUFFIXES) and "/figures/" not in path]
        for pattern in tables:
            documented = documented_columns(row, rows, pattern)
            for files in matches(demo, RUN, pattern).values():
                for file in files:
                    missing, extra = column_differences(documented, table_columns(demo / file))
                    checked += 1
                    if missing or extra:
                        differences.append(f"{file}: documented, not held: {missing}; held, not documented: {extra}")
    assert checked > 50 and differences == []


def test_the_merged_sums_files_have_the_documented_layout(demo):
    layouts, checked = layout_rows(), 0
    for model in demo_models(demo):
        folder = demo / "results" / RUN / model
        d = json.loads((folder / "run.json").read_text())["d"]
        for name, layout in layouts.items():
            schema = pq.read_schema(folder / name)
            assert [(field.name, field.type) for field in schema] == [
                (column, parquet_type(kind, d)) for column, kind in layout
            ], f"{model}/{name}"
            checked += 1
    assert checked == 5 * len(demo_models(demo))
