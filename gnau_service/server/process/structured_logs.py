"""The log lines of the service, and of every command that runs a part of it (``gnau serve``,
``gnau witness serve``): structured, on stderr, set up once by :func:`configure_logging`.

A log line never holds a seed, a token or a password: exceptions are logged without the frames'
local variables.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import types
from collections.abc import Callable
from typing import Final

import structlog


def configure_logging(
    log_format: str, *, trace_ids: bool = False, worker: int | None = None
) -> None:
    """Structured logs on stderr: one JSON object per line (or a console rendering).

    In JSON mode every line is JSON: the service's own, the standard library's (grpc, asyncio,
    psycopg, warnings) through the same processors, and exceptions as structured data
    (structlog's exception dictionaries, without local variables), uncaught ones included.
    With ``trace_ids`` (tracing on), a line logged inside a call's span carries its
    ``trace_id`` and ``span_id``. A worker of ``--workers`` stamps every line with its
    ``worker`` number.
    """
    json_lines = log_format == "json"
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    global _trace_ids  # noqa: PLW0603  (loggers cached on first use keep the chain below)
    _trace_ids = None
    if trace_ids:
        # Without OpenTelemetry installed the service refuses to start, in one line (see
        # start): until then, lines go without trace ids.
        with contextlib.suppress(ImportError):
            from gnau_service.server.grpc.tracing import add_trace_ids  # noqa: PLC0415  (only if on)

            _trace_ids = add_trace_ids
    stamped: list[structlog.types.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _with_trace_ids,
    ]
    if worker is not None:
        stamped.append(_Stamp("worker", worker))
    exceptions: list[structlog.types.Processor] = [_STRUCTURED_TRACEBACKS] if json_lines else []
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *stamped, *exceptions, renderer],
        logger_factory=_StderrLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *stamped],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *exceptions,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    if json_lines:
        sys.excepthook = _log_uncaught
        threading.excepthook = lambda hook: _log_uncaught(
            hook.exc_type, hook.exc_value or hook.exc_type(), hook.exc_traceback
        )


#: The trace ids' processor while tracing is on. Loggers cached on their first use keep the
#: processor chain they were made with, so the chain always calls this, which may change.
_trace_ids: (
    Callable[
        [structlog.types.WrappedLogger, str, structlog.types.EventDict], structlog.types.EventDict
    ]
    | None
) = None


def _with_trace_ids(
    logger: structlog.types.WrappedLogger, name: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    return event_dict if _trace_ids is None else _trace_ids(logger, name, event_dict)


#: Exceptions as structured data, without the frames' local variables: a local may be a seed,
#: a token or a password, and none of them may reach a log.
_STRUCTURED_TRACEBACKS: Final = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)


def _log_uncaught(
    kind: type[BaseException], error: BaseException, traceback: types.TracebackType | None
) -> None:
    structlog.get_logger("gnau").critical("uncaught exception", exc_info=(kind, error, traceback))


class _Stamp:
    """Adds one key to every line."""

    def __init__(self, key: str, value: object) -> None:
        self._key, self._value = key, value

    def __call__(
        self,
        logger: structlog.types.WrappedLogger,
        name: str,
        event_dict: structlog.types.EventDict,
    ) -> structlog.types.EventDict:
        event_dict[self._key] = self._value
        return event_dict


class _StderrLogger:
    """Writes each line to ``sys.stderr`` as it is at that moment (so a redirect, or a test's
    capture, sees every line), one write per line."""

    def __init__(self, *args: object) -> None:
        pass

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


class _CurrentStderr:
    """A stream for logging's handler that is ``sys.stderr`` as it is at each write."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
