"""A forgotten player is in no file of the database: every file of the data directory (the
database, its ``-wal``, ``-shm`` and ``-turn``, journals, anything else there), read byte for
byte after the forget, holds none of a forgotten player's id (UTF-8), key (its 32 raw bytes, and
its hex) or link. A link is a row holding a seat's reference beside the id, so with the id in no
file no link is left; the references themselves are public (in the log) and stay.

- SQLite, the service in process: right after ForgetPlayer answers, with the service still
  serving (the ``-wal`` file is open), for players whose rows filled whole pages.
- SQLite, a read that holds old versions of the file: the forget is committed but answered
  STORAGE_UNAVAILABLE, rounds go on meanwhile, and the retry with its request id scrubs.
- SQLite, ``gnau serve --workers 2`` with a client playing throughout (slow: real processes).
- PostgreSQL: after autovacuum's ANALYZE, the forget, and the operator's commands of
  docs/operations.md ("Erasure on disk"), the cluster's whole data directory. Its WAL is clean
  only with ``wal_recycle = off``, a superuser's setting of the whole cluster that the service
  does not control (with it on, a removed segment is renamed for reuse and keeps its bytes
  until the WAL is written over it): the test turns it off as the docs say, and back after.
  It needs a superuser and a data directory it can read (it runs as root here), and is skipped
  with the reason elsewhere.

Each test first finds the players' ids in the files, so that a search that sees nothing cannot
pass; and finds the players not forgotten there afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import psycopg
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2
from gnau_client import GnauClient

from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from gnau_service.store import sqlite as sqlite_backend
from gnau_service.store.players import read_player_keys
from tests.catalogued import catalogue
from tests.conftest import Run
from tests.postgres import admin_url, fresh_database, require_postgres
from tests.server.conftest import TOKENS, Service, write_tokens
from tests.server.test_service import details, refusal, rid
from tests.serving import REPO, gnau, served

# make test-system: `gnau serve` processes and the scrub timer.
pytestmark = pytest.mark.system

SEATS_PER_ROUND = 6
#: The tables this module's tests deal at, in the default operator's catalogue (issue 38).
TABLES = (*(f"table-{number}" for number in range(10)), "load")


@dataclass(frozen=True)
class Player:
    player_id: str
    key: bytes

    def needles(self) -> dict[str, bytes]:
        """What of the player must be in no file once they are forgotten."""
        return {
            f"{self.player_id}: id": self.player_id.encode("utf-8"),
            f"{self.player_id}: key": self.key,
            f"{self.player_id}: key in hex": self.key.hex().encode("ascii"),
        }


def new_player_id() -> str:
    return f"{secrets.token_hex(8)}@players.example"


def seats(player_ids: Sequence[str]) -> list[round_pb2.Seat]:
    return [
        round_pb2.Seat(seat_number=n, player_id=p, stake=10, client_seed=b"seed")
        for n, p in enumerate(player_ids, 1)
    ]


def files_holding(directory: Path, needles: dict[str, bytes]) -> list[str]:
    """Where in the files under ``directory`` each of ``needles`` is, byte for byte, as
    "file: needle". A file or folder removed while the search runs (another test's database
    dropped) is passed over: ``os.walk`` skips a folder it cannot list."""
    found = []
    for folder, _, names in os.walk(directory):
        for name in sorted(names):
            path = Path(folder, name)
            try:
                data = path.read_bytes() if path.is_file() else b""
            except FileNotFoundError:
                continue
            where = path.relative_to(directory)
            found += [f"{where}: {what}" for what, needle in needles.items() if needle in data]
    return found


def every_needle(players: Sequence[Player]) -> dict[str, bytes]:
    return {name: needle for player in players for name, needle in player.needles().items()}


def ids_of(players: Sequence[Player]) -> dict[str, bytes]:
    return {player.player_id: player.player_id.encode("utf-8") for player in players}


def each_found(directory: Path, players: Sequence[Player]) -> bool:
    """Whether each of ``players``' ids is in some file under ``directory``."""
    found = {hit.rpartition(": ")[2] for hit in files_holding(directory, ids_of(players))}
    return found == {player.player_id for player in players}


# -- SQLite, in process ------------------------------------------------------------------------


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    """The service on SQLite, with its data in ``tmp_path / "data"``, its catalogue holding
    :data:`TABLES`."""
    configure_logging("json")
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue(app.store, TABLES)
        yield Service(app, settings, channel)


