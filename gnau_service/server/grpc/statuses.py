"""Refusals as gRPC statuses with ``google.rpc`` details, so clients can act on them by field.

Every refusal carries an ``ErrorInfo`` (domain ``gnau.dealer``) whose ``reason`` a client can
switch on; bad fields are INVALID_ARGUMENT with a ``BadRequest`` naming each field; a round in
the wrong state or a busy table is FAILED_PRECONDITION with a ``PreconditionFailure``; too many
streams is RESOURCE_EXHAUSTED with a ``QuotaFailure``. Anything the service did not expect is
INTERNAL, saying only the request id to quote: never a Python message.

Every status is bounded (``rounds/limits.py``): the message, each field path and description,
each metadata value are cut with a marker, at most a fixed number of field violations are listed
and the message says how many more there were, so that a refusal's trailers stay under 4 KiB
whatever the request held. Messages never include a server seed, a token or a password.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Final

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from gnau_service.rounds.limits import (
    MAX_ERROR_MESSAGE_BYTES,
    MAX_FIELD_PATH_BYTES,
    MAX_FIELD_VIOLATIONS,
    MAX_VIOLATION_BYTES,
)
from gnau_service.rounds.refusals import (
    CatalogueFull,
    DealerError,
    InvalidRequest,
    ListingNotPublic,
    OutOfRange,
    ReportBusy,
    ReportPastDeadline,
    ReportTooLarge,
    RequestConflict,
    RoundNotFound,
    RtpOutsideBand,
    RulesNotApproved,
    TableBusy,
    TableDisabled,
    TableNotFound,
    WrongState,
)
from gnau_service.rules.errors import RulesError
from gnau_service.store import LogStalled, StoreUnavailable
from gnau_service.store.errors import ScrubIncomplete

DOMAIN: Final = "gnau.dealer"
#: An ErrorInfo metadata value, at most this many bytes.
MAX_METADATA_BYTES: Final = 128


class Reason(StrEnum):
    """Every ``ErrorInfo.reason`` the service sends: what a client switches on. Each is sent
    with one status code, :data:`REASON_CODES`; docs/integration.md tables both (a test holds
    the table to this enum)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    UNDECODABLE_REQUEST = "UNDECODABLE_REQUEST"
    ROUND_NOT_FOUND = "ROUND_NOT_FOUND"
    ROUND_STATE = "ROUND_STATE"
    TABLE_BUSY = "TABLE_BUSY"
    TABLE_NOT_FOUND = "TABLE_NOT_FOUND"
    TABLE_DISABLED = "TABLE_DISABLED"
    RULES_NOT_APPROVED = "RULES_NOT_APPROVED"
    RTP_OUTSIDE_BAND = "RTP_OUTSIDE_BAND"
    CATALOGUE_FULL = "CATALOGUE_FULL"
    REPORT_BUSY = "REPORT_BUSY"
    REPORT_TOO_LARGE = "REPORT_TOO_LARGE"
    REPORT_PAST_DEADLINE = "REPORT_PAST_DEADLINE"
    SOFTWARE_MANIFEST_NOT_CONFIGURED = "SOFTWARE_MANIFEST_NOT_CONFIGURED"
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    OPERATOR_SCOPE = "OPERATOR_SCOPE"
    LISTING_NOT_PUBLIC = "LISTING_NOT_PUBLIC"
    TOO_MANY_CALLS = "TOO_MANY_CALLS"
    TOO_MANY_STREAMS = "TOO_MANY_STREAMS"
    REQUEST_TOO_SLOW = "REQUEST_TOO_SLOW"
    STORAGE_UNAVAILABLE = "STORAGE_UNAVAILABLE"
    LOG_STALLED = "LOG_STALLED"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    INTERNAL = "INTERNAL"
    #: A refusal of a kind no other reason names: the fallback of :func:`status_of`.
    REFUSED = "REFUSED"


