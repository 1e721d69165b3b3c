"""The per-operator round counter (issue 38): which calls move it, under which operator, and the
bound on its ``operator`` label (docs/operations.md, *Operators in the metrics*). A real
server's scrape is in tests/server/test_metrics.py."""

from __future__ import annotations

import contextvars
from typing import cast

import grpc
import pytest

from gnau_service.server.grpc.auth import Caller, Credentials, Role
from gnau_service.server.grpc.call_observer import CallName, RpcType
from gnau_service.server.grpc.interceptors import current_operator
from gnau_service.server.process.metrics import Metrics
from gnau_service.server.process.operator_labels import (
    MAX_OPERATOR_SERIES,
    OTHER_OPERATORS,
    OperatorLabels,
)
from gnau_service.store import LogReader

COUNTER = "gnau_operator_round_transitions_total"


def credentials(*operators: str | None) -> Credentials:
    """Credentials of a token for each of ``operators`` (None: an auditor of all of them), and a
    certificate of the last."""
    tokens = {f"hash-{number}": Caller(Role.OPERATOR, "", o) for number, o in enumerate(operators)}
    return Credentials(tokens, {"CN=last": Caller(Role.AUDITOR, "", operators[-1])})


def metrics(configured: Credentials | None = None) -> Metrics:
    # The store is read only at a scrape, which these tests do not make.
    return Metrics(
        cast(LogReader, object()),
        streams_open=lambda: 0,
        streams_limit=1,
        storage_failing=lambda: False,
        serving=lambda: True,
        credentials=None if configured is None else lambda: configured,
    )


def call(
    metered: Metrics,
    method: str,
    operator: str | None,
    code: grpc.StatusCode = grpc.StatusCode.OK,
    service: str = "gnau.v1.DealerService",
) -> None:
    """A call of ``method`` by a caller of ``operator``, ending with ``code``, as the interceptor
    makes it: the watch starts before the caller is known, and ends in the call's context."""

    def run() -> None:
        watch = metered.start(CallName.of(f"/{service}/{method}", RpcType.UNARY), None)  # type: ignore[arg-type]
        current_operator.set(operator)
        watch.end(code, "" if code is grpc.StatusCode.OK else "ROUND_STATE")

    contextvars.copy_context().run(run)


def counts(metered: Metrics) -> dict[tuple[str, str], float]:
    return {
        (sample.labels["operator"], sample.labels["state"]): sample.value
        for family in metered.operator_transitions.collect()
        for sample in family.samples
        if sample.name == COUNTER
    }


def test_each_round_move_counts_under_the_callers_operator() -> None:
    metered = metrics()
    for method in ("Shuffle", "Deal", "Reveal", "Settle"):
        call(metered, method, "casino-a")
    call(metered, "Shuffle", "casino-b")
    call(metered, "VoidRound", "casino-b")
    call(metered, "Shuffle", "casino-a")
    assert counts(metered) == {
        ("casino-a", "SHUFFLED"): 2,
        ("casino-a", "DEALT"): 1,
        ("casino-a", "REVEALED"): 1,
        ("casino-a", "SETTLED"): 1,
        ("casino-b", "SHUFFLED"): 1,
        ("casino-b", "VOIDED"): 1,
    }


def test_refusals_reads_and_other_services_move_nothing() -> None:
    metered = metrics()
    call(metered, "Settle", "casino-a", grpc.StatusCode.FAILED_PRECONDITION)
    call(metered, "Shuffle", "casino-a", grpc.StatusCode.UNAVAILABLE)
    call(metered, "GetRound", "casino-a")
    call(metered, "ListRounds", "casino-a")
    call(metered, "Shuffle", "casino-a", service="gnau.v1.AuditService")
    assert counts(metered) == {}


def test_a_call_without_an_operator_counts_as_other() -> None:
    metered = metrics()
    call(metered, "Shuffle", None)
    assert counts(metered) == {("_other", "SHUFFLED"): 1}


def test_the_label_is_bounded_in_the_order_operators_come() -> None:
    metered = metrics()
    operators = [f"op-{number:03d}" for number in range(MAX_OPERATOR_SERIES + 20)]
    for operator in reversed(operators):
        call(metered, "Shuffle", operator)
    call(metered, "Shuffle", "op-119")  # among the first 100 seen: still its own
    call(metered, "Shuffle", "op-000")  # seen after the 100th: other
    found = counts(metered)
    # The first 100 seen are op-119 down to op-020; op-019 to op-000 are folded.
    assert len(found) == MAX_OPERATOR_SERIES + 1
    assert found["op-119", "SHUFFLED"] == 2
    assert found["op-020", "SHUFFLED"] == 1
    assert ("op-019", "SHUFFLED") not in found
    assert found[OTHER_OPERATORS, "SHUFFLED"] == 21


def test_with_the_configured_operators_the_first_100_sorted_have_series() -> None:
    configured = [f"op-{number:03d}" for number in range(MAX_OPERATOR_SERIES + 5)]
    metered = metrics(credentials(None, *reversed(configured)))
    for operator in ("op-104", "op-099", "op-000", "unknown"):
        call(metered, "Settle", operator)
    # Sorted, op-000 to op-099 are the first 100; op-104 is beyond, unknown not configured.
    assert counts(metered) == {
        ("op-000", "SETTLED"): 1,
        ("op-099", "SETTLED"): 1,
        ("_other", "SETTLED"): 2,
    }


def test_a_reload_of_the_credentials_is_followed() -> None:
    configured = [credentials("casino-a")]
    labels = OperatorLabels(lambda: configured[-1])
    assert (labels.label("casino-a"), labels.label("casino-b")) == ("casino-a", "_other")
    configured.append(credentials("casino-a", "casino-b"))
    assert (labels.label("casino-a"), labels.label("casino-b")) == ("casino-a", "casino-b")


def test_a_certificates_operator_is_configured_too() -> None:
    by_certificate = Credentials({}, {"CN=b": Caller(Role.OPERATOR, "", "casino-b")})
    assert OperatorLabels(lambda: by_certificate).label("casino-b") == "casino-b"


@pytest.mark.parametrize("value", ["Casino-A", "", "a" * 65, "*"])
def test_a_value_that_is_not_an_operator_id_is_other(value: str) -> None:
    assert OperatorLabels().label(value) == OTHER_OPERATORS
    assert OperatorLabels(lambda: credentials(value, "casino-a")).label(value) == OTHER_OPERATORS
