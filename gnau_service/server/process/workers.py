"""A worker of ``gnau serve --workers N``: what its supervisor
(:mod:`~gnau_service.server.process.supervisor`) tells it, and what it tells its supervisor.

The supervisor starts each worker as ``gnau serve`` with the supervisor's own flags, and one
more environment variable, :data:`WORKER_ENVIRONMENT`: a JSON :class:`WorkerRole` that names
the worker's slot, the addresses every worker listens on (with ``SO_REUSEPORT``: the supervisor
has already resolved a port 0 to one port for all), the directory where workers leave their
metrics sockets, and the descriptor on which the worker says it serves. A worker:

- dies with its supervisor: the kernel sends it SIGTERM if the supervisor dies, even by SIGKILL
  (``PR_SET_PDEATHSIG``), and its graceful shutdown follows, so no worker outlives the process
  that would restart it;
- stamps every log line with ``"worker": K``, and every metric with ``worker="K"``
  (:mod:`~gnau_service.server.process.worker_metrics`);
- writes one line to its ready descriptor once it serves, then a heartbeat every
  :data:`HEARTBEAT_SECONDS` from its event loop, by which the supervisor finds a worker that has
  stopped (frozen, or its loop blocked) and replaces it.

On PostgreSQL one more process is started the same way with ``sequencer`` set: it serves no
port and only sequences the log (:mod:`~gnau_service.server.process.sequencing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import os
import signal
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

#: The environment variable that makes ``gnau serve`` a worker: its :class:`WorkerRole`.
WORKER_ENVIRONMENT: Final = "GNAU_WORKER"
#: The most workers one supervisor runs.
MAX_WORKERS: Final = 64
#: ``--workers auto``: one worker per usable core.
AUTO: Final = "auto"

#: How often a serving worker tells its supervisor it is alive (seconds).
HEARTBEAT_SECONDS: Final = 1.0

_PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class WorkerRole:
    """What a supervisor tells one worker (see the module's text)."""

    index: int  # the worker's slot, 0 to count - 1
    count: int
    restarts: int  # how many times this slot's worker was started again
    supervisor: int  # the supervisor's pid
    listen: str
    http_listen: str
    metrics_listen: str
    run_dir: str  # where the workers' metrics sockets are (0700, the supervisor's)
    ready_fd: int
    sequencer: bool = False  # the log's own sequencer process: it serves no port

    def to_environment(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> WorkerRole | None:
        """The role in ``environ``, or None: ``gnau serve`` is not a worker."""
        text = environ.get(WORKER_ENVIRONMENT)
        return None if text is None else cls(**json.loads(text))

    def metrics_socket(self, index: int | None = None) -> Path:
        """The Unix socket on which worker ``index`` (this one by default) serves its own
        metrics."""
        return Path(self.run_dir) / f"worker-{self.index if index is None else index}.sock"

    def follow_supervisor(self) -> None:
        """Get SIGTERM when the supervisor dies; if it already has, stop now (SIGTERM)."""
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != self.supervisor:
            os.kill(os.getpid(), signal.SIGTERM)

    def say_ready(self) -> asyncio.Task[None]:
        """Tell the supervisor this worker serves, then keep telling it that it is alive (the
        task, until cancelled)."""
        # Never blocking: a full pipe (a stopped supervisor) loses beats, not the loop.
        with contextlib.suppress(OSError):
            os.set_blocking(self.ready_fd, False)
        self._say(b"serving\n")
        return asyncio.get_running_loop().create_task(self._beat(), name="gnau-worker-heartbeat")

    async def _beat(self) -> None:
        try:
            while True:
                await asyncio.sleep(HEARTBEAT_SECONDS)
                self._say(b".")
        finally:
            with contextlib.suppress(OSError):
                os.close(self.ready_fd)

    def _say(self, what: bytes) -> None:
        # A supervisor gone: the parent-death signal follows.
        with contextlib.suppress(OSError):
            os.write(self.ready_fd, what)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's cpuset), lowered to a
    cgroup v2 CPU quota (``docker run --cpus``, a Kubernetes CPU limit) rounded up; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except OSError:  # a system call filter that refuses it
        cores = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    return max(1, cores)
