"""Covariance of two seats' results in one round (placeholder: see docs/par.md)."""

from __future__ import annotations

from fractions import Fraction

from gnau_service.rules.house_rules import HouseRules


def seat_covariance(rules: HouseRules) -> Fraction:
    """Covariance of two seats' results in one round."""
    raise NotImplementedError("seats > 1 is not computed yet")
