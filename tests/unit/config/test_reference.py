"""The configuration reference, config/README.md, generated from the schema (ctxvar.config.reference): the file is what
the schema generates; its rows follow the schema depth first, each key's type with its bounds, its default (models[]
keys' from the schema's model defaults) and its description; a required key has no default and reads *required*."""

from __future__ import annotations

import yaml

from support.workflow_runs import REPO


def test_the_configuration_reference_is_generated_from_the_schema():
    """config/README.md is the schema's descriptions and defaults; regenerate with python -m ctxvar.config.reference."""
    from ctxvar.config.reference import REFERENCE, SCHEMA, markdown

    assert (REPO / REFERENCE).read_text() == markdown(yaml.safe_load((REPO / SCHEMA).read_text()))


def test_required_keys_have_no_default_and_the_reference_says_required():
    """A default on a required key would be documented but never used (corpus.source once read "hf")."""
    from ctxvar.config.reference import SCHEMA, markdown

    schema = yaml.safe_load((REPO / SCHEMA).read_text())
    reference = markdown(schema)
    assert "default" not in schema["properties"]["corpus"]  # required unless no model reads it (config.checks)
    for key, spec in (("models", schema), ("corpus.source", schema["properties"]["corpus"])):
        name = key.rsplit(".", 1)[-1]
        assert name in spec["required"] and "default" not in spec["properties"][name], key
        row = next(line for line in reference.splitlines() if line.startswith(f"| `{key}` |"))
        assert row.split(" | ")[2] == "*required*", row


def test_the_reference_rows_follow_the_schema_depth_first_with_types_bounds_and_defaults():
    from ctxvar.config.reference import HEADER, markdown

    schema = {
        "$defs": {"model_defaults": {"default": {"dtype": "float32"}}},
        "required": ["shards"],
        "properties": {
            "shards": {"type": "integer", "minimum": 1, "maximum": 512, "description": "jobs | splits"},
            "corpus": {
                "type": "object",
                "required": ["source"],
                "properties": {
                    "source": {"enum": ["text", "hf"], "description": "where"},
                    "fraction": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
                    "extra": {"type": "object", "default": {}},
                },
            },
            "models": {
                "type": "array",
                "items": {"properties": {"dtype": {"type": "string"}, "seed": {"oneOf": [{"type": "integer"}]}}},
            },
        },
    }
    rows = "\n".join(
        [
            "| `shards` | integer (≥ 1, ≤ 512) | *required* | jobs \\| splits |",
            "| `corpus` | object | — |  |",
            "| `corpus.source` | `text` \\| `hf` | *required* | where |",
            "| `corpus.fraction` | number (> 0) | `1.0` |  |",
            "| `corpus.extra` | object |  |  |",
            "| `models` | array | — |  |",
            '| `models[].dtype` | string | `"float32"` |  |',
            "| `models[].seed` | integer | — |  |",
        ]
    )
    assert markdown(schema) == HEADER + rows + "\n"
