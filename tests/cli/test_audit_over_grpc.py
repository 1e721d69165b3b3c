"""``gnau audit`` over gRPC (``--target``), for auditors with a token and no database: against a
real in-process service on each backend, every answer is held to the database path's own, byte
for byte, over a log with interleaved tables, a void, an unfinished round and a key rotation."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import dealer_pb2, round_pb2
from gnau_client import GnauClient, Seat

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.cli.remote_log import RemoteLog
from gnau_service.fairness.player_refs import is_player_ref
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.conftest import Run
from tests.server.conftest import TOKENS, Service, write_tokens
from tests.server.test_get_checkpoints import commit_one_at_a_time
from tests.server.test_service import SEATS, play, rid, shuffle
from tests.server.test_tls_and_config import _certificate, _key_pem, _pem
from tests.serving import free_port, served
from tests.serving import gnau as gnau_process

# make test-system: the commands against `gnau serve` processes.
pytestmark = pytest.mark.system

Gnau = Callable[..., Run]
AUDITOR = TOKENS["auditor"]


async def run(gnau: Gnau, *args: str) -> Run:
    """The command in a thread: its client blocks, and the service runs on this event loop.
    The service logs to the same stderr, one JSON object a line: those lines are not the
    command's, and are dropped."""
    done = await asyncio.to_thread(gnau, *args)
    own = [line for line in done.err.splitlines(keepends=True) if not line.startswith("{")]
    return Run(done.status, done.out, "".join(own))


def remote(service: Service, token: str | None = AUDITOR) -> list[str]:
    target = ["--target", f"127.0.0.1:{service.app.port}"]
    return target if token is None else [*target, "--token", token]


def database(service: Service) -> list[str]:
    return ["--database", service.settings.database_url]


@dataclass
class Rounds:
    """The rounds of :func:`varied_log`, by what happened to them."""

    early: str  # opened first, settled after later rounds: last in ListRounds, not in show
    other_table: str
    voided: str
    after_rotation: str
    unfinished: str  # left DEALT
    last: str
    settled_indices: list[int]  # the log indices the service reported for `early`
    keys: list[str]  # every key, oldest first


async def varied_log(service: Service) -> Rounds:
    store = service.app.store
    first_key = store.signer.vkey
    early = await shuffle(service, "table-1")
    other_table = await play(service, "table-2")
    voided = await shuffle(service, "table-3")
    await service.call(
        "dealer",
        "VoidRound",
        dealer_pb2.VoidRoundRequest(
            reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
            request_id=rid(),
            round_id=voided.round_id,
            reason="closed",
        ),
    )
    for step, request in [
        ("Deal", dealer_pb2.DealRequest(request_id=rid(), round_id=early.round_id, seats=SEATS)),
        ("Reveal", dealer_pb2.RevealRequest(request_id=rid(), round_id=early.round_id)),
        ("Settle", dealer_pb2.SettleRequest(request_id=rid(), round_id=early.round_id)),
    ]:
        settled = (await service.call("dealer", step, request)).round
    new = LogSigner.from_private_key(store.signer.origin, Ed25519PrivateKey.generate())
    await asyncio.to_thread(store.rotate_key, new)
    after_rotation = await play(service, "table-2")
    unfinished = await shuffle(service, "table-3")
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(request_id=rid(), round_id=unfinished.round_id, seats=SEATS),
    )
    # More than a message of checkpoints (100), so the export reads several.
    await commit_one_at_a_time(store, 120)
    last = await play(service, "table-1")
    return Rounds(
        early.round_id,
        other_table.round_id,
        voided.round_id,
        after_rotation.round_id,
        unfinished.round_id,
        last.round_id,
        list(settled.log_indices),
        [first_key, new.vkey],
    )


