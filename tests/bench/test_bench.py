"""The benchmark runs in --quick mode and reports every measurement (its numbers are not checked: not a timed test)."""

from __future__ import annotations

import functools
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from ctxvar.models.batching import BATCH_TOKENS

from support.bench_scripts import run_bench, run_bench_main
from support.tiny_models import random_model
from support.workflow_runs import REPO, SMALL_DEMO

# The sizes of the GPU benchmark's tiny models.
BENCH_SHAPE = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32}


def test_quick_benchmark_reports_every_step(tmp_path):
    run_bench_main("extraction_and_merge.py", tmp_path, "--quick")
    results = pd.read_csv(tmp_path / "results.csv")
    extraction = results[results["table"] == "extraction"]
    assert set(extraction["step"]) == {
        "(a) forward",
        "(b) extraction",
        "(b) extraction + geometry",
        "(c) reference loop",
        "(e) forward bf16",
        "(e) extraction bf16",
    }
    assert set(extraction["model"]) == {"bert-base"} and (extraction["tokens_per_s"] > 0).all()
    assert (extraction["round"] == 0).all()  # --quick: one round; every ratio is taken within a round
    assert extraction["overhead_b_over_a"].notna().sum() == 3 and extraction["speedup_c_over_b"].notna().sum() == 1
    # the baseline is a real implementation: its float32 running means give our Q and V
    assert (extraction[["Q_max_diff_over_Q_reference", "V_max_diff_over_Q_reference"]].dropna() < 1e-3).all().all()
    merge = results[results["table"] == "merge"]
    assert (
        list(merge["shards"]) == [1, 2, 4, 8] and (merge[["merge_peak_rss_mb", "layers_peak_rss_mb"]] > 0).all().all()
    )
    precision = results[results["table"] == "precision"]
    assert (precision["Q_median_rel_error"] < 0.05).all()
    assert "GPU rows: not measured" in (tmp_path / "report.md").read_text()


def test_quick_kernel_benchmark_compares_approaches_that_agree(tmp_path):
    run_bench("kernel.py", tmp_path, "--quick")
    runs = pd.read_csv(tmp_path / "kernel.csv")
    assert list(runs["approach"]) == [
        "(i) ctxvar",
        "(ii) reference loop",
        "(iii) pandas groupby",
        "(i)+g ctxvar with geometry",
    ]
    assert (runs["tokens_per_s"] > 0).all() and (runs["tokens"] == 20_000).all()
    # all three are real implementations of the same statistics: float32 running means (ii), float64 (iii)
    assert (runs.loc[1, ["max_diff_over_Q_Q", "max_diff_over_Q_M", "max_diff_over_Q_V"]] < 1e-4).all()
    assert (runs.loc[2, ["max_diff_over_Q_Q", "max_diff_over_Q_M", "max_diff_over_Q_V"]] < 1e-12).all()
    assert (runs.loc[3, ["max_diff_over_Q_Q", "max_diff_over_Q_M", "max_diff_over_Q_V"]] == 0).all()
    assert (runs.loc[[0, 3], ["allocate_seconds", "add_seconds", "finalize_seconds"]] > 0).all().all()
    assert runs.loc[[1, 2], "add_seconds"].isna().all()
    assert "(ii) reference loop / (i) once its sums are allocated" in (tmp_path / "kernel.md").read_text()


