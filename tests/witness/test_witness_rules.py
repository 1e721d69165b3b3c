"""The pure parts of the witness: request bodies, the verdict rules, LOGS.toml."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.merkle import EMPTY_ROOT, MemoryTree, leaf_hash
from gnau_service.audit.note import Signer
from gnau_service.audit.witness_protocol import (
    MAX_PROOF_LINES,
    MalformedRequestError,
    encode_add_checkpoint,
    parse_add_checkpoint,
    parse_size_response,
)
from gnau_service.witness.logs import LogsFileError, parse_logs
from gnau_service.witness.verdict import Refusal, judge
from tests.witness.test_witness_server import SPEC_REQUEST

ORIGIN = "example.com/log"
VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"


# --- Request bodies -------------------------------------------------------------------------------


def test_spec_example_request_parses() -> None:
    request = parse_add_checkpoint(SPEC_REQUEST)
    assert request.old_size == 20852014
    assert [base64.b64encode(h).decode() for h in request.proof] == [
        "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=",
        "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=",
        "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=",
        "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=",
    ]
    assert request.note.startswith("example.com/behind-the-sofa\n20852163\n")
    assert request.note.count("\u2014 example.com/behind-the-sofa ") == 2
    # And it is re-encoded byte for byte.
    assert encode_add_checkpoint(request.old_size, request.proof, request.note) == SPEC_REQUEST


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"old 0", "no empty line"),
        (b"old 0\nAAAA\n", "no empty line"),
        (b"Old 0\n\n", "does not start"),
        (b"old  0\n\n", "not a decimal"),
        (b"old 00\n\n", "not a decimal"),
        (b"old 18446744073709551616\n\n", "not a decimal"),
        (b"old \xd9\xa1\n\n", "not a decimal"),  # ARABIC-INDIC DIGIT ONE
        (b"old 1\n" + b"A" * 43 + b"\n\n", "not canonical base64"),
        (b"old 1\nAAAA\n\n", "not a 32-byte hash"),
        (b"old 1\r\n\n", "not a decimal"),
    ],
)
def test_malformed_requests(body: bytes, reason: str) -> None:
    with pytest.raises(MalformedRequestError, match=reason):
        parse_add_checkpoint(body)


def test_proof_line_limit_is_the_spec_bound() -> None:
    assert MAX_PROOF_LINES == 63
    line = base64.b64encode(bytes(32)) + b"\n"
    assert len(parse_add_checkpoint(b"old 1\n" + line * 63 + b"\nx").proof) == 63
    with pytest.raises(MalformedRequestError, match="64 proof lines"):
        parse_add_checkpoint(b"old 1\n" + line * 64 + b"\nx")
    with pytest.raises(ValueError, match="longer than 63"):
        encode_add_checkpoint(1, [bytes(32)] * 64, "x")


@given(
    old=st.integers(0, 2**64 - 1),
    proof=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PROOF_LINES),
    note=st.text(min_size=1).filter(lambda t: not t.startswith("\n")),
)
def test_encode_then_parse_round_trips(old: int, proof: list[bytes], note: str) -> None:
    request = parse_add_checkpoint(encode_add_checkpoint(old, proof, note))
    assert (request.old_size, list(request.proof), request.note) == (old, proof, note)


def test_size_response() -> None:
    assert parse_size_response(b"12\n") == 12
    for bad in (b"12", b"012\n", b"-1\n", b"1 2\n"):
        with pytest.raises(ValueError):
            parse_size_response(bad)


# --- The verdict ----------------------------------------------------------------------------------


def tree(size: int, label: str = "a") -> MemoryTree:
    memory = MemoryTree()
    for index in range(size):
        memory.append(leaf_hash(f"{label}{index}".encode()))
    return memory


def head(memory: MemoryTree, size: int) -> Checkpoint:
    return Checkpoint(ORIGIN, size, memory.root(size))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.integers(0, 70))
def test_honest_growth_is_accepted_and_any_other_root_refused(old: int, grow: int) -> None:
    memory = tree(old + grow)
    latest, new = head(memory, old), head(memory, old + grow)
    proof = memory.consistency_proof(old, old + grow) if grow else []
    assert judge(latest, old, proof, new) is None
    forged = Checkpoint(ORIGIN, new.size, leaf_hash(b"forged"))
    verdict = judge(latest, old, proof, forged)
    assert verdict is not None
    assert verdict.refusal is (Refusal.ROOT_MISMATCH if grow == 0 else Refusal.INCONSISTENT)
    assert verdict.status == (409 if grow == 0 else 422)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 39))
def test_a_fork_is_never_accepted(old: int, grow: int, fork_at: int) -> None:
    """A tree that differs from the recorded one in some leaf before ``old`` is refused, with
    the fork's own (valid for it) consistency proof."""
    fork_at %= old
    honest = tree(old)
    forked = tree(fork_at)
    for index in range(fork_at, old + grow):
        forked.append(leaf_hash(f"b{index}".encode()))
    proof = forked.consistency_proof(old, old + grow)
    verdict = judge(head(honest, old), old, proof, head(forked, old + grow))
    assert verdict is not None and verdict.refusal is Refusal.INCONSISTENT


