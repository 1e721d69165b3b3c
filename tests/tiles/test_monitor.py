"""``gnau audit monitor`` on a directory of tiles: what it verifies, every tampering it catches,
waiting for bundles not yet public, resuming from its state file.

The tiles are written by ``tests/tiles/tile_files.py`` (hashlib and the C2SP text alone, not the
code under test); the log is a :class:`~tests.audit.logs.MemoryLog`, so a test can log dishonest
entries, sign other roots with the log's own key, or write tiles that lie.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign, with_cosignatures
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import KeyRotation
from gnau_service.tiles.client import open_tiles
from gnau_service.tiles.monitor import Monitor, MonitorFailure, MonitorState
from tests.audit.logs import MemoryLog, honest_log, new_signer, play_round
from tests.conftest import Run
from tests.tiles.tile_files import leaf, tile_name, write_tiles

Gnau = Callable[..., Run]
#: Service entries between the honest rounds and the last ones: two full tiles and more.
FILLER = 600


def size_of(note: str) -> int:
    return Checkpoint.parse(SignedNote.parse(note).text).size


def publish(log: MemoryLog, directory: Path) -> Path:
    """The log's tiles for each of its checkpoints, and its latest checkpoint."""
    write_tiles(directory, log.entries, [size_of(note) for note in log.notes], log.notes[-1])
    return directory


def big_log() -> MemoryLog:
    """Rounds settled and voided, then enough entries for three bundles, then more rounds."""
    log = honest_log(rounds=2)
    for number in range(FILLER):
        log.append(EntryKind.SERVICE_STARTED, {"version": f"filler {number}"})
    log.checkpoint()
    for number in range(3):
        play_round(log.append, f"late-{number}")
    log.checkpoint()
    return log


@pytest.fixture(scope="module")
def log() -> MemoryLog:
    return big_log()


@pytest.fixture(scope="module")
def original(log: MemoryLog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish(log, tmp_path_factory.mktemp("tiles"))


@pytest.fixture
def tiles(original: Path, tmp_path: Path) -> Path:
    """A fresh copy of the honest tiles, to tamper with."""
    return Path(shutil.copytree(original, tmp_path / "tiles"))


def monitor(directory: Path, log: MemoryLog, **options: object) -> Monitor:
    return Monitor(open_tiles(str(directory)), [log.signer.verifier], **options)  # type: ignore[arg-type]


def failure_of(directory: Path, log: MemoryLog) -> str:
    with pytest.raises(MonitorFailure) as caught:
        monitor(directory, log).step()
    return str(caught.value)


def read_bundle(path: Path) -> list[bytes]:
    data, entries, offset = path.read_bytes(), [], 0
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 2], "big")
        entries.append(data[offset + 2 : offset + 2 + length])
        offset += 2 + length
    return entries


def write_bundle(path: Path, entries: list[bytes]) -> None:
    path.write_bytes(b"".join(len(entry).to_bytes(2, "big") + entry for entry in entries))


# -- an honest log ---------------------------------------------------------------------------------


def test_an_honest_log_verifies_from_its_tiles(tiles: Path, log: MemoryLog) -> None:
    result = monitor(tiles, log).step()
    size = len(log.entries)
    assert (result.size, result.verified, result.waiting) == (size, size, 0)
    # honest_log(2): 2 settled and 1 voided; then 3 settled.
    assert result.rounds_replayed == 6
    assert result.line() == (
        f"checkpoint {size:,}: {size:,} entries verified, 6 rounds replayed, 0 bundles waiting "
        "to be public"
    )


@pytest.mark.parametrize("chunk", [3, 100])
def test_rounds_replay_whole_across_chunks(tiles: Path, log: MemoryLog, chunk: int) -> None:
    """Verified a few entries at a time, every round is still replayed from its commitment."""
    result = monitor(tiles, log, chunk_entries=chunk).step()
    assert (result.verified, result.rounds_replayed) == (len(log.entries), 6)


