"""Between the wire (``gnau.v1`` messages) and the domain: house rules in, rounds and hands out.

Only shapes change here; every rule of the game and of the round lifecycle lives below.
"""

from __future__ import annotations

import functools
from datetime import UTC, date
from typing import Final

from gnau.v1 import audit_pb2, dealer_pb2, round_pb2, types_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from gnau_service.audit.report import Period
from gnau_service.audit.round_events import VoidReason
from gnau_service.audit.timestamps import format_utc_timestamp, parse_utc_timestamp
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.errors import RevealFormatError
from gnau_service.fairness.reveal import (
    REVEALED_ROUND_FORMATS,
    RevealedRound,
    beacon_to_json,
    seat_to_json,
)
from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rounds.catalogue import CatalogueEntry, CatalogueError, TableConfig
from gnau_service.rounds.limits import MAX_RULE_SETS_PER_TABLE
from gnau_service.rounds.record import RoundState
from gnau_service.rounds.refusals import InvalidRequest
from gnau_service.rounds.reporting import ReportQuery
from gnau_service.rounds.requests import check_table_id
from gnau_service.rounds.view import RoundView
from gnau_service.rules.currency import Currency
from gnau_service.rules.errors import RulesError
from gnau_service.rules.evaluation import Category, Evaluation
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import Outcome, Settlement

_TIES: Final = {
    types_pb2.TIE_RULE_DEALER: TieRule.DEALER,
    types_pb2.TIE_RULE_PUSH: TieRule.PUSH,
    types_pb2.TIE_RULE_HIGH_CARD: TieRule.HIGH_CARD,
}
_PAYOUTS: Final = {
    types_pb2.PAYOUT_TABLE_POINTS: PayoutTable.POINTS,
    types_pb2.PAYOUT_TABLE_MULTIPLIER: PayoutTable.MULTIPLIER,
}
_CATEGORIES: Final = {
    category: types_pb2.HandCategory.Value(f"HAND_CATEGORY_{category}") for category in Category
}
_STATES: Final = {state: round_pb2.RoundState.Value(f"ROUND_STATE_{state}") for state in RoundState}
_OUTCOMES: Final = {outcome: round_pb2.Outcome.Value(f"OUTCOME_{outcome}") for outcome in Outcome}


def house_rules_from_proto(message: types_pb2.HouseRules) -> HouseRules:
    """House rules from a request: fields left unset keep the rules page's defaults."""
    values: dict[str, object] = {}
    for name in ("ten_is_duke", "three_six_pair", "trips_make_ox", "five_small", "suited_double"):
        if message.HasField(name):
            values[name] = getattr(message, name)
    if message.HasField("decks"):
        values["decks"] = message.decks
    violations = []
    if message.tie != types_pb2.TIE_RULE_UNSPECIFIED:
        if message.tie not in _TIES:
            violations.append(("house_rules.tie", f"unknown tie rule {message.tie}"))
        else:
            values["tie"] = str(_TIES[message.tie])
    if message.payout != types_pb2.PAYOUT_TABLE_UNSPECIFIED:
        if message.payout not in _PAYOUTS:
            violations.append(("house_rules.payout", f"unknown payout table {message.payout}"))
        else:
            values["payout"] = str(_PAYOUTS[message.payout])
    if violations:
        raise InvalidRequest(violations)
    try:
        return HouseRules.from_mapping(values)
    except ValueError as error:
        raise InvalidRequest([(f"house_rules.{getattr(error, 'key', '')}", str(error))]) from None


def house_rules_to_proto(rules: HouseRules) -> types_pb2.HouseRules:
    return types_pb2.HouseRules(
        ten_is_duke=rules.ten_is_duke,
        three_six_pair=rules.three_six_pair,
        trips_make_ox=rules.trips_make_ox,
        five_small=rules.five_small,
        tie=next(wire for wire, tie in _TIES.items() if tie is rules.tie),
        payout=next(wire for wire, table in _PAYOUTS.items() if table is rules.payout),
        suited_double=rules.suited_double,
        decks=rules.decks,
    )


