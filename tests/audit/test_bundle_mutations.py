"""Random damage to a valid bundle: verification reports it or cannot start, and never crashes.

Byte flips, deleted, duplicated and swapped lines, junk lines and truncation at any byte. The
verifier must return a report or raise BundleFormatError (nothing else); a VALID report is only
allowed when the damage left the bundle's meaning whole (the oracle below reads the bundle with
plain json, independently of the verifier). The CLI must agree, print no traceback, and exit 0
only for VALID, 2 only when verification could not start.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.bundle import BundleFormatError
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.cli.main import main
from tests.audit.logs import MemoryLog, honest_log


@functools.cache
def base() -> tuple[MemoryLog, bytes]:
    log = honest_log(rounds=2)
    return log, "".join(log.bundle_lines()).encode()


@dataclass(frozen=True)
class Meaning:
    header: dict[str, Any]
    checkpoints: list[str]
    entries: list[str]


def meaning(data: bytes) -> Meaning | None:
    """What a bundle says, read leniently with plain json; None if that cannot read it."""
    try:
        objects = [json.loads(line) for line in data.split(b"\n") if line.strip()]
        header, *rest = objects
        return Meaning(
            header,
            [obj["checkpoint"] for obj in rest if "checkpoint" in obj],
            [obj["entry"] for obj in rest if "entry" in obj],
        )
    except (ValueError, TypeError, KeyError):
        return None


def says_the_same(mutated: bytes, original: bytes) -> bool:
    """The same header and entries, only genuine checkpoints, and the last one still there."""
    found, expected = meaning(mutated), meaning(original)
    assert expected is not None
    return (
        found is not None
        and (found.header, found.entries) == (expected.header, expected.entries)
        and set(found.checkpoints) <= set(expected.checkpoints)
        and expected.checkpoints[-1] in found.checkpoints
    )


Mutation = tuple[str, int, int, bytes]


@st.composite
def mutations(draw: st.DrawFn) -> list[Mutation]:
    kinds = st.sampled_from(["flip", "delete", "duplicate", "swap", "junk", "truncate"])
    return draw(
        st.lists(
            st.tuples(kinds, st.integers(0, 10**6), st.integers(0, 10**6), st.binary(max_size=12)),
            min_size=1,
            max_size=3,
        )
    )


def mutated(data: bytes, steps: list[Mutation]) -> bytes:
    for kind, first, second, junk in steps:
        if kind in ("flip", "truncate"):
            if not data:
                continue
            at = first % len(data)
            if kind == "truncate":
                data = data[:at]
            else:
                data = data[:at] + bytes([data[at] ^ (1 << second % 8)]) + data[at + 1 :]
            continue
        lines = data.split(b"\n")
        i, j = first % len(lines), second % len(lines)
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(i, junk)
        data = b"\n".join(lines)
    return data


def check(steps: list[Mutation]) -> None:
    log, original = base()
    data = mutated(original, steps)
    try:
        report = verify_bundle(io.BytesIO(data), pinned_keys=[log.signer.verifier], jobs=1)
    except BundleFormatError:
        expected_status = 2
    else:
        if report.ok:
            assert says_the_same(data, original), report.summary()
        expected_status = 0 if report.ok else 1
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bundle.jsonl"
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["audit", "verify", str(path), "--key", log.signer.vkey, "--jobs", "1"])
    printed = out.getvalue() + err.getvalue()
    assert "Traceback" not in printed
    assert status == expected_status, printed


@settings(max_examples=60)
@given(mutations())
def test_a_damaged_bundle_is_reported_or_refused_never_a_crash(steps: list[Mutation]) -> None:
    check(steps)


@pytest.mark.slow
@settings(max_examples=3_000)
@given(mutations())
def test_a_damaged_bundle_is_reported_or_refused_never_a_crash_exhaustively(
    steps: list[Mutation],
) -> None:
    check(steps)


def test_the_undamaged_bundle_is_valid_and_the_oracle_sees_damage() -> None:
    log, original = base()
    assert verify_bundle(io.BytesIO(original), pinned_keys=[log.signer.verifier]).ok
    assert says_the_same(original, original)
    assert says_the_same(original + b"\n\n", original)
    lines = original.split(b"\n")
    last_checkpoint = max(i for i, line in enumerate(lines) if line.startswith(b'{"checkpoint"'))
    assert not says_the_same(b"\n".join(lines[:-2] + lines[-1:]), original)  # an entry gone
    assert not says_the_same(
        b"\n".join(lines[:last_checkpoint] + lines[last_checkpoint + 1 :]), original
    )
    assert says_the_same(b"\n".join(lines[:3] + lines[2:]), original)  # a checkpoint twice
