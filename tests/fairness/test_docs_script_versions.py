"""The standalone script of docs/fairness.md (*By hand*) on fairness v2 and v3 rounds made
wrong: it must stop at each, as it passes every vector of every version
(tests/fairness/test_vectors.py)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.fairness.conftest import FAIRNESS_VECTORS, load_json
from tests.fairness.test_vectors import _docs_script
from tests.references import ref


def _vectors_of(version: int) -> list[Any]:
    return [
        path
        for path in FAIRNESS_VECTORS
        if load_json(path)["revealed_round"]["format"] == f"gnau-dealer/revealed-round/v{version}"
    ]


V2_VECTORS = _vectors_of(2)
V3_VECTORS = _vectors_of(3)


def _runs(revealed: dict[str, Any]) -> bool:
    result = subprocess.run(
        [sys.executable, "-I", "-c", _docs_script()],
        input=json.dumps(revealed),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return result.returncode == 0


def _relabelled(revealed: dict[str, Any]) -> None:
    revealed["format"] = "gnau-dealer/revealed-round/v1"
    for seat in revealed["seats"]:
        seat["player_id"] = seat.pop("player_ref")


def _other_version(revealed: dict[str, Any]) -> None:
    """A v2 round read as v3, a v3 round as v2: the same members, other tags and seats."""
    other = {"gnau-dealer/revealed-round/v2": "v3", "gnau-dealer/revealed-round/v3": "v2"}
    revealed["format"] = "gnau-dealer/revealed-round/" + other[revealed["format"]]


#: What makes a round of either version (v2, v3) wrong.
TAMPERINGS: dict[str, Callable[[dict[str, Any]], None]] = {
    "a client seed": lambda r: r["seats"][0].update(client_seed="ff"),
    "a player id for a reference": lambda r: r["seats"][0].update(player_ref="alice"),
    "an upper-case reference": lambda r: r["seats"][0].update(
        player_ref="p-" + r["seats"][0]["player_ref"][2:].upper()
    ),
    "a player id beside the reference": lambda r: r["seats"][0].update(player_id="alice"),
    "two seats with one reference": lambda r: r["seats"][1].update(
        player_ref=r["seats"][0]["player_ref"]
    ),
    "the round relabelled v1": _relabelled,
    "the round read as the other version": _other_version,
    "an unknown format": lambda r: r.update(format="gnau-dealer/revealed-round/v4"),
}


def _stake_plus_one(revealed: dict[str, Any]) -> None:
    revealed["seats"][0]["stake"] += 1


def test_there_are_v2_and_v3_vectors() -> None:
    assert len(V2_VECTORS) >= 2
    assert len(V3_VECTORS) >= 3


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_the_docs_script_stops_at_a_tampered_round(name: str, version: int) -> None:
    revealed = load_json(_vectors_of(version)[0])["revealed_round"]
    assert _runs(revealed)
    tampered = copy.deepcopy(revealed)
    TAMPERINGS[name](tampered)
    assert not _runs(tampered), name


def test_the_docs_script_stops_at_a_changed_v2_stake() -> None:
    revealed = load_json(V2_VECTORS[0])["revealed_round"]
    _stake_plus_one(revealed)
    assert not _runs(revealed)


def test_the_docs_script_takes_any_v3_stake() -> None:
    """A v3 stake is not in the lock: a revealed round alone verifies with any stake (the signed
    ROUND_DEALT entry binds it; docs/receipts.md, step round)."""
    revealed = load_json(V3_VECTORS[0])["revealed_round"]
    _stake_plus_one(revealed)
    assert _runs(revealed)


@pytest.mark.parametrize("version", [2, 3])
def test_the_docs_script_takes_any_well_formed_reference(version: int) -> None:
    """The reference is not in the lock: a revealed round alone verifies with any reference (the
    signed ROUND_DEALT entry binds it; docs/receipts.md, step round)."""
    revealed = load_json(_vectors_of(version)[0])["revealed_round"]
    revealed["seats"][0]["player_ref"] = ref("mallory")
    assert _runs(revealed)
