"""``gnau serve`` and ``gnau play`` as processes, and the auditor's check of their log."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.postgres import fresh_database
from tests.serving import REPO, free_port, served
from tests.serving import gnau as gnau_process

Gnau = Callable[..., Run]


@pytest.mark.system
def test_a_session_plays_verifies_and_leaves_a_log_that_verifies(
    gnau: Gnau, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with served(data) as service:
        played = gnau(
            "play", "--target", service.target, f"--token={service.token}",
            "--tables", "2", "--rounds", "2",
        )  # fmt: skip
        assert played.status == 0, played.err
        assert "4 of 4 rounds verified independently" in played.out
        assert any(symbol in played.out for symbol in "♣♦♥♠")
    bundle = tmp_path / "session.jsonl"
    assert gnau("audit", "export", "--database", service.database, "--out", str(bundle)).status == 0
    verified = gnau("audit", "verify", str(bundle), "--key", service.vkey)
    assert verified.status == 0, verified.out
    assert "rounds: 4 settled and replayed" in verified.out

    # One stored byte changed (by someone who can drop the trigger) is caught.
    with sqlite3.connect(data / "gnau.db") as connection:
        connection.execute("DROP TRIGGER log_entries_no_update")
        index, entry = connection.execute(
            "SELECT idx, data FROM log_entries WHERE kind = 'ROUND_SETTLED' LIMIT 1"
        ).fetchone()
        position = entry.index(b'"delta":') + len(b'"delta":')
        changed = (
            entry[:position]
            + (b"9" if entry[position : position + 1] != b"9" else b"8")
            + entry[position + 1 :]
        )
        connection.execute("UPDATE log_entries SET data = ? WHERE idx = ?", (changed, index))
    assert gnau("audit", "export", "--database", service.database, "--out", str(bundle)).status == 0
    tampered = gnau("audit", "verify", str(bundle), "--key", service.vkey)
    assert tampered.status == 1
    assert f"result: INVALID: entry {index}:" in tampered.out


def test_serve_refuses_to_start_with_a_key_others_can_read(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("not even a key")
    os.chmod(key, 0o644)
    started = gnau_process(
        "serve", "--data-dir", str(tmp_path / "data"), "--key", str(key), timeout=60
    )
    assert started.returncode == 2
    assert "cannot start" in started.stderr and str(key) in started.stderr
    assert "Traceback" not in started.stderr


def test_serve_refuses_bad_settings_by_name(tmp_path: Path) -> None:
    started = gnau_process("serve", "--max-stake", "-5", "--data-dir", str(tmp_path), timeout=60)
    assert started.returncode == 2
    assert "max_stake" in started.stderr and "Traceback" not in started.stderr


def test_play_without_a_token_says_so(
    gnau: Gnau, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GNAU_TOKEN", raising=False)
    played = gnau("play", "--token-file", str(tmp_path / "none"))
    assert played.status == 2
    assert "no operator token" in played.err


@pytest.mark.system
def test_a_refused_token_names_where_it_came_from(
    gnau: Gnau, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token from another data directory is refused with where it came from, never itself."""
    monkeypatch.delenv("GNAU_TOKEN", raising=False)
    with served(tmp_path / "data") as service:
        wrong = service.token[:-1] + ("A" if service.token[-1] != "A" else "B")
        elsewhere = tmp_path / "other-data" / "operator-token"
        elsewhere.parent.mkdir()
        elsewhere.write_text(wrong + "\n")
        elsewhere.chmod(0o600)
        played = gnau("play", "--target", service.target, "--token-file", str(elsewhere))
    assert played.status == 2
    assert "UNAUTHENTICATED" in played.err
    assert f"the token sent came from the file {elsewhere}" in played.err
    assert wrong not in played.err + played.out


# -- secrets hygiene and honest start-up failures ------------------------------------------------


@pytest.mark.system
def test_every_file_the_service_creates_is_private(gnau: Gnau, tmp_path: Path) -> None:
    # The database outside the (0700) data directory, as the tester had it, and the test's own
    # umask permissive: the service must not rely on either.
    database = tmp_path / "elsewhere" / "gnau.db"
    previous = os.umask(0o022)
    try:
        with served(tmp_path / "data", "--database", f"sqlite:///{database}") as service:
            played = gnau("play", "--target", service.target, f"--token={service.token}")
            assert played.status == 0, played.err
            modes = {
                path.name: stat.S_IMODE(path.stat().st_mode)
                for path in [
                    database,
                    database.with_name("gnau.db-wal"),
                    database.with_name("gnau.db-shm"),
                    tmp_path / "data" / "log-signing-key.pem",
                    tmp_path / "data" / "tokens.json",
                    tmp_path / "data" / "operator-token",
                ]
            }
    finally:
        os.umask(previous)
    assert modes == dict.fromkeys(modes, 0o600)
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700


