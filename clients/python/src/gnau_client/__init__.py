"""Python client of the Gnau Dealer gRPC API (``gnau.v1``).

:class:`GnauClient` (sync) and :class:`AsyncGnauClient` (``grpc.aio``) wrap ``DealerService`` and
``AuditService``. The messages are the generated ones of the ``gnau.v1`` package, re-exported
here for convenience:

>>> from gnau_client import HouseRules, Seat, TieRule
>>> HouseRules(tie=TieRule.TIE_RULE_PUSH, decks=2).HasField("ten_is_duke")  # unset: the default
False
>>> Seat(seat_number=1, player_id="alice", stake=100).stake
100
"""

from gnau.v1.audit_pb2 import Entry, GetPublicKeysResponse, VerifyRoundResponse
from gnau.v1.dealer_pb2 import ListRoundsResponse
from gnau.v1.round_pb2 import (
    Beacon,
    Outcome,
    Round,
    RoundState,
    Seat,
    SeatHand,
    SeatResult,
    Settlement,
)
from gnau.v1.types_pb2 import HandCategory, HandEvaluation, HouseRules, PayoutTable, TieRule

from gnau_client._common import (
    DEFAULT_TIMEOUT,
    VERSION,
    EntryOrderError,
    RetryPolicy,
    channel_options,
    is_local_target,
    new_request_id,
)
from gnau_client.aio import AsyncGnauClient
from gnau_client.client import GnauClient
from gnau_client.cosignatures import QuorumError, Witness

__version__ = VERSION

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncGnauClient",
    "Beacon",
    "Entry",
    "EntryOrderError",
    "GetPublicKeysResponse",
    "GnauClient",
    "HandCategory",
    "HandEvaluation",
    "HouseRules",
    "ListRoundsResponse",
    "Outcome",
    "PayoutTable",
    "QuorumError",
    "RetryPolicy",
    "Round",
    "RoundState",
    "Seat",
    "SeatHand",
    "SeatResult",
    "Settlement",
    "TieRule",
    "VerifyRoundResponse",
    "Witness",
    "__version__",
    "channel_options",
    "is_local_target",
    "new_request_id",
]
