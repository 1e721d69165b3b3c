"""The network edge every server of the project shares, below both the dealer and the witness.

- :mod:`~gnau_service.edge.peers`: who is calling, and one warning per peer per interval;
- :mod:`~gnau_service.edge.http`: every HTTP port's connection budget, timeouts and refusals.
"""
