"""Refusals as gRPC statuses with ``google.rpc`` details, so clients can act on them by field.

Bad fields are INVALID_ARGUMENT with a ``BadRequest`` naming each field; a round in the wrong
state or a busy table is FAILED_PRECONDITION with a ``PreconditionFailure``; an unknown round is
NOT_FOUND; a reused request id is ALREADY_EXISTS. Each also carries an ``ErrorInfo`` reason.
Messages name the problem and never include a server seed (none is in any error).
"""

from __future__ import annotations

from typing import Final

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from gnau_service.rules.errors import RulesError
from gnau_service.server.rounds import (
    DealerError,
    InvalidRequest,
    OutOfRange,
    RequestConflict,
    RoundNotFound,
    TableBusy,
    WrongState,
)

DOMAIN: Final = "gnau.dealer"


def status_of(error: DealerError | RulesError) -> grpc.Status:
    """The status (with details) that reports ``error`` to the client."""
    if isinstance(error, InvalidRequest):
        return _status(
            code_pb2.INVALID_ARGUMENT,
            str(error),
            "INVALID_ARGUMENT",
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=path, description=problem)
                    for path, problem in error.violations
                ]
            ),
        )
    if isinstance(error, RulesError):
        field = getattr(error, "key", None) or getattr(error, "field", None) or "cards"
        return _status(
            code_pb2.INVALID_ARGUMENT,
            str(error),
            "INVALID_ARGUMENT",
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=field, description=str(error))
                ]
            ),
        )
    if isinstance(error, WrongState):
        return _precondition("ROUND_STATE", error.round_id, str(error), {"state": str(error.state)})
    if isinstance(error, TableBusy):
        return _precondition(
            "TABLE_BUSY",
            error.table_id,
            str(error),
            {"round_id": error.round_id, "state": error.state},
        )
    if isinstance(error, RoundNotFound):
        return _status(code_pb2.NOT_FOUND, str(error), "ROUND_NOT_FOUND")
    if isinstance(error, OutOfRange):
        return _status(code_pb2.OUT_OF_RANGE, str(error), "OUT_OF_RANGE")
    if isinstance(error, RequestConflict):
        return _status(code_pb2.ALREADY_EXISTS, str(error), "REQUEST_ID_REUSED")
    return _status(code_pb2.FAILED_PRECONDITION, str(error), "REFUSED")


def _precondition(kind: str, subject: str, message: str, metadata: dict[str, str]) -> grpc.Status:
    violation = error_details_pb2.PreconditionFailure.Violation(
        type=kind, subject=subject, description=message
    )
    return _status(
        code_pb2.FAILED_PRECONDITION,
        message,
        kind,
        error_details_pb2.PreconditionFailure(violations=[violation]),
        metadata,
    )


def _status(
    code: int,
    message: str,
    reason: str,
    detail: object | None = None,
    metadata: dict[str, str] | None = None,
) -> grpc.Status:
    details = []
    if detail is not None:
        packed = any_pb2.Any()
        packed.Pack(detail)  # type: ignore[arg-type]
        details.append(packed)
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata or {}))
    details.append(info)
    return rpc_status.to_status(status_pb2.Status(code=code, message=message, details=details))
