"""The Grafana dashboard (deploy/grafana/gnau-dealer.json) and the alert rules
(deploy/prometheus-alerts.yml) ask only for metrics, and group only by labels, that a real server
exports: compared against a scrape after real calls."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from gnau_service.server.grpc.statuses import Reason
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.catalogued import catalogue
from tests.server.conftest import Service
from tests.server.test_metrics import scrape
from tests.server.test_service import play, refusal, shuffle
from tests.server.test_workers import WORKER_METRICS
from tests.server.witnessed import down_witness

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "gnau-dealer.json"
ALERTS = REPO / "deploy" / "prometheus-alerts.yml"
OPERATIONS = REPO / "docs" / "operations.md"

#: PromQL words that look like metric names but are not.
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
     "offset", "inf", "nan"}
)  # fmt: skip
IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*")


def dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return document


def queries(document: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in document["panels"] for target in panel["targets"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside strings, label
    matchers, ranges and groupings that are not functions or keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", " ", text)
    names = set()
    for match in IDENTIFIER.finditer(text):
        after = text[match.end() :].lstrip()
        if not after.startswith("(") and match.group() not in KEYWORDS:
            names.add(match.group())
    return names


def grouping_labels(expr: str) -> set[str]:
    return {
        label.strip()
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
        for label in group.split(",")
    }


def test_the_query_reader_finds_names_and_skips_the_rest() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y(z)", i=~"$i"}[$__rate_interval'
        "]))) / sum(b_total offset 5m) + c"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert grouping_labels(expr) == {"le"}


def test_the_dashboard_uses_a_prometheus_datasource_variable() -> None:
    document = dashboard()
    variables = {item["name"]: item for item in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in document["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]


@pytest.fixture
async def metered(settings: Settings) -> AsyncIterator[Service]:
    """The metered service, asking a witness that is down: its metrics are exported too. The
    tables the test deals at are catalogued (issue 38)."""
    witnessed = dataclasses.replace(
        settings, http_listen="127.0.0.1:0", witnesses=(down_witness("witness.test/w1").flag,)
    )
    async with (
        running(witnessed) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue(app.store, ["dashboard", "left-open"])
        yield Service(app, witnessed, channel)


# One backend is enough: the names do not depend on it.
@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
async def test_every_metric_in_the_dashboard_is_exported(metered: Service) -> None:
    await play(metered, "dashboard")
    await shuffle(metered, "left-open")
    await refusal(shuffle(metered, "left-open"))
    samples = await scrape(metered.app.http_port)
    exported = {name for name, _ in samples}
    labels = {label for _, pairs in samples for label, _ in pairs}

    document = dashboard()
    used = {name for expr in queries(document) for name in metric_names(expr)}
    for variable in document["templating"]["list"]:
        if variable["type"] == "query":
            used |= set(re.findall(r"label_values\((\w+)", variable["definition"]))
    assert used, "the dashboard's queries name no metric"
    assert used <= exported, f"not exported: {sorted(used - exported)}"
    grouped = {label for expr in queries(document) for label in grouping_labels(expr)}
    assert grouped <= labels, f"no such label: {sorted(grouped - labels)}"
    wanted = {  # what the dashboard is for: one of each
        "gnau_round_transitions_total", "grpc_server_handling_seconds_bucket", "gnau_log_size",
        "gnau_log_checkpoint_age_seconds", "gnau_storage_errors_total", "gnau_refusals_total",
        "gnau_streams_open", "gnau_store_commit_seconds_bucket",
    }  # fmt: skip
    assert wanted <= used, f"missing from the dashboard: {sorted(wanted - used)}"

    rules = alert_rules()
    used = {name for rule in rules for name in metric_names(rule["expr"])}
    # The workers' own metrics exist only under --workers: tests/server/test_workers.py.
    exported |= WORKER_METRICS
    labels.add("worker")
    assert used <= exported, f"alerts on metrics not exported: {sorted(used - exported)}"
    grouped = {label for rule in rules for label in grouping_labels(rule["expr"])}
    assert grouped <= labels | {"instance"}, f"no such label: {sorted(grouped - labels)}"


def alert_rules() -> list[dict[str, Any]]:
    (group,) = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def test_the_alert_rules_are_the_runbooks() -> None:
    """Each rule has a severity and a runbook entry, names only reasons the service sends, and
    the runbook's YAML is the file Prometheus loads."""
    runbook = OPERATIONS.read_text(encoding="utf-8").split("### Alerts", 1)[1].split("\n### ", 1)[0]
    block = runbook.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    rules = alert_rules()
    assert len(rules) >= 8
    for rule in rules:
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert f"- **{rule['alert']}**" in runbook, f"{rule['alert']} has no runbook entry"
        for matcher in re.findall(r'reason=~?"([^"]*)"', rule["expr"]):
            assert set(matcher.split("|")) <= set(Reason), matcher