def test_peak_disk_benchmark_measures_the_peak_against_the_merged_sums(tmp_path):
    """bench/peak_disk.py on the demo's smallest shape: its first model alone (d = 64) on a sixth of its corpus
    (``workflow_runs.SMALL_DEMO``), 2 shards, each run ending with its merged sums (the peak is the partials and
    running merges before them; the tables and figures after them are small and add only time here)."""
    config = tmp_path / "one-model.yaml"
    config.write_text(yaml.safe_dump(SMALL_DEMO))
    options = ("--config", str(config), "--shards", "2", "--repeats", "1", "--until", "merge_statistics")
    run_bench("peak_disk.py", tmp_path, *options)
    runs, models = pd.read_csv(tmp_path / "peak_disk.csv"), pd.read_csv(tmp_path / "peak_disk_models.csv")
    assert set(models["model"]) == {SMALL_DEMO["models"][0]["id"]}
    assert list(runs["incremental_merge"]) == [True, False]
    # the partials exist before their merge, so the peak holds more than the merged sums
    assert (runs["peak_bytes"] > runs["merged_bytes"]).all() and (runs["partials_bytes_at_peak"] > 0).all()
    assert runs["merged_bytes"].nunique() == 1  # the same sums either way
    assert runs.loc[1, "running_bytes_at_peak"] == 0  # no running merge without incremental_merge
    assert (models["stats_bytes_per_type_layer"] > 8 * SMALL_DEMO["models"][0]["hidden_size"]).all()  # Σx: d float64
    assert "--until merge_statistics" in (tmp_path / "peak_disk.md").read_text()


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def bench_corpus(request, tmp_path_factory):
    """The GPU benchmark's corpus (bench/gpu_models.py, 60,000 sentences) and a tiny model of ``arch`` with a
    tokenizer trained on it, as the benchmark builds its models."""
    from gpu_models import MODES
    from synthetic import corpus_texts, write_corpus

    folder = tmp_path_factory.mktemp(f"bench-{request.param}")
    write_corpus(folder, MODES["gpu"]["sentences"])
    texts = corpus_texts(folder)
    random_model(folder / "model", request.param, texts, seed=0, vocab_size=8000, **BENCH_SHAPE)
    return folder


def shard_batches(folder, n_shards: int, n_sentences: int | None = None) -> list:
    """The workflow's split of the first ``n_sentences`` into ``n_shards``, and per shard (token lengths, the batches
    extraction runs over it at the default token budget)."""
    import pyarrow.parquet as pq

    from ctxvar.corpus.shards import split_corpus
    from ctxvar.extraction.shard import chunk_batches
    from ctxvar.files.parquet import read_table, write_table

    sentences = folder / f"sentences-{n_sentences}.parquet"
    write_table(pq.read_table(folder / "sentences.parquet").slice(0, n_sentences), sentences)
    shards = [folder / f"shard-{n_sentences}-{n_shards}-{i}.parquet" for i in range(n_shards)]
    split_corpus(sentences, shards, {"id": "m"}, str(folder / "model"))
    batched = []
    for shard in shards:
        columns = read_table(shard, columns=["chunk", "sentence_id"])
        chunk, sentence_id = columns.column("chunk").to_numpy(), columns.column("sentence_id").to_numpy()
        lengths = sentence_lengths(folder)[sentence_id]  # a sentence's tokens do not depend on its shard
        batched.append((lengths, chunk_batches(lengths, chunk, BATCH_TOKENS)))
    return batched


@functools.cache
def sentence_lengths(folder) -> np.ndarray:
    """Token lengths of the benchmark corpus's sentences under its model's tokenizer, by sentence id."""
    from transformers import AutoTokenizer

    from ctxvar.models.tokens import encode

    table = pd.read_parquet(folder / "sentences.parquet", columns=["sentence_id", "text"])
    lengths = np.zeros(int(table["sentence_id"].max()) + 1, dtype=np.int64)
    tokenizer = AutoTokenizer.from_pretrained(folder / "model")
    lengths[table["sentence_id"].to_numpy()] = encode(tokenizer, table["text"].tolist()).lengths
    return lengths


def padded_tokens(lengths, batches) -> int:
    return sum(len(rows) * int(lengths[rows].max()) for rows in batches)


@pytest.mark.parametrize("n_shards", [1, 8])
def test_padding_is_under_5_percent_on_the_benchmark_corpus_at_the_default_settings(bench_corpus, n_shards):
    """All 60,000 sentences, split as the workflow splits them, batched as extraction batches each shard."""
    batched = shard_batches(bench_corpus, n_shards)
    padding = 1 - sum(int(lengths.sum()) for lengths, _ in batched) / sum(padded_tokens(*shard) for shard in batched)
    assert 0 < padding < 0.05


