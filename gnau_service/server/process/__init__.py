"""Running the service: settings, start-up (:mod:`~gnau_service.server.process.app`), the
supervisor and its workers, tokens, the key file in a rotation, metrics, witnessing, the store's
health and the log lines."""