async def export_both_ways(
    gnau: Gnau, service: Service, tmp_path: Path, name: str, *range_args: str
) -> tuple[Path, Path]:
    from_database, over_grpc = tmp_path / f"{name}-database.jsonl", tmp_path / f"{name}-grpc.jsonl"
    reference = await run(
        gnau, "audit", "export", *database(service), "--out", str(from_database), *range_args
    )
    assert reference.status == 0, reference.err
    exported = await run(
        gnau, "audit", "export", *remote(service), "--out", str(over_grpc), *range_args
    )
    assert exported.status == 0, exported.err
    assert exported.out == reference.out.replace(str(from_database), str(over_grpc))
    return from_database, over_grpc


async def test_export_over_grpc_is_byte_identical_to_the_database_export(
    gnau: Gnau, service: Service, tmp_path: Path
) -> None:
    rounds = await varied_log(service)
    old_key, new_key = rounds.keys
    # Each range, and the key to pin for it: the one signing where it starts (verify follows
    # a rotation inside a bundle from the key before it).
    ranges = {
        "whole log": ([], old_key),
        "from a round": (["--from-round", rounds.other_table], old_key),
        "to a round": (["--to-round", rounds.other_table], old_key),
        "a round spanning others": (
            ["--from-round", rounds.early, "--to-round", rounds.early],
            old_key,
        ),
        "after the rotation": (["--from-round", rounds.after_rotation], new_key),
        "to the unfinished round": (["--to-round", rounds.unfinished], old_key),
        "one round": (["--from-round", rounds.last, "--to-round", rounds.last], new_key),
    }
    first_indices = set()
    for name, (range_args, key) in ranges.items():
        reference, exported = await export_both_ways(gnau, service, tmp_path, name, *range_args)
        assert exported.read_bytes() == reference.read_bytes(), name
        header = json.loads(exported.read_bytes().split(b"\n")[0])
        first_indices.add(header["first_index"])
        assert header["public_keys"] == rounds.keys, name
        verify = await run(gnau, "audit", "verify", str(exported), "--key", key)
        assert (verify.status, verify.out.splitlines()[-1]) == (0, "result: VALID"), name
    # The ranges start at several places, so the left frontiers differ (and were all right).
    assert len(first_indices) >= 4
    assert rounds.settled_indices[0] in first_indices


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
@pytest.mark.slow  # a log of over 10,000 entries
async def test_a_log_longer_than_one_call_of_each_stream_exports_identically(
    gnau: Gnau, settings: Settings, service: Service, tmp_path: Path
) -> None:
    store = service.app.store
    await commit_one_at_a_time(store, 10_001)
    notes = await asyncio.to_thread(store.checkpoints)
    assert len(notes) > 10_000 and store.size() > 10_000

    def first_call() -> list[str]:
        with GnauClient(f"127.0.0.1:{service.app.port}") as client:
            return list(client.get_checkpoints(0))

    # GetCheckpoints stops at 10,000 a call (GetEntries too, tested in tests/server).
    assert await asyncio.to_thread(first_call) == notes[:10_000]
    reference, exported = await export_both_ways(gnau, service, tmp_path, "long")
    assert exported.read_bytes() == reference.read_bytes()
    lines = exported.read_bytes().split(b"\n")
    assert sum(line.startswith(b'{"checkpoint"') for line in lines) == len(notes)


@pytest.mark.slow  # a log of over 10,000 entries
async def test_exports_show_a_progress_bar_on_long_logs(
    gnau: Gnau, service: Service, tmp_path: Path
) -> None:
    store = service.app.store
    await store.run_async(
        lambda tx: [tx.append(EntryKind.CONFIG_CHANGED, {"n": n}) for n in range(10_050)]
    )
    size = store.size()
    for where in (database(service), remote(service)):
        exported = await run(gnau, "audit", "export", *where, "--out", str(tmp_path / "b.jsonl"))
        assert exported.status == 0, exported.err
        assert exported.err.endswith(f"] {size:,}/{size:,} entries\n"), exported.err
        assert exported.err.startswith("\r[")
    round_id = (await play(service)).round_id
    small = await run(
        gnau, "audit", "export", *remote(service), "--out", str(tmp_path / "s.jsonl"),
        "--from-round", round_id, "--to-round", round_id,
    )  # fmt: skip
    assert small.status == 0
    assert small.err == "", "a short export draws no bar"


