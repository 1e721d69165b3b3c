"""The architecture's one-way data flow, checked on the import statements themselves.

rules imports nothing else of the project; fairness may use rules (the card vocabulary) and
nothing else; audit may use both; nothing below the server imports the server or the CLI. And
no module of gnau_service imports itself through others: there is no import cycle at all.
"""

import ast
from collections.abc import Iterator
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
    "witness": {"witness", "audit", "store", "edge"},
    # The network edge: what every server port shares, using nothing of the project.
    "edge": {"edge"},
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


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path``; a package's ``__init__`` is the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported_modules(tree: ast.AST) -> Iterator[str]:
    """The gnau_service modules the imports in ``tree`` name, wherever they stand (a function's
    import ties two modules together as much as a module-level one). ``from p import m`` names
    the module ``p.m`` when there is one, else ``p``.

    Imports under ``if TYPE_CHECKING:`` count too: the two modules still need each other to be
    read, and the store's cycle (base, sequencer, schema, migrations) was one of those."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
        else:
            continue
        yield from (name for name in names if name in MODULES)


def import_graph() -> dict[str, set[str]]:
    """Each gnau_service module and the gnau_service modules it imports."""
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = set(imported_modules(tree)) - {name}
    return graph


def import_knots(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or not: the strongly connected
    components of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    knots: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = set(stack[stack.index(module) :])
            del stack[stack.index(module) :]
            if len(component) > 1:
                knots.append(component)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return knots


def cycle_in(knot: set[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest import path from the knot's first module back to it (breadth first)."""
    start = min(knot)
    paths = {start: [start]}
    queue = [start]
    for module in queue:
        for imported in sorted(graph[module] & knot):
            if imported == start:
                return [*paths[module], start]
            if imported not in paths:
                paths[imported] = [*paths[module], imported]
                queue.append(imported)
    raise AssertionError(f"{sorted(knot)} is not a knot of {start}")


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    cycles = [
        f"{' -> '.join(cycle_in(knot, graph))} (the knot: {', '.join(sorted(knot))})"
        for knot in import_knots(graph)
    ]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_cycle_check_finds_a_cycle_and_names_its_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert import_knots(graph) == [{"a", "b", "c"}]
    assert cycle_in({"a", "b", "c"}, graph) == ["a", "b", "c", "a"]
    assert import_knots({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_function_level_and_package_imports() -> None:
    graph = import_graph()
    # A function-level import, and a package's __init__ as a module of its own.
    assert "gnau_service.server.players" in graph["gnau_service.cli.audit_commands"]
    assert "gnau_service.store.store" in graph["gnau_service.store"]
