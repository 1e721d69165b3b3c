"""Every limit at the service's edge, defined once.

The proto comments (``proto/gnau/v1``), ``docs/api.md`` and the code all state these numbers;
``tests/server/test_limits.py`` checks that they agree and that each one is enforced exactly at
its boundary. Limits that belong to a lower layer (what the fairness transcript can hash, what
the log's JSON can hold) are defined there and only named here.

Text lengths are counted in bytes of UTF-8, as the proto states them, so that a client in any
language measures them the same way.
"""

from __future__ import annotations

from typing import Final

from gnau_service.audit.entries import MAX_INDEX
from gnau_service.audit.round_events import MAX_VOID_REASON_BYTES as LOGGED_VOID_REASON_BYTES
from gnau_service.fairness.commitment import MAX_ROUND_ID_BYTES
from gnau_service.fairness.deal import max_seats
from gnau_service.fairness.transcript import (
    MAX_BEACON_LABEL_BYTES,
    MAX_BEACON_VALUE_BYTES,
    MAX_CLIENT_SEED_BYTES,
    MAX_PLAYER_ID_BYTES,
    MAX_SEAT_NUMBER,
)
from gnau_service.rules.house_rules import MAX_DECKS
from gnau_service.rules.settlement import LARGEST_PAYOUT

# -- identifiers -----------------------------------------------------------------------------------

#: ``request_id``: 1 to this many characters of printable ASCII (U+0020 to U+007E).
MAX_REQUEST_ID_CHARS: Final = 36
#: ``table_id``: 1 to this many bytes of UTF-8, no control character, no outer space.
MAX_TABLE_ID_BYTES: Final = 128
#: ``x-request-id`` metadata: a client's own id is echoed only if it is this short and printable
#: ASCII; otherwise the call gets a fresh one (a header must never make the trailers large).
MAX_REQUEST_ID_HEADER_CHARS: Final = 64

#: The largest request message the gRPC port reads, in bytes: the largest legitimate request
#: (a Deal of 82 seats with every field at its limit, about 19 KiB:
#: tests/server/test_grpc_port.py builds it) with room to spare. gRPC refuses a larger one from
#: its length prefix (RESOURCE_EXHAUSTED), before its body is read or decoded, so a call without
#: credentials costs the server that much at most, whatever body it announces.
MAX_GRPC_REQUEST_BYTES: Final = 64 * 1024

# -- rounds ----------------------------------------------------------------------------------------

#: ``VoidRound.reason``: 0 to this many bytes of UTF-8, no control character (what the log's
#: readers take, :data:`gnau_service.audit.round_events.MAX_VOID_REASON_BYTES`).
MAX_VOID_REASON_BYTES: Final = LOGGED_VOID_REASON_BYTES
#: ``ListRounds.completed_by``: at most this many bytes of UTF-8, as an actor is
#: (:data:`gnau_service.audit.actors.MAX_ACTOR_BYTES`).
MAX_COMPLETED_BY_BYTES: Final = 256
#: The default of ``--max-stake``, in minor units.
DEFAULT_MAX_STAKE: Final = 10**12
#: Every integer the audit log holds must be within ±MAX_JSON_INTEGER: its canonical JSON is read
#: by IEEE 754 doubles (RFC 8785, JavaScript), exact only this far.
MAX_JSON_INTEGER: Final = MAX_INDEX
#: The most seats any round can have: the most decks, less the dealer's hand.
MOST_SEATS: Final = max_seats(MAX_DECKS)
#: The largest ``--max-stake`` for which every round, under any house rules, settles within the
#: log's range: the dealer's delta is at most (sum of stakes) x (largest payout).
LARGEST_MAX_STAKE: Final = MAX_JSON_INTEGER // (LARGEST_PAYOUT * MOST_SEATS)

# -- the table catalogue ---------------------------------------------------------------------------

#: The most rule sets one table approves (``TableConfig.rule_sets``).
MAX_RULE_SETS_PER_TABLE: Final = 64
#: The most tables one operator's catalogue holds (and so ListTables answers).
MAX_TABLES_PER_OPERATOR: Final = 1000

