"""``gnau witness keygen``, ``serve`` and ``evidence``: key file rules, refusals, and a real
``gnau witness serve`` process that is stopped and restarted on its database."""

from __future__ import annotations

import json
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.cosignature import WitnessKey, WitnessSigner, verify_cosignature
from gnau_service.audit.note import NoteSignature
from gnau_service.cli.main import main
from gnau_service.common.private_files import KeyFileError
from gnau_service.witness.keys import create_witness_key, load_witness_key
from gnau_service.witness.state import WitnessState, WitnessStateError
from tests.witnessing import GrowingLog, post, witness_process, write_logs_toml


def test_keygen_writes_a_private_key_and_prints_its_vkey(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_path = tmp_path / "w.key"
    assert main(["witness", "keygen", "--name", "witness.example/w1", "--key", str(key_path)]) == 0
    vkey = capsys.readouterr().out.strip()
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    key = WitnessKey.from_vkey(vkey)
    assert key.name == "witness.example/w1"
    assert vkey.split("+")[2].startswith("B")  # base64 of 0x04 ...: a cosignature/v1 key
    assert load_witness_key(key_path).key == key
    assert key_path.read_text().startswith("PRIVATE+KEY+witness.example/w1+")
    # Never over an existing key.
    before = key_path.read_bytes()
    assert main(["witness", "keygen", "--name", "witness.example/w2", "--key", str(key_path)]) == 2
    assert "exists" in capsys.readouterr().err
    assert key_path.read_bytes() == before


def test_keygen_refuses_a_bad_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["witness", "keygen", "--name", "has space", "--key", str(tmp_path / "k")]) == 2
    assert "space" in capsys.readouterr().err
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_key_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    key_path = tmp_path / "w.key"
    create_witness_key(key_path, "witness.example/w1")
    key_path.chmod(mode)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_witness_key(key_path)


def test_serve_refuses_an_unsafe_key_without_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_path = tmp_path / "w.key"
    create_witness_key(key_path, "witness.example/w1")
    key_path.chmod(0o644)
    log = GrowingLog.new()
    logs = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]})
    database = f"sqlite:///{tmp_path / 'w.db'}"
    args = ["witness", "serve", "--listen", "127.0.0.1:0", "--key", str(key_path)]
    assert main([*args, "--logs", str(logs), "--database", database]) == 2
    err = capsys.readouterr().err
    assert "gnau witness serve:" in err and "chmod 600" in err
    assert "PRIVATE" not in err
    assert not (tmp_path / "w.db").exists()


def test_a_key_file_that_is_not_a_key_is_refused_without_quoting_it(tmp_path: Path) -> None:
    key_path = tmp_path / "w.key"
    key_path.write_text("PRIVATE+KEY+w+00000000+BAsecretsecretsecret\n")
    key_path.chmod(0o600)
    with pytest.raises(KeyFileError) as caught:
        load_witness_key(key_path)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("database", "reason"),
    [("postgresql://db/w", "keeps its state in SQLite"), ("sqlite:///", "SQLite")],
)
def test_serve_refuses_other_databases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], database: str, reason: str
) -> None:
    key_path = tmp_path / "w.key"
    create_witness_key(key_path, "witness.example/w1")
    log = GrowingLog.new()
    logs = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]})
    args = ["witness", "serve", "--listen", "127.0.0.1:0", "--key", str(key_path)]
    assert main([*args, "--logs", str(logs), "--database", database]) == 2
    assert reason in capsys.readouterr().err


def test_evidence_lists_refusals_as_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = GrowingLog.new(size=4)
    signer = WitnessSigner.generate("witness.example/w1")
    state = WitnessState(tmp_path / "w.db")
    now = datetime(2026, 11, 30, tzinfo=UTC)

    def submit(source: GrowingLog, old: int) -> object:
        signed = open_checkpoint(
            source.checkpoint().encode(), source.origin, [source.signer.verifier]
        )
        return state.add_checkpoint(signed, old, source.proof(old), signer, now)

    assert isinstance(submit(log, 0), NoteSignature)
    fork = log.fork(at=2).grow(2)
    submit(fork, 4)  # same size, other root
    submit(fork, 0)  # stale old size
    database = f"sqlite:///{tmp_path / 'w.db'}"
    assert main(["witness", "evidence", "--database", database]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["refusal"], r["status"], r["latest_size"]) for r in rows] == [
        ("root_mismatch", 409, 4),
        ("old_size_mismatch", 409, 4),
    ]
    assert rows[0]["first_seen"] == "2026-11-30T00:00:00.000000Z" and "checkpoint" not in rows[0]
    args = ["witness", "evidence", "--database", database, "--refusal", "root_mismatch"]
    assert main([*args, "--full"]) == 0
    (full,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert full["checkpoint"] == str(fork.checkpoint())
    assert full["latest_checkpoint"] == str(log.checkpoint())
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["witness", "evidence", "--database", missing]) == 2
    assert "no witness database" in capsys.readouterr().err


def test_a_witness_database_is_not_a_dealer_database(tmp_path: Path) -> None:
    path = tmp_path / "gnau.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE log_head (id INTEGER)")
    with pytest.raises(WitnessStateError, match="dealer's database"):
        WitnessState(path)


def test_a_witness_process_survives_a_restart(tmp_path: Path) -> None:
    """``gnau witness serve`` for real: cosigns, refuses a fork, exits 0 on SIGTERM, and a new
    process on the same database remembers the size and the evidence."""
    log = GrowingLog.new(size=6)
    logs = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]}, prefix="/witness")
    with witness_process(tmp_path / "w", logs, prefix="/witness") as witness:
        assert stat.S_IMODE(witness.key_path.stat().st_mode) == 0o600
        status, content_type, body = post(witness.add_checkpoint_url, log.request(0))
        assert (status, content_type) == (200, "text/plain; charset=utf-8")
        line = NoteSignature.parse(body.decode().removesuffix("\n"))
        key = WitnessKey.from_vkey(witness.vkey)
        assert verify_cosignature(key, log.checkpoint().text, line) is not None
        database_file = tmp_path / "w" / "witness.db"
        assert stat.S_IMODE(database_file.stat().st_mode) == 0o600
    log.grow(3)
    with witness_process(tmp_path / "w", logs, prefix="/witness") as again:
        assert again.vkey == witness.vkey
        assert post(again.add_checkpoint_url, log.request(0)) == (409, "text/x.tlog.size", b"6\n")
        assert post(again.add_checkpoint_url, log.request(6))[0] == 200
        assert post(again.add_checkpoint_url, log.fork(at=4).grow(5).request(9))[0] == 409
    kinds = [e.refusal.value for e in WitnessState(tmp_path / "w" / "witness.db").evidence()]
    assert kinds == ["old_size_mismatch", "root_mismatch"]
