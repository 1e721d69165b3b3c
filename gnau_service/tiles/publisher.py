"""Publishing the log's tiles to a :class:`~gnau_service.tiles.targets.Target`: one pass, or
passes for as long as the publisher runs (``gnau tiles publish [--follow SECONDS]``).

A pass:

1. reads the target's ``checkpoint``, of ``s0`` entries (0 if there is none), and checks it is
   this log's: its origin is the store's, and its root hash the store's tree of ``s0`` entries
   (otherwise :class:`PublishError`: the target holds another log, or a fork);
2. takes the store's latest signed checkpoint, of ``s1`` entries;
3. writes every hash tile a tree of ``s1`` has and one of ``s0`` lacks, each with
   :meth:`~gnau_service.tiles.targets.Target.put_new`, :data:`WRITERS` at a time (a tile costs a
   disk flush or a request, which wait side by side);
4. writes the entry bundles in index order, a window of :data:`WRITERS` at a time, from the
   first full bundle the target lacks (found in O(log n) reads, :func:`bundled_entries`), up to
   the one ``s1`` ends in. With ``public`` (the default), it stops at the first
   bundle that holds an entry of a round whose seed is not public yet
   (:func:`~gnau_service.store.tiles.bundle_is_public`): that bundle and those after it wait for
   a later pass, once the round is revealed. ``public=False`` (``--all-bundles``) writes every
   bundle, for a bucket only auditors read;
5. writes ``checkpoint`` last, so that everything it commits to is there before it.

A pass that stops anywhere (a crash, a lost connection, a signal) leaves only tiles a later pass
finds identical at the same paths: the next pass resumes without a gap, and no tile is written
twice or rewritten. No state is kept but the target itself.

Partial tiles are kept once the full tile exists: a client holding an older checkpoint reads
the partial tile of its size. A bundle withheld while its round was open is published at the
width of the checkpoint current when it became public (or full): a client holding an older
checkpoint reads a wider bundle and takes the entries it needs.

One publisher writes to a target at a time: a second one could set the checkpoint back to an
older one (never a tile: those are written only if absent).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Final, TypeVar

from gnau_service.audit.checkpoint import Checkpoint, CheckpointError
from gnau_service.audit.note import NoteError, SignedNote
from gnau_service.audit.tiles import (
    CHECKPOINT_CACHE_CONTROL,
    CHECKPOINT_CONTENT_TYPE,
    CHECKPOINT_PATH,
    TILE_WIDTH,
    TileRef,
    tiles_of,
)
from gnau_service.store.cosignatures import (
    NO_WITNESSES,
    CheckpointNote,
    WitnessQuorum,
    cosigned_size,
    served_checkpoint,
    with_cosignatures,
)
from gnau_service.store.reader import LogReader
from gnau_service.store.tiles import BundleNotPublic, read_tile
from gnau_service.tiles.targets import Target

#: Tiles rendered and written at once: each waits on the database, a disk flush or a request.
WRITERS: Final = 8
#: Hash tiles handed to the writers between two looks at ``stop``.
_HASH_BATCH: Final = 64
T = TypeVar("T")


class PublishError(Exception):
    """The target holds something this log never published there: another log's checkpoint,
    one of another history (a fork), or one beyond the store's log."""


@dataclass
class PublishReport:
    """What one pass did."""

    #: The size of the checkpoint the target held before, and of the one it holds after.
    previous_size: int = 0
    size: int = 0
    #: Tiles (hash tiles and bundles) written, and those already there with the same bytes.
    written: int = 0
    present: int = 0
    #: The bytes of the tiles written (the checkpoint not counted).
    bytes_written: int = 0
    #: Bundles of the tree not published because a round in them is not revealed yet.
    bundles_withheld: int = 0
    #: Entries the target's bundles cover after this pass (all of them: ``size``).
    bundled: int = 0
    #: Whether the checkpoint was written (False: the target's was this one already).
    checkpoint_written: bool = False
    #: Whether the pass stopped early (asked to stop): it wrote no checkpoint.
    interrupted: bool = False
    paths_written: list[str] = field(default_factory=list, repr=False)

    def line(self) -> str:
        """The pass in one line, for people."""
        grown = self.size - self.previous_size
        text = (
            f"checkpoint {self.size:,} entries (+{grown:,}): {self.written:,} tiles written "
            f"({self.bytes_written:,} bytes), {self.present:,} already there"
        )
        if self.bundles_withheld:
            text += f", {self.bundles_withheld:,} bundles withheld until their rounds are revealed"
        if self.interrupted:
            text += "; stopped before the checkpoint"
        return text