def return_to_player_to_proto(figures: ReturnToPlayer) -> types_pb2.ReturnToPlayer:
    return types_pb2.ReturnToPlayer(**figures.to_json())


def evaluation_to_proto(evaluation: Evaluation) -> types_pb2.HandEvaluation:
    message = types_pb2.HandEvaluation(
        cards=[str(card) for card in evaluation.cards],
        category=_CATEGORIES[evaluation.category],
        ox=[str(card) for card in evaluation.ox],
        power=[str(card) for card in evaluation.power],
        points=list(evaluation.points),
        nenku=evaluation.nenku,
        strength=evaluation.rank.strength,
        description=evaluation.describe(),
    )
    if evaluation.value is not None:
        message.value = evaluation.value
    return message


def round_to_proto(view: RoundView) -> round_pb2.Round:
    record = view.record
    message = round_pb2.Round(
        round_id=record.round_id,
        table_id=record.table_id,
        operator=record.operator,
        state=_STATES[record.state],
        house_rules=house_rules_to_proto(record.rules),
        commitment=record.commitment.hex(),
        log_key_id=record.key_id,
        seats=[
            round_pb2.Seat(
                seat_number=seat.seat_number,
                # A v1 round locked the platform's id; a later round a reference, whose player
                # the operator's and auditor's views know (while the player's key exists).
                player_id=seat.player
                if record.version is FairnessVersion.V1
                else view.players.get(seat.player, ""),
                player_ref="" if record.version is FairnessVersion.V1 else seat.player,
                stake=seat.stake,
                client_seed=seat.client_seed,
            )
            for seat in record.seats
        ],
        transcript_hash=record.transcript_hash.hex() if record.transcript_hash else "",
        hands=[
            round_pb2.SeatHand(seat_number=hand.seat_number, cards=[str(c) for c in hand.cards])
            for hand in view.hands
        ],
        dealer_hand=[str(card) for card in view.dealer_hand],
        server_seed=view.server_seed.hex() if view.server_seed is not None else "",
        deck=[str(card) for card in view.deck],
        void_reason=record.void_reason or "",
        create_time=_timestamp(record.created_at),
        update_time=_timestamp(record.updated_at),
        log_indices=list(record.log_indices),
        fairness_version=int(record.version),
    )
    if record.return_to_player is not None:
        message.return_to_player.CopyFrom(return_to_player_to_proto(record.return_to_player))
    if record.table_version is not None and record.currency is not None:
        message.table_version = record.table_version
        message.currency.CopyFrom(currency_to_proto(record.currency))
    if record.beacon is not None:
        message.beacon.CopyFrom(
            round_pb2.Beacon(label=record.beacon.label, value=record.beacon.value)
        )
    if view.settlement is not None:
        message.settlement.CopyFrom(settlement_to_proto(view.settlement))
    if view.void_settlement is not None:
        message.void_settlement.CopyFrom(settlement_to_proto(view.void_settlement))
    if record.void_reason_code is not None:
        message.void_reason_code = _VOID_REASONS[record.void_reason_code]
    if record.completed_by is not None:
        message.completed_by = record.completed_by
    if record.completed_at is not None:
        message.complete_time.CopyFrom(_timestamp(record.completed_at))
    if record.due_at is not None:
        message.due_time.CopyFrom(_timestamp(record.due_at))
    return message


def settlement_to_proto(settlement: Settlement) -> round_pb2.Settlement:
    return round_pb2.Settlement(
        seat_results=[
            round_pb2.SeatResult(
                seat_number=seat.seat,
                evaluation=evaluation_to_proto(seat.evaluation),
                stake=seat.stake,
                outcome=_OUTCOMES[seat.outcome],
                delta=seat.delta,
            )
            for seat in settlement.seats
        ],
        dealer_evaluation=evaluation_to_proto(settlement.dealer),
        dealer_delta=settlement.dealer_delta,
    )


