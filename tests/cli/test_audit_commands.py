"""``gnau audit``: export from a real store, verify offline, recall rounds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.signing import LogSigner
from gnau_service.cli import audit_commands
from gnau_service.store import Store, open_store
from tests.audit.logs import new_signer, play_round
from tests.conftest import Run
from tests.references import ref
from tests.steps import append

Gnau = Callable[..., Run]


@pytest.fixture
def signer() -> LogSigner:
    return new_signer()


@pytest.fixture
def database(tmp_path: Path, signer: LogSigner) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    with open_store(url, signer) as store:

        def log(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
            append(store, kind, payload, round_id=round_id)

        append(store, EntryKind.SERVICE_STARTED, {"version": "test"})
        for number in range(3):
            play_round(log, f"round-{number}", table_id=f"table-{number % 2}")
        play_round(log, "round-voided", void_after=EntryKind.ROUND_COMMITTED)
        yield url, store


def test_export_then_verify_with_the_pinned_key(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, _ = database
    bundle = tmp_path / "log.jsonl"
    export = gnau("audit", "export", "--database", url, "--out", str(bundle))
    assert export.status == 0, export.err
    assert "wrote entries 0 to 14 (15 in all)" in export.out
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
    assert "result: INVALID: entry 6: the signature does not verify" in run.out


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
        # The log names each seat's player by reference (tests/audit/logs.play_round).
        assert f"seat {seat}   {ref(f'player-{seat}')}" in run.out
    assert any(symbol in run.out for symbol in "♣♦♥♠")
    assert "ROUND_COMMITTED" in run.out and "ROUND_SETTLED" in run.out
    voided = gnau("audit", "round", "round-voided", "--database", url)
    assert "VOIDED in state SHUFFLED: TABLE_CLOSED table closed" in voided.out


def bundle_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


@pytest.mark.parametrize(
    "range_args",
    [[], ["--from-round", "round-1", "--to-round", "round-1"], ["--to-round", "round-0"]],
    ids=["whole log", "one round", "up to a round"],
)
def test_export_always_ends_at_a_signed_size_so_the_bundle_is_anchored(
    gnau: Gnau,
    database: tuple[str, Store],
    signer: LogSigner,
    tmp_path: Path,
    range_args: list[str],
) -> None:
    url, _ = database
    bundle = tmp_path / "log.jsonl"
    assert gnau("audit", "export", "--database", url, "--out", str(bundle), *range_args).status == 0
    header, *rest = bundle_lines(bundle)
    notes = [str(line["checkpoint"]) for line in rest if "checkpoint" in line]
    assert int(notes[-1].split("\n")[1]) == header["size"]
    assert b"\r" not in bundle.read_bytes()
    run = gnau("audit", "verify", str(bundle), "--key", signer.vkey)
    assert (run.status, run.out.splitlines()[-1]) == (0, "result: VALID"), run.out


def without_last_checkpoint(bundle: Path) -> Path:
    lines = bundle.read_bytes().split(b"\n")
    last = max(i for i, line in enumerate(lines) if line.startswith(b'{"checkpoint"'))
    changed = bundle.with_name("unanchored.jsonl")
    changed.write_bytes(b"\n".join(lines[:last] + lines[last + 1 :]))
    return changed


def test_an_unanchored_bundle_exits_1_unless_allowed(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, store = database
    append(store, EntryKind.CONFIG_CHANGED, {"change": "after the last round"})
    bundle = tmp_path / "log.jsonl"
    assert gnau("audit", "export", "--database", url, "--out", str(bundle)).status == 0
    unanchored = without_last_checkpoint(bundle)
    run = gnau("audit", "verify", str(unanchored), "--key", signer.vkey)
    assert run.status == 1
    assert "unanchored: no signed root covers entry 15 (" in run.out
    assert run.out.splitlines()[-1].startswith("result: UNANCHORED")
    allowed = gnau("audit", "verify", str(unanchored), "--key", signer.vkey, "--allow-unanchored")
    assert allowed.status == 0
    assert "warning: accepted although unanchored (--allow-unanchored)" in allowed.out
    assert "unanchored: no signed root covers entry 15 (" in allowed.out
    assert allowed.out.splitlines()[-1] == "result: VALID"


def test_a_crlf_pinned_checkpoint_is_an_unusable_argument(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    url, store = database
    bundle = tmp_path / "log.jsonl"
    gnau("audit", "export", "--database", url, "--out", str(bundle))
    pin = tmp_path / "checkpoint.txt"
    pin.write_bytes((store.checkpoint(9) or "").replace("\n", "\r\n").encode())
    run = gnau("audit", "verify", str(bundle), "--key", signer.vkey, "--checkpoint", str(pin))
    assert run.status == 2
    assert "pinned checkpoint: note contains control character U+000D" in run.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "--jobs: must be a whole number from 1, not '0'"),
        (["--jobs", "many"], "--jobs: must be a whole number from 1, not 'many'"),
        (["--checkpoint", "/no/such/pin"], "cannot verify"),
        (["--key", "gnau-dealer/x+00000000+AQ=="], "--key: "),
    ],
)
def test_unusable_verify_arguments_exit_2(
    gnau: Gnau, database: tuple[str, Store], tmp_path: Path, args: list[str], message: str
) -> None:
    url, _ = database
    bundle = tmp_path / "log.jsonl"
    gnau("audit", "export", "--database", url, "--out", str(bundle))
    run = gnau("audit", "verify", str(bundle), *args)
    assert run.status == 2
    assert message in run.err
    assert "Traceback" not in run.out + run.err


def test_a_key_file_that_is_not_utf8_is_an_unusable_argument(
    gnau: Gnau, database: tuple[str, Store], tmp_path: Path
) -> None:
    url, _ = database
    bundle, key_file = tmp_path / "log.jsonl", tmp_path / "key"
    gnau("audit", "export", "--database", url, "--out", str(bundle))
    key_file.write_bytes(b"\xff\xfe")
    run = gnau("audit", "verify", str(bundle), "--key", str(key_file))
    assert run.status == 2
    assert f"--key file {key_file} is not UTF-8" in run.err


def test_show_reports_an_entry_that_does_not_verify_without_a_traceback(
    gnau: Gnau, database: tuple[str, Store]
) -> None:
    url, store = database
    store.close()
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DROP TRIGGER log_entries_no_update")
        (data,) = connection.execute("SELECT data FROM log_entries WHERE idx = 14").fetchone()
        connection.execute(
            "UPDATE log_entries SET data = ? WHERE idx = 14",
            (data.replace(b"table closed", b"table cl0sed"),),
        )
    run = gnau("audit", "show", "--database", url)
    assert run.status == 1
    assert "round round-voided: its entries do not verify: entry 14: " in run.out
    assert "Traceback" not in run.out + run.err


def test_json_recall_reports_an_entry_that_does_not_verify_as_json(
    gnau: Gnau, database: tuple[str, Store]
) -> None:
    url, store = database
    store.close()
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DROP TRIGGER log_entries_no_update")
        (data,) = connection.execute("SELECT data FROM log_entries WHERE idx = 14").fetchone()
        connection.execute(
            "UPDATE log_entries SET data = ? WHERE idx = 14",
            (data.replace(b"table closed", b"table cl0sed"),),
        )
    for args in (["show", "--json"], ["round", "round-voided", "--json"]):
        run = gnau("audit", *args, "--database", url)
        assert run.status == 1, args
        (failure,) = run.json_lines  # round-voided is the latest: nothing is listed before it
        assert failure["round_id"] == "round-voided"
        assert str(failure["error"]).startswith("its entries do not verify: entry 14: ")
    # A round whose entries verify is shown as JSON beside it.
    settled = gnau("audit", "round", "round-2", "--json", "--database", url)
    assert settled.status == 0
    (record,) = settled.json_lines
    assert record["state"] == "SETTLED"


def test_an_unexpected_error_is_one_line_naming_a_bug_not_a_traceback(
    gnau: Gnau, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(args: object) -> int:
        raise RecursionError("maximum recursion depth exceeded " + "x" * 10_000)

    monkeypatch.setattr(audit_commands, "run_verify", broken)
    run = gnau("audit", "verify", str(tmp_path / "any.jsonl"))
    assert run.status == 2
    assert run.out == ""
    assert run.err == (
        "gnau: internal error (RecursionError) in 'gnau audit': this is a bug, please report it\n"
    )


def test_no_verified_entries_are_described_as_none_not_an_inclusive_range(
    gnau: Gnau, database: tuple[str, Store], signer: LogSigner, tmp_path: Path
) -> None:
    """A regression: a bundle whose first entry fails said "(indices 0 to -1)"."""
    url, store = database
    store.close()
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DROP TRIGGER log_entries_no_update")
        (data,) = connection.execute("SELECT data FROM log_entries WHERE idx = 0").fetchone()
        changed = data.replace(b'"version":"test"', b'"version":"tset"', 1)
        assert changed != data
        connection.execute("UPDATE log_entries SET data = ? WHERE idx = 0", (changed,))
    bundle = tmp_path / "log.jsonl"
    assert gnau("audit", "export", "--database", url, "--out", str(bundle)).status == 0
    run = gnau("audit", "verify", str(bundle), "--key", signer.vkey)
    assert run.status == 1
    assert "entries: 0 verified (no entries)\n" in run.out, run.out
    assert "to -1" not in run.out
