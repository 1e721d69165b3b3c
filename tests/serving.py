"""A real ``gnau serve`` process for end-to-end tests: started on a free port with only the
test's settings, its output kept (stdout pumped by a thread so it never blocks, stderr to a
file), stopped with SIGTERM and required to exit 0 within its grace period."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnau.v1 import dealer_pb2
from gnau_client import GnauClient

from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.grpc.convert import table_config_to_proto
from gnau_service.server.process.app import STOP_ENTRY_SECONDS
from tests.catalogued import table_config

REPO = Path(__file__).resolve().parents[1]
#: The ``gnau`` command, run by this interpreter.
GNAU_MODULE = (sys.executable, "-m", "gnau_service.cli.main")
START_TIMEOUT = 30.0  # seconds until the server logs "serving", its last start-up line
GRACE_SECONDS = 10.0  # the server's shutdown grace for calls in flight
START_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it


@dataclass
class Served:
    process: subprocess.Popen[str]
    target: str
    data_dir: Path
    stderr_path: Path
    token: str = ""
    vkey: str = ""
    stdout_lines: list[str] = field(default_factory=list)
    #: How it must have exited when stopped: 0, unless a test killed it itself.
    expected_status: int = 0

    @property
    def database(self) -> str:
        return f"sqlite:///{self.data_dir / 'gnau.db'}"

    def output(self) -> str:
        stderr = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        return "".join(self.stdout_lines) + stderr[-20_000:]

    def log_events(self) -> list[dict[str, Any]]:
        """The service's JSON log lines so far, as events."""
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def add_token(self, name: str, *options: str) -> str:
        """A token added to the running service's token file (``gnau token add --name NAME
        OPTIONS``), once the service has taken it up (it says ``tokens reloaded``): an auditor of
        every operator is ``add_token("audit", "--role", "auditor", "--all-operators")``, the
        only caller that reads the whole log."""
        reloads = self.output().count("tokens reloaded")
        out = self.data_dir.parent / f"{name}.token"
        added = gnau(
            "token", "add", "--name", name, *options, "--data-dir", str(self.data_dir),
            "--out", str(out),
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        deadline = time.monotonic() + START_TIMEOUT
        while self.output().count("tokens reloaded") == reloads:
            assert time.monotonic() < deadline, f"the token was not taken up:\n{self.output()}"
            time.sleep(0.05)
        return out.read_text().strip()

    def put_tables(self, tables: Iterable[str], *rule_sets: HouseRules, **limits: Any) -> None:
        """:func:`put_tables` on this service, with its operator token."""
        put_tables(self.target, self.token, tables, table_config_message(*rule_sets, **limits))

    def stop(self) -> None:
        """SIGTERM, then the service must exit 0 within its grace period."""
        status = self.terminate()
        assert status == self.expected_status, (
            f"gnau serve exited {status} on SIGTERM:\n{self.output()}"
        )

    def terminate(self) -> int:
        """SIGTERM, and the exit status, which must come within docs/api.md's bound (the grace,
        the SERVICE_STOPPED entry's wait, and 5 s; the tests' processes have no notice). A caller
        that accepts another status sets :attr:`expected_status` to it (a benchmark notes it)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            # A process a test stopped (SIGSTOP) and left stopped, by failing before it resumed
            # it, must still be able to stop, or its test's own failure is lost behind this one.
            self.process.send_signal(signal.SIGCONT)
        try:
            return self.process.wait(timeout=GRACE_SECONDS + STOP_ENTRY_SECONDS + 5)
        except subprocess.TimeoutExpired:
            # faulthandler (PYTHONFAULTHANDLER, set at the start) writes every thread's stack
            # to the log on SIGABRT: the failure then shows where the stop hung.
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
            raise AssertionError(f"gnau serve did not stop in time:\n{self.output()}") from None


def table_config_message(*rule_sets: HouseRules, **limits: Any) -> dealer_pb2.TableConfig:
    """tests/catalogued.py's :func:`~tests.catalogued.table_config` (any stake and seat count
    the service allows, unless ``limits`` say otherwise; the default house rules unless
    ``rule_sets`` are given), as PutTable takes it."""
    return table_config_to_proto(table_config(*rule_sets, **limits))


def put_tables(
    target: str, token: str, tables: Iterable[str], config: dealer_pb2.TableConfig | None = None
) -> None:
    """Catalogue ``tables`` in the catalogue of ``token``'s operator on the running service at
    ``target`` (a round is dealt only at a catalogued table, issue 38), under ``config``
    (:func:`table_config_message` if none). PutTable is idempotent: a table already under
    ``config`` is left as it is, one under another configuration gets ``config``."""
    message = config or table_config_message()
    with GnauClient(target, token=token) as client:
        for table_id in tables:
            client.put_table(table_id, message)


def worker_pids(supervisor: int) -> list[int]:
    """The processes ``supervisor`` started (its workers), by process id."""
    path = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    try:
        return sorted(int(pid) for pid in path.read_text(encoding="ascii").split())
    except FileNotFoundError:
        return []


def gnau(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the ``gnau`` command in a subprocess and capture its output."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*GNAU_MODULE, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        **kwargs,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def served(
    data_dir: Path,
    *extra: str,
    preexec_fn: Callable[[], object] | None = None,
    program: Sequence[str] = GNAU_MODULE,
) -> Iterator[Served]:
    """``gnau serve`` on a free port with its data in ``data_dir``; stopped on exit.
    ``preexec_fn`` runs in the child before the service starts (to restrict the process).
    ``program`` is the ``gnau`` command run with ``serve`` and its options: a benchmark's
    script that changes the dealer before it runs gnau's main, say."""
    started = None
    for attempt in range(START_ATTEMPTS):
        log_path = data_dir.parent / f"{data_dir.name}-{attempt}.log"
        started = _start(data_dir, log_path, extra, preexec_fn, program)
        if started.process.poll() is None:
            break
    assert started is not None and started.process.poll() is None, (
        f"gnau serve exited before serving:\n{started.output() if started else ''}"
    )
    try:
        yield started
    finally:
        started.stop()


