"""What the workflow asks of a whole run, above the science: the inputs' identities at start-up
(:mod:`~ctxvar.run.inputs`) and where the run's config came from (:mod:`~ctxvar.run.origin`); result files under
older names (:mod:`~ctxvar.run.layout`); resource and disk estimates (:mod:`~ctxvar.run.resources`,
:mod:`~ctxvar.run.disk`); the Hub checkpoints it downloaded, removed from the HF cache after use
(:mod:`~ctxvar.run.hf_cache`); the job log every script runs in (:mod:`~ctxvar.run.job_log`); a quiet console while the
jobs run (:mod:`~ctxvar.run.console`) and the run's closing lines (:mod:`~ctxvar.run.end`)."""
