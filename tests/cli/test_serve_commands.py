"""``gnau serve`` and ``gnau play`` as processes, and the auditor's check of their log."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.serving import gnau, served


def test_a_session_plays_verifies_and_leaves_a_log_that_verifies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with served(data) as service:
        played = gnau(
            "play", "--target", service.target, "--token", service.token,
            "--tables", "2", "--rounds", "2",
        )  # fmt: skip
        assert played.returncode == 0, played.stderr
        assert "4 of 4 rounds verified independently" in played.stdout
        assert any(symbol in played.stdout for symbol in "♣♦♥♠")
    bundle = tmp_path / "session.jsonl"
    assert (
        gnau("audit", "export", "--database", service.database, "--out", str(bundle)).returncode
        == 0
    )
    verified = gnau("audit", "verify", str(bundle), "--key", service.vkey)
    assert verified.returncode == 0, verified.stdout
    assert "rounds: 4 settled and replayed" in verified.stdout

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
    assert (
        gnau("audit", "export", "--database", service.database, "--out", str(bundle)).returncode
        == 0
    )
    tampered = gnau("audit", "verify", str(bundle), "--key", service.vkey)
    assert tampered.returncode == 1
    assert f"result: INVALID: entry {index}:" in tampered.stdout


def test_serve_refuses_to_start_with_a_key_others_can_read(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("not even a key")
    os.chmod(key, 0o644)
    started = gnau("serve", "--data-dir", str(tmp_path / "data"), "--key", str(key), timeout=60)
    assert started.returncode == 2
    assert "cannot start" in started.stderr and str(key) in started.stderr
    assert "Traceback" not in started.stderr


def test_serve_refuses_bad_settings_by_name(tmp_path: Path) -> None:
    started = gnau("serve", "--max-stake", "-5", "--data-dir", str(tmp_path), timeout=60)
    assert started.returncode == 2
    assert "max_stake" in started.stderr and "Traceback" not in started.stderr


def test_play_without_a_token_says_so(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "GNAU_TOKEN"}
    played = gnau("play", "--tokens-file", str(tmp_path / "none.json"), env=env)
    assert played.returncode == 2
    assert "no operator token" in played.stderr
