"""The witness over real HTTP (aiohttp server on a free port, aiohttp client): every status code,
the spec's request example, the concurrent-submission race, split views, restarts."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gnau_service.audit.checkpoint import Checkpoint, open_checkpoint
from gnau_service.audit.cosignature import WitnessKey, WitnessSigner, verify_cosignature
from gnau_service.audit.note import NoteSignature, SignedNote
from gnau_service.audit.witness_protocol import MAX_REQUEST_BYTES, encode_add_checkpoint
from gnau_service.witness.logs import parse_logs
from gnau_service.witness.server import RunningWitness, Witness, start_witness
from gnau_service.witness.state import WitnessState
from gnau_service.witness.verdict import Refusal
from tests.witnessing import GrowingLog, write_logs_toml

# The tlog-witness spec's example request, verbatim (its log key is not published).
SPEC_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2"
    "q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V62"
    "67UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
).encode()
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class Harness:
    log: GrowingLog
    signer: WitnessSigner
    state: WitnessState
    running: RunningWitness
    session: aiohttp.ClientSession
    url: str

    async def post(self, body: bytes) -> Reply:
        async with self.session.post(self.url, data=body) as response:
            return Reply(response.status, response.headers["Content-Type"], await response.read())

    def cosignature(self, reply: Reply, log: GrowingLog | None = None) -> int | None:
        """The time of the witness's valid cosignature in a 200 reply, on ``log``'s head."""
        assert reply.status == 200, reply.text
        assert reply.body.endswith(b"\n")
        (line,) = reply.text.removesuffix("\n").split("\n")
        note = (log or self.log).checkpoint().text
        return verify_cosignature(self.signer.key, note, NoteSignature.parse(line))


async def start(
    tmp_path: Path, log: GrowingLog, signer: WitnessSigner, prefix: str = "/w"
) -> tuple[WitnessState, RunningWitness]:
    toml = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]}, prefix)
    state = WitnessState(tmp_path / "witness.db")
    logs = parse_logs(toml.read_text())
    running = await start_witness(Witness(signer, logs, state, lambda: NOW), "127.0.0.1", 0)
    return state, running


@pytest.fixture
async def witness(tmp_path: Path) -> AsyncIterator[Harness]:
    log = GrowingLog.new(size=5)
    signer = WitnessSigner.generate("witness.example/w1")
    state, running = await start(tmp_path, log, signer)
    host, port = running.addresses[0]
    async with aiohttp.ClientSession() as session:
        yield Harness(
            log, signer, state, running, session, f"http://{host}:{port}/w/add-checkpoint"
        )
    await running.stop()


# --- 200 ------------------------------------------------------------------------------------------


async def test_first_checkpoint_is_cosigned_and_recorded(witness: Harness) -> None:
    reply = await witness.post(witness.log.request(0))
    assert reply.content_type.startswith("text/plain")
    assert witness.cosignature(reply) == int(NOW.timestamp())
    assert reply.text.startswith("\u2014 witness.example/w1 ")
    latest = witness.state.latest(witness.log.origin)
    assert latest is not None
    assert (latest.checkpoint.size, latest.checkpoint.root_hash) == (5, witness.log.tree.root(5))


async def test_response_concatenated_to_the_checkpoint_verifies_as_the_spec_says(
    witness: Harness,
) -> None:
    """The spec: a client MAY append the response to the checkpoint and verify the note with
    the witness keys it trusts."""
    reply = await witness.post(witness.log.request(0))
    note = SignedNote.parse(witness.log.checkpoint().encode() + reply.body)
    assert [s.name for s in note.signatures] == [witness.log.origin, "witness.example/w1"]
    line = note.signatures[1]
    blob = base64.b64decode(reply.text.split(" ")[-1])
    assert blob[:4] == line.key_id == witness.signer.key_id
    assert int.from_bytes(blob[4:12], "big") == int(NOW.timestamp())


async def test_consistent_growth_is_cosigned_each_time(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    for grow in (1, 2, 9, 16):
        old = witness.log.tree.size
        witness.log.grow(grow)
        assert witness.cosignature(await witness.post(witness.log.request(old)))
    # The same checkpoint again (old = new = latest, same root) is cosigned again.
    size = witness.log.tree.size
    assert witness.cosignature(await witness.post(witness.log.request(size)))
    assert witness.state.evidence() == []


# --- 400, 403, 404, 405, 413 ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"old 0\n",
        b"old 01\n\nx\n",
        b"new 0\n\n",
        b"old -1\n\n",
        b"old 0\nnot base64!\n\n",
        b"old 0\nAAAA\n\n",  # 3 bytes, not a hash
        b"old 0\n\nnot a note\n",
        b"old 0\n\nno signatures\n\n",
        b"\xff\xfe",
    ],
)
async def test_malformed_bodies_are_400(witness: Harness, body: bytes) -> None:
    reply = await witness.post(body)
    assert reply.status == 400
    assert reply.content_type.startswith("text/plain")
    assert reply.text.startswith("malformed request")


async def test_too_many_proof_lines_is_400_and_63_are_read(witness: Harness) -> None:
    note = witness.log.checkpoint().encode()
    hashes = [bytes(32)] * 64
    reply = await witness.post(
        b"old 0\n" + b"".join(base64.b64encode(h) + b"\n" for h in hashes) + b"\n" + note
    )
    assert (reply.status, "64 proof lines" in reply.text) == (400, True)
    # 63 lines are within the limit: they reach the consistency check (from 0: must be empty).
    assert (await witness.post(encode_add_checkpoint(0, hashes[:63], note))).status == 422


async def test_old_larger_than_new_is_400_and_recorded(witness: Harness) -> None:
    reply = await witness.post(encode_add_checkpoint(6, [], witness.log.checkpoint().encode()))
    assert reply.status == 400
    assert "old size 6 is larger than the size 5" in reply.text
    (evidence,) = witness.state.evidence()
    assert (evidence.refusal, evidence.status, evidence.old_size) == (
        Refusal.OLD_SIZE_TOO_LARGE,
        400,
        6,
    )


async def test_unknown_origin_is_404_and_the_spec_example_too(witness: Harness) -> None:
    stranger = GrowingLog.new("gnau-dealer/stranger", size=3)
    assert (await witness.post(stranger.request(0))).status == 404
    assert (await witness.post(SPEC_REQUEST)).status == 404
    assert witness.state.evidence() == []


async def test_untrusted_signature_is_403(witness: Harness) -> None:
    impostor = GrowingLog.new(witness.log.origin, size=5)  # same origin, another key
    reply = await witness.post(impostor.request(0))
    assert reply.status == 403
    assert "no trusted signature" in reply.text
    # A broken signature by the trusted key is refused too, and nothing is recorded.
    note = witness.log.checkpoint()
    broken = note.signatures[0].signature[:-1] + bytes([note.signatures[0].signature[-1] ^ 1])
    tampered = SignedNote(
        note.text,
        (type(note.signatures[0])(note.signatures[0].name, note.signatures[0].key_id, broken),),
    )
    assert (await witness.post(encode_add_checkpoint(0, [], tampered.encode()))).status == 403
    assert witness.state.latest(witness.log.origin) is None
    assert witness.state.evidence() == []


async def test_spec_example_with_its_origin_trusted_under_another_key_is_403(
    tmp_path: Path,
) -> None:
    spec_origin = GrowingLog.new("example.com/behind-the-sofa")
    signer = WitnessSigner.generate("witness.example/w1")
    _, running = await start(tmp_path, spec_origin, signer, prefix="")
    host, port = running.addresses[0]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://{host}:{port}/add-checkpoint", data=SPEC_REQUEST) as response,
        ):
            assert response.status == 403
    finally:
        await running.stop()


async def test_oversized_body_is_413_and_get_is_405(witness: Harness) -> None:
    assert (await witness.post(b"old 0\n\n" + b"x" * MAX_REQUEST_BYTES)).status == 413
    async with witness.session.get(witness.url) as response:
        assert response.status == 405
    async with witness.session.post(witness.url.replace("/w/", "/")) as response:
        assert response.status == 404  # the prefix from LOGS.toml is required


# --- 409 and 422 ----------------------------------------------------------------------------------


async def test_old_size_not_the_latest_is_409_with_the_size(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    witness.log.grow(3)
    for old in (0, 4, 6):
        reply = await witness.post(witness.log.request(old))
        assert reply.status == 409
        assert reply.content_type == "text/x.tlog.size"  # exactly, no charset parameter
        assert reply.body == b"5\n"
    # The log retries from the witness's size, as the spec intends.
    assert witness.cosignature(await witness.post(witness.log.request(5)))


async def test_a_bad_consistency_proof_is_422(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    witness.log.grow(6)
    proof = witness.log.proof(5)
    wrong = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
    note = witness.log.checkpoint().encode()
    for bad in (wrong, proof[:-1], [*proof, proof[0]], []):
        reply = await witness.post(encode_add_checkpoint(5, bad, note))
        assert reply.status == 422, bad
        assert "consistency proof" in reply.text
    assert {e.refusal for e in witness.state.evidence()} == {Refusal.INCONSISTENT}
    latest = witness.state.latest(witness.log.origin)
    assert latest is not None and latest.checkpoint.size == 5


# --- Split views ----------------------------------------------------------------------------------


async def test_split_view_same_size_other_root_is_409_and_recorded(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    witness.log.grow(3)
    assert witness.cosignature(await witness.post(witness.log.request(5)))
    other = witness.log.fork(at=5).grow(3)  # size 8 too, same key, other leaves
    assert other.tree.root(8) != witness.log.tree.root(8)
    reply = await witness.post(other.request(8))
    assert (reply.status, reply.content_type, reply.body) == (409, "text/x.tlog.size", b"8\n")
    (evidence,) = witness.state.evidence()
    assert evidence.refusal is Refusal.ROOT_MISMATCH
    assert evidence.checkpoint == str(other.checkpoint())
    assert evidence.latest_checkpoint == str(witness.log.checkpoint())
    # Both notes verify under the log's key: together they prove the fork to anyone.
    for text in (evidence.checkpoint, evidence.latest_checkpoint):
        assert SignedNote.parse(text).verify([witness.log.signer.verifier])


async def test_split_view_inconsistent_larger_tree_is_422_and_recorded(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    other = witness.log.fork(at=3).grow(7)  # size 10, differs from leaf 3 on
    # The fork's own proof from 5 cannot connect the witness's root for size 5 to its root.
    reply = await witness.post(
        encode_add_checkpoint(5, other.proof(5), other.checkpoint().encode())
    )
    assert reply.status == 422
    (evidence,) = witness.state.evidence()
    assert evidence.refusal is Refusal.INCONSISTENT
    assert evidence.proof == tuple(base64.b64encode(h).decode() for h in other.proof(5))
    latest = witness.state.latest(witness.log.origin)
    assert latest is not None and latest.checkpoint.root_hash == witness.log.tree.root(5)
    # The honest log continues undisturbed.
    witness.log.grow(5)
    assert witness.cosignature(await witness.post(witness.log.request(5)))


async def test_repeated_evidence_is_counted_not_duplicated(witness: Harness) -> None:
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    other = witness.log.fork(at=0).grow(5)
    for _ in range(3):
        assert (await witness.post(other.request(5))).status == 409
    (evidence,) = witness.state.evidence()
    assert evidence.times == 3


# --- The race -------------------------------------------------------------------------------------


async def test_concurrent_submissions_cannot_roll_the_witness_back(witness: Harness) -> None:
    """Many submissions from the same old size at once: exactly one is cosigned; the others
    get 409 with the winner's size, and the record is the winner's, never a smaller one."""
    assert witness.cosignature(await witness.post(witness.log.request(0)))
    witness.log.grow(40)
    sizes = list(range(6, 46, 4))
    bodies = [witness.log.request(5, size) for size in sizes]
    replies = await asyncio.gather(*(witness.post(body) for body in bodies))
    winners = [size for size, reply in zip(sizes, replies, strict=True) if reply.status == 200]
    assert len(winners) == 1, [r.status for r in replies]
    losers = [reply for reply in replies if reply.status != 200]
    assert {(r.status, r.body) for r in losers} == {(409, f"{winners[0]}\n".encode())}
    latest = witness.state.latest(witness.log.origin)
    assert latest is not None and latest.checkpoint.size == winners[0]


async def test_two_servers_on_one_database_take_turns(tmp_path: Path) -> None:
    """Two witness processes' worth of servers on the same file: the transaction, not the
    event loop, is what serialises submissions."""
    log = GrowingLog.new(size=4)
    signer = WitnessSigner.generate("witness.example/w1")
    state_a, first = await start(tmp_path, log, signer)
    state_b, second = await start(tmp_path, log, signer)
    urls = [f"http://{h}:{p}/w/add-checkpoint" for r in (first, second) for h, p in r.addresses]
    log.grow(30)
    try:
        async with aiohttp.ClientSession() as session:

            async def post(url: str, body: bytes) -> int:
                async with session.post(url, data=body) as response:
                    return response.status

            assert await post(urls[0], log.request(0, 4)) == 200
            sizes = list(range(5, 35, 3))
            statuses = await asyncio.gather(
                *(post(urls[i % 2], log.request(4, size)) for i, size in enumerate(sizes))
            )
        assert sorted(statuses) == [200] + [409] * (len(sizes) - 1)
        winner = sizes[statuses.index(200)]
        for state in (state_a, state_b):
            latest = state.latest(log.origin)
            assert latest is not None and latest.checkpoint.size == winner
    finally:
        await first.stop()
        await second.stop()


# --- Restart --------------------------------------------------------------------------------------


async def test_a_restarted_witness_keeps_its_state(tmp_path: Path) -> None:
    log = GrowingLog.new(size=7)
    signer = WitnessSigner.generate("witness.example/w1")

    async def run(body: bytes) -> tuple[int, bytes]:
        state, running = await start(tmp_path, log, signer)
        host, port = running.addresses[0]
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"http://{host}:{port}/w/add-checkpoint", data=body) as response,
            ):
                return response.status, await response.read()
        finally:
            await running.stop()
            state.close()

    assert (await run(log.request(0)))[0] == 200
    log.grow(2)
    assert await run(log.request(0)) == (409, b"7\n")  # the new process remembers 7
    assert (await run(log.request(7)))[0] == 200
    fork = log.fork(at=7).grow(2)
    assert await run(fork.request(9)) == (409, b"9\n")
    assert [e.refusal for e in WitnessState(tmp_path / "witness.db").evidence()] == [
        Refusal.OLD_SIZE_MISMATCH,
        Refusal.ROOT_MISMATCH,
    ]


def test_checkpoint_sizes_up_to_2_64_minus_1_are_stored_exactly(tmp_path: Path) -> None:
    log = GrowingLog.new()
    state = WitnessState(tmp_path / "w.db")
    signer = WitnessSigner.generate("w.example/w")
    top = 2**64 - 1
    root = bytes(range(32))
    note = log.signer.sign_checkpoint(top, root)
    signed = open_checkpoint(note.encode(), log.origin, [log.signer.verifier])
    result: Any = state.add_checkpoint(signed, 0, (), signer, NOW)
    assert isinstance(result, NoteSignature)
    latest = state.latest(log.origin)
    assert latest is not None and latest.checkpoint == Checkpoint(log.origin, top, root)
    assert verify_cosignature(WitnessKey.from_vkey(signer.vkey), note.text, result)


def test_cosignature_times_never_go_back_when_the_clock_does(tmp_path: Path) -> None:
    log = GrowingLog.new(size=3)
    state = WitnessState(tmp_path / "w.db")
    signer = WitnessSigner.generate("w.example/w")
    times = []
    for clock in (NOW, NOW.replace(year=2020), NOW.replace(year=2027)):
        old = log.tree.size
        log.grow(1)
        signed = open_checkpoint(log.checkpoint().encode(), log.origin, [log.signer.verifier])
        result = state.add_checkpoint(
            signed, old if times else 0, log.proof(old) if times else (), signer, clock
        )
        assert isinstance(result, NoteSignature)
        times.append(verify_cosignature(signer.key, log.checkpoint().text, result))
    assert times == [
        int(NOW.timestamp()),
        int(NOW.timestamp()),
        int(NOW.replace(year=2027).timestamp()),
    ]