async def play(service: Service, table: str, player_ids: Sequence[str]) -> None:
    """One round at ``table`` for ``player_ids``, shuffled, dealt, revealed and settled."""
    shuffled = await service.call(
        "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id=table)
    )
    round_id = shuffled.round.round_id
    deal = dealer_pb2.DealRequest(request_id=rid(), round_id=round_id, seats=seats(player_ids))
    await service.call("dealer", "Deal", deal)
    for method, message in (
        ("Reveal", dealer_pb2.RevealRequest),
        ("Settle", dealer_pb2.SettleRequest),
    ):
        await service.call("dealer", method, message(request_id=rid(), round_id=round_id))


async def seat_players(service: Service, rounds: int) -> list[Player]:
    """``rounds`` rounds of new players; each player with their key, read from the store."""
    ids = [new_player_id() for _ in range(rounds * SEATS_PER_ROUND)]
    for number in range(rounds):
        chunk = ids[number * SEATS_PER_ROUND : (number + 1) * SEATS_PER_ROUND]
        await play(service, f"table-{number % 3}", chunk)
    keys = read_player_keys(service.app.store, DEFAULT_OPERATOR, ids)
    return [Player(player_id, keys[player_id]) for player_id in ids]


async def forget(
    service: Service, player: Player, request_id: str
) -> dealer_pb2.ForgetPlayerResponse:
    request = dealer_pb2.ForgetPlayerRequest(player_id=player.player_id, request_id=request_id)
    answer: dealer_pb2.ForgetPlayerResponse = await service.call("dealer", "ForgetPlayer", request)
    return answer


async def test_right_after_a_forget_no_file_of_the_data_directory_holds_the_player(
    service: Service,
) -> None:
    data = service.settings.data_dir
    players = await seat_players(service, rounds=16)
    # All but the first and the last round's players, seated one after another: whole pages of
    # theirs are emptied, freed and used again for the log's new entries.
    forgotten = players[SEATS_PER_ROUND:-SEATS_PER_ROUND]
    kept = players[:SEATS_PER_ROUND] + players[-SEATS_PER_ROUND:]
    assert each_found(data, forgotten), "the search sees the players before"

    for player in forgotten:
        request_id = rid()
        answer = await forget(service, player, request_id)
        assert (answer.forgotten, answer.seats_unlinked) == (True, 1)
        assert await forget(service, player, request_id) == answer, "a retry: the same answer"

    assert files_holding(data, every_needle(forgotten)) == []
    assert sorted(name for name in os.listdir(data) if name.startswith("gnau.db")) == [
        "gnau.db",
        "gnau.db-shm",
        "gnau.db-turn",
        "gnau.db-wal",
    ], "the service is still serving, its files open"
    assert each_found(data, kept), "the players not forgotten are still there"


async def test_a_read_that_keeps_old_versions_holds_up_the_scrub_but_no_round(
    service: Service, monkeypatch: pytest.MonkeyPatch, gnau: Callable[..., Run]
) -> None:
    # Long enough for a round to be played while the forget waits.
    monkeypatch.setattr(sqlite_backend, "SCRUB_SECONDS", 3.0)
    data = service.settings.data_dir
    player, by_command, other, *_ = await seat_players(service, rounds=1)
    target = ["--target", f"127.0.0.1:{service.app.port}", "--token", TOKENS["operator"]]
    reader = sqlite3.connect(data / "gnau.db", isolation_level=None)
    try:
        # A read transaction: its snapshot predates the forget, so the -wal file must keep the
        # versions it reads (a backup of a large file, an export, does the same for longer).
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM player_keys").fetchone()
        request_id = rid()
        forgetting = asyncio.create_task(forget(service, player, request_id))
        await play(service, "table-9", [other.player_id])
        assert not forgetting.done(), "a round was played while the forget waited for the read"
        error = await refusal(forgetting)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert details(error)[1] == "STORAGE_UNAVAILABLE"
        assert "forgotten" in (error.details() or "") and "request_id" in (error.details() or "")
        # Forgotten nonetheless, and the status says why: the -wal file still holds the player.
        looked_up = await service.call(
            "audit",
            "LookupPlayer",
            audit_pb2.LookupPlayerRequest(player_id=player.player_id),
            "auditor",
        )
        assert (looked_up.player_id, list(looked_up.seats)) == ("", [])
        assert any("gnau.db-wal" in hit for hit in files_holding(data, ids_of([player])))
        # The client retries the forget by itself, and then the command line says which
        # request id finishes the erasure.
        monkeypatch.setattr(sqlite_backend, "SCRUB_SECONDS", 0.05)
        failed = await asyncio.to_thread(gnau, "player", "forget", by_command.player_id, *target)
        said = failed.err.splitlines()[-2:]
        assert failed.status == 2 and "UNAVAILABLE" in said[0], failed.err
        assert said[1].startswith("gnau player forget: retry with --request-id "), failed.err
        retry_with = said[1].rpartition(" ")[2]
    finally:
        reader.close()
    answer = await forget(service, player, request_id)
    assert (answer.forgotten, answer.seats_unlinked) == (True, 1) and answer.log_index > 0
    retried = await asyncio.to_thread(
        gnau, "player", "forget", by_command.player_id, *target, "--request-id", retry_with
    )
    assert retried.status == 0 and retried.out.startswith("forgotten:"), retried.out
    assert files_holding(data, every_needle([player, by_command])) == []
    assert each_found(data, [other]), "the player not forgotten is still there"


