"""Shared fixtures of the fairness tests: the checked-in vectors and a sample round."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gnau_service.fairness import Beacon, CommittedRound, LockedSeat, RevealedRound
from gnau_service.fairness.encoding import CURRENT_VERSION, FairnessVersion
from gnau_service.rules.house_rules import HouseRules
from tests.references import ref

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The published vectors, beside docs/fairness.md, which describes them (its section 4).
VECTOR_DIR = REPO_ROOT / "docs" / "vectors"
FAIRNESS_VECTORS = sorted(VECTOR_DIR.glob("fairness-round-*.json"))
PLAYER_REF_VECTOR = VECTOR_DIR / "player-ref-v1.json"
#: Their generator, with the vectors of others that the tests read (NIST's HMAC_DRBG).
TEST_VECTOR_DIR = REPO_ROOT / "tests" / "vectors"


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_script(path: Path) -> ModuleType:
    """Import a script that is not in a package (tests/vectors, bench) by its path."""
    name = f"_script_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as an import would, so dataclasses and pickling find it.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=FAIRNESS_VECTORS, ids=lambda path: path.stem)
def vector(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each checked-in fairness vector in turn."""
    loaded: dict[str, Any] = load_json(request.param)
    return loaded


def sample_revealed_round(version: FairnessVersion = CURRENT_VERSION) -> RevealedRound:
    """Three seats with client seeds and a beacon: every kind of input a tamper can touch."""
    committed = CommittedRound(
        "table-5/round-9", HouseRules(), server_seed=bytes(range(32)), version=version
    )
    seats = [
        LockedSeat(1, ref("alice"), 100, client_seed=b"alice's seed"),
        LockedSeat(2, ref("bob"), 250),
        LockedSeat(4, ref("carol"), 75, client_seed=b"\x01\x02"),
    ]
    beacon = Beacon("drand/quicknet/round/99", bytes.fromhex("ab" * 32))
    return committed.lock(seats, beacon).deal().reveal()
