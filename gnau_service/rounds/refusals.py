"""The requests the dealer refuses, each naming what is wrong; nothing was changed or logged.

:mod:`~gnau_service.server.grpc.statuses` turns each into its gRPC status (and the HTTP port into
its JSON refusal); the interceptor does so for every call.
"""

from __future__ import annotations

from collections.abc import Sequence

from gnau_service.common.quoting import quoted
from gnau_service.rounds.record import RoundState


class DealerError(Exception):
    """A request the dealer refuses; nothing was changed or logged."""


class RoundNotFound(DealerError):  # noqa: N818
    """No round has the id, or (to the ``public``) its seed is not public yet. To the public
    the message is the same either way and never holds the id, so a refusal tells a prober
    nothing and echoes nothing; to a client with a token it names the id (bounded)."""

    def __init__(self, round_id: str, *, public: bool = False) -> None:
        super().__init__(
            "there is no round with this id" if public else f"there is no round {quoted(round_id)}"
        )
        self.round_id = round_id


class ListingNotPublic(DealerError):  # noqa: N818
    """The public role asked to list rounds while ``public_round_listing`` is off."""

    def __init__(self) -> None:
        super().__init__(
            "listing rounds is not public on this service (public_round_listing is off): "
            "fetch a round by its id"
        )


class WrongState(DealerError):  # noqa: N818
    def __init__(self, round_id: str, state: RoundState, operation: str) -> None:
        super().__init__(f"round {round_id} is {state}; {operation} is not allowed in that state")
        self.round_id, self.state, self.operation = round_id, state, operation


class TableBusy(DealerError):  # noqa: N818
    def __init__(self, table_id: str, round_id: str, state: str) -> None:
        super().__init__(
            f"table {quoted(table_id)} already has an unfinished round {round_id} ({state}); "
            "settle or void it first"
        )
        self.table_id, self.round_id, self.state = table_id, round_id, state


class RequestConflict(DealerError):  # noqa: N818
    def __init__(self, request_id: str, operation: str) -> None:
        super().__init__(
            f"request id {quoted(request_id)} was already used by another request ({operation}); "
            "a retry must repeat the same request exactly"
        )
        self.request_id = request_id


class OutOfRange(DealerError):  # noqa: N818
    """An index or size beyond the log."""


class InvalidRequest(DealerError):  # noqa: N818
    """Bad fields; ``violations`` pairs each field path with what is wrong with it."""

    def __init__(self, violations: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {problem}" for path, problem in violations))
        self.violations = tuple(violations)
