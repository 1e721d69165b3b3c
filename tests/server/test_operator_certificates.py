"""Client certificates of two operators over real mutual TLS (issue 38): ``--mtls-role
CN=ROLE[@OPERATOR]`` makes each certificate's common name a caller of one operator, or an
auditor's of every operator. Casino B's platform certificate never reaches casino A's round, A's
auditor certificate reads A's rounds only and not the log's entries, the regulator's reads both
and the log, whose entries name the certificate that made each change and its operator. A mapping
that is not one stops the start, in the words docs/configuration.md gives."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc, round_pb2

from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from tests.catalogued import catalogue
from tests.server.conftest import write_tokens
from tests.server.test_service import SEATS, details, refusal, rid
from tests.server.test_tls_and_config import _certificate, _key_pem, _pem

A, B = "casino-a", "casino-b"
#: The --mtls-role mappings the service starts with, one for each client certificate's common
#: name; the last names no operator, so its operator certificate is the default operator's.
MAPPINGS = (
    "platform.casino-a=operator@casino-a",
    "platform.casino-b=operator@casino-b",
    "audit.casino-a=auditor@casino-a",
    "regulator=auditor@*",
    "platform.legacy=operator",
)
COMMON_NAMES = tuple(mapping.partition("=")[0] for mapping in MAPPINGS)
#: The table ids both casinos deal at, each casino's own table in its catalogue (issue 38); the
#: default operator's are its starter tables.
TABLES = ("table-1", "table-2")
#: The async tests share the module's service, so they run in its event loop.
in_module_loop = pytest.mark.asyncio(loop_scope="module")
CONFIG_DOC = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()


@dataclass
class Certified:
    """A running service with mTLS, and a channel presenting each client certificate, by its
    common name."""

    channels: dict[str, grpc.aio.Channel]

    async def call(self, method: str, request: Any, common_name: str) -> Any:
        channel = self.channels[common_name]
        stub: Any = (
            audit_pb2_grpc.AuditServiceStub(channel)
            if type(request).__module__.endswith("audit_pb2")
            else dealer_pb2_grpc.DealerServiceStub(channel)
        )
        return await getattr(stub, method)(request)

    async def step(self, method: str, round_id: str, common_name: str) -> round_pb2.Round:
        """Deal, Reveal, Settle or VoidRound of a round, as the certificate's caller."""
        requests: dict[str, Any] = {
            "Deal": dealer_pb2.DealRequest(request_id=rid(), round_id=round_id, seats=SEATS),
            "Reveal": dealer_pb2.RevealRequest(request_id=rid(), round_id=round_id),
            "Settle": dealer_pb2.SettleRequest(request_id=rid(), round_id=round_id),
            "VoidRound": dealer_pb2.VoidRoundRequest(
                request_id=rid(),
                round_id=round_id,
                reason_code=round_pb2.VOID_REASON_TABLE_CLOSED,
            ),
        }
        round_: round_pb2.Round = (await self.call(method, requests[method], common_name)).round
        return round_

    def stepping(
        self, method: str, common_name: str
    ) -> Callable[[str], Awaitable[round_pb2.Round]]:
        """:meth:`step` of one method as one certificate's caller, for any round id."""

        async def step(round_id: str) -> round_pb2.Round:
            return await self.step(method, round_id, common_name)

        return step

    async def shuffle(self, common_name: str, table: str) -> round_pb2.Round:
        request = dealer_pb2.ShuffleRequest(request_id=rid(), table_id=table)
        round_: round_pb2.Round = (await self.call("Shuffle", request, common_name)).round
        return round_

    async def play(self, common_name: str, table: str) -> round_pb2.Round:
        """A round shuffled, dealt, revealed and settled by the certificate's caller."""
        round_id = (await self.shuffle(common_name, table)).round_id
        for method in ("Deal", "Reveal", "Settle"):
            settled = await self.step(method, round_id, common_name)
        return settled

    async def listed(self, common_name: str, table: str = "") -> set[str]:
        request = dealer_pb2.ListRoundsRequest(table_id=table, page_size=1000)
        response = await self.call("ListRounds", request, common_name)
        return {round_.round_id for round_ in response.rounds}

    async def entries(self, common_name: str) -> list[dict[str, Any]]:
        """The log's entries, read with the certificate's caller, each as its JSON object."""
        stub = audit_pb2_grpc.AuditServiceStub(self.channels[common_name])
        return [
            json.loads(entry.data)
            async for response in stub.GetEntries(audit_pb2.GetEntriesRequest(start=0))
            for entry in response.entries
        ]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def certified(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Certified]:
    directory = tmp_path_factory.mktemp("operator-certificates")
    authority, authority_key = _certificate("gnau test CA", None, ca=True)
    issuer = (authority.subject, authority_key)
    server, server_key = _certificate("localhost", issuer)
    (directory / "ca.pem").write_bytes(_pem(authority))
    (directory / "server.pem").write_bytes(_pem(server))
    (directory / "server.key").write_bytes(_key_pem(server_key))
    # The mappings as an operator gives them, through the setting's own parser.
    mapped = load_settings(None, {"GNAU_MTLS_ROLES": ",".join(MAPPINGS)}, {})
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=directory / "data",
        tokens=write_tokens(directory / "tokens.json"),
        tls_cert=directory / "server.pem",
        tls_key=directory / "server.key",
        tls_client_ca=directory / "ca.pem",
        mtls_roles=mapped.mtls_roles,
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    options = (("grpc.ssl_target_name_override", "localhost"),)
    async with AsyncExitStack() as stack:
        app = await stack.enter_async_context(running(settings))
        for operator in (A, B):
            await catalogue(app.store, TABLES, operator=operator)
        channels = {}
        for common_name in COMMON_NAMES:
            client, client_key = _certificate(common_name, issuer)
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(authority),
                private_key=_key_pem(client_key),
                certificate_chain=_pem(client),
            )
            channels[common_name] = await stack.enter_async_context(
                grpc.aio.secure_channel(f"127.0.0.1:{app.port}", credentials, options)
            )
        yield Certified(channels)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def settled(certified: Certified) -> dict[str, round_pb2.Round]:
    """A settled round of each casino, both at the same table id, by operator."""
    return {
        A: await certified.play("platform.casino-a", "table-1"),
        B: await certified.play("platform.casino-b", "table-1"),
    }


