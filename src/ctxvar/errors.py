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
