"""The store withholds a tile bundle (gnau_service/store/tiles.py) for the rounds the public
cannot see yet. It names their states itself, sitting below the rounds' floor."""

from __future__ import annotations

from gnau_service.rounds.record import SEED_IS_PUBLIC, RoundState
from gnau_service.store.tiles import SEED_PRIVATE_STATES


def test_the_store_withholds_a_bundle_for_exactly_the_rounds_whose_seed_is_private() -> None:
    private = {str(state) for state in RoundState} - {str(s) for s in SEED_IS_PUBLIC}
    assert set(SEED_PRIVATE_STATES) == private == {"SHUFFLED", "DEALT"}
