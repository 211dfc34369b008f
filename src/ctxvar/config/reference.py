"""The configuration reference, ``config/README.md``, generated from the JSON schema (its only source).

    python -m ctxvar.config.reference      # rewrite config/README.md after editing the schema

A test fails when the file and the schema drift apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

SCHEMA = Path("workflow/schemas/config.schema.yaml")
REFERENCE = Path("config/README.md")
HEADER = """# Configuration reference

Generated from `workflow/schemas/config.schema.yaml` by `python -m ctxvar.config.reference`; do not edit by
hand. Every key is checked against the schema before any job runs ([validation](../docs/configuration.md)); a
key marked *required* has no default. `models[]` keys belong to each entry of the `models` list.

| key | type | default | meaning |
| --- | --- | --- | --- |
"""


def rows(
    properties: dict,
    prefix: str = "",
    item_defaults: dict | None = None,
    defaults: dict | None = None,
    required: tuple = (),
):
    """``(key, type, default, description)`` for every key, depth first, in schema order; ``defaults`` fill the
    default column of keys that have none in place (models[] entries: the schema's ``$defs/model_defaults``);
    keys in ``required`` (the enclosing object's) read *required*."""
    for name, spec in properties.items():
        key = f"{prefix}{name}"
        fallback = {"default": (defaults or {})[name]} if name in (defaults or {}) else {}
        yield key, kind(spec), default({**fallback, **spec}, name in required), spec.get("description", "")
        if spec.get("type") == "object" and "properties" in spec:
            yield from rows(spec["properties"], f"{key}.", item_defaults, required=tuple(spec.get("required", ())))
        if spec.get("type") == "array" and "properties" in spec.get("items", {}):
            yield from rows(spec["items"]["properties"], f"{key}[].", item_defaults, item_defaults)


def kind(spec: dict) -> str:
    if "enum" in spec:
        return " \\| ".join(f"`{value}`" for value in spec["enum"])
    kinds = spec.get("type") or [option.get("type") for option in spec.get("oneOf", [])]
    text = " or ".join(kinds) if isinstance(kinds, list) else kinds
    bounds = [
        f"{word} {spec[key]}"
        for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"))
        if key in spec
    ]
    return f"{text} ({', '.join(bounds)})" if bounds else text


def default(spec: dict, required: bool = False) -> str:
    if "default" not in spec:
        return "*required*" if required else "—"
    value = spec["default"]
    return "" if value == {} else f"`{json.dumps(value)}`"


def escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(schema: dict) -> str:
    model_defaults = schema["$defs"]["model_defaults"]["default"]
    lines = [
        f"| `{key}` | {type_} | {value} | {escape(text)} |"
        for key, type_, value, text in rows(
            schema["properties"], item_defaults=model_defaults, required=tuple(schema.get("required", ()))
        )
    ]
    return HEADER + "\n".join(lines) + "\n"


def main(root: Path = Path(".")) -> None:
    schema = yaml.safe_load((root / SCHEMA).read_text())
    (root / REFERENCE).write_text(markdown(schema))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
