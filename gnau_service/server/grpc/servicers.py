"""The gRPC servicers: DealerService and AuditService. Thin by design: they turn messages into
calls on the dealer (:mod:`gnau_service.rounds.dealer`) or the store, and answers back into
messages; refusals raise and the interceptor turns them into statuses. Each call acts for the
caller's operator, as the interceptor set it (:data:`current_operator`): a read of None is of
every operator's rounds; a change always has one (:func:`operator_of_change`)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from time import monotonic
from typing import Any

import grpc
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc
from google.protobuf.message import Message

from gnau_service.audit.entries import EntryError, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.operators import check_operator
from gnau_service.audit.replay import ReplayError, RoundReplay
from gnau_service.audit.software_manifest import SoftwareCheck
from gnau_service.rounds.catalogue import Catalogue
from gnau_service.rounds.dealer import Dealer, Idempotency
from gnau_service.rounds.identities import forget_player, lookup_player
from gnau_service.rounds.limits import (
    CHECKPOINTS_PER_MESSAGE,
    ENTRIES_PER_MESSAGE,
    MAX_CHECKPOINTS_PER_CALL,
    MAX_ENTRIES_PER_CALL,
    MAX_REQUEST_ID_CHARS,
)
from gnau_service.rounds.receipt_gathering import key_rotation_notes, round_receipt
from gnau_service.rounds.refusals import (
    InvalidRequest,
    ListingNotPublic,
    OutOfRange,
    RoundNotFound,
)
from gnau_service.rounds.reporting import Reporting
from gnau_service.rounds.requests import SeatRequest, check_round_id
from gnau_service.rules.cards import parse_cards
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import largest_payout
from gnau_service.server.grpc.auth import Role
from gnau_service.server.grpc.convert import (
    evaluation_to_proto,
    house_rules_from_proto,
    house_rules_to_proto,
    report_query_from_proto,
    return_to_player_to_proto,
    round_to_proto,
    table_config_from_proto,
    table_to_proto,
    timestamp_from_proto,
    void_reason_from_proto,
)
from gnau_service.server.grpc.interceptors import current_actor, current_operator, current_role
from gnau_service.server.grpc.statuses import (
    OperatorScope,
    PermissionDenied,
    SoftwareManifestNotConfigured,
)
from gnau_service.server.grpc.watch import follow
from gnau_service.store import LogTail, Store
from gnau_service.store.checkpoints import checkpoints_in
from gnau_service.store.cosignatures import WitnessQuorum, served_checkpoint
from gnau_service.store.round_rows import read_round

Context = grpc.aio.ServicerContext[Any, Any]


def idempotency_of(request: Any) -> Idempotency:
    """The request id and a fingerprint of everything else in the request."""
    request_id = request.request_id
    if (
        not 1 <= len(request_id) <= MAX_REQUEST_ID_CHARS
        or not request_id.isascii()
        or not request_id.isprintable()
    ):
        raise InvalidRequest(
            [
                (
                    "request_id",
                    f"must be 1 to {MAX_REQUEST_ID_CHARS} printable ASCII characters, "
                    "unique per change (a uuid4 fits)",
                )
            ]
        )
    body: Message = type(request)()
    body.CopyFrom(request)
    body.ClearField("request_id")
    fingerprint = hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest()
    return Idempotency(request_id, fingerprint)


def operator_of_change(method: str) -> str:
    """The operator a change (``method``) is made for: the caller's. Only operator tokens may
    call a change and each belongs to one operator, so a change without one is refused, never
    made for a default."""
    operator = current_operator.get()
    if operator is None:
        raise PermissionDenied(str(current_role.get()), method)
    return operator


def listed_operator(asked: str) -> str | None:
    """Whose rounds a listing holds: the caller's operator's, or, for a caller of every
    operator (an all-operator auditor, or the public), the operator ``asked`` for (every
    operator's if none). A caller of one operator asking for another's is refused."""
    operator = current_operator.get()
    if not asked:
        return operator
    if operator is None:
        problem = check_operator(asked)
        if problem is not None:
            raise InvalidRequest([("operator", problem)])
        return asked
    if asked != operator:
        raise OperatorScope(
            f"a credential of operator {operator} lists its own operator's rounds only",
            operator=operator,
        )
    return operator


def deadline_of(context: Context) -> float | None:
    """The call's deadline as a ``time.monotonic()`` value; None if the client set none."""
    remaining = context.time_remaining()
    return None if remaining is None else monotonic() + remaining


class DealerServicer(dealer_pb2_grpc.DealerServiceServicer):
    def __init__(
        self,
        dealer: Dealer,
        quorum: WitnessQuorum,
        *,
        public_round_listing: bool = False,
    ) -> None:
        self._dealer = dealer
        self._catalogue = Catalogue(dealer.store)
        self._quorum = quorum
        self._public_round_listing = public_round_listing

    async def Shuffle(
        self, request: dealer_pb2.ShuffleRequest, context: Context
    ) -> dealer_pb2.ShuffleResponse:
        idempotency = idempotency_of(request)
        rules = house_rules_from_proto(request.house_rules)
        view = await self._dealer.shuffle(
            request.table_id,
            rules,
            idempotency,
            operator=operator_of_change("Shuffle"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.ShuffleResponse(round=round_to_proto(view))

    async def Deal(
        self, request: dealer_pb2.DealRequest, context: Context
    ) -> dealer_pb2.DealResponse:
        # The fingerprint is of the body without the player ids: the dealer adds each seat's
        # reference to it, so the request record keeps no hash of a player id.
        blinded = dealer_pb2.DealRequest()
        blinded.CopyFrom(request)
        for seat in blinded.seats:
            seat.ClearField("player_id")
            seat.ClearField("player_ref")
        idempotency = idempotency_of(blinded)
        seats = [
            SeatRequest(seat.seat_number, seat.player_id, seat.stake, seat.client_seed)
            for seat in request.seats
        ]
        beacon = (
            (request.beacon.label, request.beacon.value) if request.HasField("beacon") else None
        )
        view = await self._dealer.deal(
            request.round_id,
            seats,
            beacon,
            idempotency,
            operator=operator_of_change("Deal"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.DealResponse(round=round_to_proto(view))

    async def Reveal(
        self, request: dealer_pb2.RevealRequest, context: Context
    ) -> dealer_pb2.RevealResponse:
        view = await self._dealer.reveal(
            request.round_id,
            idempotency_of(request),
            operator=operator_of_change("Reveal"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.RevealResponse(round=round_to_proto(view))

    async def Settle(
        self, request: dealer_pb2.SettleRequest, context: Context
    ) -> dealer_pb2.SettleResponse:
        view = await self._dealer.settle(
            request.round_id,
            idempotency_of(request),
            operator=operator_of_change("Settle"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.SettleResponse(round=round_to_proto(view))

    async def VoidRound(
        self, request: dealer_pb2.VoidRoundRequest, context: Context
    ) -> dealer_pb2.VoidRoundResponse:
        view = await self._dealer.void(
            request.round_id,
            void_reason_from_proto(request.reason_code),
            request.reason,
            idempotency_of(request),
            operator=operator_of_change("VoidRound"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.VoidRoundResponse(round=round_to_proto(view))

    async def GetRound(
        self, request: dealer_pb2.GetRoundRequest, context: Context
    ) -> dealer_pb2.GetRoundResponse:
        view = await asyncio.to_thread(
            functools.partial(
                self._dealer.get,
                request.round_id,
                operator=current_operator.get(),
                public=current_role.get() is Role.PUBLIC,
            )
        )
        return dealer_pb2.GetRoundResponse(round=round_to_proto(view))

    async def GetRoundReceipt(
        self, request: dealer_pb2.GetRoundReceiptRequest, context: Context
    ) -> dealer_pb2.GetRoundReceiptResponse:
        receipt = await asyncio.to_thread(
            functools.partial(
                round_receipt,
                self._dealer,
                request.round_id,
                operator=current_operator.get(),
                public=current_role.get() is Role.PUBLIC,
                pinned_size=request.pinned_size,
                quorum=self._quorum,
            )
        )
        return dealer_pb2.GetRoundReceiptResponse(receipt=receipt.to_text())

    async def ListRounds(
        self, request: dealer_pb2.ListRoundsRequest, context: Context
    ) -> dealer_pb2.ListRoundsResponse:
        public = current_role.get() is Role.PUBLIC
        if public and not self._public_round_listing:
            raise ListingNotPublic
        operator = listed_operator(request.operator)
        views, token = await asyncio.to_thread(
            functools.partial(
                self._dealer.list,
                request.table_id,
                request.page_size,
                request.page_token,
                operator=operator,
                public=public,
                completed_by=request.completed_by,
                completed_since=timestamp_from_proto(request.completed_since)
                if request.HasField("completed_since")
                else None,
            )
        )
        return dealer_pb2.ListRoundsResponse(
            rounds=[round_to_proto(view) for view in views], next_page_token=token
        )

    async def EvaluateHand(
        self, request: dealer_pb2.EvaluateHandRequest, context: Context
    ) -> dealer_pb2.EvaluateHandResponse:
        rules = house_rules_from_proto(request.house_rules)
        evaluation = Evaluator(rules).evaluate(parse_cards(list(request.cards)))
        return dealer_pb2.EvaluateHandResponse(evaluation=evaluation_to_proto(evaluation))

    async def GetHouseRulesInfo(
        self, request: dealer_pb2.GetHouseRulesInfoRequest, context: Context
    ) -> dealer_pb2.GetHouseRulesInfoResponse:
        rules = house_rules_from_proto(request.house_rules)
        return dealer_pb2.GetHouseRulesInfoResponse(
            house_rules=house_rules_to_proto(rules),
            return_to_player=return_to_player_to_proto(ReturnToPlayer.of_rules(rules)),
            largest_payout=largest_payout(rules),
        )

    async def PutTable(
        self, request: dealer_pb2.PutTableRequest, context: Context
    ) -> dealer_pb2.PutTableResponse:
        config = table_config_from_proto(request.config)
        entry = await self._catalogue.put_table(
            operator_of_change("PutTable"),
            request.table_id,
            config,
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.PutTableResponse(table=table_to_proto(entry))

    async def SetTableEnabled(
        self, request: dealer_pb2.SetTableEnabledRequest, context: Context
    ) -> dealer_pb2.SetTableEnabledResponse:
        enabled = request.enabled
        entry = await self._catalogue.change_table(
            operator_of_change("SetTableEnabled"),
            request.table_id,
            lambda config: replace(config, enabled=enabled),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.SetTableEnabledResponse(table=table_to_proto(entry))

    async def ListTables(
        self, request: dealer_pb2.ListTablesRequest, context: Context
    ) -> dealer_pb2.ListTablesResponse:
        operator = listed_operator(request.operator)
        if operator is None:  # an auditor of every operator: one operator's at a time
            raise InvalidRequest([("operator", "name the operator whose tables to list")])
        entries = await self._catalogue.tables(operator, deadline=deadline_of(context))
        return dealer_pb2.ListTablesResponse(tables=[table_to_proto(e) for e in entries])

    async def ForgetPlayer(
        self, request: dealer_pb2.ForgetPlayerRequest, context: Context
    ) -> dealer_pb2.ForgetPlayerResponse:
        # The request id alone is kept (and checked as every request id is): no fingerprint,
        # which would be a hash of the player id.
        request_id = idempotency_of(request).request_id if request.request_id else None
        forgotten = await forget_player(
            self._dealer.store,
            request.player_id,
            request_id,
            operator=operator_of_change("ForgetPlayer"),
            actor=current_actor.get(),
            deadline=deadline_of(context),
        )
        return dealer_pb2.ForgetPlayerResponse(
            forgotten=forgotten.forgotten,
            seats_unlinked=forgotten.seats_unlinked,
            log_index=forgotten.log_index,
        )


#: Checks the installed software now and records it by an actor: the check and its entry's index
#: (:class:`~gnau_service.server.process.software_checks.SoftwareChecks`).
VerifySoftware = Callable[[str], Awaitable[tuple[SoftwareCheck, int]]]


class AuditServicer(audit_pb2_grpc.AuditServiceServicer):
    def __init__(
        self,
        store: Store,
        tail: LogTail,
        quorum: WitnessQuorum,
        verify_software: VerifySoftware | None = None,
    ) -> None:
        self._store = store
        self._tail = tail
        self._quorum = quorum
        self._reporting = Reporting(store)
        self._verify_software = verify_software

    async def GetCheckpoint(
        self, request: audit_pb2.GetCheckpointRequest, context: Context
    ) -> audit_pb2.GetCheckpointResponse:
        served = await asyncio.to_thread(
            served_checkpoint, self._store, self._quorum, cosigned=request.cosigned
        )
        return audit_pb2.GetCheckpointResponse(checkpoint="" if served is None else served[1])

    async def GetCheckpoints(
        self, request: audit_pb2.GetCheckpointsRequest, context: Context
    ) -> AsyncIterator[audit_pb2.GetCheckpointsResponse]:
        first, last = request.first_size, request.last_size
        if first < 0:
            raise InvalidRequest([("first_size", "must not be negative")])
        if last < 0 or 0 < last < first:
            raise InvalidRequest(
                [("last_size", f"must be at least first_size ({first}), or 0 for the latest")]
            )
        # One read per message, as GetEntries: a slow reader holds one page, not the whole call.
        sent = 0
        while sent < MAX_CHECKPOINTS_PER_CALL:
            limit = min(CHECKPOINTS_PER_MESSAGE, MAX_CHECKPOINTS_PER_CALL - sent)
            page = await asyncio.to_thread(checkpoints_in, self._store, first, last or None, limit)
            if page:
                yield audit_pb2.GetCheckpointsResponse(checkpoints=[note for _, note in page])
            if len(page) < limit:
                return
            sent += len(page)
            first = page[-1][0] + 1

    async def GetEntries(
        self, request: audit_pb2.GetEntriesRequest, context: Context
    ) -> AsyncIterator[audit_pb2.GetEntriesResponse]:
        if request.end and request.end <= request.start:
            raise InvalidRequest([("end", f"must be more than start ({request.start})")])
        size = await asyncio.to_thread(self._store.size)
        if not 0 <= request.start < size:
            raise OutOfRange(f"entry {request.start} is not in the log of {size} entries")
        # The stream stops early at the end of the log, and after MAX_ENTRIES_PER_CALL entries.
        end = min(request.end or size, size, request.start + MAX_ENTRIES_PER_CALL)
        for start in range(request.start, end, ENTRIES_PER_MESSAGE):
            stop = min(start + ENTRIES_PER_MESSAGE, end)
            data = await asyncio.to_thread(self._store.entries, start, stop)
            yield audit_pb2.GetEntriesResponse(entries=_entries(start, data))

    async def WatchEntries(
        self, request: audit_pb2.WatchEntriesRequest, context: Context
    ) -> AsyncIterator[audit_pb2.WatchEntriesResponse]:
        if request.start_index < 0:
            raise InvalidRequest([("start_index", "must not be negative")])
        async for start, data in follow(self._tail, request.start_index):
            yield audit_pb2.WatchEntriesResponse(entries=_entries(start, data))

    async def GetInclusionProof(
        self, request: audit_pb2.GetInclusionProofRequest, context: Context
    ) -> audit_pb2.GetInclusionProofResponse:
        try:
            hashes = await asyncio.to_thread(
                self._store.inclusion_proof, request.index, request.tree_size
            )
        except ValueError as error:
            raise OutOfRange(str(error)) from None
        return audit_pb2.GetInclusionProofResponse(hashes=hashes)

    async def GetConsistencyProof(
        self, request: audit_pb2.GetConsistencyProofRequest, context: Context
    ) -> audit_pb2.GetConsistencyProofResponse:
        try:
            hashes = await asyncio.to_thread(
                self._store.consistency_proof, request.first_size, request.second_size
            )
        except ValueError as error:
            raise OutOfRange(str(error)) from None
        return audit_pb2.GetConsistencyProofResponse(hashes=hashes)

    async def GetPublicKeys(
        self, request: audit_pb2.GetPublicKeysRequest, context: Context
    ) -> audit_pb2.GetPublicKeysResponse:
        keys = await asyncio.to_thread(self._store.public_keys)
        notes = await asyncio.to_thread(key_rotation_notes, self._store)
        return audit_pb2.GetPublicKeysResponse(
            origin=self._store.signer.origin, verifier_keys=keys, key_rotations=notes
        )

    async def VerifyRound(
        self, request: audit_pb2.VerifyRoundRequest, context: Context
    ) -> audit_pb2.VerifyRoundResponse:
        check_round_id(request.round_id)
        try:
            entries, replay = await asyncio.to_thread(
                _replayed, self._store, request.round_id, current_operator.get()
            )
        except (EntryError, ReplayError) as error:
            return audit_pb2.VerifyRoundResponse(
                ok=False, failures=[str(error)], summary=f"round {request.round_id} FAILS: {error}"
            )
        state = "settled" if replay.settled else "voided" if replay.voided else "still open"
        return audit_pb2.VerifyRoundResponse(
            ok=True,
            summary=(
                f"round {request.round_id} verifies: {entries} signed entries replayed, "
                f"{state} (this is the service's own check; verify offline for the guarantee)"
            ),
        )

    async def LookupPlayer(
        self, request: audit_pb2.LookupPlayerRequest, context: Context
    ) -> audit_pb2.LookupPlayerResponse:
        which = request.WhichOneof("player")
        player_id, seats = await asyncio.to_thread(
            functools.partial(
                lookup_player,
                self._store,
                operator=current_operator.get(),
                player_id=request.player_id if which == "player_id" else None,
                reference=request.player_ref if which == "player_ref" else None,
            )
        )
        return audit_pb2.LookupPlayerResponse(
            player_id=player_id,
            seats=[
                audit_pb2.PlayerSeat(
                    round_id=seat.round_id,
                    seat_number=seat.seat_number,
                    player_ref=seat.player_ref,
                )
                for seat in seats
            ],
        )

    async def GetReport(
        self, request: audit_pb2.GetReportRequest, context: Context
    ) -> audit_pb2.GetReportResponse:
        query = report_query_from_proto(request, listed_operator(request.operator))
        text, size = await self._reporting.report(query, deadline=deadline_of(context))
        return audit_pb2.GetReportResponse(report=text, log_size=size)

    async def VerifySoftware(
        self, request: audit_pb2.VerifySoftwareRequest, context: Context
    ) -> audit_pb2.VerifySoftwareResponse:
        if self._verify_software is None:
            raise SoftwareManifestNotConfigured
        found, index = await self._verify_software(current_actor.get())
        return audit_pb2.VerifySoftwareResponse(
            result=str(found.outcome),
            manifest_sha256=found.manifest_sha256 or "",
            mismatches=[audit_pb2.SoftwareMismatch(**listed) for listed in found.listed()],
            mismatch_count=len(found.mismatches),
            detail=found.detail,
            entry_index=index,
        )


def _replayed(store: Store, round_id: str, operator: str | None) -> tuple[int, RoundReplay]:
    """The round's entries, each checked against the log's keys and replayed in order, and how
    many there were, if it is ``operator``'s round (any operator's if None: another's is not
    found, as a round that does not exist); raises EntryError or ReplayError at the first that
    fails. Blocking (it reads the store and checks signatures): call it from a thread."""
    if operator is not None and read_round(store, round_id, operator=operator) is None:
        raise RoundNotFound(round_id)
    entries = store.round_entries(round_id)
    if not entries:
        raise RoundNotFound(round_id)
    keys = [Verifier.from_vkey(vkey) for vkey in store.public_keys()]
    replay = RoundReplay()
    for data in entries:
        entry = decode_entry(data, *keys)
        assert entry.round_id is not None
        replay.feed(entry.kind, entry.round_id, entry.payload)
    return len(entries), replay


def _entries(start: int, data: list[bytes]) -> list[audit_pb2.Entry]:
    return [audit_pb2.Entry(index=start + i, data=item) for i, item in enumerate(data)]
