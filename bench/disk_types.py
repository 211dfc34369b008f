"""Token types against tokens, and the disk of a slice shaped as Razzhigaev et al.'s run, against the cost plan's
estimates; writes disk_types.csv, disk_estimate.csv and disk_estimate.md.

    python -m bench disk_types --fit-only    # the fit (≈ 1 min)
    python -m bench disk_types               # the fit and the slice (≈ 10 min on 2 CPU cores)

The fit: two real tokenizers, all-MiniLM-L6-v2's WordPiece (uncased, bert-base-uncased's vocabulary) and
SmolLM2-135M's byte-level BPE (both from the packages config/encoder_vs_decoder.yaml names), over the prose of the
Python documentation (ctxvar.corpus.python_docs) in a seeded random order: the types (ctxvar's keys,
``tokens.merge_markers: true``) among the first N tokens, N doubling from 1,000, in disk_types.csv; Heaps' law
U = K · N^β fitted by least squares to log U against log N over both gives ctxvar.run.disk.TOKEN_TYPES, the types
the cost plan takes for a corpus not sampled yet (a test checks it against this CSV).

The slice: config/razzhigaev_2024.yaml's corpus settings and geometry (128 pieces of 512 characters drawn by
python-random with seed 0, one shard, the TwoNN sample of 4 × 4,096 points, Σxxᵀ), read from another text than the
fit's (the standard library's docstrings, one UTF-8 file read as a local enwik8), with the same two models
standing in for its encoders and decoders. The cost plan of the slice is taken before anything runs (the types by
the fit) and once the corpus is sampled (by the sample's own words: ctxvar.run.disk.sample_type_growth); then the
workflow runs until every model's merged sums (and Fig. 1's points) are written, the size of the run folder
sampled every 0.2 s (its models/ left out), and each model's merged files and types are measured:
disk_estimate.csv, one row per model and one for the peak, with each estimate's ratio to the measured bytes.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml
from peak_disk import PeakSampler

from harness import Options, command, markdown, write_results

OPTIONS = Options(out="disk_types.csv, disk_estimate.csv and disk_estimate.md", work="the slice's run")

REPO = Path(__file__).resolve().parents[1]
STANDIN = yaml.safe_load((REPO / "config" / "encoder_vs_decoder.yaml").read_text())["models"]  # MiniLM, SmolLM2
FIRST_TOKENS = 1000


def tokenizers(work: Path) -> dict:
    """``{model id: (tokenizer, its marker)}`` of the two stand-in models, read from their packages: MiniLM's
    tokenizer files from its zip, SmolLM2's from its GGUF file."""
    import zipfile

    from transformers import AutoTokenizer

    from ctxvar.models.archive import archive_path
    from ctxvar.models.tokens import word_marker

    loaded = {}
    for entry in STANDIN:
        path = archive_path(entry)
        if entry.get("gguf"):
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        else:
            folder = work / entry["id"]
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    if name.startswith(("tokenizer", "special_tokens", "config.json")):
                        archive.extract(name, folder)
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
        loaded[entry["id"]] = (tokenizer, word_marker(tokenizer))
    return loaded


