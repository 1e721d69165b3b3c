"""The supervisor of ``gnau serve --workers N``: N worker processes on the same ports and the
same database, each restarted if it dies, all drained together.

The protocol, in order:

1. **Ports.** The supervisor resolves each address (``--listen``, and ``--http-listen`` and
   ``--metrics-listen`` when set) to one port, refusing a port another process holds, as a
   single ``gnau serve`` would. It then holds the port with a bound, never listening, socket
   with ``SO_REUSEPORT``: no other user's process can take it, and a port 0 becomes one port
   for every worker. Only listening sockets take connections, so the supervisor takes none.
2. **First-start files.** It makes the data directory, the log key and the token file (showing
   a new operator token once, as a single process would), so that workers never race to.
3. **Workers.** It starts each worker (:mod:`~gnau_service.server.process.workers`): ``gnau serve``
   with the same flags, environment and ``--config``, plus its role. The workers bind the ports with
   ``SO_REUSEPORT``, so the kernel spreads new connections over those listening, and open the
   database themselves (on PostgreSQL each is a replica; on SQLite each step transaction takes
   the file's write lock and integrates its own events: docs/scaling.md). On PostgreSQL it first
   starts the log's sequencer in a process of its own, a worker that serves no port
   (:mod:`~gnau_service.server.process.sequencing`), and the workers once it runs; it is
   supervised like them, and stopped after them.
4. **Serving.** Once every worker has said it serves, the supervisor logs ``serving`` with
   ``workers``. A worker that dies before the first ``serving`` is a failed start: the others
   are stopped and the supervisor exits 2. Later, a worker that dies (killed, crashed) is
   started again after :data:`RESTART_SECONDS` (its first pause, doubled after each death of
   that slot up to the last); a worker that served :data:`STABLE_SECONDS` resets its slot's
   pause.
   Each serving worker sends a heartbeat every second from its event loop; one silent for
   :data:`WATCHDOG_SECONDS` (frozen by SIGSTOP, its loop blocked, its host swapping) is killed
   and so replaced: on SQLite a frozen worker may hold the write lock, and every other worker
   would wait for it for good.
5. **Signals.** SIGHUP is passed on to every worker (each rereads the token file). SIGTERM or
   SIGINT starts the drain: every worker gets SIGTERM and shuts down in the documented order
   (docs/api.md, "Shutdown"), all at once; a worker still running after its grace, notice and
   exit bounds plus :data:`STOP_MARGIN_SECONDS` is killed. Then the supervisor exits 0.
6. **The supervisor's own death.** Each worker asks the kernel for SIGTERM when its parent
   dies, so a supervisor killed with SIGKILL leaves no worker running unsupervised: each drains
   as in 5. Nothing is lost either way: a change is acknowledged only once durable in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import structlog

from gnau_service.edge.addresses import split_host_port
from gnau_service.edge.shutdown import EXIT_SECONDS
from gnau_service.server.process.config import Settings, cannot_listen
from gnau_service.server.process.first_start import open_credentials, open_signer
from gnau_service.server.process.workers import WORKER_ENVIRONMENT, WorkerRole
from gnau_service.store import sqlite_path

#: A dead worker's slot waits this long before its worker is started again: the first pause,
#: doubled after each death of that slot, up to the last.
RESTART_SECONDS: Final = (0.5, 30.0)
#: A worker that has served this long resets its slot's pause to the first.
STABLE_SECONDS: Final = 60.0
#: A serving worker whose heartbeat has not come for this long is killed (then started again).
WATCHDOG_SECONDS: Final = 10.0
#: How much longer than a worker's own shutdown bounds the drain waits before SIGKILL.
STOP_MARGIN_SECONDS: Final = 5.0

log = structlog.get_logger("gnau.supervisor")


@dataclass(frozen=True)
class Started:
    """A supervisor whose workers all serve: what the command line announces."""

    settings: Settings
    workers: int
    port: int
    http_port: int | None
    metrics_port: int | None
    vkey: str
    new_operator_token: str | None


@dataclass
class _Slot:
    index: int
    sequencer: bool = False
    restarts: int = 0
    pause: float = RESTART_SECONDS[0]
    process: asyncio.subprocess.Process | None = None
    serving_since: float | None = None
    heard: float = 0.0  # time.monotonic() of its last heartbeat
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    #: Set once its first worker says it serves (and never cleared).
    served: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


class Supervisor:
    """Runs ``workers`` processes of ``gnau serve`` (see the module's text)."""

    def __init__(self, settings: Settings, worker_arguments: Sequence[str]) -> None:
        self.settings = settings
        self._arguments = list(worker_arguments)
        self._slots = [_Slot(index) for index in range(settings.workers)]
        #: On PostgreSQL, the log's sequencer in a process of its own (see the module's text):
        #: its one slot, else none.
        self._sequencer = (
            [_Slot(settings.workers, sequencer=True)]
            if sqlite_path(settings.database_url) is None
            else []
        )
        self._stopping = asyncio.Event()
        self._failed: asyncio.Future[str] | None = None
        self._all_serving = asyncio.Event()
        self._reserved: list[socket.socket] = []
        #: What every worker is told; each gets its own slot, restarts and descriptor.
        self._role: WorkerRole | None = None

    async def run(self, on_started: Callable[[Started], None]) -> int:
        """Serve until SIGTERM or SIGINT; the exit status (0, or 2 if the workers failed to
        start)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self._forward, signal.SIGHUP)
        self._failed = loop.create_future()
        settings = self.settings
        run_dir = tempfile.mkdtemp(prefix="gnau-workers-")
        watchdog: asyncio.Task[None] | None = None
        try:
            addresses = {
                name: self._reserve(name) for name in ("listen", "http_listen", "metrics_listen")
            }
            settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            signer = open_signer(settings)
            _, new_token, _ = open_credentials(settings)
            self._role = WorkerRole(
                index=0,
                count=len(self._slots),
                restarts=0,
                supervisor=os.getpid(),
                listen=addresses["listen"],
                http_listen=addresses["http_listen"],
                metrics_listen=addresses["metrics_listen"],
                run_dir=run_dir,
                ready_fd=-1,
            )
            watchdog = asyncio.create_task(self._watch_heartbeats(), name="gnau-watchdog")
            outcome = await self._start_sequencer()
            if outcome is None:
                for slot in self._slots:
                    slot.task = asyncio.create_task(self._keep_running(slot))
                outcome = await _first(
                    self._all_serving.wait(), self._stopping.wait(), self._failed
                )
            if outcome is self._failed:
                log.error("cannot start", error=self._failed.result())
                return 2
            if not self._stopping.is_set():
                ports = {name: _port(address) for name, address in addresses.items()}
                log.info(
                    "serving",
                    workers=len(self._slots),
                    pids=[slot.process.pid for slot in self._slots if slot.process],
                    sequencer=next(
                        (slot.process.pid for slot in self._sequencer if slot.process), None
                    ),
                    port=ports["listen"],
                    http_port=ports["http_listen"],
                    metrics_port=ports["metrics_listen"],
                    key=signer.vkey,
                    origin=signer.origin,
                )
                on_started(
                    Started(
                        settings,
                        len(self._slots),
                        ports["listen"] or 0,
                        ports["http_listen"],
                        ports["metrics_listen"],
                        signer.vkey,
                        new_token,
                    )
                )
                await _first(self._stopping.wait(), self._failed)
            log.info("shutting down", workers=len(self._slots))
            return 0
        finally:
            self._stopping.set()
            if watchdog is not None:
                watchdog.cancel()
            await self._drain()
            for reserved in self._reserved:
                reserved.close()
            shutil.rmtree(run_dir, ignore_errors=True)
            log.info("stopped")

    async def _start_sequencer(self) -> object:
        """Start the sequencer's process, if any, and wait until it runs: None then (or with
        none to start), else what ended the wait (the drain, or a failed start)."""
        if not self._sequencer:
            return None
        (slot,) = self._sequencer
        slot.task = asyncio.create_task(self._keep_running(slot))
        assert self._failed is not None
        outcome = await _first(slot.served.wait(), self._stopping.wait(), self._failed)
        return None if slot.served.is_set() else outcome

    # -- ports ------------------------------------------------------------------------------

    def _reserve(self, setting: str) -> str:
        """The address of the listening ``setting`` (its name) with its port resolved, held for
        the workers (see the module's text); empty if it is not set."""
        address: str = getattr(self.settings, setting)
        if not address:
            return ""
        host, port = split_host_port(address)
        try:
            family, kind, protocol, _, where = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            # Without SO_REUSEPORT first: a port any other process holds is refused here.
            with socket.socket(family, kind, protocol) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(where)
                bound = probe.getsockname()[1]
            holder = socket.socket(family, kind, protocol)
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            holder.bind((where[0], bound, *where[2:]))
        except OSError as error:
            raise cannot_listen(setting, address, error.errno or 0, str(error.strerror)) from None
        self._reserved.append(holder)
        return f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"

    # -- workers ----------------------------------------------------------------------------

    async def _keep_running(self, slot: _Slot) -> None:
        """Run ``slot``'s worker, and start it again after it dies, until the drain."""
        while not self._stopping.is_set():
            status = await self._run_worker(slot)
            if self._stopping.is_set():
                return
            if not slot.served.is_set() and not self._all_serving.is_set():
                assert self._failed is not None
                if not self._failed.done():
                    self._failed.set_result(
                        f"{_name(slot)} exited ({_status(status)}) before serving; "
                        "its log lines say why"
                    )
                return
            if slot.serving_since is not None and (
                time.monotonic() - slot.serving_since >= STABLE_SECONDS
            ):
                slot.pause = RESTART_SECONDS[0]
            log.warning(
                "worker exited; starting it again",
                worker=slot.index,
                sequencer=slot.sequencer,
                status=_status(status),
                after_seconds=slot.pause,
                restarts=slot.restarts + 1,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), slot.pause)
            slot.pause = min(2 * slot.pause, RESTART_SECONDS[1])
            slot.restarts += 1

    async def _run_worker(self, slot: _Slot) -> int:
        """Start ``slot``'s worker and wait for it to exit; its exit status."""
        loop = asyncio.get_running_loop()
        ready_read, ready_write = os.pipe()
        assert self._role is not None
        role = replace(
            self._role,
            index=slot.index,
            restarts=slot.restarts,
            ready_fd=ready_write,
            sequencer=slot.sequencer,
        )
        slot.serving_since = None
        try:
            slot.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "gnau_service.cli.main",
                *self._arguments,
                stdin=asyncio.subprocess.DEVNULL,
                env={**os.environ, WORKER_ENVIRONMENT: role.to_environment()},
                pass_fds=(ready_write,),
            )
        finally:
            os.close(ready_write)

        def readable() -> None:
            try:
                said = os.read(ready_read, 4096)
            except OSError:
                said = b""
            if not said:  # the worker has exited
                loop.remove_reader(ready_read)
                return
            slot.heard = time.monotonic()
            if said.startswith(b"serving"):
                slot.serving_since = slot.heard
                slot.served.set()
                if all(s.served.is_set() for s in self._slots):
                    self._all_serving.set()

        loop.add_reader(ready_read, readable)
        try:
            return await slot.process.wait()
        finally:
            loop.remove_reader(ready_read)
            os.close(ready_read)

    async def _watch_heartbeats(self) -> None:
        """Kill a serving worker whose heartbeat stopped (see the module's text)."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for slot in self._every_slot():
                process = slot.process
                if (
                    process is not None
                    and process.returncode is None
                    and slot.serving_since is not None
                    and now - slot.heard > WATCHDOG_SECONDS
                ):
                    log.warning(
                        "worker stopped answering; killing it",
                        worker=slot.index,
                        sequencer=slot.sequencer,
                        silent_seconds=round(now - slot.heard, 1),
                    )
                    slot.serving_since = None  # killed once
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()

    def _every_slot(self) -> list[_Slot]:
        return [*self._slots, *self._sequencer]

    def _forward(self, signum: int, slots: Sequence[_Slot] | None = None) -> None:
        for slot in self._every_slot() if slots is None else slots:
            if slot.process is not None and slot.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    slot.process.send_signal(signum)

    async def _drain(self) -> None:
        """SIGTERM to every worker, then wait for all within their bounds (then SIGKILL); then
        the same for the sequencer's process, which integrates their last steps."""
        settings = self.settings
        bound = (
            settings.grace_seconds
            + settings.shutdown_notice_seconds
            + EXIT_SECONDS
            + STOP_MARGIN_SECONDS
        )
        for slots in (self._slots, self._sequencer):
            self._forward(signal.SIGTERM, slots)
            tasks = [slot.task for slot in slots if slot.task is not None]
            if not tasks:
                continue
            _, running = await asyncio.wait(tasks, timeout=bound)
            if running:
                log.warning("workers overran their shutdown; killing them", workers=len(running))
                self._forward(signal.SIGKILL, slots)
                await asyncio.wait(running)


async def _first(*waits: Awaitable[object]) -> Awaitable[object]:
    """Wait for the first of ``waits`` (coroutines or futures) to finish; the one that did. The
    others are cancelled, except futures, which are the caller's."""
    tasks: dict[asyncio.Future[object], Awaitable[object]] = {
        asyncio.ensure_future(wait): wait for wait in waits
    }
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        if not isinstance(tasks[task], asyncio.Future):
            task.cancel()
    return tasks[next(iter(done))]


def _name(slot: _Slot) -> str:
    return "the sequencer's process" if slot.sequencer else f"worker {slot.index}"


def _port(address: str) -> int | None:
    return split_host_port(address)[1] if address else None


def _status(status: int) -> str:
    """A worker's exit status in words.

    >>> _status(0), _status(2), _status(-9)
    ('exit code 0', 'exit code 2', 'killed by SIGKILL')
    """
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit code {status}"
