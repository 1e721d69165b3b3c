"""``gnau db``: status and migrate on every backend, the server's refusal of an older schema, and
backups taken while a real server plays rounds, restored, served again and verified."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from gnau.v1 import dealer_pb2, types_pb2
from gnau_client import GnauClient

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.note import SignedNote, Verifier
from gnau_service.audit.signing import LogSigner, ensure_private_key
from gnau_service.server.process.config import Settings
from gnau_service.store import Store, open_reader, open_store
from gnau_service.store.migrations import SCHEMA_VERSION
from gnau_service.store.schema import APPEND_ONLY_TABLES
from tests.audit.logs import new_signer
from tests.conftest import Run
from tests.postgres import fresh_database
from tests.server.test_start_beside_writers import SEATS, Load
from tests.serving import REPO, Served, served
from tests.serving import gnau as gnau_process
from tests.store.test_schema_startup import append_as_older_gnau, older_gnau, set_version
from tests.store.test_store import append_many

Gnau = Callable[..., Run]


def v1_database(url: str, entries: int = 3, signer: LogSigner | None = None) -> None:
    """A database as gnau left it before migrations (schema version 1), with a few entries."""
    with Store(older_gnau(url, 1), signer or new_signer()) as store:
        append_as_older_gnau(store, entries)


# -- status and migrate -------------------------------------------------------------------------


def test_status_and_migrate_bring_an_older_schema_up_to_date(
    settings: Settings, gnau: Gnau
) -> None:
    url = settings.database_url
    settings.data_dir.mkdir()
    v1_database(url)

    before = gnau("db", "status", "--database", url)
    assert before.status == 1, before.err
    lines = before.out.splitlines()
    assert "schema: version 1; this gnau's is version 11" in lines
    assert [line.split(":")[0:2] for line in lines if line.startswith("pending")] == [
        ["pending", " 2 history"],
        ["pending", " 3 requests_by_time"],
        ["pending", " 4 checkpoint_cosignatures"],
        ["pending", " 5 outbox"],
        ["pending", " 6 players"],
        ["pending", " 7 sequencer_lease"],
        ["pending", " 8 private_columns_unanalyzed"],
        ["pending", " 9 round_deadlines"],
        ["pending", " 10 operators"],
        ["pending", " 11 catalogue"],
    ]
    assert "log: 3 entries" in lines
    assert lines[-1] == "to migrate: back it up (gnau db backup FILE), then run gnau db migrate"

    migrated = gnau("db", "migrate", "--database", url)
    assert migrated.status == 0, migrated.err
    assert migrated.out.splitlines()[0].endswith(": migrated from version 1 to version 11")
    assert [line[:20] for line in migrated.out.splitlines()[1:]] == [
        "applied: 2 history: ",
        "applied: 3 requests_",
        "applied: 4 checkpoin",
        "applied: 5 outbox: T",
        "applied: 6 players: ",
        "applied: 7 sequencer",
        "applied: 8 private_c",
        "applied: 9 round_dea",
        "applied: 10 operator",
        "applied: 11 catalogu",
    ]

    after = gnau("db", "status", "--database", url)
    assert after.status == 0
    assert "schema: version 11; this gnau's is version 11" in after.out
    assert re.search(
        r"^applied: 2 \(Migration history: .*\) at 20\d\d-.* by gnau ", after.out, re.M
    )
    assert after.out.splitlines()[-1] == "up to date"

    again = gnau("db", "migrate", "--database", url)
    assert (again.status, again.out.strip()[-40:]) == (
        0,
        "schema version 11 is up to date; nothing to do"[-40:],
    )


def test_a_newer_schema_is_reported_and_not_migrated(settings: Settings, gnau: Gnau) -> None:
    url = settings.database_url
    settings.data_dir.mkdir()
    v1_database(url)
    assert gnau("db", "migrate", "--database", url).status == 0
    set_version(url, SCHEMA_VERSION + 1)

    status = gnau("db", "status", "--database", url)
    assert status.status == 1
    assert "newer than this gnau: upgrade gnau before serving it" in status.out
    refused = gnau("db", "migrate", "--database", url)
    assert refused.status == 2
    assert refused.err.count("\n") == 1
    assert "database schema version 12 is newer than this gnau (11): upgrade gnau" in refused.err


def test_the_database_is_found_as_gnau_serve_finds_it(
    tmp_path: Path, gnau: Gnau, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("from-flag", "from-env", "from-config", "data-dir"):
        (tmp_path / name).mkdir()
    for name in ("from-flag", "from-env", "from-config"):
        v1_database(f"sqlite:///{tmp_path / name / 'gnau.db'}")
    v1_database(f"sqlite:///{tmp_path / 'data-dir' / 'gnau.db'}")
    config = tmp_path / "gnau.toml"
    config.write_text(f'database = "sqlite:///{tmp_path / "from-config" / "gnau.db"}"\n')
    monkeypatch.delenv("GNAU_DATABASE", raising=False)
    monkeypatch.delenv("GNAU_CONFIG", raising=False)

    def database(*args: str) -> str:
        return gnau("db", "status", *args).out.splitlines()[0]

    assert database("--data-dir", str(tmp_path / "data-dir")) == (
        f"database: sqlite:///{tmp_path / 'data-dir' / 'gnau.db'}"
    )
    assert database("--config", str(config)).endswith("from-config/gnau.db")
    monkeypatch.setenv("GNAU_DATABASE", f"sqlite:///{tmp_path / 'from-env' / 'gnau.db'}")
    assert database("--config", str(config)).endswith("from-env/gnau.db")  # env beats file
    flag = f"sqlite:///{tmp_path / 'from-flag' / 'gnau.db'}"
    assert database("--database", flag).endswith("from-flag/gnau.db")  # flag beats env


def test_a_missing_database_is_named_and_not_created(tmp_path: Path, gnau: Gnau) -> None:
    path = tmp_path / "nowhere" / "gnau.db"
    for command in ("status", "migrate"):
        result = gnau("db", command, "--database", f"sqlite:///{path}")
        assert result.status == 2
        assert result.err == f"gnau db {command}: there is no database at sqlite:///{path}\n"
    assert not path.parent.exists()


@pytest.mark.system
def test_the_server_refuses_an_older_schema_unless_told_to_migrate(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # The server's own key, the one the log was started with: a server holding another key
    # would be refused for that (tests/cli/test_key_commands.py), not for the schema.
    key = ensure_private_key(data).path
    v1_database(
        f"sqlite:///{data / 'gnau.db'}", signer=LogSigner.from_key_file(Settings().origin, key)
    )
    refused = gnau_process("serve", "--data-dir", str(data), "--log-format", "console", "--listen",
                   "127.0.0.1:0")  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    why = refused.stderr.splitlines()[-1]
    assert "cannot start" in why
    assert "database schema version 1 is older than this gnau (11)" in why
    assert "run 'gnau db migrate' (or start with --migrate true)" in why

    with served(data, "--migrate", "true") as service:
        pass
    assert '"event": "migrated the database schema"' in service.output()
    assert "2 history: " in service.output() and "3 requests_by_time: " in service.output()


@pytest.mark.system
def test_postgresql_workers_migrate_an_older_schema_when_told_to(tmp_path: Path) -> None:
    """Under ``--workers`` on PostgreSQL the sequencer's process opens the database first: with
    ``--migrate`` it migrates it, as a worker would, and the workers then find it current."""
    data = tmp_path / "data"
    data.mkdir()
    key = ensure_private_key(data).path
    with fresh_database() as url:
        v1_database(url, signer=LogSigner.from_key_file(Settings().origin, key))
        with served(data, "--workers", "2", "--database", url, "--migrate", "true") as service:
            pass
        assert service.output().count('"event": "migrated the database schema"') == 1
        with psycopg.connect(url) as connection:
            row = connection.execute("SELECT 1 FROM log_lease").fetchone()
        assert row is not None  # migration 7's table: the schema is current


@pytest.mark.system
def test_a_new_database_is_created_at_start_without_migrate(tmp_path: Path) -> None:
    with served(tmp_path / "data") as service:
        pass
    assert "migrated the database schema" not in service.output()
    assert '"event": "created the database schema"' in service.output()
    # Its start, its settings, the eight starter tables an empty catalogue gets, its clean stop.
    reader = open_reader(service.database)
    kinds = [json.loads(data)["kind"] for data in reader.entries(0, reader.size())]
    assert kinds == ["SERVICE_STARTED", "CONFIG_CHANGED", *["TABLE_CHANGED"] * 8, "SERVICE_STOPPED"]


# -- backup and restore: refusals ---------------------------------------------------------------


def test_a_backup_never_overwrites_and_is_private(tmp_path: Path, gnau: Gnau) -> None:
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    v1_database(url, entries=4)
    out = tmp_path / "backup.db"
    taken = gnau("db", "backup", str(out), "--database", url)
    assert taken.status == 0, taken.err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "log: 4 entries" in taken.out

    kept = out.read_bytes()
    again = gnau("db", "backup", str(out), "--database", url)
    assert again.status == 2
    assert again.err == f"gnau db backup: {out} exists: a backup never overwrites a file\n"
    assert out.read_bytes() == kept


def test_a_restore_refuses_what_it_cannot_do(tmp_path: Path, gnau: Gnau) -> None:
    url = f"sqlite:///{tmp_path / 'gnau.db'}"
    v1_database(url)
    backup = tmp_path / "backup.db"
    assert gnau("db", "backup", str(backup), "--database", url).status == 0
    not_a_backup = tmp_path / "notes.txt"
    not_a_backup.write_text("hello")

    def refusal(*args: str) -> str:
        result = gnau("db", "restore", *args)
        assert result.status == 2 and result.err.count("\n") == 1, result
        return result.err

    assert "refusing to overwrite" in refusal(str(backup), "--database", url)
    assert "neither a SQLite database nor a pg_dump" in refusal(
        str(not_a_backup), "--database", f"sqlite:///{tmp_path / 'new.db'}"
    )
    assert "cannot be restored into postgresql://" in refusal(
        str(backup), "--database", "postgresql://gnau@127.0.0.1:1/gnau"
    )
    assert not (tmp_path / "new.db").exists()


def documented_recipe() -> str:
    """The PostgreSQL backup-and-restore recipe of docs/operations.md, as written there."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    return text.split("<!-- recipe: postgresql -->\n```sh\n", 1)[1].split("```", 1)[0]


