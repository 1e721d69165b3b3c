"""The sequencer's own process: on PostgreSQL, ``gnau serve --workers N`` runs the log's
sequencer in a process of its own beside the N workers, so that integrating the log never waits
for a worker's gRPC serving to let go of the GIL (docs/scaling.md, *Workers*).

It is a worker of the supervisor like the others (:class:`~gnau_service.server.process.workers.
WorkerRole` with ``sequencer`` set: restarted if it dies, killed if its heartbeat stops), but it
binds no port and serves no call: it opens the store, whose coordination takes part in the
log's election (:mod:`~gnau_service.store.sequencer`), and waits for SIGTERM. The supervisor
starts it before the workers, so it takes the lease first, and stops it after them, so that it
integrates their last steps. Nothing else changes for the log: every worker stays a candidate,
and takes the lease within :func:`~gnau_service.store.lease.takeover_bound` if this process is
killed or frozen, exactly as between replicas; the restarted sequencer process then waits as a
candidate until that worker stops leading.
"""

from __future__ import annotations

import asyncio
import signal

import structlog

from gnau_service.server.process.config import Settings
from gnau_service.server.process.first_start import open_service_store, open_signer
from gnau_service.server.process.workers import WorkerRole

log = structlog.get_logger("gnau.sequencing")


async def sequence(settings: Settings, role: WorkerRole) -> None:
    """Take part in the log's election and integrate it while leading, until SIGTERM; then
    integrate what is pending, if leading, and stop."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    # Ctrl-C reaches the whole process group: this process waits for the supervisor's SIGTERM,
    # which comes once the workers have drained, so that it integrates their last steps. And
    # the supervisor passes SIGHUP on to every worker (the token file): nothing to reread here.
    for ignored in (signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(ignored, lambda: None)
    signer = open_signer(settings)
    # Started before the workers, it is the first to open the database: it migrates it, if
    # asked, as any of them would.
    opening = asyncio.ensure_future(open_service_store(settings, signer))
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({opening, signalled}, return_when=asyncio.FIRST_COMPLETED)
    if not opening.done():
        opening.cancel()
        log.info("stopped before sequencing")
        return
    signalled.cancel()
    store = opening.result()
    try:
        log.info("sequencing", key=signer.vkey)
        heartbeat = role.say_ready()
        await stopping.wait()
        heartbeat.cancel()
        log.info("shutting down")
    finally:
        # Closing integrates what is pending while this process leads (ElectedSequencer.close).
        await asyncio.to_thread(store.close)
    log.info("stopped")
