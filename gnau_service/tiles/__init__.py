"""The log as static tiles, outside the service: publishing them to a directory or an
S3-compatible bucket (``gnau tiles publish``), and following a log through them alone
(``gnau audit monitor``). The formats are :mod:`gnau_service.audit.tiles`; a store renders them
(:mod:`gnau_service.store.tiles`)."""