def test_eight_shards_of_50000_sentences_balance_within_30_percent(bench_corpus):
    """The largest shard's padded tokens (what its forward passes cost) against the mean shard's."""
    padded = np.array([padded_tokens(*shard) for shard in shard_batches(bench_corpus, 8, 50_000)])
    assert padded.min() > 0 and padded.max() <= 1.3 * padded.mean(), padded


def test_gpu_benchmark_writes_every_column_the_report_promises(tmp_path):
    """bench/gpu.py --quick on tiny shapes, without --device (on a CPU here), in two parts as on a machine whose
    commands stop at 10 minutes: one row per model, dtype and step, sharded models; (a) and (b) warm up first,
    and the load row is (b)'s loading, timed in (b)'s process. bench/profile_job.py then profiles a job of each
    on the models the benchmark built."""
    import gpu
    import gpu_models
    from forward_variants import VARIANTS

    shutil.copy(REPO / "bench" / "results" / "gpu.csv", tmp_path)  # another GPU's rows: --models does not mix them
    with pytest.raises(SystemExit, match="holds rows of another GPU, torch version or mode"):  # before it builds
        gpu.main(["--device", "cpu", "--quick", "--models", "bert-base", "--out", str(tmp_path)])
    (tmp_path / "gpu.csv").unlink()
    run_bench_main("gpu.py", tmp_path, "--quick", "--models", "bert-base")
    # the bert-base rows stay; the 13B and 70B shapes run layer-major, streamed
    run_bench_main("gpu.py", tmp_path, "--quick", "--models", "llama-2-7b", "llama-2-13b", "llama-2-70b")
    table = pd.read_csv(tmp_path / "gpu.csv")
    streamed = table[table["model"].isin(["llama-2-13b", "llama-2-70b"])].set_index(["model", "step"])
    table = table[~table["model"].isin(["llama-2-13b", "llama-2-70b"])]
    required = ["model", "dtype", "step", "tokens", "batches", "tokens_per_s", "overhead_b_over_a", "padding_fraction"]
    assert set(required + ["peak_host_mb", "peak_gpu_mb", "gpu_name", "mfu", "read_seconds"]) <= set(table.columns)
    assert set(table["step"]) == {"load", "(a) forward", "(b) extraction", "(b) extraction + geometry"}
    assert set(zip(table["model"], table["dtype"])) == {("bert-base", "float32"), ("llama-2-7b", "bfloat16")}
    jobs = table[table["step"].str.startswith("(b)")]
    assert (jobs["overhead_b_over_a"] > 0).all() and (jobs["tokens"] > 0).all()
    parts = jobs[["prepare_seconds", "batches_seconds", "hash_wait_seconds"]]
    assert (parts >= 0).all().all() and (parts.sum(axis=1) <= jobs["seconds"]).all()
    assert (jobs["batches_seconds"] > 0).all()
    timed = table[table["step"] != "load"]
    assert (timed["warm_up_seconds"] > 0).all() and (timed["batches"] > 0).all()
    for _, rows in table.groupby(["model", "dtype"]):
        loads = rows.set_index("step")
        assert loads.loc["load", "seconds"] == loads.loc["(b) extraction", "load_seconds"]
    assert list((tmp_path / "gpu-work" / "llama-2-7b").glob("model-0000*-of-0000*.safetensors"))
    modes = gpu_models.MODES
    specs = {quick: gpu_models.model_specs(quick, modes["quick" if quick else "gpu"]["shard_size"]) for quick in (0, 1)}
    for name in ("bert-base", "llama-2-7b"):  # a full run builds its own models where a quick run saved these
        assert gpu_models.saved(tmp_path / "gpu-work" / name, specs[1][name])
        assert not gpu_models.saved(tmp_path / "gpu-work" / name, specs[0][name])
    report = (tmp_path / "gpu.md").read_text()
    assert "| llama-2-7b " in report and "| bert-base " in report
    assert "The rows of bert-base float32 are from an earlier run of the same GPU, torch and mode." in report

    assert streamed.loc[("llama-2-13b", "load"), "weights"] == "streamed from the files"
    assert streamed.loc[("llama-2-13b", "load"), "read_seconds"] > 0
    assert streamed.loc[("llama-2-70b", "load"), "weights"] == "generated"
    assert not list((tmp_path / "gpu-work" / "llama-2-70b").glob("*.safetensors"))  # no checkpoint: generated
    for name in ("llama-2-13b", "llama-2-70b"):
        job = streamed.loc[(name, "(b) extraction + geometry")]
        assert job["tokens"] > 0 and job["batches"] > 0 and job["tokens_per_s"] > 0

    saved = {path: path.stat().st_mtime_ns for path in (tmp_path / "gpu-work").rglob("*.safetensors")}
    run_bench_main("profile_job.py", tmp_path, "--quick")  # on the models gpu.py saved: none is built again
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "gpu-work").rglob("*.safetensors")} == saved
    profile = pd.read_csv(tmp_path / "profile.csv")
    assert list(profile["model"]) == ["bert-base", "llama-2-7b"]
    assert (profile[["seconds", "load_seconds", "batches_seconds", "tokens", "batches"]] > 0).all().all()
    assert profile["gpu_busy_fraction"].isna().all()  # no CUDA activity on a CPU
    assert report_has_tables(tmp_path / "profile.md")

    run_bench_main("forward_variants.py", tmp_path, "--quick")  # on the same models again
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "gpu-work").rglob("*.safetensors")} == saved
    variants = pd.read_csv(tmp_path / "forward_variants.csv")
    assert list(zip(variants["model"], variants["kernels"], variants["width_multiple"])) == [
        (model, kernels, width) for model in ("bert-base", "llama-2-7b") for kernels, width in VARIANTS
    ]
    assert (variants["padded_tokens"] >= variants["tokens"]).all() and (variants["tokens_per_s"] > 0).all()
    assert (variants["max_relative_difference"] < 1e-4).all()


