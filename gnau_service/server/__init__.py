"""The service's ports and process, in three rooms:

- :mod:`gnau_service.server.grpc`: DealerService and AuditService over gRPC (servicers, the one
  interceptor, statuses, auth, streams);
- :mod:`gnau_service.server.http`: the HTTP port (health, the browser verifier, receipts,
  ``/metrics``);
- :mod:`gnau_service.server.process`: settings, start-up, workers, metrics, witnessing and the
  rest of running the service; it wires the two ports to the round logic
  (:mod:`gnau_service.rounds`).

``grpc`` and ``http`` never import each other, and neither imports ``process``.
"""
