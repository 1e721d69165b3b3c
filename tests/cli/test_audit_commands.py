"""``gnau audit``: export from a real store, verify offline, recall rounds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.signing import LogSigner
from gnau_service.store import Store, open_store
from tests.audit.logs import new_signer, play_round
from tests.cli.conftest import Run

Gnau = Callable[..., Run]


@pytest.fixture
def signer() -> LogSigner:
    return new_signer()


@pytest.fixture
def database(tmp_path: Path, signer: LogSigner) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    with open_store(url, signer) as store:

        def append(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
            store.run(lambda tx: tx.append(kind, payload, round_id=round_id))

        store.append(EntryKind.SERVICE_STARTED, {"version": "test"})
        for number in range(3):
            play_round(append, f"round-{number}", table_id=f"table-{number % 2}")
        play_round(append, "round-voided", void_after=EntryKind.ROUND_COMMITTED)
        yield url, store


def test_export_then_verify_with_the_pinned_key(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, _ = database
    bundle = tmp_path / "log.jsonl"
    export = gnau("audit", "export", "--database", url, "--out", str(bundle))
    assert export.status == 0, export.err
    assert "wrote 15 entries" in export.out
    run = gnau("audit", "verify", str(bundle), "--key", signer.vkey)
    assert run.status == 0, run.out
    assert "entries: 15 verified" in run.out
    assert "rounds: 3 settled and replayed, 1 voided, 0 still open" in run.out
    assert run.out.rstrip().endswith("result: VALID")


def test_verify_accepts_a_key_file_and_a_pinned_checkpoint(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, store = database
    key_file = tmp_path / "log.vkey"
    key_file.write_text(signer.vkey + "\n")
    checkpoint = tmp_path / "checkpoint.txt"
    checkpoint.write_text(store.checkpoint(9) or "")
    bundle = tmp_path / "log.jsonl"
    gnau("audit", "export", "--database", url, "--out", str(bundle))
    run = gnau(
        "audit", "verify", str(bundle), "--key", str(key_file), "--checkpoint", str(checkpoint)
    )
    assert run.status == 0, run.out


def test_one_changed_stored_byte_fails_verification(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, store = database
    store.close()
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        # An administrator can drop the append-only trigger; the signatures still hold.
        connection.execute("DROP TRIGGER log_entries_no_update")
        (data,) = connection.execute("SELECT data FROM log_entries WHERE idx = 6").fetchone()
        changed = data.replace(b'"stake":20', b'"stake":21', 1)
        assert changed != data
        connection.execute("UPDATE log_entries SET data = ? WHERE idx = 6", (changed,))
    bundle = tmp_path / "log.jsonl"
    assert gnau("audit", "export", "--database", url, "--out", str(bundle)).status == 0
    run = gnau("audit", "verify", str(bundle), "--key", signer.vkey)
    assert run.status == 1
    assert "result: INVALID: entry 6: entry 6: the signature does not verify" in run.out


def test_a_range_of_rounds_exports_and_verifies(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, _ = database
    bundle = tmp_path / "range.jsonl"
    run = gnau(
        "audit", "export", "--database", url, "--out", str(bundle),
        "--from-round", "round-1", "--to-round", "round-2",
    )  # fmt: skip
    assert run.status == 0, run.err
    header = json.loads(bundle.read_text().splitlines()[0])
    assert header["first_index"] == 5
    verify = gnau("audit", "verify", str(bundle), "--key", signer.vkey)
    assert verify.status == 0, verify.out
    assert "rounds: 2 settled and replayed" in verify.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "--out", "x.jsonl", "--from-round", "no-such-round"], "not in the log"),
        (["round", "no-such-round"], "not in the log"),
    ],
)
def test_unknown_rounds_are_usage_errors(
    gnau: Gnau, database: tuple[str, Store], args: list[str], message: str
) -> None:
    url, _ = database
    run = gnau("audit", *args, "--database", url)
    assert run.status == 2
    assert message in run.err


def test_unreadable_inputs_exit_2_without_a_traceback(gnau: Gnau, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a bundle\n")
    cases = [
        ("audit", "verify", str(tmp_path / "missing.jsonl")),
        ("audit", "verify", str(garbage)),
        ("audit", "verify", str(garbage), "--key", "not-a-vkey"),
        ("audit", "show", "--database", f"sqlite:///{tmp_path / 'none.db'}"),
        ("audit", "show", "--database", "mysql://nope"),
    ]
    for args in cases:
        run = gnau(*args)
        assert run.status == 2, args
        assert run.err.startswith("gnau audit: "), run.err
        assert "Traceback" not in run.err


def test_show_lists_the_latest_rounds_first(gnau: Gnau, database: tuple[str, Store]) -> None:
    url, _ = database
    run = gnau("audit", "show", "--database", url, "--last", "3")
    lines = run.out.splitlines()
    assert run.status == 0
    assert len(lines) == 3
    assert "round-voided  table table-1  VOIDED" in lines[0]
    assert "round-2  table table-0  SETTLED" in lines[1]
    assert "dealer " in lines[1] and "seat 1 " in lines[1]


def test_round_shows_one_round_in_full(gnau: Gnau, database: tuple[str, Store]) -> None:
    url, _ = database
    run = gnau("audit", "round", "round-1", "--database", url)
    assert run.status == 0, run.err
    assert run.out.startswith("round round-1   table table-1   SETTLED")
    assert "server seed: " in run.out
    for seat in (1, 2, 3):
        assert f"seat {seat}   player-{seat}" in run.out
    assert any(symbol in run.out for symbol in "♣♦♥♠")
    assert "ROUND_COMMITTED" in run.out and "ROUND_SETTLED" in run.out
    voided = gnau("audit", "round", "round-voided", "--database", url)
    assert "VOIDED in state SHUFFLED: table closed" in voided.out
