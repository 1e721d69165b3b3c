"""``gnau token`` against a real ``gnau serve``, which picks up each change without a restart."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc

from gnau_service.common.private_files import write_private_file
from tests.conftest import Run
from tests.serving import REPO, served

# make test-system: the commands against `gnau serve` processes.
pytestmark = pytest.mark.system

Gnau = Callable[..., Run]

WAIT = 30.0  # seconds: a bound on waiting for a reload, never an assertion about speed


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def eventually(call: Callable[[], object], code: grpc.StatusCode, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while (got := code_of(call)) != code:
        assert time.monotonic() < deadline, f"{what}: still {got.name}"
        time.sleep(0.1)


def test_tokens_change_under_a_running_server_and_streams_survive(
    gnau: Gnau, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with served(data) as service, grpc.insecure_channel(service.target) as channel:
        audit = audit_pb2_grpc.AuditServiceStub(channel)
        dealer = dealer_pb2_grpc.DealerServiceStub(channel)

        def read_checkpoint_entries(token: str) -> Callable[[], object]:
            request = audit_pb2.GetEntriesRequest(start=0, end=1)
            return lambda: list(audit.GetEntries(request, metadata=bearer(token), timeout=10))

        # Added: the file watch picks it up (no signal sent).
        out = tmp_path / "ci.token"
        added = gnau("token", "add", "--role", "auditor", "--all-operators", "--name", "ci",
                     "--out", str(out), "--data-dir", str(data))  # fmt: skip
        assert added.status == 0, added.err
        ci = out.read_text().strip()
        assert ci not in added.out + added.err
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        eventually(read_checkpoint_entries(ci), grpc.StatusCode.OK, "the added token")

        stream = audit.WatchEntries(
            audit_pb2.WatchEntriesRequest(start_index=0), metadata=bearer(ci), timeout=WAIT * 2
        )
        first = next(stream)
        assert first.entries[0].index == 0

        # Revoked, then SIGHUP: refused from the next call.
        revoked = gnau("token", "revoke", "ci", "--data-dir", str(data))
        assert revoked.status == 0, revoked.err
        service.process.send_signal(signal.SIGHUP)
        eventually(read_checkpoint_entries(ci), grpc.StatusCode.UNAUTHENTICATED, "the revoked")

        # The stream opened before goes on: a new entry reaches it (a round at a starter table,
        # which the first start catalogued).
        shuffled = dealer.Shuffle(
            dealer_pb2.ShuffleRequest(request_id="after-reload", table_id="table-1"),
            metadata=bearer(service.token),
            timeout=10,
        )
        seen: set[str] = set()
        while shuffled.round.round_id not in seen:  # the stream's deadline bounds this
            seen.update(json.loads(entry.data).get("round_id") for entry in next(stream).entries)
        stream.cancel()

        # A bad file keeps the tokens in force, and says so once.
        tokens = data / "tokens.json"
        write_private_file(tokens, b'{"tokens": {"' + ci.encode() + b'": 5}}')
        service.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT
        while "token file unusable" not in service.output():
            assert time.monotonic() < deadline, "no line about the unusable token file"
            time.sleep(0.1)
        time.sleep(2.5)  # two polls of the watch, which must not repeat the line
        listing = dealer_pb2.ListRoundsRequest(page_size=1)
        assert (
            code_of(lambda: dealer.ListRounds(listing, metadata=bearer(service.token), timeout=10))
            == grpc.StatusCode.OK
        )
        assert code_of(read_checkpoint_entries(ci)) == grpc.StatusCode.UNAUTHENTICATED
    output = service.output()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    unusable = [
        line
        for line in lines
        if line.get("event") == "token file unusable; keeping the previous tokens"
    ]
    assert len(unusable) == 1 and str(tokens) in unusable[0]["error"]
    assert ci not in output and service.token not in output


def test_add_shows_a_token_only_on_a_terminal(gnau: Gnau, tmp_path: Path) -> None:
    refused = gnau("token", "add", "--role", "public", "--data-dir", str(tmp_path))
    assert refused.status == 2
    assert "pass --out FILE" in refused.err
    assert not (tmp_path / "tokens.json").exists()

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "gnau_service.cli.main", "token", "add", "--role", "operator",
         "--name", "ops", "--data-dir", str(tmp_path)],
        stdout=secondary, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    os.close(secondary)
    shown = b""
    try:
        while shown.count(b"\n") < 3:
            ready, _, _ = select.select([primary], [], [], WAIT)
            assert ready, f"nothing on the terminal: {shown!r}"
            shown += os.read(primary, 4096)
    finally:
        assert process.wait(timeout=WAIT) == 0
        os.close(primary)
    token = shown.decode().splitlines()[-1].strip()
    record = json.loads((tmp_path / "tokens.json").read_text())["tokens"][0]
    assert record["name"] == "ops" and token not in json.dumps(record)
    assert record["sha256"] == hashlib.sha256(token.encode()).hexdigest()


def test_list_shows_names_and_roles_never_tokens(gnau: Gnau, tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    write_private_file(path, json.dumps({"tokens": {"the-secret-token": "auditor"}}).encode())
    listed = gnau("token", "list", "--tokens", str(path))
    assert listed.status == 0, listed.err
    assert "the-secret-token" not in listed.out + path.read_text()
    (line,) = listed.out.splitlines()
    # From before operators: an auditor token is of every operator.
    assert line.split()[1:] == ["auditor", "*", "-"] and line.startswith("legacy-")
    missing = gnau("token", "revoke", "nobody", "--tokens", str(path))
    assert missing.status == 1 and missing.err.count("\n") == 1


def test_add_gives_each_token_its_operator(gnau: Gnau, tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"

    def add(name: str, *flags: str) -> Run:
        out = str(tmp_path / f"{name}.token")
        return gnau("token", "add", "--name", name, *flags, "--out", out, "--tokens", str(path))

    added = add("casino-a-platform", "--role", "operator", "--operator", "casino-a")
    assert added.status == 0, added.err
    assert "(operator of casino-a)" in added.out
    assert add("casino-b-audit", "--role", "auditor", "--operator", "casino-b").status == 0
    assert add("regulator", "--role", "auditor", "--all-operators").status == 0
    assert add("ops", "--role", "operator").status == 0
    for refused, reason in (
        (add("all", "--role", "operator", "--operator", "*"), "only an auditor may be of all"),
        (add("all", "--role", "operator", "--all-operators"), "only an auditor may be of all"),
        (add("bad", "--role", "auditor", "--operator", "Casino-A"), "is not 1 to 64 of a-z"),
        (add("both", "--role", "auditor", "--operator", "x", "--all-operators"), "not allowed"),
    ):
        assert refused.status == 2 and reason in refused.err, refused.err
    listed = gnau("token", "list", "--tokens", str(path))
    assert listed.status == 0, listed.err
    assert [line.split()[:3] for line in listed.out.splitlines()] == [
        ["casino-a-platform", "operator", "casino-a"],
        ["casino-b-audit", "auditor", "casino-b"],
        ["regulator", "auditor", "*"],
        ["ops", "operator", "default"],
    ]
