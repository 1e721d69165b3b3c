"""The gRPC port's budget (issue 39, part 1): connections, their time, streams and metadata.

The gRPC port draws its connections from the same descriptor limit as the HTTP ports
(:func:`~gnau_service.edge.http.descriptor_limit`): what the HTTP ports' shares and their listen
backlogs leave, less :data:`PROCESS_RESERVE` for the database, log files and threads, and its own
backlog, is what it may hold (:func:`grpc_connection_cap`). A connection over the cap is closed
by gRPC as it is accepted, so an idle flood can take the port's share and no more: the process
never runs out of descriptors, the database and the connections already open keep working.

==========================================  ============================================
limit                                       value
==========================================  ============================================
connections the port holds                  :func:`grpc_connection_cap`, at most
                                            :data:`MAX_GRPC_CONNECTIONS`
a connection's TLS and HTTP/2 handshake     :data:`HANDSHAKE_SECONDS`
a connection with no call in flight         closed after :data:`IDLE_SECONDS`
a connection's age                          :data:`MAX_AGE_SECONDS`, then GOAWAY and
                                            :data:`AGE_GRACE_SECONDS` for its calls
streams at once on one connection           :data:`MAX_CONCURRENT_STREAMS`
a call's request message, from its headers  :data:`REQUEST_SECONDS`
a call's metadata (headers)                 :data:`MAX_METADATA_BYTES`; gRPC refuses
                                            some calls from half of it
==========================================  ============================================

The age limit makes long-lived clients reconnect now and then, so that they spread over the
processes of ``--workers`` as they come and go; a ``WatchEntries`` stream is resumable
(docs/api.md). gRPC's maximum is never unlimited (``INT_MAX``: a check in gRPC aborts the
process), always a number this module computed.

>>> grpc_connection_cap(1024, http_ports=2, http_connections=256)
64
>>> grpc_connection_cap(1024, http_ports=0, http_connections=0)
832
>>> grpc_connection_cap(65536, http_ports=2, http_connections=1024)
4096
>>> grpc_connection_cap(300, http_ports=1, http_connections=16)
16
"""

from __future__ import annotations

from typing import Final

from gnau_service.edge.http import ACCEPT_BACKLOG, MIN_CONNECTIONS

#: Descriptors kept for everything but the ports: the database, log files, the worker threads.
PROCESS_RESERVE: Final = 64
#: Connections the gRPC port holds at once, at most.
MAX_GRPC_CONNECTIONS: Final = 4096
#: Seconds a new connection has to finish its handshake (TLS and the HTTP/2 preface).
HANDSHAKE_SECONDS: Final = 5
#: Seconds a connection with no call in flight stays open: gRPC cannot shed idle connections
#: for a newcomer as the HTTP ports do, so each holds its place briefly. A client reconnects
#: at its next call, without failing it.
IDLE_SECONDS: Final = 30
#: Seconds a connection lives before the server asks its client to reconnect (GOAWAY), and the
#: seconds its calls then have to finish.
MAX_AGE_SECONDS: Final = 1800
AGE_GRACE_SECONDS: Final = 30
#: Streams (calls) at once on one connection.
MAX_CONCURRENT_STREAMS: Final = 100
#: Seconds a call's request message has to arrive after its headers: a call that sends headers
#: and no body holds its caller's slot no longer (the interceptor reads it, server/grpc).
REQUEST_SECONDS: Final = 10.0
#: Bytes of a call's metadata gRPC accepts; from half of it, it refuses some calls at random
#: (gRPC's soft limit), so that a client growing its headers learns before the hard one.
MAX_METADATA_BYTES: Final = 16 * 1024


def grpc_connection_cap(descriptors: int, *, http_ports: int, http_connections: int) -> int:
    """Connections the gRPC port may hold under a ``descriptors`` limit, beside ``http_ports``
    HTTP ports of ``http_connections`` each."""
    spent = http_ports * (http_connections + ACCEPT_BACKLOG) + PROCESS_RESERVE + ACCEPT_BACKLOG
    return max(MIN_CONNECTIONS, min(MAX_GRPC_CONNECTIONS, descriptors - spent))


def grpc_port_options(connections: int) -> list[tuple[str, int]]:
    """The gRPC server's options that hold the port to the limits above."""
    return [
        ("grpc.max_allowed_incoming_connections", connections),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_SECONDS * 1000),
        ("grpc.max_connection_idle_ms", IDLE_SECONDS * 1000),
        ("grpc.max_connection_age_ms", MAX_AGE_SECONDS * 1000),
        ("grpc.max_connection_age_grace_ms", AGE_GRACE_SECONDS * 1000),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES // 2),
        ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
    ]
