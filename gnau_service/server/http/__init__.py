"""The HTTP port: health, the browser verifier, receipts and key notes as JSON, and
``/metrics``. A new route lands in :mod:`~gnau_service.server.http.routes`."""
