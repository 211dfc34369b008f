"""What the tests share, imported as ``support.<module>`` (``tests/`` is on ``sys.path`` through ``pythonpath`` in
pyproject.toml): ``tiny_models`` builds every tiny random-init model the tests run (ctxvar's own ``init: random``
models, and any transformers family for a saved tokenizer, norms randomised where asked); ``pipeline_runs`` runs the
package's data path without Snakemake (shard, extract, merge, as the jobs do) and ``oracle`` computes the same
statistics by brute force, every embedding in memory; ``effective_rank_reference``, ``ethayarajh_reference`` and
``machina_mercer_reference`` are the published definitions and code the geometry metrics are checked against,
``embedding_matrix_reference`` embedding_matrices.csv's rows by brute force from a matrix,
``razzhigaev_reference`` the published code the enwik8 source's pieces are checked against, on the generated
enwik8-like files of ``enwik8_like``;
``declared_sums`` builds sums files by hand with every sum the declarations keep, and holds the readers of each kind
of sums file and each kind in an older layout; ``byte_flips`` damages files a byte at a time, or one byte for good;
``hf_cache`` lays out a Hugging Face cache by hand (blobs, snapshots, refs), checks it as its user would
(``scan_cache_dir``, offline downloads) and serves a Hub on this machine that names revisions' commits;
``messages`` checks that an error's message is one line; ``model_files`` copies a tiny model as a user has it
and pickles an object that runs code when unpickled; ``encoded_corpora`` writes small corpora in each encoding ctxvar
reads; ``documented_outputs`` reads what docs/outputs.md says a run writes and checks a run's folder against it;
``workflow_runs`` runs Snakemake in a subprocess and holds the repository's root, the shipped configs and the runs
beside the tests; ``slurm_cluster`` starts the SLURM tier's local cluster and its runs;
``bench_scripts`` runs the scripts of bench/; ``quick_start_figures`` draws every figure of the quick start with a
decoder added (or those named), from synthetic tables shaped like that run's, ``figure_tables`` makes the other
synthetic tables the figures draw (a decoder's and an encoder's per-type tables, layers.csv, geometry.csv, the
embedding matrices' files, models.csv), ``figure_scopes`` holds a run as the figures' scopes see it, the
catalogue's rules and a figure in a new scope, and ``figure_checks`` checks a drawn figure's texts (on the canvas,
overlapping none) and lines (straight in the data, straight on the page) and lays figures out once for a module's
tests; ``cpu_costs`` is a pytest plugin, loaded on demand (``-p support.cpu_costs``), that writes each test's wall-clock
and CPU seconds, its subprocesses' included; ``forward_peak`` and
``streamed_peak`` are commands, each run in a fresh process, that measure an extraction's peak memory (``python
tests/support/forward_peak.py ...``; the second imports the first from its own folder)."""
