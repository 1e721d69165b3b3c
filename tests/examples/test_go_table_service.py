"""examples/go-table-service against a real ``gnau serve``: built offline from Debian's Go
packages by its build.sh (protoc stubs from proto/, ``go vet``, ``go test``), it plays rounds as
docs/integration.md says (its table catalogued first with PutTable, retries with the same request
id on UNAVAILABLE, TABLE_BUSY voided, refusals read by their ErrorInfo reason), and the
commitment it opened with Go's crypto/sha256 is the one the Python reference computes from the
revealed seed.

Needs the Go toolchain and packages named in build.sh (Debian: golang-go, golang-google-grpc-dev,
golang-google-protobuf-dev, golang-google-genproto-dev, golang-github-golang-protobuf-1-5-dev,
protobuf-compiler, protoc-gen-go, protoc-gen-go-grpc; .ci/run installs them). Without them the
test is skipped, except in CI (``CI`` set), where it fails. The first build compiles grpc-go,
the longest step of `make test-system`; later ones use Go's build cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gnau_client import GnauClient

from gnau_service.fairness.commitment import compute_commitment
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.process.tokens import first_start_tokens
from tests.node.test_node_client import in_ci
from tests.serving import free_port, served

# make test-system: the Go example, built and run.
pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "go-table-service"
TOOLS = ("go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc")
BUILD_TIMEOUT = 600.0
RUN_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        reason = (
            f"{', '.join(missing)} not found: install the Debian packages named in "
            "examples/go-table-service/build.sh (.ci/run does)"
        )
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    build = tmp_path_factory.mktemp("go-build")
    result = subprocess.run(
        [str(EXAMPLE / "build.sh"), str(build)],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return build / "go-table-service"


def table_service(binary: Path, target: str, token: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNAU_")}
    return subprocess.Popen(
        [str(binary), "--target", target, *args],
        env={**env, "GNAU_TOKEN": token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(
    process: subprocess.Popen[str], first: list[str], status: int = 0
) -> list[dict[str, Any]]:
    """The events the process printed (``first``: lines already read), once it exited."""
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the table service did not finish in {RUN_TIMEOUT:.0f} s:\n{out}\n{err}")
    assert process.returncode == status, f"exit {process.returncode}:\n{out}\n{err}"
    return [json.loads(line) for line in [*first, *out.splitlines()]]


def check_rounds(events: list[dict[str, Any]], rounds: int) -> None:
    settled = [event for event in events if event["event"] == "settled"]
    assert len(settled) == rounds
    for round_ in settled:
        round_id = round_["round_id"]
        mine = [e for e in events if e.get("round_id") == round_id]
        # The commitment is shown before the bets are locked.
        assert [e["event"] for e in mine] == [
            "commitment", "bets_locked", "dealt", "revealed", "settled",
        ]  # fmt: skip
        shown = mine[0]["commitment"]
        revealed = mine[3]
        assert revealed["commitment_opens"] is True
        assert revealed["fairness_version"] == "v3"
        # What Go's crypto/sha256 opened, the Python reference opens too.
        seed = bytes.fromhex(revealed["server_seed"])
        assert compute_commitment(round_id, HouseRules(), seed, FairnessVersion.V3).hex() == shown
        assert sum(r["delta"] for r in round_["results"]) + round_["dealer_delta"] == 0
        assert round_["sum"] == 0
        assert len(round_["results"]) == 3


def test_the_go_example_retries_until_the_dealer_answers_and_opens_each_commitment(
    binary: Path, tmp_path: Path
) -> None:
    data, port = tmp_path / "data", free_port()
    token = first_start_tokens(data / "tokens.json", data / "operator-token")
    assert token is not None
    target = f"127.0.0.1:{port}"
    process = table_service(
        binary, target, token, "--table", "t-1", "--rounds", "2", "--max-attempts", "40"
    )
    # Nothing listens yet: the first call, the PutTable that catalogues the table before any
    # Shuffle, must fail with UNAVAILABLE and be retried.
    assert process.stdout is not None
    first = process.stdout.readline()
    assert json.loads(first) | {"wait_ms": 0} == {
        "event": "retry", "method": "PutTable", "attempt": 1, "code": "UNAVAILABLE", "wait_ms": 0,
    }, first  # fmt: skip
    with served(data, "--listen", target):
        events = finished(process, [first])
        check_rounds(events, 2)
        assert {e["method"] for e in events if e["event"] == "retry"} == {"PutTable"}
        table = {"event": "table", "table_id": "t-1", "version": 1}
        assert [e for e in events if e["event"] == "table"] == [table]

        # A round left unfinished on the table: TABLE_BUSY's ErrorInfo names it; it is voided.
        with GnauClient(target, token=token) as client:
            unfinished = client.shuffle("t-1").round_id
        again = finished(table_service(binary, target, token, "--table", "t-1"), [])
        # Put again at the start, under the same configuration: still its first version.
        assert again[:2] == [
            table,
            {"event": "voided_unfinished", "round_id": unfinished, "state": "SHUFFLED"},
        ]
        check_rounds(again, 1)
        with GnauClient(target, token=token) as client:
            assert client.get_round(unfinished).void_reason.startswith("left unfinished")

        # A refusal that is not retryable ends the run at once, by its code and reason.
        refused = finished(table_service(binary, target, "not-a-token", "--table", "t-2"), [], 1)
        assert [(e["event"], e.get("code"), e.get("reason")) for e in refused] == [
            ("error", "UNAUTHENTICATED", "UNAUTHENTICATED")
        ]
