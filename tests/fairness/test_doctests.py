"""The examples in the fairness modules' docstrings run, and say what they show."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import gnau_service.fairness

MODULES = [
    "gnau_service.fairness",
    *sorted(
        f"gnau_service.fairness.{info.name}"
        for info in pkgutil.iter_modules(gnau_service.fairness.__path__)
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failures, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has no examples"
    assert failures == 0


def _imports_and_calls(name: str) -> tuple[set[str], set[str]]:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return imported, called


@pytest.mark.parametrize("name", MODULES)
def test_the_library_stays_pure(name: str) -> None:
    """No I/O, no clock, no `random`, nothing from the service's other layers."""
    imported, called = _imports_and_calls(name)
    impure = {"random", "time", "datetime", "os", "io", "pathlib", "socket", "subprocess"}
    assert not imported & impure
    allowed_prefixes = (
        "gnau_service.fairness",
        "gnau_service.rules.cards",
        "gnau_service.rules.house_rules",
        "gnau_service.rules.errors",
        "gnau_service.common",
    )
    for module in imported:
        if module.startswith("gnau_service"):
            assert module.startswith(allowed_prefixes), f"{name} imports {module}"
    assert not called & {"open", "print", "input"}