#: The status code each reason is sent with.
REASON_CODES: Final[Mapping[Reason, grpc.StatusCode]] = {
    Reason.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.UNDECODABLE_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    Reason.ROUND_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.ROUND_STATE: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.TABLE_BUSY: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.TABLE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Reason.TABLE_DISABLED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.RULES_NOT_APPROVED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.RTP_OUTSIDE_BAND: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.CATALOGUE_FULL: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.REPORT_BUSY: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.REPORT_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.REPORT_PAST_DEADLINE: grpc.StatusCode.DEADLINE_EXCEEDED,
    Reason.SOFTWARE_MANIFEST_NOT_CONFIGURED: grpc.StatusCode.FAILED_PRECONDITION,
    Reason.REQUEST_ID_REUSED: grpc.StatusCode.ALREADY_EXISTS,
    Reason.OUT_OF_RANGE: grpc.StatusCode.OUT_OF_RANGE,
    Reason.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Reason.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Reason.OPERATOR_SCOPE: grpc.StatusCode.PERMISSION_DENIED,
    Reason.LISTING_NOT_PUBLIC: grpc.StatusCode.PERMISSION_DENIED,
    Reason.TOO_MANY_CALLS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.TOO_MANY_STREAMS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Reason.REQUEST_TOO_SLOW: grpc.StatusCode.DEADLINE_EXCEEDED,
    Reason.STORAGE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Reason.LOG_STALLED: grpc.StatusCode.UNAVAILABLE,
    Reason.SHUTTING_DOWN: grpc.StatusCode.UNAVAILABLE,
    Reason.INTERNAL: grpc.StatusCode.INTERNAL,
    Reason.REFUSED: grpc.StatusCode.FAILED_PRECONDITION,
}


# -- refusals made at the edge, before or around the servicers --------------------------------


class EdgeRefusal(Exception):  # noqa: N818  (a refusal, not an error of the service)
    """A call refused by the service's edge: its ErrorInfo reason (which gives its status
    code) and message."""

    reason: Reason = Reason.REFUSED

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.metadata = metadata

    @property
    def code(self) -> grpc.StatusCode:
        return REASON_CODES[self.reason]


class Undecodable(EdgeRefusal):
    reason = Reason.UNDECODABLE_REQUEST

    def __init__(self) -> None:
        super().__init__("the request could not be decoded")


class Unauthenticated(EdgeRefusal):
    reason = Reason.UNAUTHENTICATED

    def __init__(self) -> None:
        super().__init__("the authorization header must be 'Bearer <token>' with a known token")


class PermissionDenied(EdgeRefusal):
    reason = Reason.PERMISSION_DENIED

    def __init__(self, role: str, method: str) -> None:
        super().__init__(f"the {role} role may not call {method}", role=role)


class OperatorScope(EdgeRefusal):
    """A call that reaches beyond the caller's one operator (:mod:`gnau_service.audit.operators`):
    the whole audit log, which holds every operator's rounds, or rounds of another operator
    named outright. A round of another operator named by its id is not refused so: it is not
    found, as a round that does not exist."""

    reason = Reason.OPERATOR_SCOPE

    def __init__(self, message: str, operator: str) -> None:
        super().__init__(message, operator=operator)


class ShuttingDown(EdgeRefusal):
    reason = Reason.SHUTTING_DOWN

    def __init__(self) -> None:
        super().__init__("the server is shutting down; retry (another replica will answer)")


class OverShare(EdgeRefusal):
    """A call over a share (:mod:`~gnau_service.server.grpc.shares`): ``scope`` says whose (a
    caller's, or the server's)."""

    #: What the share counts, and what the client may do about it.
    what: str = "calls in flight"
    then: str = "wait for one to end"

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(
            f"{scope} already has {limit} {self.what}, the most allowed; {self.then}",
            limit=str(limit),
        )
        self.scope = scope


class TooManyCalls(OverShare):
    reason = Reason.TOO_MANY_CALLS


class TooManyStreams(OverShare):
    reason = Reason.TOO_MANY_STREAMS
    what = "streams open"
    then = "close one first"


