"""Unit tier: synthetic data, no model (a few tests mark themselves ``integration``). One folder per subpackage
or wing of ctxvar (``tests/unit/<folder>/test_<module>.py``), ``test_<module>.py`` here for the package root's
modules, and ``project`` for checks of the whole tree: its layers, docs, README, style, environments and tiers."""