def void_reason_from_proto(code: round_pb2.VoidReason.ValueType) -> VoidReason | None:
    """A request's reason code; None for UNSPECIFIED or a number this service does not know
    (the dealer refuses both, naming the codes it takes)."""
    return _VOID_REASONS_BY_NUMBER.get(code)


def timestamp_from_proto(stamp: Timestamp) -> str:
    """A request's timestamp in the log's time form; INVALID_ARGUMENT if out of range."""
    try:
        return format_utc_timestamp(stamp.ToDatetime(tzinfo=UTC))
    except (ValueError, OverflowError):
        raise InvalidRequest(
            [("completed_since", "must be a timestamp from 0001-01-01 to 9999-12-31")]
        ) from None


def revealed_round_from_proto(message: round_pb2.Round) -> RevealedRound:
    """The revealed round a client received, in the verifier's form (``docs/fairness.md``, *From
    the API's Round message*), in the format of the message's ``fairness_version``."""
    beacon = message.beacon if message.HasField("beacon") else None
    version = _fairness_version(message)
    return RevealedRound.from_json(
        {
            "format": REVEALED_ROUND_FORMATS[version],
            "round_id": message.round_id,
            "house_rules": house_rules_from_proto(message.house_rules).as_dict(),
            "seats": [
                seat_to_json(
                    LockedSeat(
                        seat.seat_number,
                        seat.player_ref if version.names_players_by_reference else seat.player_id,
                        seat.stake,
                        seat.client_seed,
                    ),
                    version,
                )
                for seat in message.seats
            ],
            "beacon": None
            if beacon is None
            else beacon_to_json(Beacon(beacon.label, beacon.value)),
            "commitment": message.commitment,
            "transcript_hash": message.transcript_hash,
            "server_seed": message.server_seed,
            "deck": list(message.deck),
            "hands": [
                {"seat_number": hand.seat_number, "cards": list(hand.cards)}
                for hand in message.hands
            ],
            "dealer_hand": list(message.dealer_hand),
        }
    )


def _fairness_version(message: round_pb2.Round) -> FairnessVersion:
    """The message's fairness version; a service older than the field leaves it 0, and there
    a round is v2 if every seat names a player reference (a v1 round's seats never do). Such a
    service never made a v3 round, so a v3 round is always said by its number."""
    if message.fairness_version == 0:
        seats = message.seats
        return (
            FairnessVersion.V2 if seats and all(s.player_ref for s in seats) else FairnessVersion.V1
        )
    try:
        return FairnessVersion(message.fairness_version)
    except ValueError:
        raise RevealFormatError(
            f"fairness_version must be 1, 2 or 3, got {message.fairness_version}",
            field="fairness_version",
        ) from None


def _timestamp(text: str) -> Timestamp:
    seconds, nanos = _epoch(text)
    return Timestamp(seconds=seconds, nanos=nanos)


@functools.lru_cache(maxsize=4096)
def _epoch(text: str) -> tuple[int, int]:
    # A round's times recur in each of its answers; parsing is most of converting them.
    stamp = Timestamp()
    stamp.FromDatetime(parse_utc_timestamp(text))
    return stamp.seconds, stamp.nanos


_VOID_REASONS: Final = {
    reason: round_pb2.VoidReason.Value(f"VOID_REASON_{reason}") for reason in VoidReason
}
_VOID_REASONS_BY_NUMBER: Final = {number: reason for reason, number in _VOID_REASONS.items()}


def currency_to_proto(currency: Currency) -> types_pb2.Currency:
    return types_pb2.Currency(code=currency.code, exponent=currency.exponent)


def table_config_to_proto(config: TableConfig) -> dealer_pb2.TableConfig:
    return dealer_pb2.TableConfig(
        currency=config.currency.code,
        rule_sets=[house_rules_to_proto(rules) for rules in config.rule_sets],
        min_stake=config.min_stake,
        max_stake=config.max_stake,
        max_seats=config.max_seats,
        deal_deadline_seconds=config.deal_seconds or 0,
        settle_deadline_seconds=config.settle_seconds or 0,
        enabled=config.enabled,
    )


