"""``gnau player forget`` and ``gnau audit players`` against a real in-process service on each
backend: the token from --token or a file, the answer as text or JSON, the lookup over gRPC or
straight from the database (the same answer), and one line on stderr for a refusal."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from gnau.v1 import dealer_pb2, round_pb2

from tests.catalogued import catalogue
from tests.conftest import Run
from tests.server.conftest import TOKENS, Service
from tests.server.test_service import rid

Gnau = Callable[..., Run]
ALICE = "alice@example.com"
#: The table the tests seat Alice at, catalogued for the default operator (issue 38).
TABLE = "t"


@pytest.fixture
async def service(service: Service) -> Service:
    """The server fixture's service, with :data:`TABLE` catalogued."""
    await catalogue(service.app.store, [TABLE])
    return service


async def run(gnau: Gnau, *args: str) -> Run:
    done = await asyncio.to_thread(gnau, *args)
    own = [line for line in done.err.splitlines(keepends=True) if not line.startswith("{")]
    return Run(done.status, done.out, "".join(own))


async def seat_alice(service: Service, seat_numbers: tuple[int, ...] = (1, 3)) -> list[str]:
    """A dealt round with Alice at ``seat_numbers`` (and Bob at 2): her references."""
    shuffled = (
        await service.call(
            "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id=TABLE)
        )
    ).round
    seats = [round_pb2.Seat(seat_number=n, player_id=ALICE, stake=5) for n in seat_numbers]
    seats.append(round_pb2.Seat(seat_number=2, player_id="bob", stake=5))
    dealt = (
        await service.call(
            "dealer",
            "Deal",
            dealer_pb2.DealRequest(request_id=rid(), round_id=shuffled.round_id, seats=seats),
        )
    ).round
    return [seat.player_ref for seat in dealt.seats if seat.player_id == ALICE]


async def test_audit_players_maps_both_ways_over_grpc_and_from_the_database(
    service: Service, gnau: Gnau
) -> None:
    refs = await seat_alice(service)
    remote = ["--target", f"127.0.0.1:{service.app.port}", "--token", TOKENS["auditor"]]
    local = ["--database", service.settings.database_url]
    answers = []
    for where in (remote, local):
        by_id = await run(gnau, "audit", "players", *where, "--player-id", ALICE, "--json")
        assert by_id.status == 0, by_id.err
        answer = json.loads(by_id.out)
        assert answer["player_id"] == ALICE
        assert sorted(seat["player_ref"] for seat in answer["seats"]) == sorted(refs)
        answers.append(by_id.out)
        by_ref = await run(gnau, "audit", "players", *where, "--player-ref", refs[0])
        assert by_ref.status == 0, by_ref.err
        assert by_ref.out.startswith(f"player {ALICE!r}: 1 seat(s)\n")
        assert refs[0] in by_ref.out
    assert answers[0] == answers[1], "over gRPC and from the database alike"
    public = await run(
        gnau, "audit", "players", "--target", f"127.0.0.1:{service.app.port}", "--player-id", ALICE
    )
    assert public.status == 2 and public.err.count("\n") == 1
    assert "mapping players needs a token of the auditor" in public.err
    public_token = ["--token", TOKENS["public"]]
    refused = await run(gnau, "audit", "players", *remote[:2], *public_token, "--player-id", ALICE)
    assert refused.status == 2 and "PERMISSION_DENIED" in refused.err
    bad = await run(gnau, "audit", "players", *local, "--player-ref", "alice")
    assert bad.status == 2 and "player_ref: must be a player reference" in bad.err


async def test_player_forget_with_a_token_file_then_nothing_is_left(
    service: Service, gnau: Gnau, tmp_path: Path
) -> None:
    refs = await seat_alice(service, (1, 3, 4))
    target = ["--target", f"127.0.0.1:{service.app.port}"]
    no_token = await run(gnau, "player", "forget", ALICE, *target)
    assert no_token.status == 2 and "needs a token of the operator role" in no_token.err
    auditor = await run(gnau, "player", "forget", ALICE, *target, "--token", TOKENS["auditor"])
    assert auditor.status == 2 and "PERMISSION_DENIED" in auditor.err
    token_file = tmp_path / "operator-token"
    descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(TOKENS["operator"] + "\n")
    forgot = await run(gnau, "player", "forget", ALICE, *target, "--token-file", str(token_file))
    assert forgot.status == 0, forgot.err
    assert forgot.out.startswith("forgotten: the player's key and 3 seat link(s) are deleted;")
    assert "PLAYER_FORGOTTEN is entry " in forgot.out
    again = await run(
        gnau, "player", "forget", ALICE, *target, "--token", TOKENS["operator"], "--json"
    )
    assert again.status == 0
    assert json.loads(again.out) == {"forgotten": False, "log_index": None, "seats_unlinked": 0}
    for asked in (["--player-id", ALICE], ["--player-ref", refs[1]]):
        gone = await run(
            gnau, "audit", "players", "--database", service.settings.database_url, *asked
        )
        assert gone.status == 1 and gone.out.startswith("no known player for ")
