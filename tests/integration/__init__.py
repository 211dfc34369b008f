"""Integration tier: the package on tiny local models, no Snakemake. One folder per subpackage of ctxvar
(``tests/integration/<folder>/test_<module>.py``), and ``reliability`` for every guard and a sweep of hostile
inputs across them."""
