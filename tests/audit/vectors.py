"""The official vectors, copied unchanged from /work/shared/vectors (see each file's "source")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent / "vectors"


def load(name: str) -> Any:
    return json.loads((_HERE / name).read_text(encoding="utf-8"))


MERKLE = load("rfc6962-merkle.json")
SIGNED_NOTE = load("c2sp-signed-note.json")
COSIGNATURE = load("c2sp-tlog-cosignature.json")


def hexes(values: list[str] | None) -> list[bytes]:
    """A JSON list of hex strings as bytes; JSON null (a Go nil proof) is the empty list."""
    return [bytes.fromhex(value) for value in values or []]