def test_the_command_prints_one_line_per_checkpoint(
    tiles: Path, log: MemoryLog, gnau: Gnau
) -> None:
    state = tiles.parent / "state.json"
    run = gnau(
        "audit", "monitor", str(tiles), "--key", log.signer.vkey, "--state", str(state), "--once"
    )
    assert run.status == 0, run.err
    size = len(log.entries)
    assert run.err.splitlines() == [
        f"checkpoint {size:,}: {size:,} entries verified, 6 rounds replayed, 0 bundles waiting "
        "to be public"
    ]
    saved = json.loads(state.read_text())
    assert (saved["size"], saved["verified"], saved["replay_from"]) == (size, size, size)
    assert saved["root"] == log.tree.root().hex()


def test_audit_verify_reads_a_tiles_directory(tiles: Path, log: MemoryLog, gnau: Gnau) -> None:
    run = gnau("audit", "verify", "--tiles", str(tiles), "--key", log.signer.vkey)
    assert run.status == 0, run.out + run.err
    assert f"entries: {len(log.entries):,} of {len(log.entries):,} verified" in run.out
    assert run.out.splitlines()[-1] == "result: VALID"
    # A directory given as the bundle is read as tiles too.
    assert gnau("audit", "verify", str(tiles), "--key", log.signer.vkey).status == 0
    keyless = gnau("audit", "verify", "--tiles", str(tiles))
    assert keyless.status == 2
    assert "verifying tiles needs the log's key (--key VKEY)" in keyless.err


def test_a_key_rotation_hands_over_to_the_new_key(tmp_path: Path) -> None:
    old, new = new_signer(), new_signer()
    log = honest_log(rounds=1, signer=old)
    rotation = KeyRotation(old.verifier, new.verifier, "2026-11-29T13:00:00Z").sign(old.signer)
    log.append(EntryKind.KEY_ROTATED, {"rotation": str(rotation)})
    log.appender.signer = new
    play_round(log.append, "after-rotation")
    log.checkpoint()  # signed by the new key alone
    following = Monitor(open_tiles(str(publish(log, tmp_path))), [old.verifier])
    result = following.step()
    assert result.verified == len(log.entries)
    assert result.rounds_replayed == 3
    assert [index for index, _ in following.state.rotations] == [len(log.entries) - 5]


# -- tampering -------------------------------------------------------------------------------------


def test_reordered_entries_in_a_bundle(tiles: Path, log: MemoryLog) -> None:
    path = tiles / tile_name("entries", 0)
    entries = read_bundle(path)
    entries[3], entries[4] = entries[4], entries[3]
    write_bundle(path, entries)
    failure = failure_of(tiles, log)
    assert "entry 3: its bytes in tile/entries/000 are not the leaf the tiles hold" in failure
    assert f"leaf hash of the entry: {leaf(log.entries[4]).hex()}" in failure
    assert f"tile/0/000 holds: {leaf(log.entries[3]).hex()}" in failure


def test_an_edited_byte_of_an_entry(tiles: Path, log: MemoryLog) -> None:
    path = tiles / tile_name("entries", 1)
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))
    assert "of the entry" in failure_of(tiles, log)
    assert "entry 256: its bytes in tile/entries/001" in failure_of(tiles, log)


def test_a_truncated_bundle(tiles: Path, log: MemoryLog) -> None:
    path = tiles / tile_name("entries", 1)
    path.write_bytes(path.read_bytes()[:-10])
    assert "tile/entries/001 is malformed: a bundle ends inside entry 255" in failure_of(tiles, log)


def test_a_truncated_hash_tile(tiles: Path, log: MemoryLog) -> None:
    path = tiles / tile_name(0, 0)
    path.write_bytes(path.read_bytes()[:-32])
    failure = failure_of(tiles, log)
    assert "the tiles of the tree of 625 do not hold together" in failure
    assert "tile/0/000: a tile of width 256 is 8192 bytes, not 8160" in failure