# -- game recall ----------------------------------------------------------------------------------


async def test_show_and_round_over_grpc_print_what_the_database_path_prints(
    gnau: Gnau, service: Service
) -> None:
    rounds = await varied_log(service)
    commands = [
        ["show", "--last", "20"],
        ["show", "--last", "20", "--json"],
        ["show", "--last", "2"],
    ]
    for round_id in (rounds.early, rounds.voided, rounds.unfinished, rounds.last):
        commands += [["round", round_id], ["round", round_id, "--json"]]
    for command in commands:
        reference = await run(gnau, "audit", *command, *database(service))
        over_grpc = await run(gnau, "audit", *command, *remote(service))
        assert (reference.status, over_grpc.status, over_grpc.err) == (0, 0, ""), command
        assert over_grpc.out == reference.out, command
        assert reference.out.strip(), command


async def test_show_json_lists_the_rounds_with_the_latest_entries_first(
    gnau: Gnau, service: Service
) -> None:
    rounds = await varied_log(service)
    shown = await run(gnau, "audit", "show", "--json", *remote(service))
    assert shown.status == 0, shown.err
    summaries = shown.json_lines
    # By last entry, as the database orders them: `early` was opened first but settled after
    # `other_table` and `voided` (ListRounds, by opening time, would list it last).
    assert [summary["round_id"] for summary in summaries] == [
        rounds.last,
        rounds.unfinished,
        rounds.after_rotation,
        rounds.early,
        rounds.voided,
        rounds.other_table,
    ]
    assert [summary["state"] for summary in summaries] == [
        "SETTLED", "DEALT", "SETTLED", "SETTLED", "VOIDED", "SETTLED"
    ]  # fmt: skip
    assert [summary["table_id"] for summary in summaries] == [
        "table-1", "table-3", "table-2", "table-1", "table-3", "table-2"
    ]  # fmt: skip
    early = summaries[3]
    assert set(early) == {
        "round_id", "table_id", "state", "first_index", "last_index", "time", "settlement"
    }  # fmt: skip
    assert (early["first_index"], early["last_index"]) == (
        rounds.settled_indices[0],
        rounds.settled_indices[-1],
    )
    settlement = early["settlement"]
    assert isinstance(settlement, dict)
    assert [player["stake"] for player in settlement["players"]] == [100, 250, 7]
    assert (
        sum(player["delta"] for player in settlement["players"]) == -settlement["dealer"]["delta"]
    )
    assert summaries[1]["settlement"] is None and summaries[4]["settlement"] is None
    latest_two = await run(gnau, "audit", "show", "--json", "--last", "2", *remote(service))
    assert latest_two.json_lines == summaries[:2]


async def test_round_json_holds_every_event_as_logged(gnau: Gnau, service: Service) -> None:
    rounds = await varied_log(service)
    shown = await run(gnau, "audit", "round", rounds.early, "--json", *remote(service))
    assert shown.status == 0, shown.err
    (record,) = shown.json_lines
    assert set(record) == {"round_id", "table_id", "state", "events"}
    assert (record["round_id"], record["table_id"], record["state"]) == (
        rounds.early,
        "table-1",
        "SETTLED",
    )
    events = record["events"]
    assert isinstance(events, list)
    assert [event["index"] for event in events] == rounds.settled_indices
    assert [event["kind"] for event in events] == [
        "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED"
    ]  # fmt: skip
    assert all(set(event) == {"index", "time", "kind", "payload"} for event in events)
    dealt = events[1]["payload"]
    # A v2 round's entries name each seat by its player reference, never the platform's id.
    assert all("player_id" not in seat for seat in dealt["seats"])
    assert all(is_player_ref(seat["player_ref"]) for seat in dealt["seats"])
    voided = await run(gnau, "audit", "round", rounds.voided, "--json", *remote(service))
    (void_record,) = voided.json_lines
    assert [event["kind"] for event in void_record["events"]] == [
        "ROUND_COMMITTED",
        "ROUND_VOIDED",
    ]
    assert void_record["events"][1]["payload"]["reason"] == "closed"