def table_to_proto(entry: CatalogueEntry) -> dealer_pb2.Table:
    message = dealer_pb2.Table(
        operator=entry.operator,
        table_id=entry.table_id,
        version=entry.version,
        config=table_config_to_proto(entry.config),
        currency=currency_to_proto(entry.config.currency),
    )
    message.changed_time.CopyFrom(_timestamp(entry.changed_at))
    return message


def table_config_from_proto(config: dealer_pb2.TableConfig) -> TableConfig:
    """The configuration a PutTable asks for; :class:`InvalidRequest` naming each bad field."""
    violations: list[tuple[str, str]] = []
    currency: Currency | None = None
    try:
        currency = Currency.of(config.currency)
    except ValueError as error:
        violations.append(("config.currency", str(error)))
    if len(config.rule_sets) > MAX_RULE_SETS_PER_TABLE:
        violations.append(
            (
                "config.rule_sets",
                f"at most {MAX_RULE_SETS_PER_TABLE} rule sets, not {len(config.rule_sets)}",
            )
        )
    rule_sets: list[HouseRules] = []
    for i, rules in enumerate(config.rule_sets[:MAX_RULE_SETS_PER_TABLE]):
        try:
            rule_sets.append(house_rules_from_proto(rules))
        except RulesError as error:
            violations.append((f"config.rule_sets[{i}]", str(error)))
    for name in ("deal_deadline_seconds", "settle_deadline_seconds"):
        if getattr(config, name) < 0:
            violations.append((f"config.{name}", "must be 0 (the service's) or 1 to 604800"))
    if violations or currency is None:
        raise InvalidRequest(violations)
    try:
        return TableConfig(
            currency,
            tuple(rule_sets),
            min_stake=config.min_stake,
            max_stake=config.max_stake,
            max_seats=config.max_seats,
            deal_seconds=config.deal_deadline_seconds or None,
            settle_seconds=config.settle_deadline_seconds or None,
            enabled=config.enabled,
        )
    except CatalogueError as error:
        raise InvalidRequest([("config", str(error))]) from None


#: The most tables one GetReport may name.
MAX_REPORT_TABLES: Final = 100


def report_query_from_proto(
    request: audit_pb2.GetReportRequest, operator: str | None
) -> ReportQuery:
    """What a GetReport asks for, of ``operator``'s rounds (every operator's if None);
    :class:`InvalidRequest` naming each bad field."""
    violations: list[tuple[str, str]] = []
    periods = {str(period) for period in Period}
    if request.period and request.period not in periods:
        violations.append(("period", f"must be one of {', '.join(sorted(periods))}, or empty"))
    days: dict[str, date | None] = {}
    for name in ("since", "until"):
        text = getattr(request, name)
        try:
            days[name] = date.fromisoformat(text) if text else None
        except ValueError:
            violations.append((name, "must be a date YYYY-MM-DD, or empty"))
            days[name] = None
    since, until = days["since"], days["until"]
    if since is not None and until is not None and until < since:
        violations.append(("until", "must not be before since"))
    if len(request.table_ids) > MAX_REPORT_TABLES:
        violations.append(("table_ids", f"at most {MAX_REPORT_TABLES} tables"))
    for i, table_id in enumerate(request.table_ids[:MAX_REPORT_TABLES]):
        try:
            check_table_id(table_id)
        except InvalidRequest as error:
            violations += [(f"table_ids[{i}]", problem) for _, problem in error.violations]
    if request.format not in ("", "csv", "json"):
        violations.append(("format", "must be csv, json, or empty"))
    if violations:
        raise InvalidRequest(violations)
    return ReportQuery(
        period=Period(request.period or "month"),
        since=since,
        until=until,
        operators=None if operator is None else frozenset({operator}),
        tables=frozenset(request.table_ids) or None,
        form=request.format or "csv",
    )