def type_curve(tokenizer, marker, texts: list[str]) -> list[dict]:
    """Types (ctxvar's keys) among the first N tokens of ``texts``, N doubling from :data:`FIRST_TOKENS`, and all."""
    from ctxvar.models.tokens import type_key

    ids = [i for text in texts for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    keys = [type_key(token, marker) for token in tokenizer.convert_ids_to_tokens(ids)]
    sizes = [FIRST_TOKENS * 2**i for i in range(32) if FIRST_TOKENS * 2**i < len(keys)] + [len(keys)]
    return [{"tokens": n, "types": len(set(keys[:n]))} for n in sizes]


def fit(curves: pd.DataFrame) -> tuple[float, float]:
    """``(K, β)`` of U = K · N^β, least squares on log U against log N over every row, to 3 significant digits."""
    beta, log_k = np.polyfit(np.log(curves.tokens), np.log(curves.types), 1)
    return float(f"{np.exp(log_k):.3g}"), float(f"{beta:.3g}")


def measure_fit(work: Path) -> pd.DataFrame:
    """disk_types.csv: each tokenizer's curve over the Python documentation's sentences in a seeded order."""
    from ctxvar.corpus.python_docs import python_docs_sentences

    sentences = list(python_docs_sentences())
    order = np.random.RandomState(0).permutation(len(sentences))
    rows = []
    for model, (tokenizer, marker) in tokenizers(work).items():
        for point in type_curve(tokenizer, marker, [sentences[i] for i in order]):
            rows.append({"tokenizer": model, "corpus": "python-docs", **point})
    return pd.DataFrame(rows)


def docstrings_text() -> str:
    """The standard library's docstrings (modules, classes, functions; its tests left out), in the order of the
    files' paths, one paragraph each: the slice's text, technical English other than the fit's."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).parts
        if any(part in ("test", "tests", "idlelib", "site-packages", "lib2to3") for part in relative):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                if text := ast.get_docstring(node):
                    parts.append(text)
    return "\n\n".join(parts)


def slice_config(text_path: Path) -> dict:
    """config/razzhigaev_2024.yaml with the stand-in models, its corpus read from ``text_path``."""
    config = yaml.safe_load((REPO / "config" / "razzhigaev_2024.yaml").read_text())
    config.update(run="disk_slice", models=STANDIN, device="cpu")
    config["corpus"]["path"] = str(text_path)
    return config


def model_plans(config_path: Path, run_folder: Path) -> dict:
    """``{model: (tokens, types estimated, merged estimate, merged bound, partials estimate, partials bound)}`` of
    the cost plan, and ``"peak"``: (its peak estimate, its bound)."""
    from ctxvar.run.cost import checked_config, plan

    config, _ = checked_config([str(config_path)])
    planned = plan(config, run_folder)
    found = {
        cost.model: (cost.tokens, *cost.sums_estimate, *cost.sums) for cost in planned.models if cost.sums is not None
    }
    estimates, bounds = [c.sums_estimate for c in planned.models], [c.sums for c in planned.models]
    found["peak"] = (
        sum(m for m, _ in estimates) + max(p for _, p in estimates),
        sum(m for m, _ in bounds) + max(p for _, p in bounds),
    )
    return found


def snakemake(config_path: Path, workdir: Path, *targets: str) -> None:
    """The workflow in ``workdir`` with ``config_path``, as far as ``targets`` (rule names after --until, or files)."""
    call = ["snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "--cores", "2"]
    finished = subprocess.run([*call, *targets, "--configfile", str(config_path)], capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(targets)} failed:\n{finished.stderr[-3000:]}")


def measured_model(folder: Path) -> dict:
    """A model's merged files (sums, tokens.parquet, Fig. 1's points) in bytes, its tokens and its types."""
    files = [*folder.glob("sums*.parquet"), folder / "tokens.parquet", *folder.glob("pca/points.parquet")]
    tokens_table = pq.read_table(folder / "tokens.parquet", columns=["layer", "n"])
    run = json.loads((folder / "run.json").read_text())
    layers = len(set(tokens_table.column("layer").to_pylist()))
    return {
        "merged_bytes": sum(path.stat().st_size for path in files),
        "types": tokens_table.num_rows // layers,
        "tokens": run.get("n_tokens") or int(sum(tokens_table.column("n").to_pylist()) // layers),
    }


def measure_slice(work: Path) -> pd.DataFrame:
    """disk_estimate.csv (module docstring)."""
    text_path = work / "docstrings.txt"
    text_path.write_text(docstrings_text(), encoding="utf-8")
    config_path = work / "disk_slice.yaml"
    config_path.write_text(yaml.safe_dump(slice_config(text_path)))
    run_folder = work / "results" / "disk_slice"
    os.chdir(work)  # the plan's paths, as the workflow's, are relative to its working directory
    before = model_plans(config_path, Path("results/disk_slice"))
    snakemake(config_path, work, "--until", "sample_corpus")
    after = model_plans(config_path, Path("results/disk_slice"))
    pca = STANDIN[0]["id"]  # figures.pca.model: null, the first model
    targets = [f"results/disk_slice/{entry['id']}/sums.parquet" for entry in STANDIN]
    sampler = PeakSampler(run_folder)
    sampler.start()
    try:
        snakemake(config_path, work, *targets, f"results/disk_slice/{pca}/pca/points.parquet")
    finally:
        sampler.stopped.set()
        sampler.join()
    rows = []
    for entry in STANDIN:
        model = entry["id"]
        got = measured_model(run_folder / model)
        tokens, merged_before, _, bound, _ = before[model]
        _, merged_after, _, _, _ = after[model]
        rows.append(
            {
                "what": model,
                "tokens_planned": tokens,
                "tokens_measured": got["tokens"],
                "types_measured": got["types"],
                "bytes_measured": got["merged_bytes"],
                "estimate_before_sampling": merged_before,
                "estimate_after_sampling": merged_after,
                "bound": bound,
            }
        )
    rows.append(
        {
            "what": "peak (merged sums and one model's partials; measured: the run folder less models/ and corpus/)",
            "bytes_measured": sampler.peak["total"] - folder_bytes(run_folder / "corpus"),
            "estimate_before_sampling": before["peak"][0],
            "estimate_after_sampling": after["peak"][0],
            "bound": before["peak"][1],
        }
    )
    table = pd.DataFrame(rows)
    for column in ("estimate_before_sampling", "estimate_after_sampling", "bound"):
        table[f"{column}_over_measured"] = (table[column] / table.bytes_measured).round(2)
    return table


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its counts as whole numbers with thousands separators, ratios as they are, gaps empty."""
    shown = table.astype(object)
    for column in table.columns:
        if column.endswith(("tokens_planned", "tokens_measured", "types_measured", "bytes_measured")):
            shown[column] = [f"{value:,.0f}" if pd.notna(value) else "" for value in table[column]]
    return shown


