"""The service's own entries in the audit log (issue 37): its start with the settings in force,
its clean stop, and each change of its tokens, every one naming its actor."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.entries import EntryKind, LogEntry, decode_entry
from gnau_service.server.grpc.auth import Role
from gnau_service.server.process.app import STOP_ENTRY_SECONDS, running, start
from gnau_service.server.process.config import Settings
from gnau_service.server.process.first_start import open_signer
from gnau_service.server.process.structured_logs import configure_logging
from gnau_service.server.process.token_reload import TokenReload
from gnau_service.server.process.tokens import TokenRecord, read_token_file, token_changes
from gnau_service.store import SqliteBackend, Store, open_store
from tests.server.conftest import write_tokens
from tests.server.test_interceptors import log_lines
from tests.serving import gnau, served

#: What a first start catalogues after its start's entries (issue 38): the 8 starter tables,
#: table-1 to table-8, one TABLE_CHANGED each.
STARTER_TABLES_CATALOGUED = [EntryKind.TABLE_CHANGED] * 8


def entries_of(store: Store) -> list[LogEntry]:
    verifier = store.signer.verifier
    return [decode_entry(data, verifier) for data in store.entries(0, store.size())]


def logged_after_stop(settings: Settings) -> list[LogEntry]:
    """The log as a stopped service left it, read with its key from its files."""
    with open_store(settings.database_url, open_signer(settings)) as store:
        return entries_of(store)


async def test_each_start_records_the_settings_in_force_right_after_it(settings: Settings) -> None:
    settings = dataclasses.replace(
        settings,
        max_stake=500,
        deal_deadline_seconds=45,
        settle_deadline_seconds=900,
        public_round_listing=True,
    )
    async with running(settings):
        pass
    async with running(dataclasses.replace(settings, max_stake=700)) as app:
        entries = entries_of(app.store)
    starts = [at for at, entry in enumerate(entries) if entry.kind is EntryKind.SERVICE_STARTED]
    assert len(starts) == 2
    for at, max_stake in zip(starts, (500, 700), strict=True):
        started, configured = entries[at : at + 2]
        assert started.payload["actor"] == "service"
        assert configured.kind is EntryKind.CONFIG_CHANGED
        assert configured.index == started.index + 1
        assert configured.payload == {
            "actor": "service",
            "settings": {
                "max_stake": max_stake,
                "deal_deadline_seconds": 45,
                "settle_deadline_seconds": 900,
                "public_round_listing": True,
            },
        }


async def test_the_defaults_are_recorded_as_the_documented_values(settings: Settings) -> None:
    async with running(settings) as app:
        configured = entries_of(app.store)[1]
    assert configured.payload["settings"] == {
        "max_stake": 1_000_000_000_000,
        "deal_deadline_seconds": 600,
        "settle_deadline_seconds": 3600,
        "public_round_listing": False,
    }


async def test_a_clean_stop_is_the_last_entry(settings: Settings) -> None:
    async with running(settings):
        pass
    entries = logged_after_stop(settings)
    assert [entry.kind for entry in entries] == [
        EntryKind.SERVICE_STARTED,
        EntryKind.CONFIG_CHANGED,
        *STARTER_TABLES_CATALOGUED,
        EntryKind.SERVICE_STOPPED,
    ]
    assert entries[-1].payload == {"actor": "service"}


async def test_a_start_that_fails_records_no_stop(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part made after the start's entries fails to start: the parts already made stop, and
    no SERVICE_STOPPED claims a clean stop."""

    def fails() -> None:
        raise RuntimeError("the token watch cannot start")

    monkeypatch.setattr(TokenReload, "start", lambda self: fails())
    with pytest.raises(RuntimeError, match="the token watch cannot start"):
        await start(settings)
    kinds = [entry.kind for entry in logged_after_stop(settings)]
    assert kinds == [
        EntryKind.SERVICE_STARTED,
        EntryKind.CONFIG_CHANGED,
        *STARTER_TABLES_CATALOGUED,
    ]


async def until_logged(store: Store, size: int) -> list[LogEntry]:
    """The entries after the first ``size``, once there are some (within a few polls)."""
    for _ in range(500):
        if store.size() > size:
            return entries_of(store)[size:]
        await asyncio.sleep(0.01)
    raise AssertionError("no entry was logged")


