"""``gnau report``: from a bundle and from a database, its output forms, the operator filter,
and its refusals as one line with the documented exit status (docs/reports.md). The figures
themselves are held to a hand computation in tests/audit/test_report.py; here the PAR sheet's
figures are replaced by the same hand-chosen ones, since computing a rule set's seat covariance
takes seconds."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnau_service.audit import report as report_module
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.cli import report_commands
from gnau_service.store import DEFAULT_DATABASE_URL, open_store
from tests.audit.logs import MemoryLog, new_signer, play_round
from tests.audit.report_logs import HandFigures, hand_log, operators_log
from tests.conftest import Run
from tests.steps import append

Gnau = Callable[..., Run]


@pytest.fixture(autouse=True)
def hand_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "ParSheetFigures", HandFigures)


@pytest.fixture
def log() -> MemoryLog:
    return hand_log()


@pytest.fixture
def bundle(tmp_path: Path, log: MemoryLog) -> Path:
    path = tmp_path / "log.bundle"
    path.write_text("".join(log.bundle_lines()), encoding="utf-8", newline="\n")
    return path


@pytest.fixture
def key(tmp_path: Path, log: MemoryLog) -> str:
    path = tmp_path / "log.vkey"
    path.write_text(log.signer.vkey + "\n")
    return str(path)


def test_csv_from_a_bundle(gnau: Gnau, bundle: Path, key: str) -> None:
    run = gnau("report", str(bundle), "--key", key)
    assert (run.status, run.err) == (0, "")
    lines = list(csv.reader(io.StringIO(run.out)))
    assert [line[:3] for line in lines] == [
        ["period", "operator", "table_id"],
        ["2026-11", "default", "t-1"],
        ["2026-11", "default", "t-2"],
        ["2026-12", "default", "t-1"],
    ]
    assert lines[1][-8:] == [
        "30",
        "30",
        "1.000000",
        "30",
        "1.000000",
        "0.950000",
        "1.247219",
        "0.040",
    ]


def test_json_by_day_for_one_table_and_dates(gnau: Gnau, bundle: Path, key: str) -> None:
    run = gnau(
        "report",
        str(bundle),
        "--key",
        key,
        "--format",
        "json",
        "--period",
        "day",
        "--table",
        "t-1",
        "--since",
        "2026-11-30",
        "--until",
        "2026-11-30",
    )
    assert run.status == 0, run.err
    document = json.loads(run.out)
    assert (document["period"], document["since"], document["until"], document["tables"]) == (
        "day",
        "2026-11-30",
        "2026-11-30",
        ["t-1"],
    )
    assert [(row["period"], row["table_id"], row["stakes"]) for row in document["rows"]] == [
        ("2026-11-30", "t-1", 30)
    ]


def test_without_a_key_it_warns_on_stderr(gnau: Gnau, bundle: Path) -> None:
    run = gnau("report", str(bundle))
    assert run.status == 0
    assert run.err.startswith("gnau report: warning: no key was pinned (--key)")
    assert run.out.startswith("period,operator,table_id,")


def test_out_writes_a_file(gnau: Gnau, bundle: Path, key: str, tmp_path: Path) -> None:
    out = tmp_path / "report.csv"
    run = gnau("report", str(bundle), "--key", key, "--out", str(out))
    assert (run.status, run.out) == (0, "")
    assert out.read_text().count("\n") == 4


def test_open_rounds_are_said(gnau: Gnau, tmp_path: Path) -> None:
    log = hand_log()
    log.append(EntryKind.ROUND_COMMITTED, {"table_id": "t", "house_rules": {}}, "open")
    log.checkpoint()
    path = tmp_path / "b"
    path.write_text("".join(log.bundle_lines()))
    run = gnau("report", str(path), "--key", log.signer.vkey)
    assert run.status == 0
    assert "1 rounds were still open" in run.err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--period", "week"], "--period must be day, month or year, not 'week'"),
        (["--format", "xml"], "--format must be csv or json, not 'xml'"),
        (["--since", "2026-13-01"], "--since must be a date like 2026-12-01, not '2026-13-01'"),
        (["--until", "1 Dec"], "--until must be a date like 2026-12-01, not '1 Dec'"),
        (
            ["--since", "2026-12-02", "--until", "2026-12-01"],
            "--until 2026-12-01 is before --since 2026-12-02",
        ),
        (["--key", "nonsense+key"], "--key:"),
        (["--database", "sqlite:///x.db"], "give a bundle or --database, not both"),
        (["--jobs", "0"], "--jobs must be a whole number from 1, not 0"),
        (
            ["--operator", "casino-a", "--operator", "Casino-B"],
            "--operator: operator 'Casino-B' is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting"
            " with a letter or digit",
        ),
    ],
)
def test_unusable_arguments_exit_2_with_one_line(
    gnau: Gnau, bundle: Path, options: list[str], message: str
) -> None:
    run = gnau("report", str(bundle), *options)
    assert (run.status, run.out) == (2, "")
    assert run.err.startswith(f"gnau report: {message}")
    assert run.err.count("\n") == 1


def test_operator_filters_a_log_of_two_operators(gnau: Gnau, tmp_path: Path) -> None:
    log = operators_log()
    path = tmp_path / "operators.bundle"
    path.write_text("".join(log.bundle_lines()), encoding="utf-8", newline="\n")
    every = gnau("report", str(path), "--key", log.signer.vkey)
    assert (every.status, every.err) == (0, "")
    assert [line[:3] for line in csv.reader(io.StringIO(every.out))][1:] == [
        ["2026-12", "casino-a", "t-1"],
        ["2026-12", "casino-a", "t-2"],
        ["2026-12", "default", "t-1"],
    ]
    # The old round E (no operator member) and F ("default"): stakes 10 + 20, returned 20 + 0.
    default = gnau(
        "report", str(path), "--key", log.signer.vkey, "--operator", "default", "--format", "json"
    )
    assert default.status == 0, default.err
    document = json.loads(default.out)
    assert document["operators"] == ["default"]
    assert [
        (row["operator"], row["table_id"], row["rounds_settled"], row["stakes"], row["returned"])
        for row in document["rows"]
    ] == [("default", "t-1", 2, 30, 20)]
    both = gnau(
        "report",
        str(path),
        "--key",
        log.signer.vkey,
        "--operator",
        "casino-a",
        "--operator",
        "default",
        "--table",
        "t-2",
    )
    assert both.status == 0, both.err
    assert [line[:3] for line in csv.reader(io.StringIO(both.out))][1:] == [
        ["2026-12", "casino-a", "t-2"]
    ]


def test_unreadable_bundle_exits_2(gnau: Gnau, tmp_path: Path) -> None:
    missing = tmp_path / "missing.bundle"
    run = gnau("report", str(missing))
    assert (run.status, run.out) == (2, "")
    assert run.err == f"gnau report: cannot read {missing}: No such file or directory\n"


def test_a_file_that_is_not_a_bundle_exits_2(gnau: Gnau, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    run = gnau("report", str(path))
    assert (run.status, run.out) == (2, "")
    assert run.err.startswith(f"gnau report: cannot read {path}: line 1 is ")
    assert run.err.count("\n") == 1


def test_a_forged_entry_exits_1_and_writes_nothing(
    gnau: Gnau, bundle: Path, key: str, tmp_path: Path
) -> None:
    bundle.write_text(bundle.read_text().replace('\\"stake\\":20', '\\"stake\\":2'))
    out = tmp_path / "report.csv"
    run = gnau("report", str(bundle), "--key", key, "--out", str(out))
    assert (run.status, run.out) == (1, "")
    assert run.err == "gnau report: entry 9: the signature does not verify\n"
    assert not out.exists()


def test_a_missing_database_exits_2(gnau: Gnau, tmp_path: Path) -> None:
    run = gnau("report", "--database", f"sqlite:///{tmp_path / 'none.db'}")
    assert run.status == 2
    assert run.err.startswith("gnau report: there is no database at ")


def test_the_default_database_is_the_stores() -> None:
    assert report_commands.DEFAULT_DATABASE_URL == DEFAULT_DATABASE_URL


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    signer = new_signer()
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    with open_store(url, signer) as store:

        def log(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
            append(store, kind, payload, round_id=round_id)

        append(store, EntryKind.SERVICE_STARTED, {"version": "test"})
        for number in range(4):
            play_round(log, f"round-{number}", table_id=f"table-{number % 2}")
        play_round(log, "voided-before", void_after=EntryKind.ROUND_COMMITTED)
        play_round(log, "voided-after", void_after=EntryKind.ROUND_DEALT)
        store.checkpoint()
    yield url, signer.vkey


def test_the_database_and_its_export_give_the_same_report(
    gnau: Gnau, database: tuple[str, str], tmp_path: Path
) -> None:
    url, vkey = database
    bundle = tmp_path / "export.bundle"
    assert gnau("audit", "export", "--database", url, "--out", str(bundle)).status == 0
    from_database = gnau("report", "--database", url, "--key", vkey, "--format", "json")
    from_bundle = gnau("report", str(bundle), "--key", vkey, "--format", "json")
    assert (from_database.status, from_database.err) == (0, "")
    assert from_bundle.out == from_database.out
    rows = json.loads(from_database.out)["rows"]
    # play_round's rounds have three seats of stakes 10, 20 and 30: 60 a round.
    by_table = {row["table_id"]: row for row in rows}
    assert by_table["table-0"]["rounds_settled"] == 2
    assert by_table["table-1"]["rounds_settled"] == 2
    assert by_table["table-1"]["rounds_voided_before_deal"] == 1
    assert by_table["table-1"]["rounds_voided_after_deal"] == 1
    assert by_table["table-0"]["stakes"] == 120
    assert by_table["table-1"]["stakes"] == 180