def test_two_tiles_swapped(tiles: Path, log: MemoryLog) -> None:
    # The level-0 tiles and their bundles swapped together: each bundle matches its tile.
    for level in (0, "entries"):
        first, second = tiles / tile_name(level, 0), tiles / tile_name(level, 1)
        one, two = first.read_bytes(), second.read_bytes()
        first.write_bytes(two)
        second.write_bytes(one)
    failure = failure_of(tiles, log)
    assert "the tiles of the tree of 625 do not hold together" in failure
    expected = hashlib.sha256(b"\x01" + log.tree.node(8, 0) + log.tree.node(8, 1)).digest()
    assert expected == log.tree.node(9, 0)  # what tile/1/000.p/2 holds: two subtree roots
    assert f"tile/0/000 hashes to {log.tree.node(8, 1).hex()}" in failure
    assert f"but tile/1/000.p/2 holds {log.tree.node(8, 0).hex()} for it" in failure


def test_a_level_zero_tile_replaced_with_its_bundle(tiles: Path, log: MemoryLog) -> None:
    """A full bundle and its level-0 tile rewritten together (entries of another history,
    hashed honestly), under the honest level-1 tile."""
    path = tiles / tile_name("entries", 1)
    entries = read_bundle(path)
    entries[0] = entries[0].replace(b"filler", b"FILLER")
    write_bundle(path, entries)
    hashes = (tiles / tile_name(0, 1)).read_bytes()
    (tiles / tile_name(0, 1)).write_bytes(leaf(entries[0]) + hashes[32:])
    assert "do not hold together" in failure_of(tiles, log)


def test_a_checkpoint_of_another_key(tiles: Path, log: MemoryLog) -> None:
    impostor = new_signer(log.signer.verifier.name)
    note = impostor.sign_checkpoint(len(log.entries), log.tree.root())
    (tiles / "checkpoint").write_text(str(note))
    failure = failure_of(tiles, log)
    assert "does not verify by the log's key or any key it rotated to" in failure


def test_a_checkpoint_of_another_root_signed_by_the_log(tiles: Path, log: MemoryLog) -> None:
    forged = hashlib.sha256(b"another history").digest()
    (tiles / "checkpoint").write_text(str(log.signer.sign_checkpoint(len(log.entries), forged)))
    failure = failure_of(tiles, log)
    assert f"checkpoint root: {forged.hex()}" in failure
    assert f"tiles give:      {log.tree.root().hex()}" in failure


def test_a_fork_after_a_verified_checkpoint(tiles: Path, log: MemoryLog) -> None:
    following = monitor(tiles, log)
    following.step()
    forged = hashlib.sha256(b"another history").digest()
    (tiles / "checkpoint").write_text(str(log.signer.sign_checkpoint(len(log.entries), forged)))
    with pytest.raises(MonitorFailure, match="fork: the log signed two different roots for size"):
        following.step()


def test_a_fork_of_a_larger_size(log: MemoryLog, tmp_path: Path) -> None:
    """The log, then an honest continuation of another history from the same start: tiles and
    a checkpoint that verify on their own, but not as an extension of what was verified."""
    first = publish(log, tmp_path / "a")
    following = monitor(first, log)
    following.step()
    other = MemoryLog(log.signer)
    for data in log.entries[:-4]:  # the same history but for the last round...
        other.entries.append(data)
        other.tree.append(leaf(data))
    other.appender.head = type(log.appender.head)(
        len(other.entries), leaf(other.entries[-1]).hex(), other.frontier(len(other.entries))
    )
    for number in range(3):  # ... and then another
        play_round(other.append, f"fork-{number}")
    other.checkpoint()
    write_tiles(first, other.entries, [len(other.entries)], other.notes[-1])
    with pytest.raises(MonitorFailure, match="is not consistent with the last verified one"):
        following.step()


def test_a_checkpoint_of_a_size_with_no_tile(tiles: Path, log: MemoryLog) -> None:
    size = len(log.entries) + 7
    note = log.signer.sign_checkpoint(size, hashlib.sha256(b"x").digest())
    (tiles / "checkpoint").write_text(str(note))
    failure = failure_of(tiles, log)
    assert f"the checkpoint of size {size:,}" in failure
    assert "has no complete tiles" in failure


def test_a_rollback(tiles: Path, log: MemoryLog) -> None:
    following = monitor(tiles, log)
    following.step()
    (tiles / "checkpoint").write_text(log.notes[0])
    with pytest.raises(MonitorFailure) as caught:
        following.step()
    assert "rollback: the log's checkpoint is smaller than one it signed before" in str(
        caught.value
    )
    assert f"size {len(log.entries):,}" in str(caught.value)


