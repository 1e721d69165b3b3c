"""What the store raises: a failure, a retryable one, a database not answering, and a process
without the log's key."""

from __future__ import annotations


class StoreError(RuntimeError):
    """The store could not do what was asked (a database failure, or a store already closed)."""


class StoreUnavailable(StoreError):  # noqa: N818  (a condition a caller retries)
    """The database cannot be used right now (unreachable, read-only, full, or the store is
    closed): nothing was done, and the same call may succeed later. The message names the cause,
    for the operator's log; it may hold paths or host names, so it is not for clients."""


class DatabaseUnreachable(StoreUnavailable):
    """No connection to the database could be made (nothing listens yet, it is starting up, or
    it refused the connection): nothing was read or written. The message is the driver's first
    line, which names the server, never the password."""


class LogStalled(StoreUnavailable):
    """The log did not integrate a call's change in time (see :mod:`~gnau_service.store.waiting`):
    ``why`` says how long. If its unit ``ran``, the change is committed and will be integrated
    once a sequencer runs again, so a retry of the same request gets its answer then; if not, it
    was withdrawn before it ran, and a retry runs it."""

    def __init__(self, why: str, *, ran: bool = True) -> None:
        outcome = (
            "it is committed, and a retry of the same request gets its answer"
            if ran
            else "it was not run, and a retry of the same request runs it"
        )
        super().__init__(f"{why}; {outcome}")
        self.ran = ran


class ScrubIncomplete(StoreUnavailable):
    """Rows deleted to erase them (a forgotten player) are gone from every answer, but the
    database's files still hold older copies of them that the store could not drop now (a
    reader kept them): the erasure is committed, and a retry of the same request scrubs again."""


class KeyNotCurrent(StoreUnavailable):
    """This process's log key is not the log's current key (another process rotated it, or the
    key file holds a wrong key): it signs nothing until it has the current key. Both keys are
    named by their public verifier keys."""

    def __init__(self, held: str, current: str) -> None:
        super().__init__(
            f"the log's current key is {current}, but this process holds {held}: it writes "
            "nothing until its key file holds the current key (see docs/operations.md)"
        )
        self.held = held
        self.current = current
