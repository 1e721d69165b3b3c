"""The sequencer on PostgreSQL: steps commit while no sequencer runs and are answered once one
does (a retry in between gets the same answer); two sequencers at once integrate nothing twice;
the outbox keeps each event's index."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator, Sequence

import psycopg
import pytest

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.signing import LogSigner
from gnau_service.rounds.dealer import Dealer, Idempotency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store, open_store
from gnau_service.store import sequencer as sequencer_module
from gnau_service.store.backend import PENDING_SQL
from gnau_service.store.postgres import (
    HEAD_CHANNEL,
    PENDING_CHANNEL,
    PENDING_PLAN_SQL,
    PostgresBackend,
)
from gnau_service.store.sequencer import Notices, Sequencer, sequence
from tests.audit.logs import chain_failure
from tests.catalogued import catalogued
from tests.postgres import OutsideLeader, fresh_database
from tests.steps import append, run_steps


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


def pending_rows(url: str) -> list[tuple[int, int | None]]:
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT id, idx FROM log_pending ORDER BY id").fetchall()
    return [(int(row[0]), row[1]) for row in rows]


async def until(condition: object, what: str) -> None:
    for _ in range(200):  # a liveness bound, not a timing claim
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_retry_before_integration_gets_the_same_answer(
    postgres_url: str, signer: LogSigner
) -> None:
    # The table the round is dealt at (issue 38), catalogued while a store of the log leads:
    # its TABLE_CHANGED entry is integrated first, as index 0.
    with open_store(postgres_url, signer) as setup:
        catalogued(setup, ["table-1"])
    catalogue_rows = pending_rows(postgres_url)
    assert [index for _, index in catalogue_rows] == [0]
    outside = OutsideLeader(postgres_url)
    with open_store(postgres_url, signer) as store:
        dealer = Dealer(store)
        request = Idempotency(str(uuid.uuid4()), "fingerprint")

        async def scenario() -> None:
            first = asyncio.create_task(
                dealer.shuffle(
                    "table-1", HouseRules(), request, operator=DEFAULT_OPERATOR, actor="token:test"
                )
            )
            await until(lambda: len(pending_rows(postgres_url)) == 2, "the step committed")
            retry = asyncio.create_task(
                dealer.shuffle(
                    "table-1", HouseRules(), request, operator=DEFAULT_OPERATOR, actor="token:test"
                )
            )
            await asyncio.sleep(0.3)
            # Committed, not integrated: nobody is answered, nothing of the round is in the log,
            # and a read of the round shows no index for the event.
            assert not first.done() and not retry.done()
            assert pending_rows(postgres_url)[1][1] is None
            assert store.size() == 1  # the catalogue's entry alone
            round_id = dealer.list("table-1", 10, "", operator=DEFAULT_OPERATOR)[0][
                0
            ].record.round_id
            assert dealer.get(round_id, operator=DEFAULT_OPERATOR).record.log_indices == ()
            outside.release()
            answered, replayed = await asyncio.wait_for(asyncio.gather(first, retry), 10)
            assert replayed == answered
            assert answered.record.log_indices == (1,)
            assert dealer.get(round_id, operator=DEFAULT_OPERATOR).record == answered.record
            assert pending_rows(postgres_url) == [
                *catalogue_rows,
                (pending_rows(postgres_url)[1][0], 1),
            ]

        asyncio.run(scenario())
        assert decode_entry(store.entries(1, 2)[0], signer.verifier).round_id is not None


@pytest.mark.system
def test_two_sequencers_at_once_integrate_each_event_once(
    postgres_url: str, signer: LogSigner
) -> None:
    outside = OutsideLeader(postgres_url)
    with open_store(postgres_url, signer) as first, open_store(postgres_url, signer) as second:
        loop = asyncio.new_event_loop()
        futures = [
            loop.create_task(
                store.run_async(lambda tx, i=i: tx.append(EntryKind.CONFIG_CHANGED, {"i": i}))
            )
            for i in range(200)
            for store in (first, second)
        ]
        loop.run_until_complete(asyncio.sleep(0))  # every unit is queued
        while len(pending_rows(postgres_url)) < len(futures):
            threading.Event().wait(0.05)
        # Both run a sequencer transaction at once, as a deposed sequencer and its successor
        # would: the head lock makes them take turns, and the second sees what the first did.
        together = threading.Barrier(2)
        done = []

        def run(store: Store) -> None:
            connection = store.backend.connect()
            try:
                together.wait()
                done.append(sequence(store.backend, connection, store.signer_for))
            finally:
                connection.close()

        threads = [threading.Thread(target=run, args=(store,)) for store in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(len(result.indices) for result in done) == [0, 400]
        for result in done:
            for store in (first, second):
                store.integrated(result)
        answered = loop.run_until_complete(asyncio.wait_for(asyncio.gather(*futures), 10))
        loop.close()
        assert sorted(entry.index for entry in answered) == list(range(400))
        outside.release()
        entries = first.entries(0, 1000)
        assert len(entries) == first.size() == 400
        assert chain_failure(entries, signer.verifier) is None
        payloads = sorted(decode_entry(d, signer.verifier).payload["i"] for d in entries)
        assert payloads == sorted(list(range(200)) * 2)


def sequencer_of(store: Store) -> Sequencer:
    """The candidate for the log's sequencer of a store on PostgreSQL."""
    return store._coordination.sequencer  # type: ignore[attr-defined, no-any-return]