def target_size(target: Target, reader: LogReader) -> int:
    """The size of the checkpoint the target holds (0 if none), once it is known to be this
    log's: same origin, and the root of the store's own tree of that size."""
    data = target.get(CHECKPOINT_PATH)
    if data is None:
        return 0
    try:
        published = Checkpoint.parse(SignedNote.parse(data).text)
    except (NoteError, CheckpointError) as error:
        raise PublishError(f"its checkpoint is not a signed checkpoint: {error}") from None
    ours = reader.checkpoint()
    if ours is None:
        raise PublishError("it holds a checkpoint, but the log has signed none")
    latest = Checkpoint.parse(SignedNote.parse(ours).text)
    if published.origin != latest.origin:
        raise PublishError(
            f"its checkpoint is of the log {published.origin!r}, not of {latest.origin!r}"
        )
    if published.size > latest.size:
        raise PublishError(
            f"its checkpoint is of {published.size:,} entries, beyond the log's "
            f"{latest.size:,}: the database was rolled back, or it is another log"
        )
    if reader.frontier(published.size).root() != published.root_hash:
        raise PublishError(
            f"its checkpoint of {published.size:,} entries has another root than the log's "
            "tree of that size: it holds a fork of this log"
        )
    return published.size


def bundled_entries(target: Target, size: int) -> int:
    """The entries the target's *full* bundles cover without a gap, of a tree of ``size``.

    Bundles are written in order, :data:`WRITERS` at a time, the next ones only once those are
    all written: those present are ``0`` to ``n - 1`` for some ``n``, and perhaps some of the
    ``WRITERS`` after ``n`` (a pass that stopped). A binary search finds a present bundle followed
    by a missing one, at most ``WRITERS`` past ``n``; the bundles before it are then looked at
    one by one. O(log n) reads in all.
    """
    low, high = 0, size // TILE_WIDTH  # bundle ``low - 1`` is there; bundle ``high`` is not
    while low < high:
        middle = (low + high) // 2
        if target.exists(str(TileRef(None, middle))):
            low = middle + 1
        else:
            high = middle
    for index in range(max(0, low - WRITERS), low):
        if not target.exists(str(TileRef(None, index))):
            return index * TILE_WIDTH
    return low * TILE_WIDTH


