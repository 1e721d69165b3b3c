"""docs/architecture.md's floors and rooms are the packages on disk and the ones import-linter's
contracts (``[tool.importlinter]`` in pyproject.toml, run by ``make lint``) hold."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gnau_service"
DOC = (ROOT / "docs" / "architecture.md").read_text()
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"
]


def packages(under: Path) -> set[str]:
    return {path.parent.name for path in under.glob("*/__init__.py")}


def table_rows(header: str) -> list[str]:
    """The first column of the table whose header row is ``header``, without backticks."""
    lines = DOC[DOC.index(header) :].splitlines()[2:]
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
    return [re.match(r"\| `(?:server/)?([a-z_]+)/` \|", row)[1] for row in rows]  # type: ignore[index]


def contract(name_start: str) -> dict[str, object]:
    (found,) = [c for c in CONTRACTS if str(c["name"]).startswith(name_start)]
    return found


def layer_names(layers: object, prefix: str) -> list[set[str]]:
    assert isinstance(layers, list)
    return [{name.strip().removeprefix(prefix) for name in layer.split("|")} for layer in layers]


def test_the_floors_table_lists_every_package_and_every_layer_of_the_contract() -> None:
    floors = table_rows("| floor | holds | may import |")
    layers = layer_names(contract("Floors")["layers"], "gnau_service.")
    assert set(floors) == packages(PACKAGE)
    assert set().union(*layers) == packages(PACKAGE)
    # The table reads bottom-up, so a floor's row comes after every floor below it.
    for upper, lower in itertools.pairwise(layers):
        assert max(floors.index(name) for name in lower) < min(floors.index(n) for n in upper)


def test_the_server_rooms_table_lists_every_room_of_the_server_and_of_its_contract() -> None:
    rooms = table_rows("| room | holds | may import |")
    layers = layer_names(contract("Rooms of the server")["layers"], "")
    assert set(rooms) == packages(PACKAGE / "server") == set().union(*layers)
    assert layers[0] == {"process"}, "the process wires the ports: it is the top room"


def test_nothing_below_the_server_may_import_a_transport() -> None:
    below = contract("No transport")
    assert set(below["source_modules"]) == {  # type: ignore[arg-type]
        f"gnau_service.{floor}"
        for floor in ("rounds", "store", "audit", "fairness", "rules", "common")
    }
    assert {"grpc", "aiohttp", "prometheus_client", "opentelemetry"} <= set(
        below["forbidden_modules"]  # type: ignore[arg-type]
    )
