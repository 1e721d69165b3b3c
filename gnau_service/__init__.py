"""Gnau Dealer: a provably fair, audited dealer service for the card game Gnau."""

__version__ = "0.1.0"