@pytest.mark.system
def test_the_documented_postgresql_recipe_restores_the_log_and_its_triggers(
    tmp_path: Path,
) -> None:
    signer = new_signer()
    backup = tmp_path / "gnau.dump"
    with fresh_database() as source, fresh_database() as target:
        with open_store(source, signer) as store:
            append_many(store, 20)
            pinned = store.checkpoint()
        assert pinned is not None
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GNAU_")},
            "GNAU_DATABASE": source,
            "RESTORE_DATABASE": target,
            "BACKUP": str(backup),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # gnau itself
        }
        recipe = subprocess.run(
            ["sh", "-e", "-c", documented_recipe()],
            env=env, capture_output=True, text=True, cwd=REPO, check=False,
        )  # fmt: skip
        assert recipe.returncode == 0, recipe.stderr
        assert recipe.stdout.splitlines()[-1] == "up to date"
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        with open_reader(source) as original, open_reader(target) as restored:
            assert list(restored.iter_entries()) == list(original.iter_entries())
            assert restored.checkpoints() == original.checkpoints()
        assert_log_extends(target, signer.vkey, pinned, 20, rounds_after=0, started=False)
        with psycopg.connect(target, autocommit=True) as connection:
            for table in APPEND_ONLY_TABLES:
                for change in (f"DELETE FROM {table}", f"TRUNCATE {table}"):
                    with pytest.raises(psycopg.Error, match=f"{table} is append-only"):
                        connection.execute(change.encode())


