"""docs/architecture.md's table of layers lists every module of the package, each in the layer
tests/unit/project/test_architecture.py puts it in."""

from __future__ import annotations

import re

from .test_architecture import LAYERS, PACKAGE


def documented_modules() -> dict[str, str]:
    """module name → the layer the page's table puts it in (a backticked name that is no module, such as
    ``ctxvar.load_results``, is what a module exports)."""
    text = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text()
    table = text.split("## The package, in layers", 1)[1].split("\n\n")[2]
    found = {}
    for row in table.splitlines()[2:]:
        layer, modules = row.split("|")[1].strip().strip("`"), row.split("|")[2]
        folder = PACKAGE if layer in ("base", "results") else PACKAGE / layer
        for name in re.findall(r"`(\w+)`", modules):
            if (folder / f"{name}.py").exists():
                found[".".join((folder / name).relative_to(PACKAGE.parent).parts)] = layer
    return found


def package_modules() -> dict[str, str]:
    """module name → its layer in test_architecture.LAYERS (longest prefix)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        layer = max(
            ((len(prefix), layer) for layer, prefixes in LAYERS for prefix in prefixes if name.startswith(prefix)),
            default=(0, None),
        )[1]
        found[name] = layer
    return found


def test_the_layer_table_lists_every_module_in_its_layer():
    assert documented_modules() == package_modules()