@dataclass
class ServedHttp:
    """A ``gnau serve`` with its page port (``--http-listen``) and its metrics port."""

    served: Served
    page: int
    metrics: int


@contextmanager
def served_with_http(
    data_dir: Path, *extra: str, preexec_fn: Callable[[], object] | None = None
) -> Iterator[ServedHttp]:
    """:func:`served`, with both HTTP ports on free ports of 127.0.0.1."""
    page, metrics = free_port(), free_port()
    with served(
        data_dir,
        "--http-listen", f"127.0.0.1:{page}", "--metrics-listen", f"127.0.0.1:{metrics}", *extra,
        preexec_fn=preexec_fn,
    ) as server:  # fmt: skip
        yield ServedHttp(server, page, metrics)


def _start(
    data_dir: Path,
    stderr_path: Path,
    extra: tuple[str, ...],
    preexec_fn: Callable[[], object] | None = None,
    program: Sequence[str] = GNAU_MODULE,
) -> Served:
    port = free_port()
    # Only the test's settings: no GNAU_* from the environment (a GNAU_DATABASE, say).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNAU_")}
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [
                *program, "serve",
                "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir),
                "--log-format", "json", "--grace-seconds", str(GRACE_SECONDS), *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**env, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
            cwd=REPO,
            preexec_fn=preexec_fn,  # noqa: PLW1509  (the child runs it before any thread starts)
        )  # fmt: skip
    served = Served(process, f"127.0.0.1:{port}", data_dir, stderr_path)

    def pump() -> None:
        assert process.stdout is not None
        served.stdout_lines.extend(process.stdout)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while not served.vkey:
        time.sleep(0.05)
        served.vkey = _serving_key(stderr_path)
        if process.poll() is not None:
            return served  # exited (a port race, say): the caller tries again
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"gnau serve did not start in time:\n{served.output()}")
    made = data_dir / "operator-token"  # a first start's (none with --tokens, or a second start)
    if made.exists():
        served.token = made.read_text(encoding="utf-8").strip()
    return served


def _serving_key(stderr_path: Path) -> str:
    """The log key in the JSON "serving" line, the last line of a start, once it is written
    (with ``--workers``, the supervisor's: each worker's own has a ``worker`` key)."""
    for line in stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"serving"' in line:
            event = json.loads(line)
            if event.get("event") == "serving" and "worker" not in event:
                return str(event["key"])
    return ""