class SoftwareManifestNotConfigured(EdgeRefusal):
    """VerifySoftware of a service started without a software manifest (docs/software.md)."""

    reason = Reason.SOFTWARE_MANIFEST_NOT_CONFIGURED

    def __init__(self) -> None:
        super().__init__(
            "the service has no software manifest to verify against: start it with "
            "--software-manifest and --release-key",
            setting="software_manifest",
        )


class RequestTooSlow(EdgeRefusal):
    """A call whose request message did not arrive in time after its headers."""

    reason = Reason.REQUEST_TOO_SLOW

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request message did not arrive within {seconds:g} s")


# -- statuses --------------------------------------------------------------------------------------


def status_of(error: DealerError | RulesError | StoreUnavailable | EdgeRefusal) -> grpc.Status:
    """The status (with details) that reports ``error`` to the client."""
    if isinstance(error, InvalidRequest):
        return bad_request(error.violations)
    if isinstance(error, RulesError):
        field = getattr(error, "key", None) or getattr(error, "field", None) or "cards"
        return bad_request([(str(field), str(error))])
    if isinstance(error, WrongState):
        return _precondition(
            Reason.ROUND_STATE, error.round_id, str(error), {"state": str(error.state)}
        )
    if isinstance(error, TableBusy):
        return _precondition(
            Reason.TABLE_BUSY,
            error.table_id,
            str(error),
            {"round_id": error.round_id, "state": error.state},
        )
    if isinstance(error, TableNotFound):
        return _status(Reason.TABLE_NOT_FOUND, str(error))
    if isinstance(error, TableDisabled):
        return _precondition(
            Reason.TABLE_DISABLED, error.table_id, str(error), {"disabled": error.what}
        )
    if isinstance(error, RulesNotApproved):
        return _precondition(Reason.RULES_NOT_APPROVED, error.table_id, str(error), {})
    if isinstance(error, RtpOutsideBand):
        return _precondition(Reason.RTP_OUTSIDE_BAND, error.table_id, str(error), {})
    if isinstance(error, ReportBusy):
        return _status(Reason.REPORT_BUSY, str(error))
    if isinstance(error, ReportTooLarge):
        return _status(Reason.REPORT_TOO_LARGE, str(error), None, {"limit": str(error.most)})
    if isinstance(error, ReportPastDeadline):
        return _status(Reason.REPORT_PAST_DEADLINE, str(error))
    if isinstance(error, CatalogueFull):
        return _status(Reason.CATALOGUE_FULL, str(error), None, {"limit": str(error.most)})
    if isinstance(error, RoundNotFound):
        return _status(Reason.ROUND_NOT_FOUND, str(error))
    if isinstance(error, OutOfRange):
        return _status(Reason.OUT_OF_RANGE, str(error))
    if isinstance(error, ListingNotPublic):
        return _status(
            Reason.LISTING_NOT_PUBLIC, str(error), None, {"setting": "public_round_listing"}
        )
    if isinstance(error, RequestConflict):
        return _status(Reason.REQUEST_ID_REUSED, str(error))
    if isinstance(error, LogStalled):
        return _status(
            Reason.LOG_STALLED,
            "the change is committed, but the log's sequencer has not integrated it in time;"
            " retry with the same request_id"
            if error.ran
            else "the log's sequencer is not integrating, so the change was not run;"
            " retry with the same request_id",
        )
    if isinstance(error, ScrubIncomplete):
        return _status(
            Reason.STORAGE_UNAVAILABLE,
            "the player is forgotten, but a read kept old copies of their rows in the database's"
            " files; retry with the same request_id to finish the erasure",
        )
    if isinstance(error, StoreUnavailable):
        # The cause stays in the server's log (once per episode): it may name paths or hosts.
        return _status(
            Reason.STORAGE_UNAVAILABLE,
            "the store cannot be used right now; retry with the same request_id",
        )
    if isinstance(error, OverShare):
        quota = error_details_pb2.QuotaFailure(
            violations=[
                error_details_pb2.QuotaFailure.Violation(
                    subject=_clip(error.scope, MAX_FIELD_PATH_BYTES),
                    description=_clip(str(error), MAX_VIOLATION_BYTES),
                )
            ]
        )
        return _status(error.reason, str(error), quota, error.metadata)
    if isinstance(error, EdgeRefusal):
        return _status(error.reason, str(error), None, error.metadata)
    return _status(Reason.REFUSED, str(error))