def _all_of(pool: Executor, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``calls`` side by side; their results in order once every one has ended (none is
    left running), or the first one's error."""
    futures = [pool.submit(call) for call in calls]
    wait(futures)
    return [future.result() for future in futures]


def publish_once(
    reader: LogReader,
    target: Target,
    *,
    public: bool = True,
    quorum: WitnessQuorum = NO_WITNESSES,
    stop: threading.Event | None = None,
    pool: Executor | None = None,
) -> PublishReport:
    """One pass (the module's docstring): publish the store's latest checkpoint (with a
    ``quorum``, the newest it cosigned, as the HTTP port serves it; none before one has) and
    every tile it commits to that the target lacks; withhold bundles of unrevealed rounds if
    ``public``.
    Tiles are rendered and written :data:`WRITERS` at a time, on ``pool`` (one of its own if
    None). If ``stop`` is set meanwhile, the pass ends after the tiles being written, without
    the checkpoint."""
    with ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(ThreadPoolExecutor(WRITERS, "gnau-tiles"))
        return _publish(reader, target, public=public, quorum=quorum, stop=stop, pool=pool)


def to_publish(reader: LogReader, quorum: WitnessQuorum) -> CheckpointNote | None:
    """The checkpoint a pass publishes, with its cosignatures: the latest, or with a quorum
    the newest that quorum cosigned (None: there is none yet)."""
    if quorum.threshold == 0:
        return served_checkpoint(reader, NO_WITNESSES, cosigned=False)
    size = cosigned_size(reader, quorum)
    note = None if size is None else reader.checkpoint(size)
    if size is None or note is None:
        return None
    return CheckpointNote(size, with_cosignatures(reader, size, note))


def _publish(
    reader: LogReader,
    target: Target,
    *,
    public: bool,
    quorum: WitnessQuorum,
    stop: threading.Event | None,
    pool: Executor,
) -> PublishReport:
    report = PublishReport()
    report.previous_size = report.size = target_size(target, reader)
    served = to_publish(reader, quorum)
    if served is None or served.size < report.previous_size:
        # Nothing signed yet, or the quorum has not caught up with a checkpoint published
        # before it was asked for: the published one stays until a newer one is cosigned.
        return report
    size = served.size

    def rendered(ref: TileRef) -> bytes | None:
        """The tile's bytes, or None for a bundle that is not public yet."""
        try:
            return read_tile(reader, ref, public=public, covered_size=size)
        except BundleNotPublic:
            return None

    def written(ref: TileRef, data: bytes | None = None) -> tuple[TileRef, int, bool]:
        data = read_tile(reader, ref, public=public, covered_size=size) if data is None else data
        return ref, len(data), target.put_new(str(ref), data)

    def count(outcomes: Sequence[tuple[TileRef, int, bool]]) -> None:
        for ref, length, new in outcomes:
            if new:
                report.written += 1
                report.bytes_written += length
                report.paths_written.append(str(ref))
            else:
                report.present += 1

    def stopped() -> bool:
        report.interrupted = stop is not None and stop.is_set()
        return report.interrupted

    # The hash tiles, in any order: the checkpoint, written last, is what commits to them.
    hashes = [ref for ref in tiles_of(size, since=report.previous_size) if ref.level is not None]
    for start in range(0, len(hashes), _HASH_BATCH):
        if stopped():
            return report
        batch = hashes[start : start + _HASH_BATCH]
        count(_all_of(pool, [partial(written, ref) for ref in batch]))
    # The bundles, in order, a window at a time (bundled_entries relies on it).
    report.bundled = bundled_entries(target, size)
    bundles = [ref for ref in tiles_of(size, since=report.bundled) if ref.level is None]
    if bundles and not bundles[-1].full and target.exists(str(bundles[-1])):
        # The partial bundle of this size, which an earlier pass wrote: a pass with nothing new
        # to write then writes nothing at all.
        bundles.pop()
    for start in range(0, len(bundles), WRITERS):
        if stopped():
            return report
        window = bundles[start : start + WRITERS]
        data = _all_of(pool, [partial(rendered, ref) for ref in window])
        public_ones = next((i for i, item in enumerate(data) if item is None), len(window))
        writes = [partial(written, ref, data[i]) for i, ref in enumerate(window[:public_ones])]
        count(_all_of(pool, writes))
        if public_ones < len(window):
            report.bundles_withheld = len(bundles) - start - public_ones
            break
        report.bundled = window[-1].end_leaf
    if report.bundles_withheld == 0:
        report.bundled = size
    note = served.note.encode("utf-8")
    if target.get(CHECKPOINT_PATH) != note:
        target.put(CHECKPOINT_PATH, note, CHECKPOINT_CONTENT_TYPE, CHECKPOINT_CACHE_CONTROL)
        report.checkpoint_written = True
    report.size = size
    return report


def follow(
    reader: LogReader,
    target: Target,
    *,
    interval: float,
    stop: threading.Event,
    public: bool = True,
    quorum: WitnessQuorum = NO_WITNESSES,
    on_pass: Callable[[PublishReport], None] = lambda report: None,
    on_error: Callable[[Exception], bool] = lambda error: False,
) -> None:
    """Pass after pass, ``interval`` seconds apart, until ``stop`` is set. Each pass's report
    goes to ``on_pass``. An error of a pass goes to ``on_error``, which says whether to go on
    (a database or bucket briefly unreachable) or to raise it (a fork: never go on)."""
    with ThreadPoolExecutor(WRITERS, "gnau-tiles") as pool:
        while not stop.is_set():
            try:
                report = publish_once(
                    reader, target, public=public, quorum=quorum, stop=stop, pool=pool
                )
                on_pass(report)
            except Exception as error:
                if not on_error(error):
                    raise
            stop.wait(interval)