def elected(first: Store, second: Store) -> tuple[Store, Store]:
    """The two stores of one log once one of them is its sequencer: (that one, the other)."""
    for _ in range(200):  # a liveness bound: the election runs every ELECTION_SECONDS
        if sequencer_of(first).leading or sequencer_of(second).leading:
            break
        threading.Event().wait(0.05)
    if sequencer_of(first).leading:
        return first, second
    assert sequencer_of(second).leading
    return second, first


def append_all(store: Store, count: int) -> list[int]:
    """Queue ``count`` appends at once on ``store``; the indices they got, in order."""
    return sorted(
        entry.index
        for entry in run_steps(
            store,
            [lambda tx, i=i: tx.append(EntryKind.CONFIG_CHANGED, {"i": i}) for i in range(count)],
        )
    )


def test_only_the_sequencer_hears_that_steps_committed(
    postgres_url: str, signer: LogSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's notice on the pending channel wakes the log's sequencer alone: the other
    processes do not listen to it (each would wake at every step of every replica)."""
    with open_store(postgres_url, signer) as first, open_store(postgres_url, signer) as second:
        leader, follower = elected(first, second)
        heard: list[Notices] = []
        notifications = follower.backend.notifications  # type: ignore[attr-defined]

        def recording(session: object) -> Notices:
            result = notifications(session)
            heard.append(result)
            return result

        monkeypatch.setattr(follower.backend, "notifications", recording)
        assert append_all(follower, 20) == list(range(20))
        assert leader.size() == 20
        # A step's notice and then a head notice, from outside: notices arrive in order, so once
        # the follower has heard the head notice, it has heard the step's if it listens to it.
        seen = len(heard)
        with psycopg.connect(postgres_url, autocommit=True) as outside:
            outside.execute(f"NOTIFY {PENDING_CHANNEL}".encode())
            outside.execute(f"NOTIFY {HEAD_CHANNEL}, '20'".encode())
        for _ in range(200):  # a liveness bound, not a timing claim
            if any(grown for grown, _ in heard[seen:]):
                break
            threading.Event().wait(0.05)
        # The follower heard the log grow (how its callers were answered), never the steps.
        assert any(grown for grown, _ in heard[seen:])
        assert not any(steps for _, steps in heard), heard


def test_a_follower_answers_its_callers_from_the_head_notices_alone(
    postgres_url: str, signer: LogSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head notice carries each integrated event's index, so a process that is not the
    sequencer answers its callers without asking the database which events are integrated."""
    # No safety-net sweep during the test: every answer comes from a notice.
    monkeypatch.setattr(sequencer_module, "SWEEP_SECONDS", 3600.0)
    with open_store(postgres_url, signer) as first, open_store(postgres_url, signer) as second:
        leader, follower = elected(first, second)
        # Once a step is answered, the follower's sequencer thread is past its first sweep (on
        # connecting, for notices missed while it was not listening).
        append(follower, EntryKind.CONFIG_CHANGED, {})
        asked: list[int] = []
        pending_indices = follower.pending_indices

        def counting(pending_ids: Sequence[int]) -> dict[int, int]:
            asked.append(len(pending_ids))
            return pending_indices(pending_ids)

        monkeypatch.setattr(follower, "pending_indices", counting)
        for batch in range(5):
            assert append_all(follower, 10) == list(range(1 + 10 * batch, 11 + 10 * batch))
        assert leader.size() == 51
        assert asked == []
        assert [(pending_id, index) for pending_id, index in pending_rows(postgres_url)] == [
            (pending_id, follower.waiters.recent[pending_id])
            for pending_id, _ in pending_rows(postgres_url)
        ]


def test_the_sequencer_reads_a_backlog_in_id_order_whatever_the_statistics(
    postgres_url: str, signer: LogSigner
) -> None:
    # A backlog the statistics have not seen (inserted at once, never analysed): unless told
    # otherwise, the planner sorts every waiting row to take the first batch.
    with open_store(postgres_url, signer):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO log_pending (kind, round_id, payload, time)"
            " SELECT 'CONFIG_CHANGED', NULL, '{}', '2026-12-01T00:00:00Z'"
            " FROM generate_series(1, 20000)"
        )
        backend = PostgresBackend(postgres_url)
        try:
            with connection.transaction():
                connection.execute(PENDING_PLAN_SQL)
                query = backend.sql(PENDING_SQL)
                plan = "\n".join(
                    str(row[0])
                    for row in connection.execute(f"EXPLAIN {query}", (1024,)).fetchall()
                )
        finally:
            backend.close()
    assert "Index Scan using log_pending_waiting" in plan, plan
    assert "Sort" not in plan, plan
