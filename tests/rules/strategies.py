"""Hypothesis strategies shared by the rules tests."""

from __future__ import annotations

from hypothesis import strategies as st

from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule


def house_rules(decks: st.SearchStrategy[int]) -> st.SearchStrategy[HouseRules]:
    """Any setting of every house rule, with the number of decks drawn from ``decks``."""
    return st.builds(
        HouseRules,
        ten_is_duke=st.booleans(),
        three_six_pair=st.booleans(),
        trips_make_ox=st.booleans(),
        five_small=st.booleans(),
        tie=st.sampled_from(TieRule),
        payout=st.sampled_from(PayoutTable),
        suited_double=st.booleans(),
        decks=decks,
    )
