"""``gnau key rotate``: under real servers that keep serving, and its refusals and recovery."""

from __future__ import annotations

import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import dealer_pb2, dealer_pb2_grpc
from gnau_client import GnauClient, Seat

from gnau_service.audit.entries import EntryError, EntryKind, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.signing import LogSigner
from gnau_service.server.process.key_handover import staged_key_path, write_key_file
from gnau_service.store import open_reader, open_store
from tests.conftest import Run
from tests.server.test_interceptors import error_info
from tests.serving import gnau as gnau_process
from tests.serving import served
from tests.steps import append

Gnau = Callable[..., Run]

ORIGIN = "gnau-dealer/local"  # gnau serve's default origin
KEY_NAME = "log-signing-key.pem"
WAIT = 60.0  # seconds: a bound on waiting for rounds, never an assertion about speed


def play_until(
    stop: threading.Event, target: str, token: str, played: list[str], errors: list[str]
) -> None:
    seats = [Seat(seat_number=n, player_id=f"p{n}", stake=10) for n in (1, 2)]
    with GnauClient(target, token=token) as client:
        while not stop.is_set():
            try:
                played.append(client.play_round("table-1", seats).round_id)
            except grpc.RpcError as error:
                errors.append(f"{error.code().name}: {error.details()}")
                return


def wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


