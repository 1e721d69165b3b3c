"""Replaying a round from its log entries: each event must follow from the ones before it.

The payloads of a round's events (:mod:`gnau_service.audit.round_events`) are the fields of its
revealed-round JSON, so replaying is merging the first three payloads into a revealed round,
running the fairness verifier on it, and re-settling the dealt hands under the committed house
rules; a void's seed is checked against the commitment, and a void after the deal must pay every
seat exactly the better of its result and a refund of its stake. Each event's ``actor``, where it
has one, must be one (:func:`~gnau_service.audit.actors.check_actor`). Each event's ``operator``
(:mod:`gnau_service.audit.operators`), where it has one, must be an operator id, and a round's
events all name the same operator or none does (logs from before operators name none: those
rounds are the default operator's). A table has at most one unfinished round per operator.

>>> from gnau_service.audit.round_events import (
...     committed_payload, dealt_payload, revealed_payload, settle_round, settled_payload,
... )
>>> from gnau_service.fairness.round import CommittedRound
>>> from gnau_service.fairness.transcript import LockedSeat
>>> from gnau_service.rules.house_rules import HouseRules
>>> committed = CommittedRound("r-1", HouseRules(), bytes(32))
>>> dealt = committed.lock([LockedSeat(1, "p-" + "a0" * 16, 5)]).deal()
>>> replay = RoundReplay()
>>> replay.feed(EntryKind.ROUND_COMMITTED, "r-1", committed_payload(committed, "t-1"))
>>> replay.feed(EntryKind.ROUND_DEALT, "r-1", dealt_payload(dealt))
>>> replay.feed(EntryKind.ROUND_REVEALED, "r-1", revealed_payload(dealt))
>>> replay.feed(EntryKind.ROUND_SETTLED, "r-1", settled_payload(settle_round(dealt.reveal())))
>>> replay.settled
1
>>> replay.feed(EntryKind.ROUND_DEALT, "r-1", dealt_payload(dealt))
Traceback (most recent call last):
...
gnau_service.audit.replay.ReplayError: round r-1: ROUND_DEALT after ROUND_SETTLED
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from gnau_service.audit.actors import CONTROL_CHARACTER, SERVICE, check_actor
from gnau_service.audit.entries import EntryKind, JsonValue, clip, is_hash_hex
from gnau_service.audit.operators import DEFAULT_OPERATOR, OPERATOR_FIELD, check_operator
from gnau_service.audit.round_events import (
    ACTOR_FIELD,
    COMMITTED_FIELDS,
    CURRENCY_FIELD,
    DEALT_FIELDS,
    DISCLOSED_FIELD,
    MAX_VOID_REASON_BYTES,
    REVEALED_FIELDS,
    SETTLING_VOID_FIELDS,
    SOFTWARE_FIELD,
    TABLE_VERSION_FIELD,
    VERSION_FIELD,
    VOIDED_FIELDS,
    VoidReason,
    committed_version,
    paid_payload,
    settle_round,
    settled_payload,
)
from gnau_service.common.quoting import quoted
from gnau_service.fairness.commitment import compute_commitment
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.reveal import REVEALED_ROUND_FORMATS, VERSION_OF_FORMAT, RevealedRound
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.currency import Currency
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer, ReturnToPlayerError
from gnau_service.rules.settlement import settle_interrupted

# Which event may follow which: None is "nothing logged yet for this round".
_ALLOWED_AFTER: Final[dict[EntryKind, tuple[EntryKind | None, ...]]] = {
    EntryKind.ROUND_COMMITTED: (None,),
    EntryKind.ROUND_DEALT: (EntryKind.ROUND_COMMITTED,),
    EntryKind.ROUND_REVEALED: (EntryKind.ROUND_DEALT,),
    EntryKind.ROUND_SETTLED: (EntryKind.ROUND_REVEALED,),
    EntryKind.ROUND_VOIDED: (
        EntryKind.ROUND_COMMITTED,
        EntryKind.ROUND_DEALT,
        EntryKind.ROUND_REVEALED,
    ),
}


class ReplayError(ValueError):
    """A round whose entries do not follow from each other; the message names round and link."""


@dataclass
class _RoundState:
    last: EntryKind
    document: dict[str, Any]
    #: The round's operator and table_id as canonical JSON (any JSON value is signed as logged).
    table: str = ""
    #: The operator its ROUND_COMMITTED names; None for a round logged before operators.
    operator: str | None = None


@dataclass(frozen=True)
class RoundCheck:
    """The costly part of replaying one event (fairness, settlement, or a void's seed), apart
    from the ordering, so that it can run in another process. :meth:`run` raises
    :class:`ReplayError` if the event does not follow from the round's earlier ones."""

    kind: EntryKind
    round_id: str
    document: dict[str, Any]
    payload: dict[str, JsonValue]
    #: The round's event before this one (a void's checks depend on it).
    after: EntryKind | None = None

    def run(self) -> None:
        if self.kind is EntryKind.ROUND_REVEALED:
            _verify_fairness(self.round_id, self.document)
        elif self.kind is EntryKind.ROUND_SETTLED:
            # Its fairness was the reveal's check, which always comes first.
            _verify_settlement(self.round_id, _read(self.round_id, self.document), self.payload)
        else:
            _verify_void(self.round_id, self.document, self.payload, self.after)


def run_check(check: RoundCheck) -> str | None:
    """:meth:`RoundCheck.run` as a reason or None: the shape a worker process returns."""
    try:
        check.run()
    except ReplayError as error:
        return str(error)
    return None


@dataclass
class RoundReplay:
    """Replays round events in log order; :meth:`feed` raises :class:`ReplayError` on the first
    event that does not follow from the ones before it."""

    settled: int = 0
    voided: int = 0
    _rounds: dict[str, _RoundState] = field(default_factory=dict)
    #: Each table's unfinished round, by the operator and table as canonical JSON: an operator's
    #: table has at most one (docs/integration.md), so a commitment for a table in this map is
    #: refused. Two operators may each have a table of the same id.
    _unfinished_by_table: dict[str, str] = field(default_factory=dict)

    def knows(self, round_id: str) -> bool:
        """Whether the round's commitment has been replayed."""
        return round_id in self._rounds

    @property
    def open_rounds(self) -> list[str]:
        """Rounds neither settled nor voided (still in play when the log was read)."""
        return [
            round_id
            for round_id, state in self._rounds.items()
            if state.last not in (EntryKind.ROUND_SETTLED, EntryKind.ROUND_VOIDED)
        ]

    def feed(self, kind: EntryKind, round_id: str, payload: dict[str, JsonValue]) -> None:
        """Replay one event completely, here and now."""
        check = self.stage(kind, round_id, payload)
        if check is not None:
            check.run()

    def stage(
        self, kind: EntryKind, round_id: str, payload: dict[str, JsonValue]
    ) -> RoundCheck | None:
        """Check the event's place in its round and take in its fields; return the costly
        rest of its replay, for the caller to run (here, or in a worker process)."""
        state = self._rounds.get(round_id)
        last = None if state is None else state.last
        if last not in _ALLOWED_AFTER[kind]:
            after = "before anything else" if last is None else f"after {last}"
            raise ReplayError(f"round {round_id}: {kind} {after}")
        operator, payload = _without_operator(round_id, kind, payload)
        if state is not None and operator != state.operator:
            raise ReplayError(
                f"round {round_id}: {kind} names {_named(operator)}, its ROUND_COMMITTED "
                f"{_named(state.operator)}: every entry of a round names the same operator, or "
                "none does"
            )
        payload = _without_actor(round_id, kind, payload)
        if kind is EntryKind.ROUND_COMMITTED:
            # Exactly its own fields: a payload member must not stand in for the round id or
            # format that replay puts in the document itself.
            optional = tuple(key for key in COMMITTED_OPTIONAL if key in payload)
            fields = _only(payload, (*COMMITTED_FIELDS, *optional), round_id, kind)
            _require_every_rule(round_id, fields["house_rules"])
            if DISCLOSED_FIELD in payload:
                _check_disclosed(round_id, payload[DISCLOSED_FIELD])
            _check_table_played(round_id, payload)
            try:
                version = committed_version(payload)
            except ValueError as error:
                raise ReplayError(f"round {round_id}: {clip(str(error))}") from None
            document: dict[str, Any] = {
                "format": REVEALED_ROUND_FORMATS[version],
                "round_id": round_id,
            }
            document |= {key: fields[key] for key in ("house_rules", "commitment")}
            table = json.dumps([operator or DEFAULT_OPERATOR, fields["table_id"]], sort_keys=True)
            previous = self._unfinished_by_table.get(table)
            if previous is not None:
                of_operator = "" if operator is None else f" of operator {quoted(operator)}"
                raise ReplayError(
                    f"round {round_id}: ROUND_COMMITTED for table {quoted(fields['table_id'])}"
                    f"{of_operator} while its round {previous} is neither settled nor voided"
                )
            self._unfinished_by_table[table] = round_id
            self._rounds[round_id] = _RoundState(kind, document, table, operator)
            return None
        assert state is not None
        state.last = kind
        if kind is EntryKind.ROUND_DEALT:
            if SOFTWARE_FIELD in payload:
                _check_software(round_id, payload[SOFTWARE_FIELD])
                payload = {key: value for key, value in payload.items() if key != SOFTWARE_FIELD}
            state.document.update(_only(payload, DEALT_FIELDS, round_id, kind))
            _require_client_seeds(round_id, payload["seats"])
            return None
        if kind is EntryKind.ROUND_REVEALED:
            state.document.update(_only(payload, REVEALED_FIELDS, round_id, kind))
            return RoundCheck(kind, round_id, dict(state.document), {})
        if kind is EntryKind.ROUND_SETTLED:
            self.settled += 1
        else:
            self.voided += 1
        # Finished: its table is free, and only its last event is kept, enough to refuse
        # anything after it.
        self._unfinished_by_table.pop(state.table, None)
        self._rounds[round_id] = _RoundState(kind, {})
        return RoundCheck(kind, round_id, state.document, payload, last)


def _read(round_id: str, document: dict[str, Any]) -> RevealedRound:
    try:
        return RevealedRound.from_json(document)
    except FairnessError as error:
        raise ReplayError(
            f"round {round_id}: its logged fields do not form a round: {clip(str(error))}"
        ) from None


def _verify_fairness(round_id: str, document: dict[str, Any]) -> None:
    revealed = _read(round_id, document)
    report = verify_revealed_round(revealed)
    if not report.ok:
        raise ReplayError(f"round {round_id}: {clip(str(report.first_failure))}")


def _verify_void(
    round_id: str,
    document: dict[str, Any],
    payload: dict[str, JsonValue],
    after: EntryKind | None,
) -> None:
    """A void's form, what it pays, and its seed against the commitment. ``payload`` still has
    its actor (a deadline's void is the service's alone)."""
    if "reason_code" not in payload:
        _verify_void_without_code(round_id, payload, after)
    else:
        _verify_void_with_code(round_id, document, payload, after)
    seed = payload["server_seed"]
    assert isinstance(seed, str)
    house_rules = document.get("house_rules")
    if not isinstance(house_rules, dict):
        raise ReplayError(
            f"round {round_id}: its void cannot be checked: the committed house_rules are "
            f"{quoted(house_rules)}, not a JSON object"
        )
    try:
        rules = HouseRules.from_mapping(house_rules)
        version = VERSION_OF_FORMAT[document["format"]]
        commitment = compute_commitment(round_id, rules, bytes.fromhex(seed), version)
    except (ValueError, RulesError, FairnessError) as error:
        raise ReplayError(
            f"round {round_id}: its void cannot be checked: {clip(str(error))}"
        ) from None
    if commitment.hex() != document.get("commitment"):
        raise ReplayError(
            f"round {round_id}: the seed revealed by its void does not match its commitment"
        )


def _verify_void_without_code(
    round_id: str, payload: dict[str, JsonValue], after: EntryKind | None
) -> None:
    """A void from before reason codes: a reason, the state, the seed; before the deal only."""
    fields = {key: value for key, value in payload.items() if key != ACTOR_FIELD}
    _only(fields, ("reason", "state", "server_seed"), round_id, EntryKind.ROUND_VOIDED)
    seed, reason = payload["server_seed"], payload["reason"]
    if not isinstance(seed, str) or not isinstance(reason, str) or not reason:
        raise ReplayError(f"round {round_id}: ROUND_VOIDED must carry a reason and the seed")
    if after is not EntryKind.ROUND_COMMITTED:
        raise ReplayError(
            f"round {round_id}: its void after the deal settles nothing: a void after the deal "
            "must pay every seat the better of its result and a refund of its stake"
        )


def _verify_void_with_code(
    round_id: str,
    document: dict[str, Any],
    payload: dict[str, JsonValue],
    after: EntryKind | None,
) -> None:
    fields = {key: value for key, value in payload.items() if key != ACTOR_FIELD}
    code, reason, state, seed = (fields.get(name) for name in VOIDED_FIELDS)
    if not isinstance(code, str) or code not in set(VoidReason):
        raise ReplayError(
            f"round {round_id}: ROUND_VOIDED's reason_code {quoted(code)} is not one of "
            f"{', '.join(VoidReason)}"
        )
    reason_code = VoidReason(str(code))
    if not isinstance(reason, str) or not isinstance(seed, str):
        raise ReplayError(f"round {round_id}: ROUND_VOIDED's reason and server_seed are strings")
    if len(reason.encode("utf-8", "surrogatepass")) > MAX_VOID_REASON_BYTES or (
        CONTROL_CHARACTER.search(reason)
    ):
        raise ReplayError(
            f"round {round_id}: ROUND_VOIDED's reason must be at most {MAX_VOID_REASON_BYTES} "
            "bytes of UTF-8 without control characters"
        )
    if reason_code is VoidReason.DEAL_DEADLINE_PASSED and (
        state != "SHUFFLED" or payload.get(ACTOR_FIELD, SERVICE) != SERVICE
    ):
        raise ReplayError(
            f"round {round_id}: DEAL_DEADLINE_PASSED is the service's void of a SHUFFLED round"
        )
    if after is EntryKind.ROUND_COMMITTED:
        if state != "SHUFFLED":
            raise ReplayError(
                f"round {round_id}: its void before the deal says state {quoted(state)}"
            )
        _only(fields, VOIDED_FIELDS, round_id, EntryKind.ROUND_VOIDED)
        return
    if after is not EntryKind.ROUND_REVEALED:
        raise ReplayError(
            f"round {round_id}: a void after the deal must follow the round's ROUND_REVEALED"
        )
    if state not in ("DEALT", "REVEALED"):
        raise ReplayError(f"round {round_id}: its void after the deal says state {quoted(state)}")
    _only(fields, (*VOIDED_FIELDS, *SETTLING_VOID_FIELDS), round_id, EntryKind.ROUND_VOIDED)
    if seed != document.get("server_seed"):
        raise ReplayError(
            f"round {round_id}: the seed of its void is not the seed its reveal published"
        )
    revealed = _read(round_id, document)
    _require_hand_per_seat(round_id, revealed)
    try:
        result = settle_round(revealed)
    except RulesError as error:
        raise ReplayError(
            f"round {round_id}: its hands cannot be settled: {clip(str(error))}"
        ) from None
    expected_result = settled_payload(result)
    if not _same_json(fields["result"], expected_result):
        raise ReplayError(
            f"round {round_id}: its void's result does not follow from the dealt hands "
            f"({_first_difference(expected_result, fields['result'], 'result')})"
        )
    expected_paid = paid_payload(settle_interrupted(result))
    if not _same_json(fields["paid"], expected_paid):
        raise ReplayError(
            f"round {round_id}: its void does not pay every seat the better of its result and a "
            f"refund of its stake ({_first_difference(expected_paid, fields['paid'], 'paid')})"
        )


def _without_operator(
    round_id: str, kind: EntryKind, payload: dict[str, JsonValue]
) -> tuple[str | None, dict[str, JsonValue]]:
    """The operator ``payload`` names (None where it names none, as in logs from before
    operators), once checked, and ``payload`` without it: the operator says whose round it is,
    and is no field of the round."""
    if OPERATOR_FIELD not in payload:
        return None, payload
    operator = payload[OPERATOR_FIELD]
    problem = check_operator(operator)
    if problem is not None:
        raise ReplayError(f"round {round_id}: {kind}'s {clip(problem)}")
    assert isinstance(operator, str)
    return operator, {key: value for key, value in payload.items() if key != OPERATOR_FIELD}


def _named(operator: str | None) -> str:
    return "no operator" if operator is None else f"operator {quoted(operator)}"


def _without_actor(
    round_id: str, kind: EntryKind, payload: dict[str, JsonValue]
) -> dict[str, JsonValue]:
    """``payload`` without its actor, once the actor (where there is one) is checked: the
    actor says who, and is no field of the round. A void keeps it (see :func:`_verify_void`)."""
    if ACTOR_FIELD not in payload:
        return payload
    problem = check_actor(payload[ACTOR_FIELD])
    if problem is not None:
        raise ReplayError(f"round {round_id}: {kind}'s {clip(problem)}")
    if kind is EntryKind.ROUND_VOIDED:
        return payload
    return {key: value for key, value in payload.items() if key != ACTOR_FIELD}


def _check_software(round_id: str, software: JsonValue) -> None:
    """A dealt event's software, as SERVICE_STARTED names it: a non-empty name and version, and
    the package's SHA-256 in 64 lower-case hex digits."""
    if not (
        isinstance(software, dict)
        and set(software) == {"name", "version", "sha256"}
        and all(isinstance(software[key], str) and software[key] for key in ("name", "version"))
        and is_hash_hex(software["sha256"])
    ):
        raise ReplayError(
            f"round {round_id}: ROUND_DEALT's software must be an object of a non-empty name and "
            "version and a sha256 of 64 lower-case hex digits"
        )


def _verify_settlement(
    round_id: str, revealed: RevealedRound, payload: dict[str, JsonValue]
) -> None:
    _require_hand_per_seat(round_id, revealed)
    try:
        expected = settle_round(revealed).to_json()
    except RulesError as error:
        raise ReplayError(
            f"round {round_id}: its hands cannot be settled: {clip(str(error))}"
        ) from None
    if not _same_json(payload, expected):
        raise ReplayError(
            f"round {round_id}: the logged settlement does not follow from the dealt hands "
            f"({_first_difference(expected, payload)})"
        )


def _require_hand_per_seat(round_id: str, revealed: RevealedRound) -> None:
    """The reveal's check refuses a round whose hands are not one per locked seat, but it may
    run in another worker at the same time as a settlement's or a void's, so neither may
    assume it passed."""
    seats = [seat.seat_number for seat in revealed.seats]
    if [hand.seat_number for hand in revealed.seat_hands] != seats:
        raise ReplayError(f"round {round_id}: its hands are not one for each locked seat {seats}")


def _same_json(logged: object, expected: object) -> bool:
    """Equal as JSON: Python's ``==`` would take a logged ``false`` for ``0``, ``true`` for 1."""
    return json.dumps(logged, sort_keys=True) == json.dumps(expected, sort_keys=True)


def _check_disclosed(round_id: str, figures: JsonValue) -> None:
    """The shape of the disclosed figures and their agreement with each other. Whether they
    are the rule set's is for its PAR sheet to say (``gnau par``, docs/par.md): replay does not
    spend seconds per rule set recomputing it."""
    try:
        ReturnToPlayer.from_json(figures)
    except ReturnToPlayerError as error:
        raise ReplayError(f"round {round_id}: {clip(str(error))}") from None


#: The members a committed entry may carry besides its own: the disclosed figures, the fairness
#: version, and the table's catalogue version with the round's currency (issue 38).
COMMITTED_OPTIONAL: Final = (DISCLOSED_FIELD, VERSION_FIELD, TABLE_VERSION_FIELD, CURRENCY_FIELD)


def _check_table_played(round_id: str, payload: dict[str, JsonValue]) -> None:
    """The table version and the currency are both there or both absent (a round from before
    the catalogue): a positive version, and an ISO 4217 code with a minor-unit exponent of 0 to
    4 (their form only; whether the catalogue had that version is its TABLE_CHANGED entries')."""
    present = [key for key in (TABLE_VERSION_FIELD, CURRENCY_FIELD) if key in payload]
    if not present:
        return
    if len(present) == 1:
        raise ReplayError(
            f"round {round_id}: ROUND_COMMITTED names {TABLE_VERSION_FIELD} and {CURRENCY_FIELD}"
            " together or neither"
        )
    version = payload[TABLE_VERSION_FIELD]
    if type(version) is not int or version < 1:
        raise ReplayError(
            f"round {round_id}: ROUND_COMMITTED's {TABLE_VERSION_FIELD} must be a positive"
            f" integer, got {quoted(version)}"
        )
    try:
        Currency.from_json(payload[CURRENCY_FIELD])
    except ValueError as error:
        raise ReplayError(f"round {round_id}: ROUND_COMMITTED's {clip(str(error))}") from None


#: Every house rule by name: a logged ``house_rules`` names them all.
_RULE_NAMES: Final = tuple(HouseRules().as_dict())


def _require_every_rule(round_id: str, house_rules: JsonValue) -> None:
    """A logged round is in the one form the service writes (docs/audit.md, *Rounds in the
    log*): its committed ``house_rules`` name every rule, though a revealed round given to a
    verifier may leave a default out. Any other fault is the revealed-round reader's to name."""
    if isinstance(house_rules, dict):
        missing = [name for name in _RULE_NAMES if name not in house_rules]
        if missing:
            raise ReplayError(
                f"round {round_id}: ROUND_COMMITTED's house_rules must name every rule; "
                f"missing: {', '.join(missing)}"
            )


def _require_client_seeds(round_id: str, seats: JsonValue) -> None:
    """Each logged seat carries its ``client_seed`` (``""`` for none), though a revealed round
    given to a verifier may leave an empty one out."""
    if isinstance(seats, list):
        for index, seat in enumerate(seats):
            if isinstance(seat, dict) and "client_seed" not in seat:
                raise ReplayError(
                    f"round {round_id}: ROUND_DEALT's seats[{index}].client_seed is missing: a "
                    f'logged seat always carries it ("" for none)'
                )


def _only(
    payload: dict[str, JsonValue], fields: tuple[str, ...], round_id: str, kind: EntryKind
) -> dict[str, JsonValue]:
    if set(payload) != set(fields):
        raise ReplayError(
            f"round {round_id}: {kind} must carry exactly {', '.join(fields)}, "
            f"got {quoted(sorted(payload), 120)}"
        )
    return payload


def _first_difference(expected: object, logged: object, path: str = "settlement") -> str:
    if isinstance(expected, dict) and isinstance(logged, dict):
        for key in sorted(set(expected) | set(logged)):
            if expected.get(key) != logged.get(key):
                return _first_difference(expected.get(key), logged.get(key), f"{path}.{key}")
    if isinstance(expected, list) and isinstance(logged, list) and len(expected) == len(logged):
        for position, (ours, theirs) in enumerate(zip(expected, logged, strict=True)):
            if ours != theirs:
                return _first_difference(ours, theirs, f"{path}[{position}]")
    return f"{path} is {quoted(logged)}, the rules give {quoted(expected)}"