def test_a_round_that_does_not_replay(tmp_path: Path) -> None:
    """Tiles that hold exactly what the log signed, but the log settled a round twice."""
    log = honest_log(rounds=1)
    play_round(log.append, "twice")
    log.append(EntryKind.ROUND_SETTLED, json.loads(log.entries[-1])["payload"], "twice")
    log.checkpoint()
    failure = failure_of(publish(log, tmp_path), log)
    assert f"entry {len(log.entries) - 1}" in failure
    assert "ROUND_SETTLED after ROUND_SETTLED" in failure


def test_a_round_reopened_in_a_later_pass(tmp_path: Path) -> None:
    """A round settled in one pass and settled again in the next: the second pass starts after
    the round, so only the monitor's own bookkeeping knows it was over."""
    log = honest_log(rounds=1)
    play_round(log.append, "twice")
    log.checkpoint()
    following = monitor(publish(log, tmp_path), log)
    following.step()
    log.append(EntryKind.ROUND_SETTLED, json.loads(log.entries[-1])["payload"], "twice")
    log.checkpoint()
    publish(log, tmp_path)
    with pytest.raises(MonitorFailure, match=f"entry {len(log.entries) - 1}: ROUND_SETTLED"):
        following.step()


def test_an_entry_the_log_signed_wrongly(tmp_path: Path) -> None:
    """An entry whose signature is not the log key's, in tiles and a checkpoint that hold it."""
    log = honest_log(rounds=1)
    data = bytearray(log.entries[2])
    data[data.index(b'"signature":"') + 13] ^= 0x01  # still hex
    log.entries[2] = bytes(data)
    leaves = [leaf(entry) for entry in log.entries]
    other = MemoryLog(log.signer)
    for item in leaves:
        other.tree.append(item)
    note = str(log.signer.sign_checkpoint(len(leaves), other.tree.root()))
    write_tiles(tmp_path, log.entries, [len(leaves)], note)
    failure = failure_of(tmp_path, log)
    assert "verification failed: entry 2" in failure
    assert "signature" in failure


# -- waiting for bundles, resuming -----------------------------------------------------------------


def test_a_bundle_not_yet_public_is_waited_for(tiles: Path, log: MemoryLog) -> None:
    size = len(log.entries)
    last = tiles / tile_name("entries", 2, size - 512)
    held = last.read_bytes()
    last.unlink()
    now = [1000.0]
    following = monitor(tiles, log, clock=lambda: now[0], bundle_grace=60.0)
    result = following.step()
    assert (result.size, result.verified, result.waiting) == (size, 512, 1)
    now[0] += 59
    assert following.step().verified == 512
    last.write_bytes(held)
    result = following.step()
    assert (result.verified, result.waiting, result.rounds_replayed) == (size, 0, 6)


def test_a_bundle_withheld_past_the_grace_is_a_failure(tiles: Path, log: MemoryLog) -> None:
    (tiles / tile_name("entries", 1)).unlink()
    now = [1000.0]
    following = monitor(tiles, log, clock=lambda: now[0], bundle_grace=60.0)
    assert following.step().verified == 256
    now[0] += 61
    with pytest.raises(MonitorFailure, match=r"tile/entries/001 has not been public for 61 s"):
        following.step()