def internal_error(request_id: str) -> grpc.Status:
    """What a client learns of a fault inside the service: only the request id to quote."""
    return _status(
        Reason.INTERNAL,
        f"internal error; quote request id {request_id}",
        metadata={"request_id": request_id},
    )


def bad_request(violations: Sequence[tuple[str, str]]) -> grpc.Status:
    """INVALID_ARGUMENT naming each bad field, the first MAX_FIELD_VIOLATIONS of them."""
    shown = [
        (_clip(path, MAX_FIELD_PATH_BYTES), _clip(problem, MAX_VIOLATION_BYTES))
        for path, problem in violations[:MAX_FIELD_VIOLATIONS]
    ]
    # The message names the first violation and counts the rest, so the count is never cut.
    others = len(violations) - 1
    suffix = f" (and {others} more)" if others else ""
    path, problem = shown[0] if shown else ("request", "is invalid")
    message = _clip(f"{path}: {problem}", MAX_ERROR_MESSAGE_BYTES - len(suffix)) + suffix
    more = len(violations) - len(shown)
    detail = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=path, description=problem)
            for path, problem in shown
        ]
    )
    metadata = {"more_violations": str(more)} if more else None
    return _status(Reason.INVALID_ARGUMENT, message, detail, metadata)


def reason_of(status: grpc.Status) -> str:
    """The ErrorInfo ``reason`` of a status made here (``""`` if it has none): what a refusal
    is counted under.

    >>> reason_of(internal_error("r-1"))
    'INTERNAL'
    """
    for key, value in status.trailing_metadata:
        if key == _DETAILS_KEY and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return str(info.reason)
    return ""


_DETAILS_KEY: Final = "grpc-status-details-bin"


def _precondition(
    kind: Reason, subject: str, message: str, metadata: dict[str, str]
) -> grpc.Status:
    violation = error_details_pb2.PreconditionFailure.Violation(
        type=kind,
        subject=_clip(subject, MAX_FIELD_PATH_BYTES * 2),
        description=_clip(message, MAX_VIOLATION_BYTES),
    )
    return _status(
        kind, message, error_details_pb2.PreconditionFailure(violations=[violation]), metadata
    )


def _status(
    reason: Reason,
    message: str,
    detail: Message | None = None,
    metadata: Mapping[str, str] | None = None,
) -> grpc.Status:
    details = []
    if detail is not None:
        packed = any_pb2.Any()
        packed.Pack(detail)
        details.append(packed)
    info = any_pb2.Any()
    info.Pack(
        error_details_pb2.ErrorInfo(
            reason=str(reason),
            domain=DOMAIN,
            metadata={
                key: _clip(value, MAX_METADATA_BYTES) for key, value in (metadata or {}).items()
            },
        )
    )
    details.append(info)
    return rpc_status.to_status(
        status_pb2.Status(
            code=REASON_CODES[reason].value[0],
            message=_clip(message, MAX_ERROR_MESSAGE_BYTES),
            details=details,
        )
    )


def _clip(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 form fits ``max_bytes``, else its longest fitting prefix (whole
    characters) with a marker saying how many bytes were cut.

    >>> _clip("abc", 3), _clip("abcdefghijklmnopqrstuvwxyz" * 4, 20)
    ('abc', 'abcde…(+99 bytes)')
    """
    # A lone surrogate has no UTF-8 form and would fail the status's serialisation: replace it.
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    marker_bytes = len(f"…(+{len(data)} bytes)".encode())
    kept = data[: max(max_bytes - marker_bytes, 0)].decode("utf-8", "ignore")
    return f"{kept}…(+{len(data) - len(kept.encode())} bytes)"
