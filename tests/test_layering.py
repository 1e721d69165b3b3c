"""The architecture's one-way data flow, checked on the import statements themselves.

rules imports nothing else of the project; fairness may use rules (the card vocabulary) and
nothing else; audit may use both; nothing below the server imports the server or the CLI.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gnau_service"

ALLOWED = {
    "rules": {"rules"},
    "fairness": {"fairness", "rules"},
    "audit": {"audit", "fairness", "rules"},
    "store": {"store", "audit"},
    # The witness is a separate service: it checks and cosigns checkpoints with the audit floor
    # and keeps its state with the store's SQLite helpers, but never uses the dealer's server.
    "witness": {"witness", "audit", "store"},
}


def project_imports(layer: str) -> set[tuple[str, str]]:
    """(file, imported layer) for every import of a gnau_service module inside ``layer``."""
    found = set()
    for path in (PACKAGE / layer).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                raise AssertionError(f"{path}: use absolute imports")
            for name in names:
                parts = name.split(".")
                if parts[0] == "gnau_service" and len(parts) > 1:
                    found.add((path.name, parts[1]))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_lies_below_it(layer: str) -> None:
    wrong = {
        (file, imported)
        for file, imported in project_imports(layer)
        if imported not in ALLOWED[layer]
    }
    assert not wrong, f"{layer} imports {sorted(wrong)}"


def test_rules_core_is_actually_scanned() -> None:
    assert ("evaluation.py", "rules") in project_imports("rules")


def test_below_the_server_nothing_imports_metrics_or_tracing() -> None:
    """The store is measured through its observer hook; prometheus and opentelemetry are the
    server's business."""
    for layer in ALLOWED:
        for path in (PACKAGE / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for name in names:
                    assert name.split(".")[0] not in {"prometheus_client", "opentelemetry"}, (
                        f"{path} imports {name}"
                    )
