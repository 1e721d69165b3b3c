"""Clock drift between the dealer and its witnesses (gnau_service/server/process/witnessing.py,
docs/operations.md, *Time*): real witness servers in this process, over HTTP, cosigning with
their clocks a minute ahead, a minute behind and on time. The service's metrics and log flag the
first two, once each, and not the third; a clock put right ends the drift."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest

from gnau_service.server.process.app import running
from gnau_service.server.process.config import SETTINGS, Settings
from gnau_service.witness.server import utc_now
from tests.catalogued import catalogue
from tests.server.conftest import Service
from tests.server.test_interceptors import log_lines
from tests.server.test_metrics import Samples, scrape, value
from tests.server.test_service import play
from tests.server.witnessed import WitnessSpec, local_witness, log_vkey, until

ORIGIN = "gnau-dealer/clocks"
OPERATIONS = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
#: docs/operations.md's section on time, up to the next section.
TIME_SECTION = OPERATIONS.split("\n## Time", 1)[1].split("\n## ", 1)[0]
DRIFT_EVENT = (
    "witness clock drift: the cosignature's time and the dealer's clock, or its entries' times, "
    "differ by more than the bound"
)


class SkewedClock:
    """A witness's clock: the true time plus ``skew`` seconds, which a test may change."""

    def __init__(self, skew: float) -> None:
        self.skew = skew

    def __call__(self) -> datetime:
        return utc_now() + timedelta(seconds=self.skew)


@dataclass
class Clocks:
    service: Service
    ahead: WitnessSpec
    behind: WitnessSpec
    on_time: WitnessSpec
    behind_clock: SkewedClock

    async def cosigned_by_all(self) -> None:
        witnessing = self.service.app.witnessing
        assert witnessing is not None
        size = self.service.app.tail.size
        await until(lambda: all(s.cosigned_size >= size for s in witnessing.statuses))


@pytest.fixture
async def clocks(settings: Settings, tmp_path: Path) -> AsyncIterator[Clocks]:
    vkey = log_vkey(settings.data_dir, ORIGIN)
    behind_clock = SkewedClock(-60.0)
    async with (
        local_witness(
            tmp_path / "ahead", "witness.test/ahead", ORIGIN, vkey, clock=SkewedClock(60.0)
        ) as ahead,
        local_witness(
            tmp_path / "behind", "witness.test/behind", ORIGIN, vkey, clock=behind_clock
        ) as behind,
        local_witness(tmp_path / "on-time", "witness.test/on-time", ORIGIN, vkey) as on_time,
    ):
        witnessed = dataclasses.replace(
            settings,
            origin=ORIGIN,
            http_listen="127.0.0.1:0",
            witnesses=(ahead.flag, behind.flag, on_time.flag),
            witness_interval_ms=20,
        )
        async with (
            running(witnessed) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            await catalogue(app.store, ["clocks"])
            yield Clocks(Service(app, witnessed, channel), ahead, behind, on_time, behind_clock)


def offset(samples: Samples, witness: WitnessSpec) -> tuple[float, float]:
    """The offset gauge and its uncertainty for ``witness``; both must be there."""
    key = frozenset({("witness", witness.name)})
    return (
        samples[("gnau_witness_clock_offset_seconds", key)],
        samples[("gnau_witness_clock_offset_uncertainty_seconds", key)],
    )


# One backend is enough: the clocks do not depend on it.
@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
async def test_a_witness_clock_a_minute_off_is_flagged_once_and_one_on_time_is_not(
    clocks: Clocks, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    await play(clocks.service, "clocks")
    await clocks.cosigned_by_all()
    samples = await scrape(clocks.service.app.http_port)
    ahead, behind, on_time = clocks.ahead.name, clocks.behind.name, clocks.on_time.name

    estimate, uncertainty = offset(samples, clocks.ahead)
    assert 0.5 <= uncertainty < 5  # half a second, plus half a local round trip
    assert abs(estimate - 60) <= uncertainty
    estimate, uncertainty = offset(samples, clocks.behind)
    assert abs(estimate + 60) <= uncertainty
    estimate, uncertainty = offset(samples, clocks.on_time)
    assert abs(estimate) <= uncertainty
    assert value(samples, "gnau_witness_clock_drift", witness=ahead) == 1
    assert value(samples, "gnau_witness_clock_drift", witness=behind) == 1
    assert value(samples, "gnau_witness_clock_drift", witness=on_time) == 0
    assert value(samples, "gnau_witness_clock_drifts_total", witness=ahead) == 1
    assert value(samples, "gnau_witness_clock_drifts_total", witness=behind) == 1
    assert ("gnau_witness_clock_drifts_total", frozenset({("witness", on_time)})) in samples

    # More cosignatures, still drifting: no more lines, no more counts.
    await play(clocks.service, "clocks")
    await clocks.cosigned_by_all()
    drifts = [line for line in log_lines(capsys.readouterr().err) if line["event"] == DRIFT_EVENT]
    assert sorted((line["witness"], line["drift"], line["level"]) for line in drifts) == [
        (ahead, "witness_ahead", "error"),
        (behind, "witness_behind", "error"),
    ]
    documented = json.loads(TIME_SECTION.split("```json\n", 1)[1].split("```", 1)[0])
    for line in drifts:
        assert set(line) == set(documented)
        assert line["bound_seconds"] == 5.0
        assert abs(abs(float(str(line["offset_seconds"]))) - 60) < 5
    # The checkpoint's newest entry, stamped just before it was sent, against each witness's time:
    # about a minute before the one ahead, a minute after the one behind.
    leads = {line["witness"]: float(str(line["entry_lead_seconds"])) for line in drifts}
    assert -65 < leads[ahead] < -60
    assert 55 < leads[behind] <= 60
    samples = await scrape(clocks.service.app.http_port)
    assert value(samples, "gnau_witness_clock_drifts_total", witness=ahead) == 1

    # The clock behind is put right: the next cosignature ends its drift.
    clocks.behind_clock.skew = 0.0
    await play(clocks.service, "clocks")
    await clocks.cosigned_by_all()
    samples = await scrape(clocks.service.app.http_port)
    assert value(samples, "gnau_witness_clock_drift", witness=behind) == 0
    assert value(samples, "gnau_witness_clock_drift", witness=ahead) == 1
    assert value(samples, "gnau_witness_clock_drifts_total", witness=behind) == 1
    ended = [
        line
        for line in log_lines(capsys.readouterr().err)
        if line["event"] == "witness clock within the bound again"
    ]
    assert [(line["witness"], line["was"]) for line in ended] == [(behind, "witness_behind")]


def test_the_bound_and_the_metrics_are_documented() -> None:
    setting = SETTINGS["witness_clock_bound_seconds"]
    assert setting.flag == "--witness-clock-bound-seconds"
    assert setting.flag in TIME_SECTION
    assert "GnauClockDrift" in TIME_SECTION
    for metric in (
        "gnau_witness_clock_offset_seconds",
        "gnau_witness_clock_offset_uncertainty_seconds",
        "gnau_witness_clock_drift",
        "gnau_witness_clock_drifts_total",
    ):
        assert re.search(rf"^\| `{metric}` \|", OPERATIONS, re.MULTILINE), metric
    documented = json.loads(TIME_SECTION.split("```json\n", 1)[1].split("```", 1)[0])
    assert documented["event"] == DRIFT_EVENT