def _missing() -> str:
    return f"r-{uuid.uuid4().hex[:24]}"


def _shape(error: grpc.aio.AioRpcError, round_id: str) -> tuple[grpc.StatusCode, str, str]:
    """A refusal with the round id taken out: what it tells of the round beyond its id."""
    return error.code(), details(error)[1], (error.details() or "").replace(round_id, "ROUND")


async def _as_absent(call: Callable[[str], Awaitable[Any]], round_id: str) -> None:
    """``call`` of ``round_id`` is refused NOT_FOUND exactly as of a round that does not exist."""
    error = await refusal(call(round_id))
    missing = _missing()
    absent = await refusal(call(missing))
    assert error.code() == grpc.StatusCode.NOT_FOUND, error
    assert _shape(error, round_id) == _shape(absent, missing)


def _reads(certified: Certified, common_name: str) -> dict[str, Callable[[str], Awaitable[Any]]]:
    """The calls that read one round by its id, as the certificate's caller."""
    return {
        "GetRound": lambda round_id: certified.call(
            "GetRound", dealer_pb2.GetRoundRequest(round_id=round_id), common_name
        ),
        "GetRoundReceipt": lambda round_id: certified.call(
            "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=round_id), common_name
        ),
        "VerifyRound": lambda round_id: certified.call(
            "VerifyRound", audit_pb2.VerifyRoundRequest(round_id=round_id), common_name
        ),
    }


@in_module_loop
async def test_each_platform_deals_at_one_table_id_and_b_cannot_change_a_s_round(
    certified: Certified,
) -> None:
    of_a = await certified.shuffle("platform.casino-a", "table-2")
    of_b = await certified.shuffle("platform.casino-b", "table-2")
    assert (of_a.operator, of_b.operator) == (A, B)
    assert of_a.round_id != of_b.round_id

    # B's certificate, at each state where the change would be A's next step.
    for method in ("Deal", "VoidRound"):
        await _as_absent(certified.stepping(method, "platform.casino-b"), of_a.round_id)
    dealt_a = await certified.step("Deal", of_a.round_id, "platform.casino-a")
    dealt_b = await certified.step("Deal", of_b.round_id, "platform.casino-b")
    assert dealt_a.state == dealt_b.state == round_pb2.ROUND_STATE_DEALT
    assert (dealt_a.table_id, dealt_b.table_id) == ("table-2", "table-2")
    await _as_absent(certified.stepping("Reveal", "platform.casino-b"), of_a.round_id)
    await certified.step("Reveal", of_a.round_id, "platform.casino-a")
    for method in ("Settle", "VoidRound"):
        await _as_absent(certified.stepping(method, "platform.casino-b"), of_a.round_id)
    # Nothing B's certificate tried changed A's round; A settles it, and B voids its own.
    now = await certified.call(
        "GetRound", dealer_pb2.GetRoundRequest(round_id=of_a.round_id), "platform.casino-a"
    )
    assert now.round.state == round_pb2.ROUND_STATE_REVEALED
    settled_a = await certified.step("Settle", of_a.round_id, "platform.casino-a")
    assert settled_a.state == round_pb2.ROUND_STATE_SETTLED
    voided_b = await certified.step("VoidRound", of_b.round_id, "platform.casino-b")
    assert voided_b.state == round_pb2.ROUND_STATE_VOIDED