# -- checkpoints ----------------------------------------------------------------------------------


async def test_checkpoint_saves_the_latest_signed_checkpoint_for_pinning(
    gnau: Gnau, service: Service, tmp_path: Path
) -> None:
    rounds = await varied_log(service)
    latest = await asyncio.to_thread(service.app.store.checkpoint)
    assert latest is not None
    # Public: no token needed.
    printed = await run(gnau, "audit", "checkpoint", *remote(service, token=None))
    assert (printed.status, printed.out) == (0, latest)
    from_database = await run(gnau, "audit", "checkpoint", *database(service))
    assert from_database.out == latest
    pin = tmp_path / "pinned.txt"
    saved = await run(
        gnau, "audit", "checkpoint", *remote(service, token=None), "--out", str(pin),
        "--key", rounds.keys[-1],
    )  # fmt: skip
    assert saved.status == 0, saved.err
    size = int(latest.split("\n")[1])
    assert saved.out == f"saved the checkpoint of size {size:,} (verified) to {pin}\n"
    assert pin.read_bytes() == latest.encode()
    # The pin is what verify takes: a bundle of the same log agrees with it.
    bundle = tmp_path / "log.jsonl"
    assert (await run(gnau, "audit", "export", *remote(service), "--out", str(bundle))).status == 0
    verify = await run(
        gnau, "audit", "verify", str(bundle), "--key", rounds.keys[0], "--checkpoint", str(pin)
    )
    assert (verify.status, verify.out.splitlines()[-1]) == (0, "result: VALID")
    # The key before the rotation did not sign the latest checkpoint.
    refused = await run(
        gnau, "audit", "checkpoint", *remote(service), "--out", str(tmp_path / "no.txt"),
        "--key", rounds.keys[0],
    )  # fmt: skip
    assert refused.status == 1
    assert refused.out.startswith("the latest checkpoint does not verify: ")
    assert not (tmp_path / "no.txt").exists()


async def test_the_left_frontier_from_public_proofs_is_the_stores(service: Service) -> None:
    await varied_log(service)
    store = service.app.store
    size = await asyncio.to_thread(store.size)

    def frontiers() -> list[object]:
        with GnauClient(f"127.0.0.1:{service.app.port}", token=AUDITOR) as client:
            log = RemoteLog(client)
            return [log.frontier(first_index) for first_index in range(size + 1)]

    expected = [await asyncio.to_thread(store.frontier, n) for n in range(size + 1)]
    assert await asyncio.to_thread(frontiers) == expected


# -- refusals: one line on stderr, exit 2 ---------------------------------------------------------


