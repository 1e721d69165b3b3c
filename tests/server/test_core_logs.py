"""grpc's ERROR about a client that went away mid-answer is lowered; its other lines are not."""

from __future__ import annotations

import logging

import pytest

from gnau_service.server.grpc.core_logs import GRPC_CORE_LOGGER, lower_peer_gone


def test_a_peer_gone_mid_answer_is_no_error_and_other_grpc_errors_stay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lower_peer_gone()
    lower_peer_gone()  # twice: still one filter
    core = logging.getLogger(GRPC_CORE_LOGGER)
    assert len(core.filters) == 1
    caplog.set_level(logging.WARNING)
    try:
        raise RuntimeError("the batch failed")
    except RuntimeError:
        core.exception(
            "ExecuteBatchError raised in core by servicer method [%s]",
            "/gnau.v1.DealerService/Deal",
        )
        core.exception("Unexpected [%s] raised by servicer method [%s]", "KeyError", "/x")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "Unexpected [KeyError] raised by servicer method [/x]")
    ]
    caplog.clear()
    caplog.set_level(logging.INFO)
    core.error("ExecuteBatchError raised in core by servicer method [%s]", "/a")
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("INFO", None)]
