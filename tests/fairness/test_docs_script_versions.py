"""The standalone script of docs/fairness.md (*By hand*) on fairness v2 rounds made wrong: it
must stop at each, as it passes every vector of both versions (tests/fairness/test_vectors.py)."""

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

V2_VECTORS = [
    path
    for path in FAIRNESS_VECTORS
    if load_json(path)["revealed_round"]["format"] == "gnau-dealer/revealed-round/v2"
]


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


TAMPERINGS: dict[str, Callable[[dict[str, Any]], None]] = {
    "a stake": lambda r: r["seats"][0].update(stake=r["seats"][0]["stake"] + 1),
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
    "an unknown format": lambda r: r.update(format="gnau-dealer/revealed-round/v3"),
}


def test_there_are_v2_vectors() -> None:
    assert len(V2_VECTORS) >= 2


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_the_docs_script_stops_at_a_tampered_v2_round(name: str) -> None:
    revealed = load_json(V2_VECTORS[0])["revealed_round"]
    assert _runs(revealed)
    tampered = copy.deepcopy(revealed)
    TAMPERINGS[name](tampered)
    assert not _runs(tampered), name


def test_the_docs_script_takes_any_well_formed_reference() -> None:
    """The reference is not in the lock: a revealed round alone verifies with any reference (the
    signed ROUND_DEALT entry binds it; docs/receipts.md, step round)."""
    revealed = load_json(V2_VECTORS[0])["revealed_round"]
    revealed["seats"][0]["player_ref"] = ref("mallory")
    assert _runs(revealed)
