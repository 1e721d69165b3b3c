"""Following a log through its tiles alone (``gnau audit monitor``): no token, no export.

Each pass reads the latest checkpoint and:

1. verifies its signature (by the pinned key, or a key it rotated to in verified entries) and
   the witnesses' quorum;
2. recomputes its root from the hash tiles (a size with no tile, or a root the tiles do not give,
   is a failure), and proves it consistent with the last verified checkpoint through the same
   tiles (a smaller size is a rollback, another root for the same size a fork);
3. reads the bundles past the entries verified so far, checks each entry's leaf hash
   (SHA-256 of 0x00 and the entry) against the level-0 tile, and verifies the entries as
   ``gnau audit verify`` does, by :func:`~gnau_service.audit.bundle_verification.verify_bundle`
   itself: a bundle is synthesised for the range, from the first entry of the oldest round still
   open (so a round is replayed whole, across passes and restarts) with the Merkle frontier the
   tiles give there. The tiles, bound to a verified signed root, anchor the range.

A bundle that is not public yet (403, or absent from a bucket) is waited for: entries stop
there, the checkpoint chain still advances; one missing longer than the grace period while a
checkpoint covers it is a failure. The state (:class:`MonitorState`) is a JSON file, rewritten
atomically after each pass, so a restart resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

from gnau_service.audit.bundle import BUNDLE_FORMAT
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.checkpoint import (
    Checkpoint,
    CheckpointError,
    SignedCheckpoint,
    open_checkpoint,
)
from gnau_service.audit.cosignature import WitnessKey, cosigners
from gnau_service.audit.entries import EntryKind, clip
from gnau_service.audit.merkle import (
    Frontier,
    ProofError,
    consistency_proof,
    leaf_hash,
    root_from_reader,
    root_of,
    verify_consistency,
)
from gnau_service.audit.note import NoteError, SignedNote, Verifier
from gnau_service.audit.signing import KeyRotation, RotationError, trusted_keys
from gnau_service.audit.tiles import TILE_WIDTH, TileError, TileNodes, TileRef, tile_width
from gnau_service.common.private_files import replace_file
from gnau_service.tiles.client import TileClient, TileNotFound, TileNotPublic

STATE_FORMAT: Final = "gnau-dealer/monitor-state/v1"
#: The state holds only what the tiles say (sizes, roots, indices): nothing to hide.
STATE_MODE: Final = 0o644
#: Seconds a covered bundle may stay absent (not yet public) before it is a failure.
DEFAULT_BUNDLE_GRACE: Final = 3600.0
#: Entries verified in one call of verify_bundle (their bytes are held meanwhile).
CHUNK_ENTRIES: Final = 1 << 17
_CLOSING: Final = (EntryKind.ROUND_SETTLED.value, EntryKind.ROUND_VOIDED.value)
_T = TypeVar("_T")


class MonitorFailure(Exception):  # noqa: N818  (the log failed a check: exit 1)
    """The log does not verify: ``reason``, and the evidence (which checkpoint, tile or entry,
    what was expected and what was found)."""

    def __init__(self, reason: str, *evidence: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.evidence = tuple(evidence)

    def __str__(self) -> str:
        return "\n".join([self.reason, *(f"  {line}" for line in self.evidence)])


class CannotMonitorError(ValueError):
    """Monitoring cannot start: an unusable state file or argument (exit 2)."""


@dataclass
class MonitorState:
    """Where a monitor stands; :meth:`to_json` is the state file's content."""

    #: The pinned key the chain of keys starts from (a state is refused under another).
    key: str
    #: The last verified checkpoint (its note as served), its size and root.
    checkpoint: str | None = None
    size: int = 0
    root: str = ""
    #: Entries ``start`` to ``verified - 1`` are verified (``start``: the --since size).
    start: int = 0
    verified: int = 0
    #: Where the next verification starts: the first entry of the oldest round still open.
    replay_from: int = 0
    #: The Merkle frontier of the entries before ``replay_from`` (None: read it from the tiles).
    frontier: list[str] | None = field(default_factory=list)
    #: Key rotations seen in verified entries: [entry index, rotation note].
    rotations: list[tuple[int, str]] = field(default_factory=list)
    rounds_replayed: int = 0
    #: Rounds begun before ``start``: their later entries are checked, they are not replayed.
    partial_rounds: list[str] = field(default_factory=list)
    #: Bundles found absent (not yet public), by index: when first seen so (Unix time).
    waiting: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "key": self.key,
            "checkpoint": self.checkpoint,
            "size": self.size,
            "root": self.root,
            "start": self.start,
            "verified": self.verified,
            "replay_from": self.replay_from,
            "frontier": self.frontier,
            "rotations": [[index, note] for index, note in self.rotations],
            "rounds_replayed": self.rounds_replayed,
            "partial_rounds": self.partial_rounds,
            "waiting": self.waiting,
        }

    @classmethod
    def from_json(cls, obj: Any) -> MonitorState:
        if not isinstance(obj, dict) or obj.get("format") != STATE_FORMAT:
            raise CannotMonitorError(f"not a {STATE_FORMAT} state")
        try:
            state = cls(
                key=str(obj["key"]),
                checkpoint=obj["checkpoint"],
                size=int(obj["size"]),
                root=str(obj["root"]),
                start=int(obj["start"]),
                verified=int(obj["verified"]),
                replay_from=int(obj["replay_from"]),
                frontier=None if obj["frontier"] is None else [str(h) for h in obj["frontier"]],
                rotations=[(int(index), str(note)) for index, note in obj["rotations"]],
                rounds_replayed=int(obj["rounds_replayed"]),
                partial_rounds=[str(round_id) for round_id in obj["partial_rounds"]],
                waiting={str(k): float(v) for k, v in obj["waiting"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CannotMonitorError(f"a malformed state: {error!r}") from None
        if not state.start <= state.replay_from <= state.verified <= max(state.size, state.start):
            raise CannotMonitorError("a state whose positions are out of order")
        return state

    @classmethod
    def load(cls, path: Path) -> MonitorState:
        try:
            return cls.from_json(json.loads(path.read_bytes()))
        except (OSError, ValueError) as error:
            if isinstance(error, CannotMonitorError):
                raise CannotMonitorError(f"{path}: {error}") from None
            raise CannotMonitorError(f"cannot read the state {path}: {error}") from None

    def save(self, path: Path) -> None:
        """Write the state atomically and durably: a restart reads the old state or the new."""
        replace_file(path, json.dumps(self.to_json(), indent=1).encode(), STATE_MODE)


@dataclass(frozen=True)
class PassResult:
    """What one pass did."""

    size: int
    verified: int
    rounds_replayed: int
    waiting: int
    new_checkpoint: bool
    new_entries: int

    def line(self) -> str:
        return (
            f"checkpoint {self.size:,}: {self.verified:,} entries verified, "
            f"{self.rounds_replayed:,} rounds replayed, {self.waiting:,} bundles waiting to be "
            "public"
        )


@dataclass(frozen=True)
class _Scanned:
    """What the monitor reads of one entry itself (verify_bundle checks all of it)."""

    kind: str
    round_id: str | None
    prev_hash: str
    rotation: str | None


class Monitor:
    """Follows one log through a :class:`~gnau_service.tiles.client.TileClient`."""

    def __init__(
        self,
        client: TileClient,
        keys: Sequence[Verifier],
        *,
        state: MonitorState | None = None,
        witnesses: Sequence[WitnessKey] = (),
        quorum: int = 0,
        bundle_grace: float = DEFAULT_BUNDLE_GRACE,
        jobs: int | None = None,
        clock: Callable[[], float] = time.time,
        chunk_entries: int = CHUNK_ENTRIES,
    ) -> None:
        if not keys:
            raise CannotMonitorError("the log's key is needed (--key)")
        self.client = client
        self.keys = list(keys)
        self.origin = keys[0].name  # a log's key name is its origin
        if state is None:
            state = MonitorState(key=keys[0].vkey)
        elif state.key != keys[0].vkey:
            raise CannotMonitorError(
                f"the state follows the log of key {state.key}, not {keys[0].vkey}"
            )
        self.state = state
        self.witnesses = tuple(witnesses)
        self.quorum = quorum
        self.bundle_grace = bundle_grace
        self.jobs = jobs
        self.clock = clock
        self.chunk_entries = chunk_entries

    # -- starting from a checkpoint seen earlier --------------------------------------------------

    def start_at(self, note: bytes | str) -> None:
        """Trust a checkpoint seen earlier (``--since``): later checkpoints must be consistent
        with it, and entries are verified from its size on (rounds begun before it are checked,
        not replayed)."""
        try:
            signed = open_checkpoint(note, self.origin, self._chain())
        except (NoteError, CheckpointError) as error:
            raise CannotMonitorError(f"the --since checkpoint does not verify: {error}") from None
        size = signed.checkpoint.size
        text = note if isinstance(note, str) else note.decode("utf-8")
        state = self.state
        state.checkpoint, state.size, state.root = text, size, signed.checkpoint.root_hash.hex()
        state.start = state.verified = state.replay_from = size
        state.frontier = None if size else []

    def check_pinned(self, note: bytes | str) -> int:
        """Compare the verified log with a checkpoint seen earlier: its size must be within the
        verified checkpoint's, and the tiles must give its root there. Its size; raises
        :class:`MonitorFailure` (a rollback, a fork) or :class:`CannotMonitorError`."""
        try:
            pinned = open_checkpoint(note, self.origin, self._chain())
        except (NoteError, CheckpointError) as error:
            raise CannotMonitorError(f"the pinned checkpoint does not verify: {error}") from None
        size, root, state = pinned.checkpoint.size, pinned.checkpoint.root_hash, self.state
        if size > state.size:
            raise MonitorFailure(
                f"rollback: the pinned checkpoint covers {size:,} entries, the log's latest "
                f"{state.size:,}",
                f"pinned root: {root.hex()}",
            )
        if size == 0:
            return 0
        nodes = verified_nodes(self.client, state.size)
        shown = f"checkpoint of size {state.size:,}"
        proof = _from_tiles(lambda: consistency_proof(nodes, size, state.size), shown)
        try:
            verify_consistency(size, state.size, proof, root, bytes.fromhex(state.root))
        except ProofError as error:
            raise MonitorFailure(
                f"fork: the log is not consistent with the pinned checkpoint of size {size:,}",
                f"pinned root: {root.hex()}",
                f"latest: size {state.size:,}, root {state.root}",
                str(error),
            ) from None
        return size

    # -- one pass --------------------------------------------------------------------------------

    def step(self) -> PassResult:
        """One pass: the latest checkpoint, then every entry that has become public. Raises
        :class:`MonitorFailure` at the first thing that does not verify."""
        before = (self.state.size, self.state.verified)
        self._advance_checkpoint()
        self._verify_entries()
        state = self.state
        return PassResult(
            size=state.size,
            verified=state.verified,
            rounds_replayed=state.rounds_replayed,
            waiting=self.waiting(),
            new_checkpoint=state.size != before[0],
            new_entries=state.verified - before[1],
        )

    def waiting(self) -> int:
        """Bundles the verified checkpoint covers whose entries are not verified yet."""
        state = self.state
        if state.verified >= state.size:
            return 0
        return -(-state.size // TILE_WIDTH) - state.verified // TILE_WIDTH

    # -- checkpoints -----------------------------------------------------------------------------

    def _chain(self) -> list[Verifier]:
        try:
            chain = trusted_keys(self.keys[0], [note for _, note in self.state.rotations])
        except (NoteError, RotationError) as error:  # verified once: only a tampered state
            raise CannotMonitorError(f"the state's key rotations do not verify: {error}") from None
        return [key.verifier for key in chain]

    def _key_at(self, index: int) -> Verifier:
        """The log key current at entry ``index``."""
        rotated = sum(1 for at, _ in self.state.rotations if at < index)
        return self._chain()[rotated]

    def _advance_checkpoint(self) -> None:
        try:
            data = self.client.checkpoint()
        except TileNotFound:
            return  # the log has signed nothing yet
        except TileNotPublic as error:
            raise MonitorFailure("the checkpoint is refused to the public", str(error)) from None
        signed = self._open(data)
        if signed is None:
            return
        checkpoint, state = signed.checkpoint, self.state
        shown = f"checkpoint of size {checkpoint.size:,}, root {checkpoint.root_hash.hex()}"
        if state.checkpoint is not None:
            earlier = f"last verified checkpoint: size {state.size:,}, root {state.root}"
            if checkpoint.size < state.size:
                raise MonitorFailure(
                    "rollback: the log's checkpoint is smaller than one it signed before",
                    f"served: {shown}",
                    earlier,
                )
            if checkpoint.size == state.size:
                if checkpoint.root_hash.hex() != state.root:
                    raise MonitorFailure(
                        f"fork: the log signed two different roots for size {state.size:,}",
                        f"served: {shown}",
                        earlier,
                        f"served note:\n{data.decode('utf-8', 'replace')}",
                        f"verified note:\n{state.checkpoint}",
                    )
                return
        nodes = verified_nodes(self.client, checkpoint.size)
        root = _from_tiles(lambda: root_from_reader(nodes, checkpoint.size), shown)
        if root != checkpoint.root_hash:
            raise MonitorFailure(
                f"the tiles do not give the root of the checkpoint of size {checkpoint.size:,}",
                f"checkpoint root: {checkpoint.root_hash.hex()}",
                f"tiles give:      {root.hex()}",
            )
        if state.checkpoint is not None and state.size > 0:
            old_size, old_root = state.size, bytes.fromhex(state.root)
            proof = _from_tiles(lambda: consistency_proof(nodes, old_size, checkpoint.size), shown)
            try:
                verify_consistency(old_size, checkpoint.size, proof, old_root, root)
            except ProofError as error:
                raise MonitorFailure(
                    f"fork: the checkpoint of size {checkpoint.size:,} is not consistent with "
                    f"the last verified one of size {old_size:,}",
                    f"last verified root: {state.root}",
                    f"served: {shown}",
                    f"the tiles' consistency proof fails: {error}",
                ) from None
        state.checkpoint = data.decode("utf-8")
        state.size, state.root = checkpoint.size, checkpoint.root_hash.hex()
        if state.frontier is None and state.replay_from == 0:
            state.frontier = []

    def _open(self, data: bytes) -> SignedCheckpoint | None:
        """The checkpoint verified by the keys known, or by keys rotated to in entries it newly
        covers; None to wait (the rotation may be in a bundle not public yet)."""
        failure: Exception | None = None
        try:
            signed: SignedCheckpoint | None = open_checkpoint(data, self.origin, self._chain())
        except (NoteError, CheckpointError) as error:
            failure, signed = error, None
        if signed is None:
            rotations = self._rotations_ahead(data)
            if rotations is None:
                return None
            try:
                chain = trusted_keys(self._chain()[-1], rotations)
                signed = open_checkpoint(data, self.origin, [key.verifier for key in chain])
            except (NoteError, CheckpointError, RotationError):
                raise MonitorFailure(
                    "the checkpoint does not verify by the log's key or any key it rotated to "
                    f"(a forged checkpoint, or another log's): {clip(str(failure), 300)}",
                    f"checkpoint:\n{data.decode('utf-8', 'replace')}",
                ) from None
        have = cosigners(signed.note, self.witnesses)
        if len(have) < self.quorum:
            raise MonitorFailure(
                f"the checkpoint of size {signed.checkpoint.size:,} has {len(have)} valid "
                f"cosignatures of the trusted witnesses, fewer than the quorum of {self.quorum}",
                f"checkpoint:\n{data.decode('utf-8', 'replace')}",
            )
        return signed

    def _rotations_ahead(self, data: bytes) -> list[str] | None:
        """The rotation notes in the entries past those verified, up to the checkpoint's size,
        each entry checked against the tiles of that size: what might have rotated the key that
        signed it. None if an entry is not public yet (or the checkpoint is unreadable)."""
        state = self.state
        if state.verified < state.size:
            return None  # entries the last checkpoint covers are not verified yet: wait
        try:
            size = Checkpoint.parse(SignedNote.parse(data).text).size
        except (NoteError, CheckpointError):
            return []
        nodes = verified_nodes(self.client, size)
        notes: list[str] = []
        try:
            for _, entry in self._entries_checked(nodes, state.verified, size):
                if b'"KEY_ROTATED"' in entry:
                    scanned = _scan(entry)
                    if scanned is not None and scanned.rotation is not None:
                        notes.append(scanned.rotation)
        except _Blocked:
            return None
        except MonitorFailure:
            return []  # tiles that do not bind the entries: the signature fails as it is
        return notes

    # -- entries ---------------------------------------------------------------------------------

    def _entries_checked(
        self, nodes: TileNodes, first: int, end: int
    ) -> Iterator[tuple[int, bytes]]:
        """Entries ``first`` to ``end - 1`` from their bundles, each one's leaf hash checked
        against the level-0 tile; raises :class:`_Blocked` at a bundle not (yet) there."""
        index = first
        while index < end:
            number = index // TILE_WIDTH
            ref = TileRef(None, number, tile_width(nodes.size, None, number))
            try:
                entries = self.client.bundle(ref)
            except (TileNotFound, TileNotPublic) as error:
                raise _Blocked(ref, str(error)) from None
            except TileError as error:
                raise MonitorFailure(
                    f"{ref} is malformed: {error}", f"tiles: {self.client.base}"
                ) from None
            level0 = TileRef(0, number, ref.width)
            hashes = _from_tiles(partial(nodes.hashes, level0), f"tree of {nodes.size:,}")
            for offset in range(index - number * TILE_WIDTH, min(ref.width, end - ref.first_leaf)):
                data = entries[offset]
                leaf = leaf_hash(data)
                if leaf != hashes[offset]:
                    at = number * TILE_WIDTH + offset
                    raise MonitorFailure(
                        f"entry {at:,}: its bytes in {ref} are not the leaf the tiles hold",
                        f"leaf hash of the entry: {leaf.hex()}",
                        f"{TileRef(0, number, ref.width)} holds: {hashes[offset].hex()}",
                        f"entry: {clip(data.decode('utf-8', 'replace'), 300)}",
                    )
                yield number * TILE_WIDTH + offset, data
            index = ref.end_leaf

    def _verify_entries(self) -> None:
        state = self.state
        if state.checkpoint is None or state.verified >= state.size:
            return
        nodes = verified_nodes(self.client, state.size)
        if state.frontier is None:
            at = state.replay_from
            frontier = _from_tiles(lambda: Frontier.from_reader(nodes, at), "verified tree")
            state.frontier = [node.hex() for node in frontier.hashes]
        while state.verified < state.size:
            first = state.replay_from
            entries: list[bytes] = []
            blocked: _Blocked | None = None
            limit = state.verified - first + self.chunk_entries
            end = min(state.size, first + limit)
            try:
                for _, data in self._entries_checked(nodes, first, end):
                    entries.append(data)
            except _Blocked as stop:
                blocked = stop
            if blocked is not None:
                self._wait_for(blocked)
            if first + len(entries) > state.verified:
                self._verify_range(nodes, first, entries)
            if blocked is not None:
                return

    def _wait_for(self, blocked: _Blocked) -> None:
        state, now = self.state, self.clock()
        key = str(blocked.ref.index)
        since = state.waiting.setdefault(key, now)
        if now - since > self.bundle_grace:
            raise MonitorFailure(
                f"{blocked.ref} has not been public for {now - since:,.0f} s while the checkpoint "
                f"of size {state.size:,} covers it (the grace is {self.bundle_grace:,.0f} s)",
                f"last answer: {blocked.reason}",
            )

    def _verify_range(self, nodes: TileNodes, first: int, entries: list[bytes]) -> None:
        """Verify entries ``first`` on with verify_bundle, then move the state past them."""
        state = self.state
        end = first + len(entries)
        scanned = [_scan(data) for data in entries]
        if first > 0 and scanned[0] is not None:
            expected = _from_tiles(lambda: nodes.node(0, first - 1), "verified tree").hex()
            if scanned[0].prev_hash != expected:
                raise MonitorFailure(
                    f"entry {first:,}: prev_hash is not the hash of the entry before it",
                    f"prev_hash:                  {scanned[0].prev_hash}",
                    f"leaf {first - 1:,} in the tiles: {expected}",
                )
        key = self._key_at(first)
        candidates = [key.vkey]
        for item in scanned:
            if item is not None and item.rotation is not None:
                candidates += _rotated_to(item.rotation)
        header = {
            "format": BUNDLE_FORMAT,
            "origin": self.origin,
            "public_keys": list(dict.fromkeys(candidates)),
            "first_index": first,
            "size": end,
            "left_frontier": state.frontier,
        }

        def lines() -> Iterator[bytes]:
            yield json.dumps(header).encode()
            for data in entries:
                text = data.decode("utf-8", "surrogateescape")
                yield json.dumps({"entry": text}, ensure_ascii=False).encode("utf-8", "replace")

        report = verify_bundle(lines(), pinned_keys=[key], allow_unanchored=True, jobs=self.jobs)
        if report.failure is not None:
            where = report.failure.index
            evidence = [f"checkpoint of size {state.size:,}, root {state.root}"]
            if where is not None:
                number = where // TILE_WIDTH
                evidence.append(
                    f"bundle: {TileRef(None, number, tile_width(state.size, None, number))}"
                )
                evidence.append(
                    f"entry: {clip(entries[where - first].decode('utf-8', 'replace'), 300)}"
                )
            raise MonitorFailure(f"verification failed: {report.failure}", *evidence)
        # Rounds whose first entry here is not their commitment: begun before --since, or an
        # entry for a round that was over (verify_bundle does not replay either).
        rounds: dict[str, int] = {}
        closed: set[str] = set()
        rotations: list[tuple[int, str]] = []
        replayed = 0
        for index, item in enumerate(scanned, start=first):
            assert item is not None  # verify_bundle refused any entry that does not read
            if item.rotation is not None and index >= state.verified:
                rotations.append((index, item.rotation))
            if item.round_id is None:
                continue
            if item.round_id not in rounds and item.round_id not in closed:
                if item.kind != EntryKind.ROUND_COMMITTED.value:
                    if first == state.start and item.round_id not in state.partial_rounds:
                        state.partial_rounds.append(item.round_id)
                    if item.round_id not in state.partial_rounds:
                        raise MonitorFailure(
                            f"entry {index:,}: {item.kind} of round {item.round_id}, which is "
                            "not open (its commitment is not in the log since the monitor "
                            "started, or the round was over)",
                            f"checkpoint of size {state.size:,}, root {state.root}",
                        )
                    continue
                rounds[item.round_id] = index
            if item.kind in _CLOSING:
                rounds.pop(item.round_id, None)
                closed.add(item.round_id)
                if index >= state.verified:
                    replayed += 1
        state.rotations += rotations
        state.rounds_replayed += replayed
        state.verified = end
        state.replay_from = min(rounds.values(), default=end)
        at = state.replay_from
        frontier = _from_tiles(lambda: Frontier.from_reader(nodes, at), "verified tree")
        state.frontier = [node.hex() for node in frontier.hashes]
        state.waiting = {
            number: since
            for number, since in state.waiting.items()
            if (int(number) + 1) * TILE_WIDTH > end
        }


def verified_nodes(client: TileClient, size: int) -> TileNodes:
    """The tree of ``size`` entries read from the tiles, each full tile checked against the
    hash its parent tile holds for it: so every hash read is bound to the root, not only the
    few the root is computed from (a level-0 tile swapped under an honest level-1 tile is
    caught)."""

    def fetch(ref: TileRef) -> Sequence[bytes]:
        hashes = client.hashes(ref)
        if ref.full and ref.level is not None:
            level, number = ref.level + 1, ref.index // TILE_WIDTH
            parent = TileRef(level, number, tile_width(size, level, number))
            held = nodes.hashes(parent)[ref.index % TILE_WIDTH]
            if len(hashes) == TILE_WIDTH and root_of(hashes) != held:
                raise TileError(
                    f"{ref} hashes to {root_of(hashes).hex()}, but {parent} holds "
                    f"{held.hex()} for it"
                )
        return hashes

    nodes = TileNodes(size, fetch)
    return nodes


def _from_tiles(action: Callable[[], _T], shown: str) -> _T:
    """Run a computation over the tiles, a tile absent or malformed being a failure."""
    try:
        return action()
    except TileError as error:
        raise MonitorFailure(
            f"the tiles of the {shown} do not hold together", f"tile: {error}"
        ) from None
    except (TileNotFound, TileNotPublic, LookupError) as error:
        raise MonitorFailure(
            f"the {shown} has no complete tiles: a signed size the tiles do not hold",
            f"tile: {error}",
        ) from None


class _Blocked(Exception):  # noqa: N818
    """A bundle not (yet) there: entries stop before it."""

    def __init__(self, ref: TileRef, reason: str) -> None:
        super().__init__(reason)
        self.ref = ref
        self.reason = reason


def _scan(data: bytes) -> _Scanned | None:
    """The few members the monitor reads itself, or None for an entry that does not read
    (verify_bundle then says why)."""
    try:
        obj = json.loads(data)
        kind, round_id, prev_hash = obj["kind"], obj["round_id"], obj["prev_hash"]
        rotation = obj["payload"].get("rotation") if kind == "KEY_ROTATED" else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(kind, str) or not isinstance(prev_hash, str):
        return None
    return _Scanned(
        kind,
        round_id if isinstance(round_id, str) else None,
        prev_hash,
        rotation if isinstance(rotation, str) else None,
    )


def _rotated_to(note: str) -> list[str]:
    """The key a rotation note names as new (unverified: a candidate for verify_bundle)."""
    try:
        return [KeyRotation.parse(SignedNote.parse(note).text).new.vkey]
    except (NoteError, RotationError, ValueError):
        return []


# -- receipts against tiles ----------------------------------------------------------------------


def check_entries_in_tiles(
    client: TileClient,
    signed: SignedCheckpoint,
    entries: Sequence[tuple[int, bytes]],
    keys: Sequence[Verifier],
) -> list[str]:
    """Check entries (a receipt's: index and bytes) against the tiles: the tiles of the
    checkpoint's size give its root and hold each entry's leaf hash, and the log's latest
    checkpoint (signed by one of ``keys``) is consistent with it. The lines to print; raises
    :class:`MonitorFailure` with the evidence."""
    size, root = signed.checkpoint.size, signed.checkpoint.root_hash
    nodes = verified_nodes(client, size)
    shown = f"receipt's checkpoint of size {size:,}"
    computed = _from_tiles(lambda: root_from_reader(nodes, size), shown)
    if computed != root:
        raise MonitorFailure(
            f"the tiles do not give the root of the {shown}",
            f"checkpoint root: {root.hex()}",
            f"tiles give:      {computed.hex()}",
        )
    lines = [f"tiles: the tree of {size:,} entries has the receipt checkpoint's root"]
    for index, data in entries:
        held = _from_tiles(partial(nodes.node, 0, index), shown)
        if held != leaf_hash(data):
            raise MonitorFailure(
                f"entry {index:,} of the receipt is not the one the tiles hold",
                f"leaf hash of the receipt's entry: {leaf_hash(data).hex()}",
                f"{TileRef(0, index // TILE_WIDTH, tile_width(size, 0, index // TILE_WIDTH))} "
                f"holds: {held.hex()}",
            )
    lines.append(f"tiles: the leaf hashes of all {len(entries)} entries are the tiles'")
    try:
        latest = client.checkpoint()
    except TileNotFound:
        return lines
    try:
        signed_latest = open_checkpoint(latest, keys[0].name, keys)
    except (NoteError, CheckpointError) as error:
        lines.append(f"tiles: the latest checkpoint was not compared: {clip(str(error), 200)}")
        return lines
    new_size, new_root = signed_latest.checkpoint.size, signed_latest.checkpoint.root_hash
    if new_size < size:
        raise MonitorFailure(
            f"rollback: the log's latest checkpoint (size {new_size:,}) is smaller than the "
            f"receipt's ({size:,})"
        )
    newer = verified_nodes(client, new_size)
    shown = f"latest checkpoint of size {new_size:,}"
    if _from_tiles(lambda: root_from_reader(newer, new_size), shown) != new_root:
        raise MonitorFailure(f"the tiles do not give the root of the {shown}")
    proof = _from_tiles(lambda: consistency_proof(newer, size, new_size), shown)
    try:
        verify_consistency(size, new_size, proof, root, new_root)
    except ProofError as error:
        raise MonitorFailure(
            f"fork: the log's latest checkpoint (size {new_size:,}) is not consistent with the "
            f"receipt's (size {size:,})",
            str(error),
        ) from None
    lines.append(f"tiles: the log's latest checkpoint (size {new_size:,}) extends it")
    return lines
