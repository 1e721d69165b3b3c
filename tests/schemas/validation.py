"""The JSON Schemas of docs/schemas/, loaded for validation with the ``jsonschema`` package.

Every schema is registered under its ``$id``, so their relative ``$ref`` s resolve to the files
of the directory and never to the network. Patterns are matched with ECMA-262's meaning of
``$`` (the end of the string), as JSON Schema specifies: Python's ``re`` also lets ``$`` match
before a final newline, which would let ``"<64 hex digits>\\n"`` pass for a hash.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schemas"
BASE = "https://gnau-dealer.example/schemas/v1/"


def schema_files() -> list[Path]:
    return sorted(SCHEMA_DIR.glob("*.schema.json"))


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def registry() -> Registry:  # type: ignore[type-arg]
    """Every schema under its ``$id``, as draft 2020-12. Their ``$schema`` member is left out
    here (and only here): given one, jsonschema validates a referenced schema with the stock
    validator of that dialect, not with the ECMA-pattern one below."""
    resources = []
    for path in schema_files():
        contents = {key: value for key, value in load(path).items() if key != "$schema"}
        resources.append((contents["$id"], DRAFT202012.create_resource(contents)))
    return Registry().with_resources(resources)


@functools.cache
def _ecma(pattern: str) -> re.Pattern[str]:
    # A final unescaped "$" is the end of the string, and only that.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(
    validator: Validator, pattern: str, instance: object, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _ecma(pattern).search(str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


EcmaValidator = extend(Draft202012Validator, {"pattern": _pattern})


@functools.cache
def validator(name: str, pointer: str = "") -> Validator:
    """A validator of documents against ``docs/schemas/<name>`` (or a ``#pointer`` in it)."""
    return EcmaValidator({"$ref": f"{BASE}{name}{pointer}"}, registry=registry())


def error_paths(name: str, document: object, pointer: str = "") -> list[str]:
    """Where ``document`` is not valid: the JSON path (``$.seats[0].stake``) of every error."""
    return [error.json_path for error in validator(name, pointer).iter_errors(document)]


def errors(name: str, document: object, pointer: str = "") -> list[str]:
    """Why ``document`` is not valid under the schema: every error, at its path."""
    return [
        f"{error.json_path}: {error.message[:300]}"
        for error in validator(name, pointer).iter_errors(document)
    ]
