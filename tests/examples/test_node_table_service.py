"""examples/node-table-service against a real ``gnau serve``: it runs rounds as
docs/integration.md says (its table catalogued first, request ids, retries with backoff on
UNAVAILABLE, the commitment before the bets, the receipt after), and what it prints holds up:
every round settles and sums to zero, and every receipt it fetched verifies with ``gnau receipt
verify``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gnau_client import GnauClient

from gnau_service.server.process.tokens import first_start_tokens
from tests.node.test_node_client import node_executable
from tests.serving import free_port, gnau, served

# make test-system: the Node.js example, run against `gnau serve`.
pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "node-table-service"
NODE_TIMEOUT = 120.0


@pytest.fixture
def node() -> str:
    executable = node_executable()
    if not (EXAMPLE / "node_modules" / "@grpc" / "grpc-js" / "package.json").is_file():
        pytest.fail(
            "the example's packages are not installed: run "
            "`npm ci --prefix examples/node-table-service` (make test does it)"
        )
    return executable


def table_service(node: str, target: str, token: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GNAU_", "NODE_"))}
    return subprocess.Popen(
        [node, "table-service.mjs", "--target", target, *args],
        cwd=EXAMPLE,
        env={**env, "GNAU_TOKEN": token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str], first: list[str]) -> list[dict[str, Any]]:
    """The events the process printed (``first``: lines already read), once it exited 0."""
    try:
        out, err = process.communicate(timeout=NODE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the table service did not finish in {NODE_TIMEOUT:.0f} s:\n{out}\n{err}")
    assert process.returncode == 0, f"exit {process.returncode}:\n{out}\n{err}"
    return [json.loads(line) for line in [*first, *out.splitlines()]]


def check_rounds(events: list[dict[str, Any]], rounds: int, service_vkey: str) -> None:
    settled = [event for event in events if event["event"] == "settled"]
    assert len(settled) == rounds
    for round_ in settled:
        round_id = round_["round_id"]
        order = [e["event"] for e in events if e.get("round_id") == round_id]
        # The commitment is shown before the bets are locked, the receipt fetched last.
        assert order == ["commitment", "bets_locked", "dealt", "revealed", "settled", "receipt"]
        deltas = [int(result["delta"]) for result in round_["results"]]
        assert sum(deltas) + int(round_["dealer_delta"]) == 0
        assert round_["sum"] == "0"
        (receipt,) = [e for e in events if e["event"] == "receipt" and e["round_id"] == round_id]
        verified = gnau("receipt", "verify", receipt["path"], "--key", service_vkey)
        assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_example_retries_until_the_dealer_answers_and_its_rounds_verify(
    node: str, tmp_path: Path
) -> None:
    data, port = tmp_path / "data", free_port()
    token = first_start_tokens(data / "tokens.json", data / "operator-token")
    assert token is not None
    target = f"127.0.0.1:{port}"
    receipts = tmp_path / "receipts"
    process = table_service(
        node, target, token, "--table", "t-1", "--rounds", "2", "--receipts", str(receipts),
        "--max-attempts", "40",
    )  # fmt: skip
    # Nothing listens yet: the first call, the PutTable that catalogues the table before any
    # Shuffle, must fail with UNAVAILABLE and be retried.
    assert process.stdout is not None
    first = process.stdout.readline()
    assert json.loads(first) | {"wait_ms": 0} == {
        "event": "retry", "method": "PutTable", "attempt": 1, "code": "UNAVAILABLE", "wait_ms": 0,
    }, first  # fmt: skip
    # The later --listen wins over the helper's own: the service comes up where the example calls.
    with served(data, "--listen", target) as service:
        events = finished(process, [first])
        check_rounds(events, 2, service.vkey)
        retries = [e for e in events if e["event"] == "retry"]
        assert {e["method"] for e in retries} == {"PutTable"}
        table = {"event": "table", "table_id": "t-1", "version": "1"}
        assert [e for e in events if e["event"] == "table"] == [table]

        # A round left unfinished on the table (by a crash, say) is voided, then play goes on.
        with GnauClient(target, token=token) as client:
            unfinished = client.shuffle("t-1").round_id
        again = finished(
            table_service(node, target, token, "--table", "t-1", "--receipts", str(receipts)), []
        )
        # Put again at the start, under the same configuration: still its first version.
        assert again[:2] == [
            table,
            {"event": "voided_unfinished", "round_id": unfinished, "state": "SHUFFLED"},
        ]
        check_rounds(again, 1, service.vkey)
        with GnauClient(target, token=token) as client:
            assert client.get_round(unfinished).void_reason.startswith("left unfinished")