@pytest.mark.system
def test_a_new_token_is_not_printed_where_stdout_is_a_log(tmp_path: Path) -> None:
    with served(tmp_path / "data") as service:
        pass
    output = service.output()
    assert service.token not in output
    events = [json.loads(line) for line in output.splitlines()]
    written = [event for event in events if event["event"] == "new local operator token written"]
    assert written == [dict(written[0], path=str(tmp_path / "data" / "operator-token"))]
    # The token file itself keeps only the token's hash.
    assert service.token not in (tmp_path / "data" / "tokens.json").read_text()


@pytest.mark.system
def test_a_new_token_is_shown_on_a_terminal(tmp_path: Path) -> None:
    """And the verifier page's address, when the HTTP port is on."""
    port, http_port = free_port(), free_port()
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "gnau_service.cli.main", "serve", "--log-format", "console",
            "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"),
            "--shutdown-notice-seconds", "0", "--http-listen", f"127.0.0.1:{http_port}",
        ],
        stdout=secondary,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )  # fmt: skip
    os.close(secondary)
    shown = b""
    try:
        while b"operator token" not in shown or shown.count(b"\n") < 5:
            ready, _, _ = select.select([primary], [], [], 30)
            assert ready, f"nothing on the terminal: {shown!r}"
            shown += os.read(primary, 4096)
    finally:
        process.terminate()
        process.wait(timeout=15)
        os.close(primary)
    token = (tmp_path / "data" / "operator-token").read_text().strip()
    assert token.encode() in shown
    assert f"gnau: the verifier page at http://127.0.0.1:{http_port}/".encode() in shown
    (record,) = json.loads((tmp_path / "data" / "tokens.json").read_text())["tokens"]
    assert record["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert (record["name"], record["role"]) == ("local-operator", "operator")


@pytest.mark.system
def test_a_database_password_never_shows(tmp_path: Path) -> None:
    with fresh_database() as url:
        # Trust authentication ignores the password, so the service starts with it.
        with_password = url.replace("postgres@", "postgres:sekrit-pw@")
        with served(tmp_path / "data", "--database", with_password) as service:
            pass
        output = service.output()
        assert "sekrit-pw" not in output
        serving = next(json.loads(line) for line in output.splitlines() if '"serving"' in line)
        assert serving["database"] == with_password.replace("sekrit-pw", "***")
        console = gnau_process(
            "serve", "--log-format", "console", "--data-dir", str(tmp_path / "data"),
            "--listen", "127.0.0.1:0", "--database", "mysql://u:sekrit-pw@h/db",
        )  # fmt: skip
        assert console.returncode == 2 and "sekrit-pw" not in console.stderr + console.stdout
        assert "mysql://u:***@h/db" in console.stderr


def test_on_a_busy_port_nothing_is_created(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = gnau_process(
            "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"),
            timeout=60,
        )  # fmt: skip
    assert started.returncode == 2
    assert not (tmp_path / "data").exists(), "a key, tokens or a database was created"
    lines = [json.loads(line) for line in started.stderr.splitlines()]
    assert [line["event"] for line in lines] == ["cannot start"]
    # The OS's reason and the setting to change, not gRPC's "set GRPC_VERBOSITY=debug".
    assert lines[0]["error"] == (
        f"[Errno 98] --listen 127.0.0.1:{port} (GNAU_LISTEN): Address already in use; "
        "another process holds it"
    )
    assert started.stdout == ""


def test_json_mode_writes_only_json_even_when_it_cannot_start(tmp_path: Path) -> None:
    for args in (
        ["--max-stake", "lots"],
        ["--key", str(tmp_path / "missing.pem")],
        ["--config", str(tmp_path / "missing.toml")],
    ):
        started = gnau_process("serve", "--data-dir", str(tmp_path / "data"), *args, timeout=60)
        assert started.returncode == 2, args
        for line in (started.stdout + started.stderr).splitlines():
            assert json.loads(line)["level"] in ("error", "warning"), line
