"""Player references for tests: a fixed, readable stand-in for the service's keyed ones.

``ref("alice")`` is a well-formed reference (``p-`` and 32 hex digits) derived from the label,
so a test can say who sits where without a key. The service computes the real ones
(:func:`gnau_service.fairness.player_refs.player_ref`).
"""

from __future__ import annotations

import hashlib


def ref(label: str) -> str:
    """A player reference standing for ``label``."""
    return "p-" + hashlib.sha256(label.encode()).digest()[:16].hex()
