"""grpc's own log lines about a peer that went away, at the level they deserve.

When the answer to a call cannot be sent because its client stopped reading (its flow-control
window stays shut) and then dropped the connection, grpc.aio logs an ERROR with a traceback,
"ExecuteBatchError raised in core by servicer method", unless the call had already been seen to
close. That is the client's doing, not a fault of the service, and any client could make an
operator's ERROR alert fire with it. :data:`PEER_GONE` lowers those records to INFO, below the
service's WARNING threshold; every other grpc record keeps its level.
"""

from __future__ import annotations

import logging
from typing import Final

#: The logger of grpc's Cython layer, which logs the servicer's failed sends.
GRPC_CORE_LOGGER: Final = "grpc._cython.cygrpc"

_PEER_GONE_MESSAGE: Final = "ExecuteBatchError raised in core by servicer method"


class _PeerGone(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(_PEER_GONE_MESSAGE):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
        return record.levelno >= logging.getLogger(record.name).getEffectiveLevel()


#: The filter, installed once per process by :func:`lower_peer_gone`.
PEER_GONE: Final = _PeerGone()


def lower_peer_gone() -> None:
    """Lower grpc's "peer went away mid-answer" ERRORs to INFO (idempotent)."""
    logging.getLogger(GRPC_CORE_LOGGER).addFilter(PEER_GONE)