def test_a_restart_resumes_and_replays_a_round_open_across_it(tmp_path: Path, gnau: Gnau) -> None:
    log = honest_log(rounds=1)
    committed_at = len(log.entries)
    # A round committed and dealt before the first pass, revealed and settled after it.
    entries_before = len(log.entries)
    play_round(log.append, "across")
    across = log.entries[entries_before:]
    del log.entries[entries_before + 2 :]
    log.tree = type(log.tree)()
    for data in log.entries:
        log.tree.append(leaf(data))
    log.appender.head = type(log.appender.head)(
        len(log.entries), leaf(log.entries[-1]).hex(), log.frontier(len(log.entries))
    )
    log.checkpoint()
    directory, state = publish(log, tmp_path / "tiles"), tmp_path / "state.json"
    args = ("audit", "monitor", str(directory), "--key", log.signer.vkey, "--state", str(state))
    first = gnau(*args, "--once")
    assert first.status == 0, first.err
    saved = json.loads(state.read_text())
    assert (saved["verified"], saved["replay_from"]) == (len(log.entries), committed_at)
    assert saved["rounds_replayed"] == 2
    # The rest of the round (as signed by the log: the same payloads), then another round.
    for data in across[2:]:
        entry = json.loads(data)
        log.append(EntryKind(entry["kind"]), entry["payload"], entry["round_id"])
    play_round(log.append, "after")
    log.checkpoint()
    publish(log, directory)
    second = gnau(*args, "--once")
    assert second.status == 0, second.err
    assert second.err.splitlines()[0].startswith("resuming: checkpoint")
    saved = json.loads(state.read_text())
    assert (saved["verified"], saved["replay_from"]) == (len(log.entries), len(log.entries))
    assert saved["rounds_replayed"] == 4
    assert MonitorState.load(state).partial_rounds == []


def test_a_failure_exits_1_with_the_evidence(tiles: Path, log: MemoryLog, gnau: Gnau) -> None:
    (tiles / "checkpoint").write_text(log.notes[0])
    state = tiles.parent / "state.json"
    args = ("audit", "monitor", str(tiles), "--key", log.signer.vkey, "--state", str(state))
    assert gnau(*args, "--once").status == 0
    publish(log, tiles)
    assert gnau(*args, "--once").status == 0
    (tiles / "checkpoint").write_text(log.notes[0])
    run = gnau(*args, "--once")
    assert run.status == 1
    assert run.out.startswith("FAILED: rollback")
    assert f"last verified checkpoint: size {len(log.entries):,}" in run.out


# -- witnesses, --since ----------------------------------------------------------------------------


def test_a_witness_quorum_is_required(tiles: Path, log: MemoryLog, gnau: Gnau) -> None:
    witness = WitnessSigner.generate("witness.example/w1")
    note = SignedNote.parse(log.notes[-1])
    args = ("audit", "monitor", str(tiles), "--key", log.signer.vkey, "--once")
    refused = gnau(*args, "--witness", witness.vkey)
    assert refused.status == 1
    assert "has 0 valid cosignatures of the trusted witnesses, fewer than the quorum of 1" in (
        refused.out
    )
    cosigned = with_cosignatures(note, [cosign(witness, note.text, 1_800_000_000)])
    (tiles / "checkpoint").write_text(str(cosigned))
    accepted = gnau(*args, "--witness", witness.vkey)
    assert accepted.status == 0, accepted.out + accepted.err


def test_since_starts_at_a_checkpoint_inside_a_round(tmp_path: Path, gnau: Gnau) -> None:
    """Entries from the --since checkpoint on: a round begun before it is checked, not replayed;
    the rounds after it are."""
    log = honest_log(rounds=1)

    def append(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
        log.append(kind, payload, round_id)
        if kind is EntryKind.ROUND_DEALT:
            log.checkpoint()

    play_round(append, "straddling")
    since = log.notes[-1]
    play_round(log.append, "after")
    log.checkpoint()
    directory = publish(log, tmp_path / "tiles")
    (tmp_path / "since").write_text(since)
    state = tmp_path / "state.json"
    run = gnau(
        "audit", "monitor", str(directory), "--key", log.signer.vkey, "--once",
        "--since", str(tmp_path / "since"), "--state", str(state),
    )  # fmt: skip
    assert run.status == 0, run.out + run.err
    saved = json.loads(state.read_text())
    assert (saved["start"], saved["verified"]) == (size_of(since), len(log.entries))
    assert saved["partial_rounds"] == ["straddling"]
    assert saved["rounds_replayed"] == 1  # "after"; "straddling" is only checked


def test_since_a_checkpoint_of_another_history(tiles: Path, log: MemoryLog) -> None:
    following = monitor(tiles, log)
    forged = hashlib.sha256(b"another history").digest()
    following.start_at(str(log.signer.sign_checkpoint(100, forged)))
    with pytest.raises(MonitorFailure, match="not consistent with the last verified one of size"):
        following.step()
