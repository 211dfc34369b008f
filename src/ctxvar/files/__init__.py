"""Files the package writes and reads back: atomic writes and checksummed text, CSV and JSON
(:mod:`~ctxvar.files.atomic`); Parquet files with a value digest per column chunk and a byte digest per page
(:mod:`~ctxvar.files.parquet`, :mod:`~ctxvar.files.value_digest`, :mod:`~ctxvar.files.byte_digest`), read only
after every byte is verified; and the free space a job needs before it writes (:mod:`~ctxvar.files.space`)."""
