"""AuditService.GetReport over real gRPC (issue 38): the report of docs/reports.md, computed by
the service. An auditor of one operator gets its operator's rows only; the regulator any one
operator's, or all; the text is ``gnau report``'s on the same log; the work is bounded.
"""

# The tests take the imported ``operators`` fixture as their argument (F811).
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path
from time import monotonic

import grpc
import pytest
from gnau.v1 import audit_pb2

from gnau_service.audit.report import Period
from gnau_service.audit.round_events import VoidReason
from gnau_service.rounds import reporting
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.refusals import ReportBusy, ReportPastDeadline
from gnau_service.rounds.reporting import Reporting, ReportQuery
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.process.config import Settings
from tests.catalogued import catalogue
from tests.conftest import Run
from tests.dealers import fresh, opened_store
from tests.server.test_catalogue_api import why
from tests.server.test_operator_isolation import A, B, Operators, operators  # noqa: F401
from tests.server.test_service import SEATS


async def played(ops: Operators) -> None:
    """One settled round of A at t1, and of B at t1 and at t2, each of SEATS."""
    for caller, table in (("operator-a", "t1"), ("operator-b", "t1"), ("operator-b", "t2")):
        round_ = await ops.shuffle(caller, table)
        await ops.deal(caller, round_.round_id)
        await ops.reveal(caller, round_.round_id)
        await ops.settle(caller, round_.round_id)


async def report(ops: Operators, caller: str, **fields: object) -> audit_pb2.GetReportResponse:
    request = audit_pb2.GetReportRequest(**fields)  # type: ignore[arg-type]
    answer: audit_pb2.GetReportResponse = await ops.call("GetReport", request, caller)
    return answer


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


async def test_each_auditor_gets_the_rows_of_what_it_may_see(operators: Operators) -> None:
    await played(operators)
    mine = rows((await report(operators, "auditor-a")).report)
    assert [(r["operator"], r["table_id"], r["currency"]) for r in mine] == [(A, "t1", "EUR")]
    stakes = sum(seat.stake for seat in SEATS)  # the seats every round of played() deals
    assert (mine[0]["rounds_settled"], mine[0]["seats"], mine[0]["stakes"]) == (
        "1",
        str(len(SEATS)),
        str(stakes),
    )
    theirs = rows((await report(operators, "auditor-b", operator=B)).report)
    assert [(r["operator"], r["table_id"]) for r in theirs] == [(B, "t1"), (B, "t2")]
    everyone = rows((await report(operators, "regulator")).report)
    assert {(r["operator"], r["table_id"]) for r in everyone} == {(A, "t1"), (B, "t1"), (B, "t2")}
    named = json.loads((await report(operators, "regulator", operator=B, format="json")).report)
    assert named["operators"] == [B]
    assert [row["table_id"] for row in named["rows"]] == ["t1", "t2"]
    for caller, fields in (("auditor-a", {"operator": B}), ("auditor-b", {"operator": A})):
        with pytest.raises(grpc.aio.AioRpcError) as scoped:
            await report(operators, caller, **fields)
        assert (why(scoped.value).code, why(scoped.value).reason) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "OPERATOR_SCOPE",
        )
    for caller in ("operator-a", None):
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await report(operators, caller)  # type: ignore[arg-type]
        assert why(denied.value).code in {
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
        }


async def test_the_text_is_gnau_reports_on_the_same_log(
    operators: Operators, settings: Settings, gnau: object
) -> None:
    await played(operators)
    answer = await report(operators, "regulator", period="day")
    run: Run = gnau(  # type: ignore[operator]
        "report", "--database", settings.database_url, "--period", "day"
    )
    assert run.status == 0, run.err
    # The CLI read the log after the RPC: the same rounds, as nothing was played in between.
    assert answer.report == run.out
    assert answer.log_size > 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"period": "week"}, "period"),
        ({"since": "2026-13-01"}, "since"),
        ({"since": "2026-12-02", "until": "2026-12-01"}, "until"),
        ({"format": "xml"}, "format"),
        ({"table_ids": ["t\n1"]}, "table_ids[0]"),
        ({"table_ids": [f"t{n}" for n in range(101)]}, "table_ids"),
        ({"operator": "Casino-A"}, "operator"),
    ],
)
async def test_a_bad_request_is_refused_before_any_work(
    operators: Operators, fields: dict[str, object], field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await report(operators, "regulator", **fields)
    assert why(refused.value).code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in why(refused.value).fields, why(refused.value).fields


async def test_a_report_too_large_is_refused(
    operators: Operators, monkeypatch: pytest.MonkeyPatch
) -> None:
    await played(operators)
    monkeypatch.setattr(reporting, "MAX_REPORT_BYTES", 100)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await report(operators, "regulator")
    assert (why(refused.value).code, why(refused.value).reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "REPORT_TOO_LARGE",
    )
    assert why(refused.value).metadata == {"limit": "100"}


QUERY = ReportQuery(Period.MONTH, None, None, None, None, "csv")


async def test_one_report_at_a_time_and_none_past_its_deadline(tmp_path: Path) -> None:
    with opened_store("sqlite", tmp_path) as store:
        await catalogue(store, ["t"], operator=A)
        view = await Dealer(store).shuffle("t", HouseRules(), fresh(), operator=A, actor="token:p")
        round_id = view.record.round_id
        await Dealer(store).void(
            round_id, VoidReason.TABLE_CLOSED, "", fresh(), operator=A, actor="token:p"
        )
        shared = Reporting(store)
        loop = asyncio.get_running_loop()
        started, release = asyncio.Event(), asyncio.Event()
        compute = shared._compute

        def held(query: ReportQuery, deadline: float | None) -> tuple[str, int]:
            loop.call_soon_threadsafe(started.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
            return compute(query, deadline)

        shared._compute = held  # type: ignore[method-assign]
        first = asyncio.create_task(shared.report(QUERY, deadline=None))
        await started.wait()
        with pytest.raises(ReportBusy):  # refused at once, while the first one runs
            await shared.report(QUERY, deadline=None)
        release.set()
        text, size = await first
        assert rows(text)[0]["rounds_voided_before_deal"] == "1" and size > 0
        shared._compute = compute  # type: ignore[method-assign]
        with pytest.raises(ReportPastDeadline):
            await shared.report(QUERY, deadline=monotonic() - 1)