@in_module_loop
async def test_b_s_certificate_neither_reads_nor_lists_a_s_round(
    certified: Certified, settled: dict[str, round_pb2.Round]
) -> None:
    of_a, of_b = settled[A].round_id, settled[B].round_id
    for name, read in _reads(certified, "platform.casino-b").items():
        await _as_absent(read, of_a)
        await read(of_b)  # its own
        await _reads(certified, "platform.casino-a")[name](of_a)
    for table in ("", "table-1"):
        listed_b = await certified.listed("platform.casino-b", table)
        assert of_b in listed_b and of_a not in listed_b, table
        listed_a = await certified.listed("platform.casino-a", table)
        assert of_a in listed_a and of_b not in listed_a, table


@in_module_loop
async def test_a_s_auditor_certificate_reads_a_s_rounds_only_and_not_the_log(
    certified: Certified, settled: dict[str, round_pb2.Round]
) -> None:
    of_a, of_b = settled[A].round_id, settled[B].round_id
    for read in _reads(certified, "audit.casino-a").values():
        await read(of_a)
        await _as_absent(read, of_b)
    found = await certified.call(
        "GetRound", dealer_pb2.GetRoundRequest(round_id=of_a), "audit.casino-a"
    )
    assert found.round.operator == A
    verdict = await certified.call(
        "VerifyRound", audit_pb2.VerifyRoundRequest(round_id=of_a), "audit.casino-a"
    )
    assert verdict.ok, verdict.failures
    listed = await certified.listed("audit.casino-a", "table-1")
    assert of_a in listed and of_b not in listed
    error = await refusal(certified.entries("audit.casino-a"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert details(error)[1] == "OPERATOR_SCOPE"


@in_module_loop
async def test_the_regulator_s_certificate_reads_both_casinos_and_the_log(
    certified: Certified, settled: dict[str, round_pb2.Round]
) -> None:
    for operator, round_ in settled.items():
        for read in _reads(certified, "regulator").values():
            await read(round_.round_id)
        found = await certified.call(
            "GetRound", dealer_pb2.GetRoundRequest(round_id=round_.round_id), "regulator"
        )
        assert found.round.operator == operator
    listed = await certified.listed("regulator", "table-1")
    assert {settled[A].round_id, settled[B].round_id} <= listed
    entries = await certified.entries("regulator")
    assert {entry["round_id"] for entry in entries} >= {settled[A].round_id, settled[B].round_id}


@in_module_loop
async def test_every_entry_of_a_round_names_its_certificate_and_operator(
    certified: Certified, settled: dict[str, round_pb2.Round]
) -> None:
    entries = await certified.entries("regulator")
    for operator, round_ in settled.items():
        of_round = [entry for entry in entries if entry["round_id"] == round_.round_id]
        assert [entry["kind"] for entry in of_round] == [
            "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED",
        ]  # fmt: skip
        for entry in of_round:
            assert entry["payload"]["actor"] == f"cert:platform.{operator}", entry["kind"]
            assert entry["payload"]["operator"] == operator, entry["kind"]


@in_module_loop
async def test_an_operator_certificate_mapped_without_an_operator_is_the_default_s(
    certified: Certified, settled: dict[str, round_pb2.Round]
) -> None:
    # The same table id again: a third operator's table.
    legacy = await certified.play("platform.legacy", "table-1")
    assert legacy.operator == "default"
    await _as_absent(_reads(certified, "platform.legacy")["GetRound"], settled[A].round_id)
    await _as_absent(_reads(certified, "platform.casino-a")["GetRound"], legacy.round_id)
    assert await certified.listed("platform.legacy") == {legacy.round_id}
    entries = await certified.entries("regulator")
    of_round = [entry for entry in entries if entry["round_id"] == legacy.round_id]
    assert len(of_round) == 4
    for entry in of_round:
        assert entry["payload"]["actor"] == "cert:platform.legacy", entry["kind"]
        assert entry["payload"]["operator"] == "default", entry["kind"]


@pytest.mark.parametrize(
    ("mapping", "reason"),
    [
        ("CN=operator@*", "only an auditor may be of all operators ('*') in 'CN=operator@*'"),
        (
            "CN=operator@Bad",
            "operator 'Bad' is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or"
            " digit in 'CN=operator@Bad'",
        ),
        (
            "CN=auditor@",
            "operator '' is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or"
            " digit in 'CN=auditor@'",
        ),
    ],
)
def test_a_mapping_that_is_not_one_stops_the_start_as_the_docs_say(
    mapping: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {}, {"mtls_roles": [mapping]})
    source = "setting 'mtls_roles' (from flag --mtls-role): "
    assert str(refused.value) == source + reason
    documented = " ".join(CONFIG_DOC.split())
    assert f"`{source}...`" in documented
    assert f"`{reason}`" in documented
