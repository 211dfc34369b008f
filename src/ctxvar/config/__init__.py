"""The config contract: the JSON schema, where every default lives, and the config files
(:mod:`~ctxvar.config.schema`); the checks the schema cannot express (:mod:`~ctxvar.config.checks`); the models[]
entries as the code reads them (:mod:`~ctxvar.config.entries`); the run's name (:mod:`~ctxvar.config.run_name`);
the hashes that name what made a run's numbers (:mod:`~ctxvar.config.hashes`); and the generator of
``config/README.md`` (``python -m ctxvar.config.reference``)."""