def test_gpu_benchmark_leaves_what_it_did_not_make(tmp_path, capsys):
    """A folder under --work that the benchmark did not build is not removed, --quick does not write into
    bench/results, and an unreadable gpu.csv is not merged into: each stops the run with one line."""
    import gpu
    import gpu_models

    mine = tmp_path / "work" / "llama-2-7b"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("a user's own files")
    with pytest.raises(SystemExit, match="was not built by this benchmark"):
        with gpu_models.building(mine, gpu_models.model_specs(True, "200KB")["llama-2-7b"]):
            pytest.fail("built over a folder of the user's")
    assert (mine / "notes.txt").exists()

    with pytest.raises(SystemExit) as quick:
        gpu.main(["--quick"])
    assert quick.value.code == 2 and "--quick: give --out a folder of its own" in capsys.readouterr().err
    (tmp_path / "gpu.csv").write_text("")  # a run killed while it wrote it
    with pytest.raises(SystemExit, match="cannot be read, or holds rows of another GPU"):
        gpu.main(["--device", "cpu", "--quick", "--models", "bert-base", "--out", str(tmp_path)])


def report_has_tables(path) -> bool:
    text = path.read_text()
    return text.count("By self CUDA time:") == 2 and text.count("By self CPU time:") == 2


def test_profile_measures_from_a_cuda_trace():
    """bench/profile_job.py's reading of a Chrome trace, on a made-up one with two passes, listed out of time
    order: the GPU's busy share over the batch windows (a kernel launched in one that ends after it counts, the
    loading's kernel not), the batch thread's waits per batch apart from another thread's, and each idle gap put
    down to the innermost op of the batch thread under way at its start."""
    from profile_job import trace_summary

    def span(cat, name, ts, dur, tid=1, correlation=None):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid} | (
            {"args": {"correlation": correlation}} if correlation is not None else {}
        )

    events = [
        span("user_annotation", "ctxvar.load", 0, 100),
        span("kernel", "loading's copy", 50, 400, tid=7, correlation=9),
        span("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=9),
        span("user_annotation", "ctxvar.batches", 3000, 100),  # the second pass, listed first
        span("cuda_runtime", "cudaLaunchKernel", 3000, 1, correlation=5),
        span("kernel", "second pass", 3000, 100, tid=7, correlation=5),
        span("user_annotation", "ctxvar.batches", 1000, 1000),
        span("gpu_user_annotation", "ctxvar.batches", 1000, 1000, tid=7),
        span("cpu_op", "aten::mm", 1010, 20),
        span("cuda_runtime", "cudaLaunchKernel", 1015, 5, correlation=1),
        span("kernel", "gemm", 1030, 500, tid=7, correlation=1),
        span("cpu_op", "aten::item", 1600, 300),
        span("cpu_op", "other thread", 1500, 800, tid=2),
        span("cuda_runtime", "cudaStreamSynchronize", 1800, 10, tid=2, correlation=6),
        span("cuda_runtime", "cudaMemcpyAsync", 1610, 280, correlation=2),
        span("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 1620, 10, tid=7, correlation=2),
        span("cuda_runtime", "cudaStreamSynchronize", 1700, 10, correlation=3),
        span("cuda_runtime", "cudaLaunchKernel", 1950, 5, correlation=4),
        span("kernel", "late", 2100, 100, tid=7, correlation=4),
    ]
    summary = trace_summary(events, 2)
    assert summary["load_seconds"] == pytest.approx(100e-6) and summary["batches_seconds"] == pytest.approx(1.1e-3)
    assert summary["gpu_busy_fraction"] == pytest.approx((500 + 10 + 100 + 100) / (1200 + 100))
    assert summary["syncs_per_batch"] == 0.5 and summary["other_thread_syncs"] == 1
    assert summary["pageable_copies"] == 1
    assert summary["idle_by_host_op"] == pytest.approx({"cudaMemcpyAsync": 470e-6, "(Python)": 120e-6})
    loading_only = trace_summary(events[:3], 0)  # no batches: nothing to measure the GPU by
    assert np.isnan(loading_only["gpu_busy_fraction"]) and np.isnan(loading_only["syncs_per_batch"])


def test_the_gpu_benchmarks_7b_shard_runs_at_least_30_batches(tmp_path):
    """The 7B decoder's smaller shard (bench/gpu_models.py), batched as extraction batches it with the default token
    budget and its tokenizer (gpt2-medium's, trained on the corpus): enough batches to measure a rate."""
    from transformers import AutoTokenizer

    from ctxvar.extraction.shard import chunk_batches
    from ctxvar.files.parquet import read_table
    from ctxvar.models.batching import BATCH_TOKENS
    from ctxvar.models.tokens import encode

    from gpu_models import MODES
    from synthetic import write_corpus

    shard = read_table(write_corpus(tmp_path, MODES["gpu"]["small"]), columns=["text", "chunk"])
    texts, chunk = shard.column("text").to_pylist(), shard.column("chunk").to_numpy()
    random_model(tmp_path / "t", "gpt2", texts, seed=0, vocab_size=8000, **BENCH_SHAPE)
    lengths = encode(AutoTokenizer.from_pretrained(tmp_path / "t"), texts).lengths
    assert len(chunk_batches(lengths, chunk, BATCH_TOKENS)) >= 30


def test_the_bare_forward_warms_up_and_runs_without_a_weight_hash_beside_it(tmp_path, monkeypatch, tiny_models):
    """(a) of bench/steps.py: a hash thread beside it would slow the limit that (b) is measured against."""
    from ctxvar.models import hashing

    import steps
    from synthetic import write_corpus

    hashed = []
    monkeypatch.setattr(hashing, "weights_sha256", lambda model: hashed.append(model) or "")
    forward = steps.forward(tiny_models["gpt2"], str(write_corpus(tmp_path, 200)), "cpu")
    assert hashed == [] and forward["warm_up_seconds"] > 0 and forward["batches"] >= 1


def test_sums_io_benchmark_writes_and_reads_every_shape_in_every_layout(tmp_path):
    """bench/sums_io.py --quick: each shape written and read back by ctxvar, by its layout with page CRCs, by the layout
    before it and by numpy, the same numbers coming back; ctxvar's reader counts at least the file's bytes; the paper
    projected at the rates."""
    run_bench("sums_io.py", tmp_path, "--quick", "--dir", str(tmp_path))
    rows = pd.read_csv(tmp_path / "sums_io.csv")
    assert set(zip(rows["shape"], rows["variant"], rows["op"])) == {
        (shape, variant, op)
        for shape in ("bert-base partial", "7B layer group")
        for variant in ("layout 1", "page CRC", "ctxvar", "numpy")
        for op in ("write", "read")
    }
    assert rows["read_back_equal"].all() and (rows["gb_per_s"] > 0).all()
    counted = rows[(rows["variant"] == "ctxvar") & (rows["op"] == "read")]
    assert (counted["bytes_counted"] >= counted["file_bytes"]).all()
    projected = pd.read_csv(tmp_path / "sums_io_projection.csv")
    assert len(projected) == 6 and (projected["end_to_end_s"] >= projected["forward_s"]).all()
    assert "The paper on one H100" in (tmp_path / "sums_io.md").read_text()
    assert not list(tmp_path.glob("ctxvar-io-*")), "the benchmark's files were left behind"


def test_compare_runs_finds_layout_1_and_2_of_the_same_sums_equal_and_one_ulp_apart_not(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctxvar.stats.sample_file import sample_schema, sample_table
    from ctxvar.stats.sums import LayerSums, moments_schema, moments_table

    import compare_runs as compare
    import sums_io as bench_io

    arrays, d, n_layers = bench_io.layer_arrays(40, 6), 6, 3
    first_sums = {name: arrays.sums[name] for name in ("sum_sq", "sum", "sum_unit")}  # what layout 1 held
    sums = LayerSums(arrays.layer, arrays.types, arrays.count, first_sums)
    first, second = tmp_path / "layout1" / "m", tmp_path / "layout2" / "m"
    first.mkdir(parents=True), second.mkdir(parents=True)
    bench_io.write_layout1(first / "stats.parquet", sums, n_layers)
    bench_io.write_ctxvar(second / "stats.parquet", sums, n_layers)
    outer = np.arange(d * d, dtype=np.float64).reshape(d, d) / 7
    pq.write_table(  # layout 1's moments: one row per layer
        pa.table(
            {
                "layer": pa.array(np.arange(2, dtype=np.int16)),
                "n": pa.array([11, 11]),
                "sum": pa.array([np.arange(d) / 3.0] * 2, type=pa.list_(pa.float64(), d)),
                "sum_outer": pa.array([outer.ravel()] * 2, type=pa.list_(pa.float64(), d * d)),
            }
        ),
        first / "stats.moments.parquet",
    )
    schema = moments_schema(d, {})
    layers = [moments_table(layer, 11, np.arange(d) / 3.0, outer, schema) for layer in range(2)]
    pq.write_table(pa.concat_tables(layers), second / "stats.moments.parquet")
    points = (np.arange(4 * d, dtype=np.float32) / 3).reshape(4, d)  # a sample's vectors are float32
    where = {"key": np.arange(4, dtype=np.uint64), "sentence_id": np.arange(4), "window": np.zeros(4, np.int32)}
    where |= {"position": np.arange(4, dtype=np.int32), "token": np.array(list("abcd"), dtype=object)}
    sample = sample_table(0, where, points, sample_schema(d, {}))
    pq.write_table(sample, second / "stats.sample.parquet")
    pq.write_table(
        sample.set_column(6, "x", pa.array(list(points), type=pa.list_(pa.float32(), d))).replace_schema_metadata(None),
        first / "stats.sample.parquet",
    )
    assert compare.main([str(first.parent), str(second.parent)]) == 0

    sums.sum[3, 2] = np.nextafter(sums.sum[3, 2], np.inf)
    bench_io.write_ctxvar(second / "stats.parquet", sums, n_layers)
    assert compare.compare_file(first / "stats.parquet", second / "stats.parquet")["sum"] > 0
    assert compare.main([str(first.parent), str(second.parent)]) == 1
    assert compare.main([str(first.parent), str(second.parent), "--rtol", "1e-12"]) == 0
    (second / "extra.parquet").write_bytes((second / "stats.parquet").read_bytes())
    assert compare.main([str(first.parent), str(second.parent), "--rtol", "1e-12"]) == 1


def test_compare_runs_says_ok_only_for_arrays_that_agree(tmp_path):
    """No false OK: infinities hiding a difference, other integer types, nulls against NaN, vectors of another
    width, lists of other lengths, nothing compared; and a damaged file is a failure, not a traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import compare_runs as compare

    assert compare.difference(np.array([np.inf, 4.0]), np.array([np.inf, 5.0])) == 0.25
    assert compare.difference(np.array([np.inf, 1.0]), np.array([-np.inf, 1.0])) == np.inf
    assert compare.difference(np.array([-0.0]), np.array([0.0])) > 0
    assert compare.difference(np.array([1, 2], np.int32), np.array([1, 2], np.int64)) == np.inf

    def run(**tables) -> int:
        for side, table in tables.items():
            (tmp_path / side).mkdir(exist_ok=True)
            pq.write_table(table, tmp_path / side / "t.parquet")
        return compare.main([str(tmp_path / "a"), str(tmp_path / "b"), "--rtol", "1e-6"])

    assert run(a=pa.table({"x": [1.0, 2.0]}), b=pa.table({"x": [1.0, 2.0]})) == 0
    assert run(a=pa.table({"x": [1.0, None]}), b=pa.table({"x": [1.0, float("nan")]})) == 1
    vectors = pa.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], type=pa.list_(pa.float64(), 3))
    other_width = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], type=pa.list_(pa.float64(), 2))
    assert run(a=pa.table({"v": vectors}), b=pa.table({"v": other_width})) == 1
    ids = pa.array([[1, 5, 2], [1, 2]], type=pa.large_list(pa.int32()))  # a shard's token ids: lists of any length
    assert run(a=pa.table({"ids": ids}), b=pa.table({"ids": ids})) == 0
    moved = pa.array([[1, 5], [2, 1, 2]], type=pa.large_list(pa.int32()))  # the same numbers, cut elsewhere
    assert run(a=pa.table({"ids": ids}), b=pa.table({"ids": moved})) == 1
    (tmp_path / "b" / "t.parquet").write_bytes(b"not parquet")
    assert compare.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    (tmp_path / "empty").mkdir()
    assert compare.main([str(tmp_path / "empty"), str(tmp_path / "empty")]) == 1
    assert compare.main([str(tmp_path / "a"), str(tmp_path / "missing")]) == 1


def test_quick_extraction_order_benchmark_measures_both_orders(tmp_path):
    """Both orders of every model, with seconds, CPU seconds and peak memory (the script stops when their files
    differ)."""
    run_bench_main("extraction_order.py", tmp_path, "--quick")
    results = pd.read_csv(tmp_path / "extraction_order.csv")
    assert set(zip(results["model"], results["order"])) == {
        (model, order) for model in ("gpt2", "bert") for order in ("layer_major", "whole_model")
    }
    assert (results[["seconds", "cpu_seconds", "peak_rss_mb"]] > 0).all().all()
    assert "Both orders gave the same partial files, bit for bit." in (tmp_path / "extraction_order.md").read_text()


def test_quick_job_parts_reports_the_gpus_path_of_each_width(tmp_path):
    """bench/job_parts.py --quick: every part of a job at both widths, the path the sum of its own parts (the
    job took the digest's hash: the script refuses a second hash), the hand-over placed by the real shapes' plan
    on an 80 GB card: beside the batches."""
    run_bench_main("job_parts.py", tmp_path, "--quick")
    table = pd.read_csv(tmp_path / "job_parts.csv")
    assert list(table["model"]) == ["bert-base", "llama-2-7b"] and (table["tokens"] > 0).all()
    assert table["hand_over_beside"].all() and (table["layer_seconds"] > 0).all()
    per_layer = table["new_sums"] + table["hand_over_per_layer"]
    waits = (per_layer - table["layer_seconds"]).clip(lower=0)
    on_path = table["load"] + table["metadata"] + per_layer + (table["hidden_states"] - 1) * waits
    np.testing.assert_allclose(table["path_seconds"], on_path)
    assert (table[["read_shard", "plan", "weight_hash", "sums_per_batch", "write_per_layer"]] > 0).all().all()