# -- backup under load, restore, serve again ----------------------------------------------------


@contextmanager
def database(backend: str, directory: Path) -> Iterator[str]:
    """A new database's URL: a file in ``directory`` or a fresh PostgreSQL database."""
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'gnau.db'}"
    else:
        with fresh_database() as url:
            yield url


def latest_checkpoint(url: str) -> str:
    with open_reader(url) as reader:
        note = reader.checkpoint()
    assert note is not None
    return note


def checkpoint_size(note: str) -> int:
    return Checkpoint.parse(SignedNote.parse(note).text).size


#: The tables the rounds here are played at: catalogued by the test, as a platform does.
TABLE = dealer_pb2.TableConfig(
    currency="EUR",
    rule_sets=[types_pb2.HouseRules()],
    min_stake=1,
    max_stake=1_000_000,
    max_seats=82,
    enabled=True,
)


def keep_playing(service: Served, load: Load, table: str) -> None:
    """Rounds on ``table`` until told to stop; every failure counts (no client retries)."""
    with GnauClient(service.target, token=service.token, retry=None) as client:
        client.put_table(table, TABLE)
        while not load.stop.is_set():
            try:
                client.play_round(table, SEATS)
            except Exception as error:  # every failure counts, whatever it is
                load.errors.append(repr(error))
            else:
                load.rounds += 1


def play(service: Served, rounds: int, table: str) -> None:
    with GnauClient(service.target, token=service.token) as client:
        client.put_table(table, TABLE)  # idempotent: a table played at before stays as it is
        for _ in range(rounds):
            client.play_round(table, SEATS)


