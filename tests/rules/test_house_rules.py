import pytest

from gnau_service.rules.errors import HouseRulesError
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule


def test_defaults_are_the_rules_page_defaults() -> None:
    assert HouseRules().as_dict() == {
        "ten_is_duke": False,
        "three_six_pair": False,
        "trips_make_ox": True,
        "five_small": True,
        "tie": "dealer",
        "payout": "points",
        "suited_double": False,
        "decks": 1,
    }


def test_assignments_set_every_key() -> None:
    rules = HouseRules.from_assignments(
        [
            "ten_is_duke=true",
            "three_six_pair=TRUE",
            "trips_make_ox=false",
            "five_small=false",
            "tie=high_card",
            "payout=multiplier",
            "suited_double=true",
            "decks=3",
        ]
    )
    assert rules == HouseRules(
        ten_is_duke=True,
        three_six_pair=True,
        trips_make_ox=False,
        five_small=False,
        tie=TieRule.HIGH_CARD,
        payout=PayoutTable.MULTIPLIER,
        suited_double=True,
        decks=3,
    )


def test_as_dict_round_trips_through_from_mapping() -> None:
    rules = HouseRules(tie=TieRule.PUSH, decks=2, suited_double=True)
    assert HouseRules.from_mapping(rules.as_dict()) == rules


@pytest.mark.parametrize(
    ("values", "key", "message"),
    [
        ({"colour": True}, "colour", "unknown house rule 'colour'"),
        ({"tie": "player"}, "tie", "'tie' must be one of dealer|push|high_card"),
        ({"payout": 2}, "payout", "'payout' must be one of points|multiplier"),
        ({"ten_is_duke": "yes"}, "ten_is_duke", "'ten_is_duke' must be true or false"),
        ({"five_small": 1}, "five_small", "'five_small' must be true or false"),
        ({"decks": 0}, "decks", "from 1 to 8, got 0"),
        ({"decks": 9}, "decks", "from 1 to 8, got 9"),
        ({"decks": True}, "decks", "got True"),
        ({"decks": 1.5}, "decks", "got 1.5"),
    ],
)
def test_bad_values_are_refused_naming_the_key(
    values: dict[str, object], key: str, message: str
) -> None:
    with pytest.raises(HouseRulesError, match=message) as caught:
        HouseRules.from_mapping(values)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("decks", "must be KEY=VALUE"),
        ("decks=two", "'decks' must be an integer"),
        ("suited_double=1", "must be true or false, got '1'"),
        ("tie=", "'tie' must be one of"),
        ("=true", "unknown house rule ''"),
    ],
)
def test_bad_assignments_are_refused(assignment: str, message: str) -> None:
    with pytest.raises(HouseRulesError, match=message):
        HouseRules.from_assignments([assignment])


def test_house_rules_are_immutable() -> None:
    rules = HouseRules()
    with pytest.raises(AttributeError):
        rules.decks = 2  # type: ignore[misc]