#: The most text (bytes of UTF-8) one GetReport answer holds.
MAX_REPORT_BYTES: Final = 4 * 1024 * 1024

# -- reads -----------------------------------------------------------------------------------------

DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 1000
#: ``page_token``: at most this many characters (the server's own tokens are far shorter).
MAX_PAGE_TOKEN_CHARS: Final = 1024
#: Entries per message of GetEntries and WatchEntries.
ENTRIES_PER_MESSAGE: Final = 100
#: The most entries one GetEntries call streams.
MAX_ENTRIES_PER_CALL: Final = 10_000
#: Signed checkpoints per message of GetCheckpoints, and the most one call streams.
CHECKPOINTS_PER_MESSAGE: Final = 100
MAX_CHECKPOINTS_PER_CALL: Final = 10_000

# -- streams (the defaults of their settings) ------------------------------------------------------

#: Server-streaming calls open at once, in total and from one caller (a credential, or the
#: address of a caller without one).
DEFAULT_MAX_STREAMS: Final = 500
DEFAULT_MAX_STREAMS_PER_CALLER: Final = 50
#: Calls in flight at once from one caller (the total is ``--max-concurrent-rpcs``): a quarter,
#: so that one platform's burst leaves the others three quarters.
DEFAULT_MAX_CALLS_PER_CALLER: Final = 250
#: A WatchEntries stream that has caught up sends at most one message per this interval, so
#: that hundreds of streams cost the writer little however often the log grows.
WATCH_INTERVAL_SECONDS: Final = 0.25

# -- refusals --------------------------------------------------------------------------------------

#: A refusal's message, at most this many bytes of UTF-8 (percent-encoded on the wire: x3 at most).
MAX_ERROR_MESSAGE_BYTES: Final = 256
#: Field violations listed in a BadRequest; the message says how many more there were.
MAX_FIELD_VIOLATIONS: Final = 5
#: A field path and a violation's description, each at most this many bytes.
MAX_FIELD_PATH_BYTES: Final = 64
MAX_VIOLATION_BYTES: Final = 160
#: What every refusal's trailers (status, message, details, request id) stay under.
MAX_TRAILER_BYTES: Final = 4096

__all__ = [
    "CHECKPOINTS_PER_MESSAGE",
    "DEFAULT_MAX_CALLS_PER_CALLER",
    "DEFAULT_MAX_STAKE",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MAX_STREAMS_PER_CALLER",
    "DEFAULT_PAGE_SIZE",
    "ENTRIES_PER_MESSAGE",
    "LARGEST_MAX_STAKE",
    "MAX_BEACON_LABEL_BYTES",
    "MAX_BEACON_VALUE_BYTES",
    "MAX_CHECKPOINTS_PER_CALL",
    "MAX_CLIENT_SEED_BYTES",
    "MAX_COMPLETED_BY_BYTES",
    "MAX_ENTRIES_PER_CALL",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_FIELD_PATH_BYTES",
    "MAX_FIELD_VIOLATIONS",
    "MAX_GRPC_REQUEST_BYTES",
    "MAX_JSON_INTEGER",
    "MAX_PAGE_SIZE",
    "MAX_PAGE_TOKEN_CHARS",
    "MAX_PLAYER_ID_BYTES",
    "MAX_REPORT_BYTES",
    "MAX_REQUEST_ID_CHARS",
    "MAX_REQUEST_ID_HEADER_CHARS",
    "MAX_ROUND_ID_BYTES",
    "MAX_RULE_SETS_PER_TABLE",
    "MAX_SEAT_NUMBER",
    "MAX_TABLES_PER_OPERATOR",
    "MAX_TABLE_ID_BYTES",
    "MAX_TRAILER_BYTES",
    "MAX_VIOLATION_BYTES",
    "MAX_VOID_REASON_BYTES",
    "MOST_SEATS",
    "WATCH_INTERVAL_SECONDS",
]