async def test_gnau_token_add_and_revoke_are_recorded_by_name_role_and_operator(
    settings: Settings,
) -> None:
    path = settings.tokens_path
    async with running(settings) as app:
        size = app.store.size()
        out = path.parent / "ci-audit.token"
        added_by = await asyncio.to_thread(
            gnau, "token", "add", "--role", "auditor", "--operator", "casino-a",
            "--name", "ci-audit", "--out", str(out), "--tokens", str(path),
        )  # fmt: skip
        assert added_by.returncode == 0, added_by.stderr
        token = out.read_text().strip()
        (added,) = await until_logged(app.store, size)
        assert added.kind is EntryKind.TOKENS_CHANGED and added.round_id is None
        assert added.payload == {
            "actor": "console",
            "added": [{"name": "ci-audit", "role": "auditor", "operator": "casino-a"}],
            "revoked": [],
        }
        raw = app.store.entries(added.index, added.index + 1)[0].decode()
        (digest,) = [r.sha256 for r in read_token_file(path).records if r.name == "ci-audit"]
        assert token not in raw and digest not in raw
        size = app.store.size()
        revoked_by = await asyncio.to_thread(
            gnau, "token", "revoke", "ci-audit", "--tokens", str(path)
        )
        assert revoked_by.returncode == 0, revoked_by.stderr
        (revoked,) = await until_logged(app.store, size)
        assert revoked.payload == {
            "actor": "console",
            "added": [],
            "revoked": [{"name": "ci-audit", "role": "auditor", "operator": "casino-a"}],
        }
        # A reread that changes nothing records nothing.
        size = app.store.size()
        assert app.tokens.reload("SIGHUP")
        await asyncio.sleep(0.2)
        assert app.store.size() == size


ROLES = st.sampled_from(list(Role))


@st.composite
def token_records(draw: st.DrawFn) -> TokenRecord:
    role = draw(ROLES)
    operators = {Role.PUBLIC: [None], Role.OPERATOR: ["default", "casino-a"]}
    return TokenRecord(
        draw(st.sampled_from(["ci-audit", "casino-a-platform", "ops.1", "legacy-0a1b2c3d"])),
        role,
        draw(st.sampled_from([c * 64 for c in "0123456789abcdef"])),
        None,
        draw(st.sampled_from(operators.get(role, ["*", "casino-a", "casino-b"]))),
    )


@given(st.lists(token_records(), max_size=6), st.lists(token_records(), max_size=6))
def test_a_token_change_lists_what_came_and_went_by_name_role_and_operator(
    before: list[TokenRecord], after: list[TokenRecord]
) -> None:
    changes = token_changes(before, after)
    held = {(r.sha256, r.name, r.role, r.operator) for r in before}
    now = {(r.sha256, r.name, r.role, r.operator) for r in after}
    if held == now:
        assert changes is None
        return
    assert changes is not None and changes["actor"] == "console"
    assert set(changes) == {"actor", "added", "revoked"}
    for listed, tokens in ((changes["added"], now - held), (changes["revoked"], held - now)):
        assert isinstance(listed, list)
        assert sorted(
            (item["name"], item["role"], item.get("operator"))
            for item in listed
            if isinstance(item, dict)
        ) == sorted((name, str(role), operator) for _, name, role, operator in tokens)
        assert listed == sorted(listed, key=lambda item: (item["name"], item["role"]))  # type: ignore[index]
        # A public token has no operator; every other names its own.
        assert all(
            set(item)
            == ({"name", "role"} if item["role"] == "public" else {"name", "role", "operator"})  # type: ignore[arg-type,index]
            for item in listed
        )


# -- a stop on a log that cannot take the entry ----------------------------------------------------


@pytest.mark.system  # waits out the entry's bound on real timers
async def test_a_stop_on_a_stalled_log_skips_its_entry_within_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite, the writers' turn held by another process (a frozen one): the stop waits at most
    STOP_ENTRY_SECONDS for its entry, then goes on without it and says so in one WARNING."""
    configure_logging("json")
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    app = await start(settings)
    backend = app.store.backend
    assert isinstance(backend, SqliteBackend)
    turn = os.open(backend.turn_path, os.O_RDWR)
    # Let the turn go well after the bound, in case the store's close waits for it.
    letting_go = threading.Timer(STOP_ENTRY_SECONDS + 8, os.close, (turn,))
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)  # a frozen process's turn
        began = time.monotonic()
        await app.stop()
        took = time.monotonic() - began
    finally:
        if letting_go.is_alive() or not letting_go.finished.is_set():
            letting_go.cancel()
        with contextlib.suppress(OSError):
            os.close(turn)
    # The stop's own steps (no calls, no notice) take a moment; the entry took its bound.
    assert took < STOP_ENTRY_SECONDS + 1.5, took
    warnings = [
        line
        for line in log_lines(capsys.readouterr().err)
        if line["event"] == "audit entry not written"
    ]
    assert len(warnings) == 1 and warnings[0]["level"] == "warning", warnings
    assert warnings[0]["kind"] == "SERVICE_STOPPED"
    assert EntryKind.SERVICE_STOPPED not in [e.kind for e in logged_after_stop(settings)]


# -- a real process ------------------------------------------------------------------------------


@pytest.mark.system  # a `gnau serve` process, stopped with SIGTERM
def test_sigterm_records_the_stop_before_the_process_exits(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with served(data_dir):
        pass  # leaving sends SIGTERM and requires exit 0 within the grace
    settings = Settings(data_dir=data_dir)
    entries = logged_after_stop(settings)
    assert [entry.kind for entry in entries[-1:]] == [EntryKind.SERVICE_STOPPED]
    assert entries[-1].payload == {"actor": "service"}
