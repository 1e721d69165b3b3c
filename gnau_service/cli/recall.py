"""Game recall: a round's history read back from the log, for people (``gnau audit show`` and
``gnau audit round``) and, with ``--json``, for programs.

Every entry shown is decoded and its signature verified against the log's keys first; the
rendering only reads what verified. ``docs/audit.md`` states the JSON shapes.
"""

from __future__ import annotations

from typing import Protocol

from gnau_service.audit.entries import EntryKind, JsonValue, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.round_events import RoundEvent, RoundHistory
from gnau_service.cli.amounts import signed_amount
from gnau_service.rules.cards import parse_card
from gnau_service.rules.evaluation import Category, HandRank


class RoundReader(Protocol):
    """What reading a round's history needs: a database's LogReader, or the log over gRPC."""

    def public_keys(self) -> list[str]: ...
    def round_entries(self, round_id: str) -> list[bytes]: ...


def read_history(log: RoundReader, round_id: str) -> RoundHistory:
    """A round's entries, each verified (raises EntryError or NoteError if one does not)."""
    keys = [Verifier.from_vkey(vkey) for vkey in log.public_keys()]
    events = []
    for data in log.round_entries(round_id):
        entry = decode_entry(data, *keys)
        events.append(RoundEvent(entry.index, entry.time, entry.kind, entry.payload))
    return RoundHistory(round_id, tuple(events))


# -- JSON ------------------------------------------------------------------------------------------


def summary_json(history: RoundHistory) -> dict[str, JsonValue]:
    """One round in brief (a line of ``gnau audit show --json``): where it is in the log, its
    state and, once settled, its settlement as logged."""
    return {
        "round_id": history.round_id,
        "table_id": history.payload(EntryKind.ROUND_COMMITTED).get("table_id"),
        "state": history.state,
        "first_index": history.events[0].index,
        "last_index": history.events[-1].index,
        "time": history.events[-1].time,
        "settlement": history.payload(EntryKind.ROUND_SETTLED) or None,
    }


def record_json(history: RoundHistory) -> dict[str, JsonValue]:
    """One round in full (``gnau audit round --json``): every event with its payload as logged."""
    return {
        "round_id": history.round_id,
        "table_id": history.payload(EntryKind.ROUND_COMMITTED).get("table_id"),
        "state": history.state,
        "events": [
            {
                "index": event.index,
                "time": event.time,
                "kind": str(event.kind),
                "payload": event.payload,
            }
            for event in history.events
        ],
    }


# -- for people ------------------------------------------------------------------------------------


def one_line(history: RoundHistory) -> str:
    settled = history.payload(EntryKind.ROUND_SETTLED)
    when = history.events[-1].time[:19].replace("T", " ")
    head = f"{when}  {history.round_id}  table {history.table_id}  {history.state}"
    if not settled:
        return head
    dealer = _object(settled.get("dealer"))
    seats = ", ".join(
        f"seat {player['seat']} {player['outcome']} {_signed(player['delta'])}"
        for player in map(_object, _list(settled.get("players")))
    )
    return f"{head}  dealer {_rank_title(dealer)} ({_signed(dealer.get('delta'))})  {seats}"


def full_record(history: RoundHistory) -> list[str]:
    committed = history.payload(EntryKind.ROUND_COMMITTED)
    dealt = history.payload(EntryKind.ROUND_DEALT)
    revealed = history.payload(EntryKind.ROUND_REVEALED)
    settled = history.payload(EntryKind.ROUND_SETTLED)
    voided = history.payload(EntryKind.ROUND_VOIDED)
    rules = _object(committed.get("house_rules"))
    lines = [
        f"round {history.round_id}   table {history.table_id}   {history.state}",
        "house rules: " + ", ".join(f"{key}={value}" for key, value in rules.items()),
        f"commitment:  {committed.get('commitment')}",
    ]
    if dealt:
        lines.append(f"transcript:  {dealt.get('transcript_hash')}")
        beacon = dealt.get("beacon")
        if isinstance(beacon, dict):
            lines.append(f"beacon:      {beacon.get('label')} {beacon.get('value')}")
    if revealed:
        lines.append(f"server seed: {revealed.get('server_seed')}")
    lines.append("")
    results = {player["seat"]: player for player in map(_object, _list(settled.get("players")))}
    seats = {seat["seat_number"]: seat for seat in map(_object, _list(dealt.get("seats")))}
    for hand in map(_object, _list(dealt.get("hands"))):
        number = hand["seat_number"]
        seat = seats.get(number, {})
        player = seat.get("player_ref") or seat.get("player_id", "?")
        line = (
            f"seat {number:<3} {player:<12} stake {seat.get('stake', '?'):>8}  "
            f"{_symbols(hand.get('cards'))}"
        )
        if number in results:
            result = results[number]
            line += (
                f"  {_rank_title(result):<22} {result['outcome']!s:<4} "
                f"{_signed(result['delta']):>9}"
            )
        lines.append(line)
    if dealt:
        line = f"{'dealer':<38}{_symbols(dealt.get('dealer_hand'))}"
        dealer = _object(settled.get("dealer"))
        if dealer:
            line += f"  {_rank_title(dealer):<22} {'':<4} {_signed(dealer['delta']):>9}"
        lines.append(line)
    if voided:
        code = voided.get("reason_code")
        why = f"{code} {voided.get('reason') or ''}".strip() if code else voided.get("reason")
        lines.append(f"VOIDED in state {voided.get('state')}: {why}")
        lines.append(f"server seed revealed by the void: {voided.get('server_seed')}")
        paid = _object(voided.get("paid"))
        if paid:
            # After the deal: the better of each seat's result and a refund of its stake.
            lines.append(
                "paid (better of result and refund): "
                + ", ".join(
                    f"seat {p.get('seat')} {_signed(p.get('delta'))}"
                    for p in map(_object, _list(paid.get("players")))
                )
                + f"; dealer {_signed(paid.get('dealer_delta'))}"
            )
    lines.append("")
    lines += [
        f"  #{event.index:<8} {event.time}  {event.kind}"
        + (f"  by {event.payload['actor']}" if "actor" in event.payload else "")
        for event in history.events
    ]
    return lines


def _rank_title(evaluation: dict[str, JsonValue]) -> str:
    """``Double-Ox 8`` from a logged evaluation."""
    value = evaluation.get("value")
    try:
        rank = HandRank.of(
            Category(str(evaluation.get("category"))), value if isinstance(value, int) else None
        )
    except (KeyError, ValueError):
        return "?"
    return f"{rank} (Nenku)" if evaluation.get("nenku") is True else str(rank)


def _symbols(cards: JsonValue) -> str:
    return " ".join(parse_card(str(card)).symbol.rjust(3) for card in _list(cards))


def _signed(value: object) -> str:
    return signed_amount(value) if isinstance(value, int) else "?"


def _object(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []
