"""What the tiles tests share: a real store's log that grows on request, and the tiles a tree
*should* have, computed here from the entries alone (SHA-256 and RFC 6962), never by the code
under test."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store
from tests.catalogued import catalogued
from tests.dealers import fresh, opened_store
from tests.steps import run_steps

PLATFORM = "token:casino-a-platform"
TABLE = "t-tiles"
SEATS = [SeatRequest(n, f"player-{n}", 100 * n, b"") for n in range(1, 4)]


@dataclass
class Log:
    """A store's log, grown by plain entries (no round: public at once) and by rounds."""

    store: Store
    dealer: Dealer = field(init=False)

    def __post_init__(self) -> None:
        self.dealer = Dealer(self.store)

    def grow(self, count: int) -> int:
        """Append ``count`` entries of no round; the log's size after."""
        units = [
            lambda tx, i=i: tx.append(EntryKind.CONFIG_CHANGED, {"i": i}) for i in range(count)
        ]
        for start in range(0, count, 500):
            run_steps(self.store, units[start : start + 500])
        return self.store.size()

    def deal(self) -> str:
        """A round shuffled and dealt, not revealed: its seed, and so its hands, are secret."""

        async def dealt() -> str:
            shuffled = await self.dealer.shuffle(
                TABLE, HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
            )
            round_id = shuffled.record.round_id
            await self.dealer.deal(
                round_id, SEATS, None, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
            )
            return round_id

        return asyncio.run(dealt())

    def reveal(self, round_id: str) -> None:
        asyncio.run(
            self.dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        )

    def entries(self) -> list[bytes]:
        return list(self.store.iter_entries(0))


@contextmanager
def opened_log(backend: str, directory: Path) -> Iterator[Log]:
    with opened_store(backend, directory) as store:
        catalogued(store, [TABLE])
        yield Log(store)


# --- The tiles a tree should have, from its entries alone -----------------------------------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def subtree_hash(hashes: Sequence[bytes]) -> bytes:
    """RFC 6962's hash of a complete subtree over ``hashes`` (a power of two of them)."""
    level = list(hashes)
    while len(level) > 1:
        level = [sha256(b"\x01" + level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def path_of(level: int | None, index: int, width: int) -> str:
    assert index < 1000, "the tests' logs are small: one group of three digits"
    name = f"tile/{'entries' if level is None else level}/{index:03d}"
    return name if width == 256 else f"{name}.p/{width}"


def expected_tiles(entries: Sequence[bytes]) -> dict[str, bytes]:
    """Every tile of the tree of ``entries``, by path: the hash tiles of each level (level 0:
    SHA-256(0x00 || entry); level L+1: the hash of each complete 256-hash run of level L), then
    the bundles (each entry as a big-endian uint16 length and its bytes)."""
    tiles: dict[str, bytes] = {}
    hashes, level = [sha256(b"\x00" + entry) for entry in entries], 0
    while hashes:
        for start in range(0, len(hashes), 256):
            run = hashes[start : start + 256]
            tiles[path_of(level, start // 256, len(run))] = b"".join(run)
        complete = len(hashes) - len(hashes) % 256
        hashes = [subtree_hash(hashes[i : i + 256]) for i in range(0, complete, 256)]
        level += 1
    for start in range(0, len(entries), 256):
        bundled = entries[start : start + 256]
        bundle = b"".join(len(entry).to_bytes(2, "big") + entry for entry in bundled)
        tiles[path_of(None, start // 256, len(bundled))] = bundle
    return tiles


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by its path relative to it."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
