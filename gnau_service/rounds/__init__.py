"""Round logic: the steps of a round and the reads of rounds, with no transport.

Every port (gRPC, HTTP) and the CLI reach rounds through here; nothing here imports grpc, an
HTTP framework or the process. A new round rule, step or read lands in this floor:

- :mod:`~gnau_service.rounds.dealer`: the :class:`~gnau_service.rounds.dealer.Dealer`: Shuffle,
  Deal, Reveal, Settle and Void as units of work on the store, and the reads of rounds;
- :mod:`~gnau_service.rounds.record`: a round's stored record, its state, and how it names its
  events in the log;
- :mod:`~gnau_service.rounds.view`: what a round shows the world, and the deal behind it;
- :mod:`~gnau_service.rounds.requests`: the checks of a request's fields;
- :mod:`~gnau_service.rounds.refusals`: the refusals, each naming what is wrong;
- :mod:`~gnau_service.rounds.limits`: every limit at the service's edge, defined once;
- :mod:`~gnau_service.rounds.paging`: pages of a table's rounds;
- :mod:`~gnau_service.rounds.identities`: players behind their references (forget, lookup);
- :mod:`~gnau_service.rounds.receipt_gathering`: a round's receipt, gathered from the store.
"""