def one_line_refusal(done: Run, message: str) -> None:
    assert done.status == 2, done
    assert done.out == ""
    assert done.err.startswith("gnau audit: ") and done.err.count("\n") == 1, done.err
    assert message in done.err, done.err
    assert "Traceback" not in done.err


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
async def test_refusals_over_the_wire_are_one_line_and_exit_2(
    gnau: Gnau,
    settings: Settings,
    service: Service,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await play(service)
    out = ["--out", str(tmp_path / "x.jsonl")]
    target = f"127.0.0.1:{service.app.port}"
    nobody = f"127.0.0.1:{free_port()}"
    monkeypatch.delenv("GNAU_TOKEN", raising=False)
    cases = [
        (["export", "--target", nobody, "--token", AUDITOR, *out], f"{nobody}: UNAVAILABLE: "),
        (["checkpoint", "--target", nobody], f"{nobody}: UNAVAILABLE: "),
        (["show", *remote(service, "no-such-token")], f"{target}: UNAUTHENTICATED: "),
        (["export", *remote(service, TOKENS["public"]), *out], f"{target}: PERMISSION_DENIED: "),
        (["show", *remote(service, None)], "needs a token of the auditor role: pass --token"),
        (["round", "no-such-round", *remote(service)], "round 'no-such-round' is not in the log"),
        (["round", "", *remote(service)], "round '' is not in the log"),
        (
            ["export", *remote(service), *out, "--to-round", "no-such-round"],
            "round 'no-such-round' is not in the log",
        ),
        (
            ["export", "--target", "192.0.2.1:50051", "--token", AUDITOR, *out],
            "the token would cross the network to 192.0.2.1:50051 in clear text",
        ),
        (["show", *remote(service, "not a bearer token")], "--token: a bearer token is"),
        (["show", *remote(service), "--tls-ca", str(tmp_path / "none.pem")], "--tls-ca "),
    ]
    for args, message in cases:
        one_line_refusal(await run(gnau, "audit", *args), message)
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "x.jsonl.partial").exists()
    # The same unknown round from the database: the same words.
    reference = await run(gnau, "audit", "round", "no-such-round", *database(service))
    one_line_refusal(reference, "round 'no-such-round' is not in the log")
    # --target and --database name two logs: argparse refuses the pair.
    both = await run(gnau, "audit", "show", *remote(service), *database(service))
    assert both.status == 2 and "not allowed with argument" in both.err
    # GNAU_TOKEN stands for --token.
    monkeypatch.setenv("GNAU_TOKEN", AUDITOR)
    assert (await run(gnau, "audit", "show", *remote(service, None))).status == 0


async def test_over_tls_with_the_service_ca(
    gnau: Gnau, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, ca_key = _certificate("gnau test CA", None, ca=True)
    server, server_key = _certificate("localhost", (ca.subject, ca_key))
    (tmp_path / "ca.pem").write_bytes(_pem(ca))
    (tmp_path / "server.pem").write_bytes(_pem(server))
    (tmp_path / "server.key").write_bytes(_key_pem(server_key))
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        tls_cert=tmp_path / "server.pem",
        tls_key=tmp_path / "server.key",
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    async with running(settings) as app:
        target = ["--target", f"localhost:{app.port}"]
        saved = await run(
            gnau, "audit", "checkpoint", *target, "--tls-ca", str(tmp_path / "ca.pem")
        )
        assert saved.status == 0, saved.err
        assert saved.out == await asyncio.to_thread(app.store.checkpoint)
        plaintext = await run(gnau, "audit", "checkpoint", *target)
        one_line_refusal(plaintext, f"localhost:{app.port}: UNAVAILABLE: ")


def test_a_served_process_exports_the_same_bundle_over_grpc(tmp_path: Path) -> None:
    # The test's tokens, written before the start (which then makes none): the export needs an
    # auditor of every operator, as the log holds every operator's rounds.
    (tmp_path / "data").mkdir(mode=0o700)
    write_tokens(tmp_path / "data" / "tokens.json")
    with served(tmp_path / "data") as service:
        with GnauClient(service.target, token=TOKENS["operator"]) as client:
            for table in ("table-1", "table-2", "table-1"):
                client.play_round(table, [Seat(seat_number=1, player_id="ann", stake=5)])
        from_database, over_grpc = tmp_path / "database.jsonl", tmp_path / "grpc.jsonl"
        reference = gnau_process(
            "audit", "export", "--database", service.database, "--out", str(from_database)
        )
        assert reference.returncode == 0, reference.stderr
        # The token from the environment, as an auditor's script would pass it.
        exported = gnau_process(
            "audit", "export", "--target", service.target, "--out", str(over_grpc),
            env={**os.environ, "GNAU_TOKEN": TOKENS["auditor"]},
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
    assert over_grpc.read_bytes() == from_database.read_bytes()
    # Its start and settings (SERVICE_STARTED, CONFIG_CHANGED), the eight starter tables a first
    # start catalogues (a TABLE_CHANGED each, issue 38), and three rounds of four.
    assert exported.stdout.startswith("wrote entries 0 to 21 (22 in all) to ")
