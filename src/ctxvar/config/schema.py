"""The config contract as the JSON schema states it: the package's schema, loaded once at import (its defaults
are the code's), a validator whose integers are ints and whose numbers are finite, one-line errors naming the key
and what is allowed, and config files read refusing a key repeated in one mapping."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from ctxvar.errors import ConfigError, first_line

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")  # workflow/schemas/config.schema.yaml links here
# libyaml's loader where PyYAML has one (7 ms a job instead of 50 ms): the same objects, as
# tests/unit/config/test_schema.py checks
SCHEMA = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _is_integer(checker, instance) -> bool:
    """JSON Schema's integer, minus floats with a zero fraction (2.0): the code uses them as counts and indices."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_finite_number(checker, instance) -> bool:
    """JSON Schema's number, minus NaN and ±inf (YAML's .nan, .inf), which pass every minimum and maximum."""
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)


def strict_validator(schema: dict):
    """A 2020-12 validator of ``schema`` whose integers are ints and whose numbers are finite."""
    import jsonschema

    types = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_finite_number}
    )
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=types)(schema)


TYPE_WORDS = {
    "integer": "a whole number (no decimal point)",
    "number": "a finite number",
    "string": "text",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def quoted_scalar(instance, kinds: list[str]) -> bool:
    """Whether ``instance`` is text that YAML would read as one of ``kinds`` (integer, number, boolean) unquoted."""
    if not isinstance(instance, str) or not {"integer", "number", "boolean"} & set(kinds):
        return False
    try:
        value = yaml.safe_load(instance)
    except yaml.YAMLError:
        return False
    return (isinstance(value, bool) and "boolean" in kinds) or (
        isinstance(value, (int, float)) and not isinstance(value, bool) and bool({"integer", "number"} & set(kinds))
    )


def check_schema(config: dict, schema_path=None) -> None:
    """Raise :class:`ConfigError` naming the key and what is allowed, for the most relevant schema violation;
    ``schema_path`` defaults to the package's schema, :data:`SCHEMA`, loaded once at import."""
    import jsonschema

    schema = yaml.safe_load(open(schema_path)) if schema_path else SCHEMA
    error = jsonschema.exceptions.best_match(strict_validator(schema).iter_errors(config))
    if error is None:
        return
    where = ".".join(str(part) for part in error.absolute_path) or "config"
    message = error.message
    if error.validator == "additionalProperties":
        message += f"; allowed keys: {', '.join(error.schema['properties'])}"
    elif error.validator == "enum":
        message = f"{error.instance!r} is not allowed; use one of {', '.join(map(str, error.validator_value))}"
    elif error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        message = f"{error.instance!r} is not {' or '.join(TYPE_WORDS.get(k, k) for k in kinds)}"
        if quoted_scalar(error.instance, kinds):
            message += (
                " but text (quoted in a config file, or inside a --config mapping such as --config "
                "geometry='{batches: 8}', whose values Snakemake passes as text): set it in a config file, unquoted"
            )
    elif error.validator == "pattern":
        message = (
            f"{error.instance!r} is not usable here; use letters, digits and . _ + @ = - "
            "(starting with a letter or digit)"
        )
    raise ConfigError(f"{where}: {message}")


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key repeated in one mapping (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise ConfigError(
                    f"{self.name}: line {key_node.start_mark.line + 1}: key {key!r} appears twice in "
                    "the same mapping (YAML keeps only the last); keep one"
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_config_file(path) -> dict:
    """A YAML (or JSON) config file, refusing duplicate keys, which Snakemake's loader silently overwrites."""
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.load(handle, Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({first_line(error)})") from error
    return loaded if isinstance(loaded, dict) else {}
