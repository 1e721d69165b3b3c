"""Round replay fed hostile payloads: every wrong shape is a named ReplayError, never a crash.

The payloads are signed by the log key, so whoever holds it can log any JSON at all; replay must
refuse each wrong value for a reason it names, like any other link that does not follow.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.entries import MAX_INTEGER, EntryKind, JsonValue
from gnau_service.audit.replay import ReplayError, RoundReplay
from tests.audit.logs import play_round

Event = tuple[EntryKind, dict[str, JsonValue], str]


def honest_events(void_after: EntryKind | None = None) -> list[Event]:
    events: list[Event] = []

    def record(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
        assert round_id is not None
        events.append((kind, copy.deepcopy(payload), round_id))

    play_round(record, "round-1", seats=2, void_after=void_after)
    return events


SETTLED = honest_events()
VOIDED_AFTER_COMMIT = honest_events(void_after=EntryKind.ROUND_COMMITTED)
VOIDED_AFTER_DEAL = honest_events(void_after=EntryKind.ROUND_DEALT)


def replay(events: list[Event]) -> RoundReplay:
    rounds = RoundReplay()
    for kind, payload, round_id in events:
        rounds.feed(kind, round_id, payload)
    return rounds


def test_the_honest_rounds_replay() -> None:
    assert [kind for kind, _, _ in VOIDED_AFTER_DEAL] == [
        EntryKind.ROUND_COMMITTED,
        EntryKind.ROUND_DEALT,
        EntryKind.ROUND_REVEALED,
        EntryKind.ROUND_VOIDED,
    ]
    assert replay(SETTLED).settled == 1
    assert replay(VOIDED_AFTER_COMMIT).voided == replay(VOIDED_AFTER_DEAL).voided == 1


def changed(
    events: list[Event], position: int, edit: Callable[[dict[str, Any]], None]
) -> list[Event]:
    events = copy.deepcopy(events)
    edit(events[position][1])
    return events


def set_path(path: tuple[str | int, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def edit(payload: dict[str, Any]) -> None:
        target: Any = payload
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return edit


COMMITTED, DEALT, REVEALED, SETTLED_AT = 0, 1, 2, 3
# Where each void stands: right after its commitment, or after the reveal its step logs first.
VOID_BEFORE_DEAL, VOID_AFTER_DEAL = 1, 3


@pytest.mark.parametrize(
    ("events", "position", "edit", "reason"),
    [
        (
            SETTLED,
            DEALT,
            set_path(("seats", 0, "stake"), "10"),
            "seats[0].stake must be an integer",
        ),
        (SETTLED, DEALT, set_path(("seats",), {"0": {}}), "seats must be a JSON array"),
        (SETTLED, DEALT, set_path(("seats", 0), []), "seats[0] must be a JSON object"),
        (SETTLED, DEALT, set_path(("hands", 0, "seat_number"), 9), "no hand is published"),
        (SETTLED, DEALT, set_path(("beacon",), 7), "beacon must be a JSON object"),
        (SETTLED, COMMITTED, set_path(("house_rules",), ["decks", 1]), "house_rules must be"),
        (SETTLED, COMMITTED, set_path(("house_rules", "decks"), "1"), "'decks' must be an integer"),
        (SETTLED, COMMITTED, set_path(("round_id",), "another"), "must carry exactly"),
        (SETTLED, COMMITTED, set_path(("format",), "x"), "must carry exactly"),
        (SETTLED, REVEALED, set_path(("deck",), "AS KD"), "deck must be a JSON array"),
        (SETTLED, REVEALED, set_path(("server_seed",), 5), "server_seed must be a string"),
        (SETTLED, SETTLED_AT, set_path(("players",), {}), "settlement.players is {}"),
        (SETTLED, SETTLED_AT, set_path(("dealer", "delta"), "x" * 500), "settlement.dealer.delta"),
        (VOIDED_AFTER_COMMIT, COMMITTED, set_path(("house_rules",), "default"), "house_rules"),
        (VOIDED_AFTER_COMMIT, COMMITTED, set_path(("house_rules",), None), "house_rules"),
        (
            VOIDED_AFTER_COMMIT,
            VOID_BEFORE_DEAL,
            set_path(("server_seed",), ["ab"]),
            "ROUND_VOIDED's reason and server_seed are strings",
        ),
        (
            VOIDED_AFTER_COMMIT,
            VOID_BEFORE_DEAL,
            set_path(("server_seed",), "zz"),
            "cannot be checked",
        ),
        (
            VOIDED_AFTER_DEAL,
            VOID_AFTER_DEAL,
            set_path(("reason",), {}),
            "ROUND_VOIDED's reason and server_seed are strings",
        ),
    ],
    ids=[
        "stake a string",
        "seats an object",
        "seat an array",
        "hand of no seat",
        "beacon a number",
        "house rules a list",
        "decks a string",
        "commit names another round",
        "commit overrides the format",
        "deck a string",
        "seed a number",
        "settlement players an object",
        "settlement delta a long string",
        "void of rules that are a string",
        "void of rules that are null",
        "void seed a list",
        "void seed not hex",
        "void reason an object",
    ],
)
def test_a_wrong_type_in_a_payload_is_a_named_replay_error(
    events: list[Event], position: int, edit: Callable[[dict[str, Any]], None], reason: str
) -> None:
    with pytest.raises(ReplayError, match=r"^round round-1: ") as raised:
        replay(changed(events, position, edit))
    assert reason in str(raised.value)
    assert len(str(raised.value)) < 400


def test_a_settlement_checked_apart_from_its_reveal_refuses_hands_of_no_seat() -> None:
    # Worker processes run a round's settlement check beside its reveal check, so the settlement
    # check cannot count on the reveal's having refused hands that belong to no locked seat.
    events = changed(SETTLED, DEALT, set_path(("hands", 0, "seat_number"), 9))
    rounds = RoundReplay()
    checks = [rounds.stage(kind, round_id, payload) for kind, payload, round_id in events]
    settlement = checks[SETTLED_AT]
    assert settlement is not None and settlement.kind is EntryKind.ROUND_SETTLED
    with pytest.raises(ReplayError, match="its hands are not one for each locked seat"):
        settlement.run()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_INTEGER, MAX_INTEGER)
    | st.text(max_size=10)
    | st.sampled_from(["AS", "KD", "00" * 32, "points", "push", "dealer"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def paths(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in a payload a value can be put: each member and item, at any depth."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [(*prefix, key), *paths(item, (*prefix, key))]
    elif isinstance(value, list):
        for position, item in enumerate(value):
            found += [(*prefix, position), *paths(item, (*prefix, position))]
    return found


@given(
    st.sampled_from([SETTLED, VOIDED_AFTER_COMMIT, VOIDED_AFTER_DEAL]),
    st.data(),
    JSON,
)
def test_any_value_anywhere_in_any_payload_replays_or_is_a_replay_error(
    events: list[Event], data: st.DataObject, value: JsonValue
) -> None:
    position = data.draw(st.integers(0, len(events) - 1))
    places = paths(events[position][1])
    path = data.draw(st.sampled_from(places))
    tampered = changed(events, position, set_path(path, value))
    try:
        replay(tampered)
    except ReplayError as error:
        assert str(error).startswith("round round-1: ")


# -- the disclosed return to player (an optional member of ROUND_COMMITTED) ---------------------

FIGURES = {
    "rtp": "1276/1345",
    "house_edge": "69/1345",
    "rtp_decimal": "0.948699",
    "house_edge_decimal": "0.051301",
}


def with_figures(figures: object) -> list[Event]:
    return changed(SETTLED, 0, lambda payload: payload.update(return_to_player=figures))


def test_a_commitment_with_or_without_disclosed_figures_replays() -> None:
    assert "return_to_player" not in SETTLED[0][1]  # as logs written before the figures
    assert replay(with_figures(FIGURES)).settled == 1


@pytest.mark.parametrize(
    ("why", "figures", "message"),
    [
        ("not an object", "0.95", "must be an object of exactly"),
        ("a decimal that is not text", {**FIGURES, "rtp_decimal": None}, "does not agree"),
        ("an extra member", {**FIGURES, "rtp_percent": "94.87"}, "must be an object of exactly"),
        ("not in lowest terms", {**FIGURES, "rtp": "2552/2690"}, "lowest terms"),
        ("not a fraction", {**FIGURES, "rtp": "0.948699"}, "numerator/denominator"),
        ("a zero denominator", {**FIGURES, "rtp": "1/0"}, "numerator/denominator"),
        ("an edge that is not 1 - rtp", {**FIGURES, "house_edge": "70/1345"}, "does not agree"),
        ("a decimal rounded wrong", {**FIGURES, "rtp_decimal": "0.948700"}, "does not agree"),
        ("a number, not text", {**FIGURES, "rtp": 1}, "numerator/denominator"),
        ("a huge numerator", {**FIGURES, "rtp": "1" * 200 + "/3"}, "numerator/denominator"),
    ],
)
def test_disclosed_figures_that_do_not_agree_are_refused(
    why: str, figures: object, message: str
) -> None:
    with pytest.raises(ReplayError, match=message) as refused:
        replay(with_figures(figures))
    assert "round round-1" in str(refused.value), why
    assert len(str(refused.value)) < 400


# -- one unfinished round per table ------------------------------------------------------------


def round_events(round_id: str, table_id: str, void_after: EntryKind | None = None) -> list[Event]:
    events: list[Event] = []

    def record(kind: EntryKind, payload: dict[str, JsonValue], logged_id: str | None) -> None:
        assert logged_id is not None
        events.append((kind, copy.deepcopy(payload), logged_id))

    play_round(record, round_id, table_id=table_id, seats=2, void_after=void_after)
    return events


def test_a_tables_next_round_committed_before_its_previous_round_ends_is_refused() -> None:
    # The log of issue 23: the next round's commitment, then the previous round's settlement.
    first, second = round_events("r-first", "shared1"), round_events("r-second", "shared1")
    overlapping = [*first[:-1], second[0], first[-1], *second[1:]]
    with pytest.raises(ReplayError) as refused:
        replay(overlapping)
    assert str(refused.value) == (
        "round r-second: ROUND_COMMITTED for table 'shared1' while its round r-first is neither"
        " settled nor voided"
    )


@pytest.mark.parametrize(
    "void_after", [EntryKind.ROUND_COMMITTED, EntryKind.ROUND_DEALT], ids=["shuffled", "dealt"]
)
def test_a_round_committed_while_the_tables_round_awaits_its_void_is_refused(
    void_after: EntryKind,
) -> None:
    first = round_events("r-first", "shared1", void_after=void_after)
    second = round_events("r-second", "shared1")
    with pytest.raises(ReplayError, match="while its round r-first is neither settled nor voided"):
        replay([*first[:-1], second[0], first[-1], *second[1:]])


def test_a_table_takes_a_new_round_once_the_last_is_settled_or_voided() -> None:
    played = [
        *round_events("r-1", "shared1"),
        *round_events("r-2", "shared1", void_after=EntryKind.ROUND_COMMITTED),
        *round_events("r-3", "shared1", void_after=EntryKind.ROUND_DEALT),
        *round_events("r-4", "shared1"),
    ]
    done = replay(played)
    assert (done.settled, done.voided, done.open_rounds) == (2, 2, [])


def test_rounds_of_other_tables_interleave_and_rounds_still_in_play_at_the_end_are_fine() -> None:
    one, two = round_events("r-one", "table-1"), round_events("r-two", "table-2")
    # Interleaved event by event; then each table opens a round that the log ends inside.
    played = [event for pair in zip(one, two, strict=True) for event in pair]
    played += round_events("r-open-1", "table-1")[:2] + round_events("r-open-2", "table-2")[:1]
    done = replay(played)
    assert (done.settled, done.voided) == (2, 0)
    assert sorted(done.open_rounds) == ["r-open-1", "r-open-2"]


def test_tables_are_told_apart_by_their_logged_json() -> None:
    # A table id the service would never write, but signed as logged: 1 and "1" are two tables.
    number, text = round_events("r-number", "1"), round_events("r-text", "1")
    number[0][1]["table_id"] = 1
    done = replay([number[0], text[0]])
    assert sorted(done.open_rounds) == ["r-number", "r-text"]


# -- the operator (issue 38) ------------------------------------------------------------------


def of_operator(events: list[Event], *operators: object) -> list[Event]:
    """``events`` with the operator of each (by position) set as given; ``...`` leaves the
    entry without one."""
    named = copy.deepcopy(events)
    for (_, payload, _), operator in zip(named, operators, strict=True):
        if operator is not ...:
            payload["operator"] = operator  # type: ignore[assignment]
    return named


@pytest.mark.parametrize(
    "events",
    [SETTLED, VOIDED_AFTER_COMMIT, VOIDED_AFTER_DEAL],
    ids=["settled", "shuffled", "dealt"],
)
def test_a_round_naming_its_operator_in_every_entry_or_in_none_replays(events: list[Event]) -> None:
    assert replay(events).settled + replay(events).voided == 1
    named = of_operator(events, *["casino-a"] * len(events))
    assert replay(named).settled + replay(named).voided == 1


OPERATOR_TAMPERING = [
    (
        "changed at the reveal",
        ("casino-a", "casino-a", "casino-b", "casino-a"),
        "round round-1: ROUND_REVEALED names operator 'casino-b', its ROUND_COMMITTED operator "
        "'casino-a': every entry of a round names the same operator, or none does",
    ),
    (
        "changed at the settlement",
        ("casino-a", "casino-a", "casino-a", "default"),
        "round round-1: ROUND_SETTLED names operator 'default', its ROUND_COMMITTED operator "
        "'casino-a'",
    ),
    (
        "missing from the deal",
        ("casino-a", ..., "casino-a", "casino-a"),
        "round round-1: ROUND_DEALT names no operator, its ROUND_COMMITTED operator 'casino-a'",
    ),
    (
        "only on the settlement",
        (..., ..., ..., "casino-a"),
        "round round-1: ROUND_SETTLED names operator 'casino-a', its ROUND_COMMITTED no operator",
    ),
    (
        "not an operator id",
        ("Casino-A", "Casino-A", "Casino-A", "Casino-A"),
        "round round-1: ROUND_COMMITTED's operator 'Casino-A' is not 1 to 64 of a-z, 0-9",
    ),
    (
        "every operator, as a token file says it",
        ("*", "*", "*", "*"),
        "round round-1: ROUND_COMMITTED's operator '*' is not 1 to 64",
    ),
    ("empty", ("", "", "", ""), "round round-1: ROUND_COMMITTED's operator '' is not 1 to 64"),
    (
        "65 characters",
        ("a" * 65,) * 4,
        "round round-1: ROUND_COMMITTED's operator 'aaaa",
    ),
    (
        "a number",
        ("casino-a", "casino-a", 7, "casino-a"),
        "round round-1: ROUND_REVEALED's operator 7 is not a string",
    ),
    ("null", (None, None, None, None), "round round-1: ROUND_COMMITTED's operator None is not"),
]


@pytest.mark.parametrize(
    ("operators", "says"),
    [(operators, says) for _, operators, says in OPERATOR_TAMPERING],
    ids=[name for name, _, _ in OPERATOR_TAMPERING],
)
def test_a_round_whose_operator_changes_is_missing_or_malformed_is_refused(
    operators: tuple[object, ...], says: str
) -> None:
    with pytest.raises(ReplayError) as refused:
        replay(of_operator(SETTLED, *operators))
    assert str(refused.value).startswith(says), refused.value


def test_an_operators_void_names_its_operator_like_the_rest_of_the_round() -> None:
    after_deal = ("casino-a",) * 3
    assert replay(of_operator(VOIDED_AFTER_DEAL, *after_deal, "casino-a")).voided == 1
    with pytest.raises(ReplayError, match="ROUND_VOIDED names no operator"):
        replay(of_operator(VOIDED_AFTER_DEAL, *after_deal, ...))
    with pytest.raises(ReplayError, match="ROUND_VOIDED names operator 'casino-b'"):
        replay(of_operator(VOIDED_AFTER_COMMIT, "casino-a", "casino-b"))


def test_two_operators_each_have_an_unfinished_round_at_a_table_of_one_id() -> None:
    first = of_operator(round_events("r-a", "shared1"), *["casino-a"] * 4)
    second = of_operator(round_events("r-b", "shared1"), *["casino-b"] * 4)
    done = replay([*first[:-1], *second[:-1], first[-1], second[-1]])
    assert done.settled == 2
    third = of_operator(round_events("r-a2", "shared1"), *["casino-a"] * 4)
    with pytest.raises(ReplayError) as refused:
        replay([*first[:-1], third[0]])
    assert str(refused.value) == (
        "round r-a2: ROUND_COMMITTED for table 'shared1' of operator 'casino-a' while its round "
        "r-a is neither settled nor voided"
    )


def test_a_round_logged_before_operators_is_the_default_operators() -> None:
    """A round that names no operator holds its table for the default operator: a round of
    ``default`` at the same table waits for it, one of another operator does not."""
    old = round_events("r-old", "shared1")
    of_default = of_operator(round_events("r-new", "shared1"), *["default"] * 4)
    with pytest.raises(ReplayError, match="while its round r-old is neither settled nor voided"):
        replay([*old[:-1], of_default[0]])
    other = of_operator(round_events("r-other", "shared1"), *["casino-a"] * 4)
    assert replay([*old[:-1], *other, old[-1]]).settled == 2
