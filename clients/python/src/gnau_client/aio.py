"""The asynchronous Gnau Dealer client, over ``grpc.aio``.

It mirrors :class:`gnau_client.GnauClient` method for method; see there for the behaviour
(deadlines, retries, request ids, the bearer token). Make and use it inside one event loop.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Self, TypeVar

import grpc
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc, round_pb2, types_pb2
from grpc import aio

from gnau_client import _common
from gnau_client._common import DEFAULT_TIMEOUT, ChannelOption, RetryPolicy
from gnau_client.cosignatures import Witness, WitnessPolicy

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class AsyncGnauClient:
    """The ``grpc.aio`` twin of :class:`gnau_client.GnauClient`: the same arguments and methods,
    each a coroutine (the streams are async iterators)."""

    timeout: float | None
    """Default deadline, in seconds, of a unary call."""

    def __init__(
        self,
        target: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008  (frozen, so safe to share)
        options: Sequence[ChannelOption] = (),
        allow_insecure_token: bool = False,
    ) -> None:
        _common.check_token_transport(target, credentials, token, allow_insecure_token)
        all_options = _common.channel_options(retry, options)
        if credentials is None:
            channel = aio.insecure_channel(target, options=all_options)
        else:
            channel = aio.secure_channel(target, credentials, options=all_options)
        self._setup(channel, token=token, timeout=timeout, owns_channel=True)

    @classmethod
    def from_channel(
        cls,
        channel: aio.Channel,
        *,
        token: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> Self:
        """A client over a channel the caller made (and closes)."""
        client = cls.__new__(cls)
        client._setup(channel, token=token, timeout=timeout, owns_channel=False)
        return client

    def _setup(
        self, channel: aio.Channel, *, token: str | None, timeout: float | None, owns_channel: bool
    ) -> None:
        self._metadata = _common.bearer_metadata(token)
        self._channel = channel
        self._owns_channel = owns_channel
        self._dealer = dealer_pb2_grpc.DealerServiceStub(channel)
        self._audit = audit_pb2_grpc.AuditServiceStub(channel)
        self.timeout = timeout

    @property
    def channel(self) -> aio.Channel:
        """The channel the client calls over."""
        return self._channel

    async def close(self) -> None:
        """Close the channel, if the client made it. Calls in flight are cancelled."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _unary(
        self,
        method: aio.UnaryUnaryMultiCallable[_Request, _Response],
        request: _Request,
        timeout: float | None,
    ) -> _Response:
        return await method(
            request,
            timeout=self.timeout if timeout is None else timeout,
            metadata=self._metadata,
        )

    # DealerService

    async def shuffle(
        self,
        table_id: str,
        house_rules: types_pb2.HouseRules | None = None,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> round_pb2.Round:
        """Start a round at ``table_id``: returns it SHUFFLED, with its commitment."""
        request = _common.shuffle_request(table_id, house_rules, request_id)
        return (await self._unary(self._dealer.Shuffle, request, timeout)).round

    async def deal(
        self,
        round_id: str,
        seats: Iterable[round_pb2.Seat],
        beacon: round_pb2.Beacon | None = None,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> round_pb2.Round:
        """Lock the seats (and the beacon, if any) and deal: returns the round DEALT."""
        request = _common.deal_request(round_id, seats, beacon, request_id)
        return (await self._unary(self._dealer.Deal, request, timeout)).round

    async def reveal(
        self, round_id: str, *, request_id: str | None = None, timeout: float | None = None
    ) -> round_pb2.Round:
        """Publish the round's server seed and deck: returns the round REVEALED."""
        request = _common.reveal_request(round_id, request_id)
        return (await self._unary(self._dealer.Reveal, request, timeout)).round

    async def settle(
        self, round_id: str, *, request_id: str | None = None, timeout: float | None = None
    ) -> round_pb2.Round:
        """Settle every seat against the dealer: returns the round SETTLED, with its settlement."""
        request = _common.settle_request(round_id, request_id)
        return (await self._unary(self._dealer.Settle, request, timeout)).round

    async def void_round(
        self,
        round_id: str,
        reason_code: round_pb2.VoidReason.ValueType,
        reason: str = "",
        *,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> round_pb2.Round:
        """Void a round that is not settled (operator only), for ``reason_code`` (a
        ``round_pb2.VOID_REASON_*``) with optional free text: returns it VOIDED. After the deal
        the void pays every seat the better of its result and a refund (``void_settlement``)."""
        request = _common.void_round_request(round_id, reason_code, reason, request_id)
        return (await self._unary(self._dealer.VoidRound, request, timeout)).round

    async def forget_player(
        self, player_id: str, *, request_id: str | None = None, timeout: float | None = None
    ) -> dealer_pb2.ForgetPlayerResponse:
        """Forget a player (operator only): their secret key and every link of their seat
        references to them are deleted, and a PLAYER_FORGOTTEN entry naming no one is logged
        (``forgotten``, ``seats_unlinked``, ``log_index``). A retry with the same
        ``request_id`` gets the first answer; a player never seated, or already forgotten,
        answers ``forgotten`` false."""
        request = _common.forget_player_request(player_id, request_id)
        return await self._unary(self._dealer.ForgetPlayer, request, timeout)

    async def put_table(
        self, table_id: str, config: dealer_pb2.TableConfig, *, timeout: float | None = None
    ) -> dealer_pb2.Table:
        """Add a table to the caller's operator's catalogue, or replace its configuration
        (operator only). The same configuration again changes nothing; a change is a new
        version, and rounds already shuffled keep theirs."""
        request = dealer_pb2.PutTableRequest(table_id=table_id, config=config)
        return (await self._unary(self._dealer.PutTable, request, timeout)).table

    async def set_table_enabled(
        self, table_id: str, enabled: bool, *, timeout: float | None = None
    ) -> dealer_pb2.Table:
        """Enable or disable a table of the caller's operator (operator only): a disabled table
        starts no round; its open rounds complete."""
        request = dealer_pb2.SetTableEnabledRequest(table_id=table_id, enabled=enabled)
        return (await self._unary(self._dealer.SetTableEnabled, request, timeout)).table

    async def list_tables(
        self, operator: str = "", *, timeout: float | None = None
    ) -> list[dealer_pb2.Table]:
        """The tables of ``operator`` (empty: the caller's), each with its configuration in
        force; an auditor of every operator names one."""
        request = dealer_pb2.ListTablesRequest(operator=operator)
        return list((await self._unary(self._dealer.ListTables, request, timeout)).tables)

    async def get_round(self, round_id: str, *, timeout: float | None = None) -> round_pb2.Round:
        """The round as it stands."""
        request = dealer_pb2.GetRoundRequest(round_id=round_id)
        return (await self._unary(self._dealer.GetRound, request, timeout)).round

    async def get_round_receipt(
        self, round_id: str, *, pinned_size: int = 0, timeout: float | None = None
    ) -> str:
        """The round's receipt (JSON text, docs/receipts.md), with the consistency proof from
        ``pinned_size`` if given."""
        request = dealer_pb2.GetRoundReceiptRequest(round_id=round_id, pinned_size=pinned_size)
        return (await self._unary(self._dealer.GetRoundReceipt, request, timeout)).receipt

    async def list_rounds(
        self,
        table_id: str = "",
        *,
        page_size: int = 0,
        page_token: str = "",
        completed_by: str = "",
        completed_since: datetime | None = None,
        operator: str = "",
        timeout: float | None = None,
    ) -> dealer_pb2.ListRoundsResponse:
        """One page of rounds, newest first (of every table if ``table_id`` is empty); only
        those completed by ``completed_by`` (e.g. ``"service"``: the rounds the service completed
        at their deadlines) and at ``completed_since`` (timezone-aware) or later, if given; only
        those of ``operator``, if given (a credential of one operator sees only its own rounds;
        each round names its ``operator``)."""
        request = _common.list_rounds_request(
            table_id, page_size, page_token, completed_by, completed_since, operator=operator
        )
        return await self._unary(self._dealer.ListRounds, request, timeout)

    async def iter_rounds(
        self,
        table_id: str = "",
        *,
        page_size: int = 0,
        operator: str = "",
        timeout: float | None = None,
    ) -> AsyncGenerator[round_pb2.Round, None]:
        """Every round, newest first, fetching page after page as the iteration needs them."""
        page_token = ""
        while True:
            page = await self.list_rounds(
                table_id,
                page_size=page_size,
                page_token=page_token,
                operator=operator,
                timeout=timeout,
            )
            for round_ in page.rounds:
                yield round_
            page_token = page.next_page_token
            if not page_token:
                return

    async def evaluate_hand(
        self,
        cards: str | Iterable[str],
        house_rules: types_pb2.HouseRules | None = None,
        *,
        timeout: float | None = None,
    ) -> types_pb2.HandEvaluation:
        """Evaluate five cards, given as ``"3C 6S 8H 4H 8C"`` or as separate strings."""
        request = dealer_pb2.EvaluateHandRequest(
            cards=_common.cards_list(cards), house_rules=house_rules
        )
        return (await self._unary(self._dealer.EvaluateHand, request, timeout)).evaluation

    async def house_rules_info(
        self,
        house_rules: types_pb2.HouseRules | None = None,
        *,
        timeout: float | None = None,
    ) -> dealer_pb2.GetHouseRulesInfoResponse:
        """The rules in force and their return to player and house edge (exact and decimal).

        A rule set the server has not computed yet takes seconds: give a ``timeout`` to match.
        """
        request = dealer_pb2.GetHouseRulesInfoRequest(house_rules=house_rules)
        return await self._unary(self._dealer.GetHouseRulesInfo, request, timeout)

    async def play_round(
        self,
        table_id: str,
        seats: Iterable[round_pb2.Seat],
        house_rules: types_pb2.HouseRules | None = None,
        beacon: round_pb2.Beacon | None = None,
        *,
        timeout: float | None = None,
    ) -> round_pb2.Round:
        """Play a whole round: Shuffle, Deal, Reveal, Settle. Returns the round SETTLED.

        A failed step's ``grpc.RpcError`` is raised with a note naming the round and the step.
        """
        seats = list(seats)
        shuffle_id = _common.new_request_id()
        try:
            round_ = await self.shuffle(
                table_id, house_rules, request_id=shuffle_id, timeout=timeout
            )
        except grpc.RpcError as error:
            error.add_note(f"play_round: Shuffle failed (request_id {shuffle_id!r})")
            raise
        step = "Deal"
        try:
            round_ = await self.deal(round_.round_id, seats, beacon, timeout=timeout)
            step = "Reveal"
            round_ = await self.reveal(round_.round_id, timeout=timeout)
            step = "Settle"
            return await self.settle(round_.round_id, timeout=timeout)
        except grpc.RpcError as error:
            error.add_note(f"play_round: round {round_.round_id!r} stopped at {step}")
            raise

    # AuditService

    async def get_checkpoint(
        self,
        *,
        witnesses: Sequence[str | Witness] = (),
        quorum: int | None = None,
        timeout: float | None = None,
    ) -> str:
        """The log's latest checkpoint, as C2SP signed-note text with the witnesses'
        cosignatures (verify the log's signature before use).

        With ``witnesses`` (their vkeys, or :class:`~gnau_client.cosignatures.Witness`) it asks
        for the latest checkpoint the service's witnesses have cosigned, and raises
        :class:`~gnau_client.cosignatures.QuorumError` unless at least ``quorum`` (default: all)
        of these witnesses validly cosigned it; cosignatures from other keys are ignored.
        """
        policy = WitnessPolicy.of(witnesses, quorum)
        request = audit_pb2.GetCheckpointRequest(cosigned=bool(policy.witnesses))
        response = await self._unary(self._audit.GetCheckpoint, request, timeout)
        return policy.check(response.checkpoint)

    async def get_checkpoints(
        self, first_size: int, last_size: int = 0, *, timeout: float | None = None
    ) -> AsyncGenerator[str, None]:
        """The signed checkpoints with sizes in ``[first_size, last_size]`` (``last_size`` 0: up
        to the latest), in increasing size; at most 10,000 a call."""
        request = audit_pb2.GetCheckpointsRequest(first_size=first_size, last_size=last_size)
        call = self._audit.GetCheckpoints(request, timeout=timeout, metadata=self._metadata)
        try:
            async for response in call:
                for note in response.checkpoints:
                    yield note
        finally:
            call.cancel()

    async def get_entries(
        self, start: int, end: int, *, timeout: float | None = None
    ) -> AsyncGenerator[audit_pb2.Entry, None]:
        """The log entries with indices in ``[start, end)``, fewer if the log ends first."""
        request = audit_pb2.GetEntriesRequest(start=start, end=end)
        call = self._audit.GetEntries(request, timeout=timeout, metadata=self._metadata)
        try:
            expected = start
            async for response in call:
                for entry in response.entries:
                    expected = _common.check_entry(entry, expected)
                    yield entry
        finally:
            call.cancel()

    async def get_inclusion_proof(
        self, index: int, tree_size: int, *, timeout: float | None = None
    ) -> list[bytes]:
        """The inclusion proof of entry ``index`` in the tree of ``tree_size`` entries."""
        request = audit_pb2.GetInclusionProofRequest(index=index, tree_size=tree_size)
        return list((await self._unary(self._audit.GetInclusionProof, request, timeout)).hashes)

    async def get_consistency_proof(
        self, first_size: int, second_size: int, *, timeout: float | None = None
    ) -> list[bytes]:
        """The consistency proof from the tree of ``first_size`` to that of ``second_size``."""
        request = audit_pb2.GetConsistencyProofRequest(
            first_size=first_size, second_size=second_size
        )
        response = await self._unary(self._audit.GetConsistencyProof, request, timeout)
        return list(response.hashes)

    async def get_public_keys(
        self, *, timeout: float | None = None
    ) -> audit_pb2.GetPublicKeysResponse:
        """The log's origin, verifier keys and key rotation statements."""
        request = audit_pb2.GetPublicKeysRequest()
        return await self._unary(self._audit.GetPublicKeys, request, timeout)

    async def watch_entries(
        self, start_index: int = 0, *, resume: bool = True, timeout: float | None = None
    ) -> AsyncGenerator[audit_pb2.Entry, None]:
        """Every entry from ``start_index`` on, then each new one as it is appended; resumed
        after ``UNAVAILABLE`` from the next index due (see ``GnauClient.watch_entries``)."""
        expected = start_index
        while True:
            request = audit_pb2.WatchEntriesRequest(start_index=expected)
            call = self._audit.WatchEntries(request, timeout=timeout, metadata=self._metadata)
            opened_at = expected
            try:
                async for response in call:
                    for entry in response.entries:
                        expected = _common.check_entry(entry, expected)
                        yield entry
                return
            except aio.AioRpcError as error:
                if not (
                    resume and error.code() is grpc.StatusCode.UNAVAILABLE and expected > opened_at
                ):
                    raise
            finally:
                call.cancel()

    async def get_report(
        self,
        *,
        period: str = "",
        since: str = "",
        until: str = "",
        operator: str = "",
        table_ids: Sequence[str] = (),
        format: str = "",
        timeout: float | None = None,
    ) -> audit_pb2.GetReportResponse:
        """The report of docs/reports.md, computed by the service from its log (auditor only):
        ``report`` (CSV, or JSON with ``format="json"``) and the ``log_size`` it covers. A long
        log takes a while: give a ``timeout`` to match."""
        request = audit_pb2.GetReportRequest(
            period=period,
            since=since,
            until=until,
            operator=operator,
            table_ids=list(table_ids),
            format=format,
        )
        return await self._unary(self._audit.GetReport, request, timeout)

    async def verify_software(
        self, *, timeout: float | None = None
    ) -> audit_pb2.VerifySoftwareResponse:
        """Software authentication on demand, as :meth:`GnauClient.verify_software
        <gnau_client.client.GnauClient.verify_software>`."""
        request = audit_pb2.VerifySoftwareRequest()
        return await self._unary(self._audit.VerifySoftware, request, timeout)

    async def lookup_player(
        self,
        *,
        player_id: str | None = None,
        player_ref: str | None = None,
        timeout: float | None = None,
    ) -> audit_pb2.LookupPlayerResponse:
        """A player's seats (``player_id`` and ``seats``: round id, seat number, reference), or
        the seat and player a ``player_ref`` names, while the player's key exists (auditor or
        operator); give exactly one. Unknown or forgotten: an empty ``player_id``."""
        request = _common.lookup_player_request(player_id, player_ref)
        return await self._unary(self._audit.LookupPlayer, request, timeout)

    async def verify_round(
        self, round_id: str, *, timeout: float | None = None
    ) -> audit_pb2.VerifyRoundResponse:
        """The server's recomputation of a revealed round from its log."""
        request = audit_pb2.VerifyRoundRequest(round_id=round_id)
        return await self._unary(self._audit.VerifyRound, request, timeout)
