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


class TableNotFound(DealerError):  # noqa: N818
    """The caller's operator has no table of this id in the catalogue
    (:mod:`~gnau_service.rounds.catalogue`); another operator's table of the same id is another
    table, and is not named."""

    def __init__(self, table_id: str) -> None:
        super().__init__(
            f"there is no table {quoted(table_id)} in your operator's catalogue (gnau table add)"
        )
        self.table_id = table_id


class TableDisabled(DealerError):  # noqa: N818
    """No new round: the table, its operator or all gaming (``what``) is disabled. Open rounds
    still complete."""

    def __init__(self, table_id: str, what: str) -> None:
        whose = {"table": "the table", "operator": "its operator", "gaming": "all gaming"}[what]
        super().__init__(f"table {quoted(table_id)} takes no new round: {whose} is disabled")
        self.table_id, self.what = table_id, what


class RulesNotApproved(DealerError):  # noqa: N818
    """The requested rule set is not one the table is approved for."""

    def __init__(self, table_id: str, approved: int) -> None:
        super().__init__(
            f"these house rules are not approved for table {quoted(table_id)}, which has"
            f" {approved} approved rule set(s) (gnau table list)"
        )
        self.table_id = table_id


class RtpOutsideBand(DealerError):  # noqa: N818
    """A table would approve a rule set whose exact return to player is outside its operator's
    band (or a band would leave an approved rule set outside it); nothing was changed."""

    def __init__(self, message: str, table_id: str) -> None:
        super().__init__(message)
        self.table_id = table_id


class CatalogueFull(DealerError):  # noqa: N818
    """The operator already has the most tables a catalogue holds."""

    def __init__(self, most: int) -> None:
        super().__init__(f"your operator already has {most} tables, the most a catalogue holds")
        self.most = most


class ReportBusy(DealerError):  # noqa: N818
    """A report is being computed in this process already: one at a time."""

    def __init__(self) -> None:
        super().__init__("this process is computing another report; retry in a while")


class ReportTooLarge(DealerError):  # noqa: N818
    """The report's text would exceed the most one answer holds."""

    def __init__(self, most: int) -> None:
        super().__init__(
            f"the report is over {most:,} bytes: narrow it by operator, table or dates"
        )
        self.most = most


class ReportPastDeadline(DealerError):  # noqa: N818
    """The caller's deadline passed while the report was computed: it was stopped."""

    def __init__(self) -> None:
        super().__init__("the report was not done by the call's deadline: give it a longer one")