# -- SQLite, gnau serve --workers 2 ------------------------------------------------------------


@pytest.mark.slow
def test_a_player_forgotten_by_one_of_two_workers_under_load_is_in_no_file(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with served(data, "--workers", "2") as server:
        server.put_tables(TABLES)
        ids = [new_player_id() for _ in range(10 * SEATS_PER_ROUND)]
        with GnauClient(server.target, token=server.token) as client:
            for number in range(10):
                chunk = ids[number * SEATS_PER_ROUND : (number + 1) * SEATS_PER_ROUND]
                client.play_round(f"table-{number}", seats(chunk))
        with contextlib.closing(sqlite3.connect(data / "gnau.db")) as db:
            keys = dict(db.execute("SELECT player_id, secret FROM player_keys").fetchall())
        players = [Player(player_id, bytes(keys[player_id])) for player_id in ids]
        forgotten, kept = players[:-SEATS_PER_ROUND], players[-SEATS_PER_ROUND:]
        assert each_found(data, forgotten), "the search sees the players before"

        # Another client plays throughout, on its own connections (so on both workers).
        stop = threading.Event()
        played: list[str] = []

        def keep_playing() -> None:
            while not stop.is_set():
                with GnauClient(server.target, token=server.token) as load:
                    played.append(load.play_round("load", seats([new_player_id()])).round_id)

        load = threading.Thread(target=keep_playing)
        load.start()
        try:
            # The first with the command line, the others on connections of their own: each
            # worker answers some.
            done = gnau(
                "player", "forget", forgotten[0].player_id, "--target", server.target,
                "--token", server.token, "--json",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["forgotten"] is True
            for player in forgotten[1:]:
                with GnauClient(server.target, token=server.token) as client:
                    assert client.forget_player(player.player_id).forgotten
            holding = files_holding(data, every_needle(forgotten))
        finally:
            stop.set()
            load.join()
        assert holding == []
        assert played, "the load played while the players were forgotten"
        assert each_found(data, kept)
        log_lines = server.output()
    assert not any(player.player_id in log_lines for player in players), "no id in a log line"


# -- PostgreSQL: the operator's commands, then the cluster's data directory -------------------


def documented_sql(marker: str) -> list[str]:
    """The statements of the SQL block of docs/operations.md after ``<!-- marker -->``."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    block = text.split(f"<!-- {marker} -->\n```sql\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if not line.lstrip().startswith("--")]
    return [statement.strip() for statement in "\n".join(lines).split(";") if statement.strip()]


@contextlib.contextmanager
def cluster_recycling_no_wal() -> Iterator[None]:
    """The cluster with ``wal_recycle = off``, as docs/operations.md has it set once; the
    setting as it was afterwards, if it was on."""
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        was_on = admin.execute("SHOW wal_recycle").fetchone() == ("on",)
        if was_on:
            for statement in documented_sql("erasure: postgresql cluster"):
                admin.execute(statement.encode())
            # The postmaster signals the reload to its children, the checkpointer (which
            # removes WAL) among them, once it has read the file; a new session then shows it.
            deadline = time.monotonic() + 30
            while cluster_setting("wal_recycle") != "off":
                assert time.monotonic() < deadline, "the cluster never took wal_recycle = off"
                time.sleep(0.05)
        try:
            yield
        finally:
            if was_on:
                admin.execute("ALTER SYSTEM RESET wal_recycle")
                admin.execute("SELECT pg_reload_conf()")


def cluster_setting(name: str) -> str:
    """A setting as a new session of the cluster sees it."""
    with psycopg.connect(admin_url(), autocommit=True) as session:
        row = session.execute("SELECT setting FROM pg_settings WHERE name = %s", (name,))
        return str(row.fetchone()[0])  # type: ignore[index]


def readable_cluster() -> Path:
    """The cluster's data directory, if this test may use it (skipped otherwise, saying why)."""
    require_postgres()
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        superuser = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if superuser.fetchone() != (True,):
            pytest.skip("the operator's commands need a superuser (CHECKPOINT, pg_switch_wal)")
        row = admin.execute("SHOW data_directory").fetchone()
        slots = admin.execute("SELECT count(*) FROM pg_replication_slots").fetchone()
        keep = admin.execute("SELECT setting FROM pg_settings WHERE name = 'wal_keep_size'")
        kept = keep.fetchone()
    directory = Path(str(row[0])) if row else Path()
    if not os.access(directory / "base", os.R_OK | os.X_OK):
        pytest.skip(f"the cluster's data directory {directory} is not readable here")
    if slots != (0,) or kept != ("0",):
        pytest.skip("a replication slot or wal_keep_size keeps WAL: docs/privacy.md says so")
    return directory


@pytest.mark.slow  # forces checkpoints, sets wal_recycle and reads the whole cluster
async def test_after_the_operator_s_commands_no_file_of_the_cluster_holds_the_player(
    tmp_path: Path,
) -> None:
    cluster = readable_cluster()
    configure_logging("json")
    with cluster_recycling_no_wal(), fresh_database() as url:
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            database=url,
            tokens=write_tokens(tmp_path / "tokens.json"),
            grace_seconds=1,
            shutdown_notice_seconds=0,
        )
        async with (
            running(settings) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            service = Service(app, settings, channel)
            await catalogue(app.store, TABLES)
            players = await seat_players(service, rounds=4)
            forgotten, kept = players[:-SEATS_PER_ROUND], players[-SEATS_PER_ROUND:]
            # What autovacuum does sooner or later, and a checkpoint: the data files hold the
            # rows, and pg_statistic whatever ANALYZE keeps of them.
            await asyncio.to_thread(run_sql, url, ["ANALYZE", "CHECKPOINT"])
            for player in forgotten:
                answer = await forget(service, player, rid())
                assert (answer.forgotten, answer.seats_unlinked) == (True, 1)
            deleted = await asyncio.to_thread(each_found, cluster, forgotten)
            assert deleted, "deleted, the rows are still on disk: in dead tuples and the WAL"
            await asyncio.to_thread(run_sql, url, documented_sql("erasure: postgresql"))
            holding = await asyncio.to_thread(files_holding, cluster, every_needle(forgotten))
            current = await asyncio.to_thread(
                run_sql, url, ["SELECT pg_walfile_name(pg_current_wal_lsn())"]
            )
            assert holding == [], f"the WAL is now at {current}"
            found = await asyncio.to_thread(each_found, cluster / "base", kept)
            assert found, "the players not forgotten are still there"


def run_sql(url: str, statements: Sequence[str]) -> list[tuple[object, ...]]:
    """Run ``statements`` in the database at ``url`` (the cluster-wide ones of docs/operations.md
    need a superuser, which the test's role is); the last one's rows."""
    rows: list[tuple[object, ...]] = []
    with psycopg.connect(url, autocommit=True) as connection:
        for statement in statements:
            cursor = connection.execute(statement.encode())
            rows = cursor.fetchall() if cursor.description else []
    return rows


def test_the_docs_say_how_long_a_forget_waits_for_a_read() -> None:
    privacy = (REPO / "docs" / "privacy.md").read_text(encoding="utf-8")
    assert f"waits up to {sqlite_backend.SCRUB_SECONDS:g} s" in privacy
