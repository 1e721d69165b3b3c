"""docs/integration.md's ``buf curl`` lines, every public, operator and auditor call, run as
printed (with ``DEALER``, ``TOKEN``, ``AUDITOR`` and ``ROUND`` set as the text says) against a
real ``gnau serve``."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.serving import REPO, served

# make test-system: `buf curl` against a `gnau serve` process.
pytestmark = pytest.mark.system

GUIDE = REPO / "docs" / "integration.md"
BUF = REPO / ".venv" / "bin" / "buf"


def guide_lines() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## From the command line: every call with `buf curl`") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [line for line in block[1].splitlines() if line.startswith("buf curl ")]


def test_every_call_of_the_guide_runs_as_printed(tmp_path: Path) -> None:
    lines = guide_lines()
    methods = {line.rsplit("/", 1)[1] for line in lines}
    # Every RPC of the contract, but none left out.
    declared = set()
    for proto in (REPO / "proto" / "gnau" / "v1").glob("*.proto"):
        declared |= set(re.findall(r"^\s*rpc (\w+)\(", proto.read_text(), re.MULTILINE))
    assert methods == declared, declared ^ methods
    with served(tmp_path / "data") as service:
        env = {
            **os.environ,
            "PATH": f"{BUF.parent}:{os.environ['PATH']}",
            "DEALER": service.target,
            "TOKEN": service.token,
            "AUDITOR": service.add_token("audit", "--role", "auditor", "--all-operators"),
            "ROUND": "",
        }
        for line in lines:
            done = subprocess.run(
                ["bash", "-c", line], env=env, cwd=REPO, capture_output=True, text=True,
                timeout=60, check=False,
            )  # fmt: skip
            method = line.rsplit("/", 1)[1]
            if method == "WatchEntries":  # ends at its --timeout, after every entry
                assert '"entry"' in done.stdout or '"entries"' in done.stdout, done.stdout
                assert "deadline_exceeded" in done.stderr, done.stderr
                continue
            if method == "VerifySoftware":  # served without a manifest, as the text says
                assert done.returncode != 0, done.stdout
                assert "failed_precondition" in done.stderr, done.stderr
                assert "start it with --software-manifest" in done.stderr, done.stderr
                continue
            assert done.returncode == 0, (method, done.stderr[:300])
            answer = json.loads(done.stdout)
            if method == "PutTable":  # the guide's table, catalogued as it printed it
                table = answer["table"]
                assert (table["tableId"], table["version"], table["currency"]["code"]) == (
                    "t1", "1", "EUR",
                )  # fmt: skip
            if method == "ListTables":  # closed by the SetTableEnabled before it
                (table,) = [t for t in answer["tables"] if t["tableId"] == "t1"]
                assert not table["config"].get("enabled", False), table
            if method == "GetReport":  # the guide's round at t1, settled, in one row
                (row,) = json.loads(answer["report"])["rows"]
                assert (row["table_id"], row["currency"], row["rounds_settled"]) == ("t1", "EUR", 1)
            if method == "Shuffle":
                env["ROUND"] = answer["round"]["roundId"]
            if method == "Settle":
                assert answer["round"]["state"] == "ROUND_STATE_SETTLED"
