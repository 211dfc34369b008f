"""Integration tier: the package on tiny local models, no Snakemake. One folder per subpackage of ctxvar
(``tests/integration/<folder>/test_<module>.py``), each guard tested in the file of the module that holds it."""