def report(curves: pd.DataFrame, sliced: pd.DataFrame | None, seconds: float, argv: list[str]) -> str:
    k, beta = fit(curves)
    lines = [
        "# Token types, and the disk of a Razzhigaev-shaped slice against the cost plan",
        "",
        f"`{command(__file__, *argv)}`: {time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}; ran "
        f"{seconds:.0f} s.",
        "",
        "## Types among the first N tokens (disk_types.csv)",
        "",
        markdown(curves.astype({"tokens": int, "types": int}).assign(tokens=curves.tokens.map("{:,}".format))),
        "",
        f"Heaps' law over both: U = {k} · N^{beta} (ctxvar.run.disk.TOKEN_TYPES).",
    ]
    if sliced is not None:
        lines += [
            "",
            "## The slice: merged sums per model, and the run's peak (disk_estimate.csv)",
            "",
            markdown(readable(sliced.drop(columns=["estimate_before_sampling", "estimate_after_sampling", "bound"]))),
            "",
            "Bytes measured against the plan's estimate before the corpus is sampled (types by the fit), after it "
            "is sampled (types by the sample's own words) and its bound (every token a type of its own).",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = OPTIONS.parser(__doc__)
    parser.add_argument("--fit-only", action="store_true", help="the fit alone, not the slice")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = args.out.resolve()
    with tempfile.TemporaryDirectory(prefix="ctxvar-disk-types-") as temporary:
        work = (args.work or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        curves = measure_fit(work)
        sliced = None if args.fit_only else measure_slice(work)
    files = {"disk_types.csv": curves}
    if sliced is not None:  # the report holds both: --fit-only leaves a committed one as it is
        files["disk_estimate.csv"] = sliced
        files["disk_estimate.md"] = report(curves, sliced, time.perf_counter() - start, argv or sys.argv[1:])
    write_results(out, files)
    print("Heaps' law fitted: K, β =", fit(curves))


if __name__ == "__main__":
    main()
