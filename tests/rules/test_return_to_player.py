"""The disclosed figures' text forms, against Python's decimal module as an independent oracle."""

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.rules.return_to_player import (
    ReturnToPlayer,
    ReturnToPlayerError,
    decimal_text,
    read_fraction,
)

FRACTIONS = st.fractions(max_denominator=10**22).filter(lambda f: abs(f) < 10**6)


@given(FRACTIONS)
def test_the_decimal_is_the_fraction_rounded_half_even(value: Fraction) -> None:
    with localcontext(prec=80):  # far more digits than the fraction's period can hide a tie in
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        want = exact.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN)
    text = decimal_text(value)
    assert Decimal(text) == want
    assert text.lstrip("-").count(".") == 1 and len(text.split(".")[1]) == 6


@given(FRACTIONS)
def test_the_json_form_reads_back(value: Fraction) -> None:
    figures = ReturnToPlayer(value)
    assert ReturnToPlayer.from_json(figures.to_json()) == figures
    assert Fraction(figures.to_json()["house_edge"]) == 1 - value


def test_each_json_form_is_the_callers_own() -> None:
    # The text is remembered per figure: a caller that changes its dict changes no one else's.
    figures = ReturnToPlayer(Fraction(9, 10))
    mine = figures.to_json()
    mine["rtp"] = "1/2"
    assert figures.to_json()["rtp"] == "9/10"
    assert ReturnToPlayer(Fraction(9, 10)).to_json() == {
        "rtp": "9/10",
        "house_edge": "1/10",
        "rtp_decimal": "0.900000",
        "house_edge_decimal": "0.100000",
    }


@pytest.mark.parametrize("text", ["1/1", "-3/7", "0/1", "1276/1345"])
def test_fractions_in_their_one_spelling_are_read(text: str) -> None:
    assert read_fraction(text, "rtp") == Fraction(text)


@pytest.mark.parametrize("text", ["1", "2/2", "1/-3", "01/3", "+1/3", " 1/3", "1/3\n", "½", "1/0"])
def test_any_other_spelling_is_refused(text: str) -> None:
    with pytest.raises(ReturnToPlayerError):
        read_fraction(text, "rtp")


def test_the_default_rules_disclose_their_par_sheets_rtp() -> None:
    from gnau_service.rules.house_rules import HouseRules
    from gnau_service.rules.par import par_sheet

    figures = ReturnToPlayer.of_rules(HouseRules())
    assert figures.rtp == par_sheet(HouseRules()).rtp
    assert figures.to_json()["rtp_decimal"] == "0.948173"
