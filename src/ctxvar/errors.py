"""Errors that reach the user as one line: what is wrong, and what to do."""


class CtxvarError(Exception):
    """Base class; entry scripts print ``str(error)`` alone, without a traceback."""


class ConfigError(CtxvarError):
    """The configuration is invalid."""


class ModelLoadError(CtxvarError):
    """A model or tokenizer cannot be loaded or lacks what the pipeline needs."""


class CorpusError(CtxvarError):
    """The corpus cannot be read or sampled."""


class StatisticsError(CtxvarError):
    """Sums are non-finite, inconsistent, or cannot be merged."""


class DeviceMemoryError(CtxvarError):
    """The device has too little memory for one pass of a job."""


class IntegrityError(CtxvarError):
    """A file a job reads is corrupt, truncated or not what the pipeline wrote."""


class DiskSpaceError(CtxvarError):
    """The run's outputs would not fit in the free space of the results disk."""


class InsufficientData(CtxvarError):
    """The corpus is too small for an optional output (a figure, the Fig. 1 selection); the core outputs stand."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (its type name if it has none), for one-line errors."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def size_text(n_bytes: float) -> str:
    """A byte count in the decimal unit that shows it with three significant digits: ``412 kB``, ``1.25 GB``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} B"
