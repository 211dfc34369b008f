"""What an extraction job needs besides its shard and output paths, and how a Snakemake job gives it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ctxvar.extraction.accumulator import NO_GEOMETRY, GeometryOptions
from ctxvar.models.batching import BATCH_TOKENS


@dataclass
class MeasuredSettings:
    """What an extraction job measures: each of these changes its sums, so each comes from a config key that the
    extraction hash reads (:func:`ctxvar.config.hashes.extraction_config_hash`), and partials that differ in any
    never merge."""

    model: dict  # resolved model entry (id, name, revision, ...)
    source: str  # Hub id or local directory to load from
    dtype: str = "float32"
    merge_markers: bool = True
    long_sentences: str = "skip"  # skip | split | error
    geometry: GeometryOptions = field(default_factory=lambda: NO_GEOMETRY)  # sums beyond n, Σx, Σ‖x‖²
    sample_seed: int = 0  # seed of the sample's position hash (geometry.seed)


@dataclass
class ExecutionSettings:
    """How an extraction job runs: where, in what batches and within what memory. None of these changes what it
    measures (the sums are the same but for floating-point summation order), so no hash reads them and a run may
    change them without re-extracting."""

    device: str = "auto"
    batch_tokens: int = BATCH_TOKENS
    max_state_mb: float = (
        0  # cap on the sums' memory, any device; 0: the GPU's free memory less one batch (budget.py), no cap on CPU
    )
    # the device's memory for the model's weights, any device; 0: the GPU's free memory less the reserve
    # (budget.py), no budget on CPU. Weights beyond it are read block by block (streamed_weights.py)
    max_device_mb: float = 0
    extraction_order: str = "auto"  # auto | layer_major | whole_model (ctxvar.extraction.layer_major)
    threads: int | None = None  # CPU threads for torch; None keeps torch's default
    progress: bool = True

    @property
    def max_state_bytes(self) -> int | None:
        """``max_state_mb`` in bytes; None where it is 0 (no cap of the job's own)."""
        return int(self.max_state_mb * 1e6) if self.max_state_mb else None

    @property
    def max_device_bytes(self) -> int | None:
        """``max_device_mb`` in bytes; None where it is 0 (no budget of the job's own)."""
        return int(self.max_device_mb * 1e6) if self.max_device_mb else None


@dataclass
class ExtractionSettings(ExecutionSettings, MeasuredSettings):
    """Everything an extraction job needs besides its shard and output path: what it measures
    (:class:`MeasuredSettings`), how it runs (:class:`ExecutionSettings`), and which job it is: the extraction hash
    its partials carry and its shard's number."""

    config_hash: str = ""
    shard: int = 0

    def measured(self) -> MeasuredSettings:
        """The settings that change the sums, alone."""
        return MeasuredSettings(**{item.name: getattr(self, item.name) for item in fields(MeasuredSettings)})


def job_settings(job, config_hash: str = "") -> ExtractionSettings:
    """Settings of a Snakemake job that runs a model over a shard, from its ``snakemake`` object
    (``params.geometry`` only for jobs that accumulate sums)."""
    geometry = job.params.get("geometry")
    return ExtractionSettings(
        model=job.params.model,
        source=job.params.source,
        dtype=job.params.dtype,
        device=job.config["device"],  # not a param: moving to another device must not re-run
        extraction_order=job.config["extraction_order"],  # not a param either: both orders give the same bits
        merge_markers=job.params.tokens["merge_markers"],
        long_sentences=job.params.tokens["long_sentences"],
        batch_tokens=job.resources.batch_tokens,
        max_state_mb=job.resources.get("max_state_mb", 0),
        max_device_mb=job.resources.get("max_device_mb", 0),
        geometry=GeometryOptions.from_config(geometry) if geometry else NO_GEOMETRY,
        sample_seed=geometry["seed"] if geometry else 0,
        threads=job.threads,
        config_hash=config_hash,
        shard=int(job.wildcards.shard),
    )