def test_the_rules_in_the_spec_order() -> None:
    memory = tree(8)
    latest = head(memory, 4)
    cases = [
        # (latest, old, proof, new) -> refusal or None
        ((None, 0, [], head(memory, 8)), None),  # first sight: trusted as is
        ((None, 0, [bytes(32)], head(memory, 8)), Refusal.INCONSISTENT),  # must be empty from 0
        ((None, 3, [], head(memory, 8)), Refusal.OLD_SIZE_MISMATCH),
        ((None, 9, [], head(memory, 8)), Refusal.OLD_SIZE_TOO_LARGE),  # 400 before 409
        ((latest, 0, [], head(memory, 8)), Refusal.OLD_SIZE_MISMATCH),
        ((latest, 5, [], head(memory, 8)), Refusal.OLD_SIZE_MISMATCH),
        ((latest, 4, [], head(memory, 4)), None),  # the same checkpoint again
        ((latest, 4, [bytes(32)], head(memory, 4)), Refusal.INCONSISTENT),
        ((latest, 4, [], Checkpoint(ORIGIN, 4, EMPTY_ROOT)), Refusal.ROOT_MISMATCH),
        ((latest, 4, memory.consistency_proof(4, 8), head(memory, 8)), None),
        ((latest, 4, memory.consistency_proof(4, 7), head(memory, 8)), Refusal.INCONSISTENT),
    ]
    for (old_head, old, proof, new), expected in cases:
        verdict = judge(old_head, old, proof, new)
        assert (verdict.refusal if verdict else None) is expected, (old, new.size, expected)
        if verdict:
            assert verdict.latest_size == (old_head.size if old_head else 0)


# --- LOGS.toml ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no \\[\\[log\\]\\] tables"),
        ("prefix = 'w'\n[[log]]\norigin='a'\nkeys=['x']", "prefix"),
        ("prefix = '/w/'\n[[log]]\norigin='a'\nkeys=['x']", "prefix"),
        ("[[log]]\norigin='a'\nkeys=[]", "non-empty list"),
        ("[[log]]\norigin=''\nkeys=['x']", "origin"),
        ("[[log]]\norigin='a'\nkeys=['not-a-vkey']", "name\\+keyid\\+key"),
        (f"[[log]]\norigin='a'\nkeys=['{VKEY}']\n[[log]]\norigin='a'\nkeys=['{VKEY}']", "twice"),
        (f"[[log]]\norigin='a'\nkeys=['{VKEY}']\nkey='typo'", "unknown keys: key"),
        (f"prefixes='/w'\n[[log]]\norigin='a'\nkeys=['{VKEY}']", "unknown keys: prefixes"),
        ("[[log]\n", "not valid TOML"),
    ],
)
def test_bad_logs_files(text: str, reason: str) -> None:
    with pytest.raises(LogsFileError, match=reason):
        parse_logs(text)


def test_logs_file_with_two_logs_and_a_rotation() -> None:
    second = Signer("example.com/bar", Ed25519PrivateKey.from_private_bytes(bytes(32))).verifier
    logs = parse_logs(
        f"[[log]]\norigin='one'\nkeys=['{VKEY}', '{VKEY}']\n"
        f"[[log]]\norigin='two'\nkeys=['{VKEY}', '{second.vkey}']\n"
    )
    assert logs.prefix == ""
    one, two = logs.keys_for("one"), logs.keys_for("two")
    assert one is not None and [k.vkey for k in one] == [VKEY]  # listed twice, kept once
    assert two is not None and [k.vkey for k in two] == [VKEY, second.vkey]