@pytest.mark.system
def test_a_rotation_while_servers_deal_leaves_a_log_that_verifies(
    gnau: Gnau, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with served(data) as service:
        old_copy = tmp_path / "old-key.pem"  # a second process that keeps the old key
        shutil.copy(data / KEY_NAME, old_copy)
        old_copy.chmod(0o600)
        with served(
            tmp_path / "other", "--database", service.database, "--key", str(old_copy)
        ) as other:
            stop, played, errors = threading.Event(), [], []
            player = threading.Thread(
                target=play_until, args=(stop, service.target, service.token, played, errors)
            )
            player.start()
            try:
                wait_for(lambda: len(played) >= 3 or errors, "rounds before the rotation")
                rotated = gnau_process("key", "rotate", "--data-dir", str(data))
                at_rotation = len(played)
                wait_for(lambda: len(played) >= at_rotation + 3 or errors, "rounds after it")
            finally:
                stop.set()
                player.join(timeout=WAIT)
            assert rotated.returncode == 0, rotated.stderr
            assert errors == []
            lines = rotated.stdout.splitlines()
            assert lines[1] == f"old {service.vkey}"
            new_vkey = lines[2].removeprefix("new ")
            assert new_vkey != service.vkey
            assert LogSigner.from_key_file(ORIGIN, data / KEY_NAME).vkey == new_vkey
            assert not staged_key_path(data / KEY_NAME).exists()
            assert stat.S_IMODE((data / KEY_NAME).stat().st_mode) == 0o600

            # The process that holds only the old key writes nothing, retryably, and says why.
            with grpc.insecure_channel(other.target) as channel:
                stub = dealer_pb2_grpc.DealerServiceStub(channel)
                try:
                    stub.Shuffle(
                        dealer_pb2.ShuffleRequest(request_id="stale-1", table_id="t-stale"),
                        metadata=[("authorization", f"Bearer {other.token}")],
                        timeout=30,
                    )
                    raise AssertionError("a server holding the retired key appended")
                except grpc.RpcError as refused:
                    assert refused.code() == grpc.StatusCode.UNAVAILABLE
                    assert error_info(refused).reason == "STORAGE_UNAVAILABLE"  # type: ignore[arg-type]
            wait_for(lambda: new_vkey in other.output(), "the stale server's log line")

    bundle = tmp_path / "log.bundle"
    exported = gnau("audit", "export", "--database", service.database, "--out", str(bundle))
    assert exported.status == 0, exported.err
    verified = gnau("audit", "verify", str(bundle), "--key", service.vkey)
    assert verified.status == 0, verified.out + verified.err
    assert "result: VALID" in verified.out

    old, new = Verifier.from_vkey(service.vkey), Verifier.from_vkey(new_vkey)
    with open_reader(service.database) as reader:
        entries = list(reader.iter_entries())
        assert reader.public_keys() == [service.vkey, new_vkey]
    kinds = [decode_entry(data_, old, new).kind for data_ in entries]
    rotation = kinds.index(EntryKind.KEY_ROTATED)
    assert decode_entry(entries[rotation], old).kind is EntryKind.KEY_ROTATED
    after = entries[rotation + 1 :]
    assert len(after) >= 3 * 4  # the rounds played after it, each several entries
    for data_ in after:
        assert decode_entry(data_, new).key_id == new.key_id.hex()
        try:
            decode_entry(data_, old)
            raise AssertionError("an entry after the rotation verifies under the retired key")
        except EntryError:
            pass


def started_log(tmp_path: Path) -> tuple[Path, str, LogSigner]:
    """A data directory with a log of one entry, as a first ``gnau serve`` leaves it."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    key = Ed25519PrivateKey.generate()
    write_key_file(data / KEY_NAME, key)
    signer = LogSigner.from_private_key(ORIGIN, key)
    database = f"sqlite:///{data / 'gnau.db'}"
    with open_store(database, signer) as store:
        append(store, EntryKind.CONFIG_CHANGED, {})
    return data, database, signer


def test_a_dry_run_checks_and_changes_nothing(gnau: Gnau, tmp_path: Path) -> None:
    data, database, signer = started_log(tmp_path)
    key_bytes = (data / KEY_NAME).read_bytes()
    dry = gnau("key", "rotate", "--dry-run", "--data-dir", str(data))
    assert dry.status == 0, dry.err
    assert f"old {signer.vkey}" in dry.out.splitlines()
    assert (data / KEY_NAME).read_bytes() == key_bytes
    assert not staged_key_path(data / KEY_NAME).exists()
    with open_reader(database) as reader:
        assert reader.size() == 1 and reader.public_keys() == [signer.vkey]


def test_a_key_file_without_the_current_key_is_refused_in_one_line(
    gnau: Gnau, tmp_path: Path
) -> None:
    data, database, _ = started_log(tmp_path)
    retired = tmp_path / "retired.pem"
    shutil.copy(data / KEY_NAME, retired)
    assert gnau("key", "rotate", "--data-dir", str(data)).status == 0
    again = gnau("key", "rotate", "--data-dir", str(data), "--key", str(retired))
    assert again.status == 2
    assert again.out == ""
    assert again.err.count("\n") == 1 and "does not hold the log's current key" in again.err
    with open_reader(database) as reader:
        assert len(reader.public_keys()) == 2


def test_a_rotation_interrupted_before_its_rename_is_finished(gnau: Gnau, tmp_path: Path) -> None:
    data, database, signer = started_log(tmp_path)
    new_key = Ed25519PrivateKey.generate()
    write_key_file(staged_key_path(data / KEY_NAME), new_key)
    new = LogSigner.from_private_key(ORIGIN, new_key)
    with open_store(database, signer) as store:
        store.rotate_key(new)  # the crash comes after this, before the rename
    finished = gnau("key", "rotate", "--data-dir", str(data))
    assert finished.status == 0, finished.err
    assert finished.out.splitlines()[-1] == f"new {new.vkey}"
    assert LogSigner.from_key_file(ORIGIN, data / KEY_NAME).vkey == new.vkey
    with open_reader(database) as reader:
        assert reader.public_keys() == [signer.vkey, new.vkey]  # no second rotation


def test_new_key_rotates_to_a_delivered_key_and_leaves_the_key_file(
    gnau: Gnau, tmp_path: Path
) -> None:
    data, database, _ = started_log(tmp_path)
    key_bytes = (data / KEY_NAME).read_bytes()
    delivered = tmp_path / "next.pem"
    rotated = gnau("key", "rotate", "--data-dir", str(data), "--new-key", str(delivered))
    assert rotated.status == 0, rotated.err
    assert stat.S_IMODE(delivered.stat().st_mode) == 0o600
    new = LogSigner.from_key_file(ORIGIN, delivered)
    assert rotated.out.splitlines()[-1] == f"new {new.vkey}"
    assert (data / KEY_NAME).read_bytes() == key_bytes
    with open_reader(database) as reader:
        assert reader.current_key() == new.vkey


def test_a_server_with_a_retired_key_refuses_to_start(gnau: Gnau, tmp_path: Path) -> None:
    data, _, signer = started_log(tmp_path)
    retired = tmp_path / "retired.pem"
    shutil.copy(data / KEY_NAME, retired)
    rotated = gnau("key", "rotate", "--data-dir", str(data))
    assert rotated.status == 0, rotated.err
    new_vkey = rotated.out.splitlines()[-1].removeprefix("new ")
    started = gnau_process(
        "serve", "--data-dir", str(data), "--key", str(retired), "--listen", "127.0.0.1:0",
        "--log-format", "json", timeout=60,
    )  # fmt: skip
    assert started.returncode == 2
    (line,) = started.stderr.splitlines()[-1:]
    assert "cannot start" in line and new_vkey in line and signer.vkey in line


def test_key_show_prints_the_current_key_first_then_the_earlier_ones(
    gnau: Gnau, tmp_path: Path
) -> None:
    data, _, signer = started_log(tmp_path)
    assert gnau("key", "rotate", "--data-dir", str(data)).status == 0
    new = LogSigner.from_key_file(signer.origin, data / KEY_NAME)
    assert new.vkey != signer.vkey
    shown = gnau("key", "show", "--data-dir", str(data))
    assert shown.status == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[:3] == [
        f"origin   {signer.origin}",
        f"current  {new.vkey}",
        f"earlier  {signer.vkey}",
    ]
    assert "PRIVATE" not in shown.out and "publish the current key" in lines[3]


@pytest.mark.system
def test_key_show_reads_a_running_service(gnau: Gnau, tmp_path: Path) -> None:
    with served(tmp_path / "data") as service:
        shown = gnau("key", "show", "--target", service.target)
    assert shown.status == 0, shown.err
    assert shown.out.splitlines()[1] == f"current  {service.vkey}"
    unreachable = gnau("key", "show", "--target", "127.0.0.1:1")
    assert unreachable.status == 2 and unreachable.err.count("\n") == 1