def backup_under_load(
    gnau: Gnau, tmp_path: Path, backend: str, *, players: int, backups: int
) -> None:
    """A real server plays rounds (``players`` clients at once) while ``gnau db backup`` runs
    ``backups`` times; each backup is restored into a new database, served again (with the same
    key), played on, and its log verified against the last checkpoint before that backup."""
    with database(backend, tmp_path / "writer") as url:
        taken: list[tuple[Path, Path]] = []  # each backup, and the checkpoint before it
        with served(tmp_path / "writer", "--database", url) as writer:
            load = Load()
            threads = [
                threading.Thread(target=keep_playing, args=(writer, load, f"table-{n}"))
                for n in range(players)
            ]
            for thread in threads:
                thread.start()
            try:
                for number in range(backups):
                    started = load.rounds
                    while load.rounds < started + 3 and not load.errors:
                        time.sleep(0.02)  # rounds are being played as the backup starts
                    pinned = tmp_path / f"checkpoint-{number}.txt"
                    pinned.write_text(latest_checkpoint(url))
                    out = tmp_path / f"backup-{number}"
                    # A process of its own, as an operator runs it beside the service: in
                    # this one it would hold the interpreter's lock from the players' threads.
                    result = gnau_process("db", "backup", str(out), "--database", url)
                    assert result.returncode == 0, result.stderr
                    assert stat.S_IMODE(out.stat().st_mode) == 0o600
                    taken.append((out, pinned))
                during = load.rounds
                while load.rounds < during + 2 and not load.errors:
                    time.sleep(0.02)  # and after it: entries the restores will not have
            finally:
                load.stop.set()
                for thread in threads:
                    thread.join(timeout=60)
        assert load.errors == []
        final = latest_checkpoint(url)
    key = writer.data_dir / "log-signing-key.pem"

    for number, (backup, pinned) in enumerate(taken):
        home = tmp_path / f"restored-{number}"
        with database(backend, home) as target:
            restored = gnau(
                "db", "restore", str(backup), "--database", target,
                "--expect-checkpoint", str(pinned), "--key", writer.vkey,
            )  # fmt: skip
            assert restored.status == 0, restored.out + restored.err
            assert "result: VALID" in restored.out
            assert f"consistent with the expected checkpoint {pinned}" in restored.out
            size = int(
                re.findall(r"^log: ([\d,]+) entries$", restored.out, re.M)[0].replace(",", "")
            )
            assert checkpoint_size(pinned.read_text()) <= size < checkpoint_size(final)

            # A rollback is refused: the writer's newest checkpoint is beyond this backup.
            with database(backend, tmp_path / f"rollback-{number}") as elsewhere:
                newest = tmp_path / "newest.txt"
                newest.write_text(final)
                rolled_back = gnau(
                    "db", "restore", str(backup), "--database", elsewhere,
                    "--expect-checkpoint", str(newest),
                )  # fmt: skip
                assert rolled_back.status == 1
                assert "the log was truncated or rolled back" in rolled_back.out
                assert "does not verify: do not serve it" in rolled_back.err

            # Steps the backup caught committed but not yet integrated are in its outbox: the
            # restored service integrates them first, then logs its start.
            with open_reader(target) as reader:
                carried = int(
                    reader.query("SELECT count(*) FROM log_pending WHERE idx IS NULL")[0][0]
                )
            with served(home, "--database", target, "--key", str(key)) as again:
                play(again, 2, "table-after-restore")
            assert_log_extends(
                target, writer.vkey, pinned.read_text(), size, rounds_after=2, carried=carried
            )


def assert_log_extends(
    url: str,
    vkey: str,
    pinned: str,
    size: int,
    *,
    rounds_after: int,
    started: bool = True,
    carried: int = 0,
) -> None:
    """The log at ``url`` verifies under ``vkey``, extends ``pinned``, and carries on from
    ``size`` (with ``carried`` round events a backup held in its outbox, then a start, if
    ``started``) and ``rounds_after`` rounds, at gap-free indices."""
    verifier = Verifier.from_vkey(vkey)
    with open_reader(url) as reader:
        end = reader.size()
        bundle = io.StringIO()
        write_bundle(reader, bundle, end=end)
        appended = [decode_entry(data, verifier) for data in reader.iter_entries(size, end)]
    report = verify_bundle(
        io.BytesIO(bundle.getvalue().encode()), pinned_keys=[verifier], pinned_checkpoint=pinned
    )
    assert report.ok, report.summary()
    assert [entry.index for entry in appended] == list(range(size, end))
    assert all(entry.round_id is not None for entry in appended[:carried])
    appended = appended[carried:]
    assert started == bool(appended and appended[0].kind is EntryKind.SERVICE_STARTED)
    settled = sum(entry.kind is EntryKind.ROUND_SETTLED for entry in appended)
    assert settled == rounds_after


@pytest.mark.system
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_backup_under_load_restores_verifies_and_carries_on(
    gnau: Gnau, tmp_path: Path, backend: str
) -> None:
    backup_under_load(gnau, tmp_path, backend, players=1, backups=1)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_backups_under_heavy_load_all_restore(gnau: Gnau, tmp_path: Path, backend: str) -> None:
    backup_under_load(gnau, tmp_path, backend, players=4, backups=5)
