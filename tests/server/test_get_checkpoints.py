"""AuditService.GetCheckpoints over real gRPC: every signed checkpoint of a size range, in order,
open to everyone, bounded per message and per call; and its limits stated where clients read
them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import audit_pb2
from gnau_client import AsyncGnauClient, GnauClient

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.rounds import limits
from gnau_service.store import Store
from tests.server.conftest import Service
from tests.server.test_limits import flat
from tests.server.test_service import details, play, refusal

ROOT = Path(__file__).resolve().parents[2]


async def commit_one_at_a_time(store: Store, count: int) -> None:
    """``count`` writes, each its own batch, so each signs its own checkpoint."""
    for number in range(count):
        await store.run_async(
            lambda tx, number=number: tx.append(EntryKind.CONFIG_CHANGED, {"write": number})
        )


async def get_checkpoints(
    service: Service, first_size: int, last_size: int = 0, token: str | None = None
) -> list[list[str]]:
    """Each message's checkpoints, as the stream sent them (with no token unless given)."""
    request = audit_pb2.GetCheckpointsRequest(first_size=first_size, last_size=last_size)
    metadata = () if token is None else (("authorization", f"Bearer {token}"),)
    return [
        list(message.checkpoints)
        async for message in service.audit.GetCheckpoints(request, metadata=metadata)
    ]


async def test_every_checkpoint_of_a_range_in_increasing_size(service: Service) -> None:
    store = service.app.store
    for table in ("table-1", "table-2"):
        await play(service, table)
    await commit_one_at_a_time(store, 5)
    notes = await asyncio.to_thread(store.checkpoints)  # the store's own list: every size
    sizes = [int(note.split("\n")[1]) for note in notes]
    assert len(notes) >= 14 and sizes == sorted(set(sizes))

    # No token: checkpoints are public, like GetCheckpoint.
    assert await get_checkpoints(service, 0) == [notes]
    assert await get_checkpoints(service, sizes[2], sizes[5]) == [notes[2:6]]
    # Bounds between two signed sizes: the range holds those inside it, both ends included.
    assert await get_checkpoints(service, sizes[2] + 1, sizes[5] - 1) == [notes[3:5]]
    assert await get_checkpoints(service, sizes[-1]) == [notes[-1:]]
    assert await get_checkpoints(service, sizes[3], sizes[3]) == [[notes[3]]]
    # A range with no signed size ends the stream with no message, and OK.
    assert await get_checkpoints(service, sizes[-1] + 1) == []
    assert await get_checkpoints(service, 2**63 - 1) == []


async def test_the_clients_read_the_same_stream(service: Service) -> None:
    await play(service)
    notes = await asyncio.to_thread(service.app.store.checkpoints)
    client = AsyncGnauClient.from_channel(service.channel)
    assert [note async for note in client.get_checkpoints(0)] == notes
    # The notes of sizes 2 and 10, whatever the start wrote first (SERVICE_STARTED and
    # CONFIG_CHANGED in one batch: the first checkpoint is of size 2; then the 8 starter tables'
    # TABLE_CHANGED entries in one: size 10).
    sized = [note for note in notes if 2 <= int(note.split("\n")[1]) <= 10]
    assert len(sized) == 2
    assert [note async for note in client.get_checkpoints(2, 10)] == sized

    def read_sync() -> list[str]:
        with GnauClient(f"127.0.0.1:{service.app.port}") as sync_client:
            return list(sync_client.get_checkpoints(0, 0))

    assert await asyncio.to_thread(read_sync) == notes


async def test_a_hundred_checkpoints_a_message(service: Service) -> None:
    store = service.app.store
    await commit_one_at_a_time(store, 250)
    notes = await asyncio.to_thread(store.checkpoints)
    messages = await get_checkpoints(service, 0)
    assert [len(message) for message in messages] == [100, 100, len(notes) - 200]
    assert [note for message in messages for note in message] == notes


# At most 10,000 a call: tests/cli/test_audit_over_grpc.py, on a log of more than 10,000
# checkpoints that the export reads past one call.


@pytest.mark.parametrize(
    ("first_size", "last_size", "field"),
    [(-1, 0, "first_size"), (0, -1, "last_size"), (9, 8, "last_size"), (-5, -9, "first_size")],
)
async def test_a_bad_range_is_invalid_argument(
    service: Service, first_size: int, last_size: int, field: str
) -> None:
    error = await refusal(get_checkpoints(service, first_size, last_size))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error) == ([field], "INVALID_ARGUMENT")


async def test_an_unknown_token_is_refused_even_for_public_checkpoints(service: Service) -> None:
    error = await refusal(get_checkpoints(service, 0, token="no-such-token"))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_public_keys_are_listed_oldest_first(service: Service) -> None:
    store = service.app.store
    first = store.signer
    await play(service)
    new = LogSigner.from_private_key(first.origin, Ed25519PrivateKey.generate())
    await asyncio.to_thread(store.rotate_key, new)
    keys = await service.audit.GetPublicKeys(audit_pb2.GetPublicKeysRequest())
    assert list(keys.verifier_keys) == [first.vkey, new.vkey]
    assert list(keys.verifier_keys) == await asyncio.to_thread(store.public_keys)


def test_the_limits_are_stated_where_clients_read_them() -> None:
    proto = flat((ROOT / "proto/gnau/v1/audit.proto").read_text())
    api = flat((ROOT / "docs/api.md").read_text())
    per_message, per_call = limits.CHECKPOINTS_PER_MESSAGE, limits.MAX_CHECKPOINTS_PER_CALL
    assert (
        "rpc GetCheckpoints(GetCheckpointsRequest) returns (stream GetCheckpointsResponse)" in proto
    )
    assert f"in increasing size, {per_message} a message and at most {per_call:,} a call" in proto
    assert f"| `GetCheckpoints` | {per_message} checkpoints a message, {per_call} a call" in api
