"""No enumeration by default (issue 21, part 2): the public role lists no rounds, over gRPC or
HTTP, unless ``public_round_listing`` is on; a round id (96 bits from the CSPRNG) is the
capability to read its round; guessed ids find nothing and are never echoed; no metric label
holds a round id."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import aiohttp
import grpc
import pytest
from gnau.v1 import dealer_pb2

from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from tests.catalogued import catalogue
from tests.server.conftest import Service
from tests.server.test_service import deal, details, play, refusal, shuffle

ROUND_ID = re.compile(r"r-[0-9a-f]{24}")
NOT_FOUND = "there is no round with this id"
#: The tables the tests deal at, each catalogued (issue 38).
TABLES = (
    "listing-off",
    "listing-on",
    "guess-table",
    "guess-other",
    "metric-table-0",
    "metric-table-1",
    "metric-open",
)


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


@pytest.fixture
async def listing(settings: Settings) -> AsyncIterator[Service]:
    """The service with its HTTP port, and the public allowed to list rounds."""
    on = dataclasses.replace(settings, http_listen="127.0.0.1:0", public_round_listing=True)
    async with (
        running(on) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue(app.store, TABLES)
        yield Service(app, on, channel)


async def http_get(service: Service, path: str) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{service.app.http_port}{path}") as response,
    ):
        return response.status, await response.read()


async def list_rounds(service: Service, role: str | None, table: str = "") -> list[str]:
    listed = await service.call(
        "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id=table), role=role
    )
    return [round_.round_id for round_ in listed.rounds]


def test_the_setting_is_off_unless_turned_on() -> None:
    assert Settings().public_round_listing is False
    assert load_settings(None, {}, {}).public_round_listing is False
    environ = {"GNAU_PUBLIC_ROUND_LISTING": "true"}
    assert load_settings(None, environ, {}).public_round_listing is True
    assert load_settings(None, environ, {"public_round_listing": "false"}).public_round_listing is (
        False
    )
    with pytest.raises(ConfigError, match="public_round_listing"):
        load_settings(None, {"GNAU_PUBLIC_ROUND_LISTING": "yes"}, {})


async def test_the_public_lists_no_rounds_by_default(metered: Service) -> None:
    assert metered.settings.public_round_listing is False
    settled = (await play(metered, "listing-off")).round_id
    for role in (None, "public"):
        error = await refusal(
            metered.call(
                "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id="listing-off"), role
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, role
        assert details(error)[1] == "LISTING_NOT_PUBLIC"
        assert "public_round_listing" in (error.details() or "")
        assert not ROUND_ID.search(error.details() or "")
    # The operator and auditor still list; the public still reads the round by its id.
    for role in ("operator", "auditor"):
        assert await list_rounds(metered, role, "listing-off") == [settled]
    got = await metered.call(
        "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=settled), role=None
    )
    assert got.round.round_id == settled
    receipt = await metered.call(
        "dealer", "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=settled), role=None
    )
    assert json.loads(receipt.receipt)["round_id"] == settled
    # HTTP: /rounds is 403 whatever the query (even one that would be INVALID_ARGUMENT), and
    # the receipt of a known round is served.
    for query in ("", "?table_id=listing-off", "?page_size=ten", "?page_token=nonsense"):
        status, body = await http_get(metered, "/rounds" + query)
        assert status == 403, query
        document = json.loads(body)
        assert set(document) == {"error", "reason"}
        assert document["error"] == "PERMISSION_DENIED"
        assert "public_round_listing" in document["reason"]
        assert settled not in body.decode()
    status, body = await http_get(metered, f"/rounds/{settled}/receipt")
    assert status == 200 and json.loads(body)["round_id"] == settled


async def test_the_setting_lets_the_public_list_public_rounds(listing: Service) -> None:
    settled = (await play(listing, "listing-on")).round_id
    dealt = (await shuffle(listing, "listing-on")).round_id
    await deal(listing, dealt)
    for role in (None, "public"):
        assert await list_rounds(listing, role, "listing-on") == [settled]  # not the dealt one
    assert await list_rounds(listing, "auditor", "listing-on") == [dealt, settled]
    status, body = await http_get(listing, "/rounds?table_id=listing-on")
    assert status == 200
    assert [r["round_id"] for r in json.loads(body)["rounds"]] == [settled]


def guesses(real: str, unrevealed: str) -> list[str]:
    """Ids a prober would try: sequential ones, ones a hex digit off a real one, the real one
    in capitals or cut short or extended, and the id of a round whose seed is not public."""
    tried = [f"r-{n:024x}" for n in range(4)] + [f"r-{'f' * 24}", "r-1", "1", "r-"]
    digits = real[2:]
    for position in range(len(digits)):
        other = "0" if digits[position] != "0" else "1"
        tried.append(f"r-{digits[:position]}{other}{digits[position + 1 :]}")
    tried += [real.upper(), real[:-1], real + "0", f"{real} ", unrevealed]
    assert real not in tried
    return tried


async def test_guessed_round_ids_find_nothing_and_are_not_echoed(metered: Service) -> None:
    rounds = [(await play(metered, "guess-table")).round_id for _ in range(2)]
    unrevealed = (await shuffle(metered, "guess-other")).round_id
    await deal(metered, unrevealed)
    # Ids are 96 random bits: r- and 24 lowercase hex digits, no two alike, not in sequence.
    assert all(ROUND_ID.fullmatch(round_id) for round_id in [*rounds, unrevealed])
    assert len({*rounds, unrevealed}) == 3
    assert abs(int(rounds[0][2:], 16) - int(rounds[1][2:], 16)) > 2**32
    for guess in guesses(rounds[0], unrevealed):
        for method, request in (
            ("GetRound", dealer_pb2.GetRoundRequest(round_id=guess)),
            ("GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=guess)),
        ):
            error = await refusal(metered.call("dealer", method, request, role=None))
            assert error.code() == grpc.StatusCode.NOT_FOUND, (method, guess)
            assert details(error)[1] == "ROUND_NOT_FOUND"
            # One bounded message for every miss, an unknown id or an unrevealed round alike.
            assert error.details() == NOT_FOUND, (method, guess)
            trailers = b"".join(
                value if isinstance(value, bytes) else value.encode()
                for _, value in error.trailing_metadata() or ()
            )
            assert guess.encode() not in trailers, (method, guess)
        status, body = await http_get(metered, f"/rounds/{quote(guess, safe='')}/receipt")
        assert status == 404, guess
        assert json.loads(body) == {"error": "NOT_FOUND", "reason": NOT_FOUND}, guess
    # Another path under /rounds does not echo what it was asked either.
    status, body = await http_get(metered, f"/rounds/{rounds[0]}")
    assert status == 404 and rounds[0] not in body.decode()
    # The real ids still read.
    for round_id in rounds:
        status, _ = await http_get(metered, f"/rounds/{round_id}/receipt")
        assert status == 200


async def test_no_metric_label_holds_a_round_id(metered: Service) -> None:
    played = [(await play(metered, f"metric-table-{n}")).round_id for n in range(2)]
    open_round = (await shuffle(metered, "metric-open")).round_id
    await refusal(
        metered.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=f"r-{'0' * 24}"), None
        )
    )
    await http_get(metered, f"/rounds/{played[0]}/receipt")
    await http_get(metered, "/rounds")
    status, body = await http_get(metered, "/metrics")
    assert status == 200
    text = body.decode()
    assert 'table_id="metric-open"' in text  # the open round is seen, by its table, not its id
    for round_id in [*played, open_round]:
        assert round_id not in text
    assert not ROUND_ID.search(text)
    assert not re.search(r'"r-[^"]*"', text)  # no label value that is a round id at all
