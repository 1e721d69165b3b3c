"""The tamper-evident audit log's pure logic: formats, hashes, signatures and proofs.

No storage, network or clock here; see docs/audit.md for the formats and every rejection.

- :mod:`~gnau_service.audit.merkle`: RFC 6962 / 9162 Merkle tree, proofs and their verification
- :mod:`~gnau_service.audit.note`: C2SP signed notes with Ed25519
- :mod:`~gnau_service.audit.checkpoint`: C2SP tlog-checkpoints and fork evidence
- :mod:`~gnau_service.audit.signing`: log key files, the log signer, key rotation
- :mod:`~gnau_service.audit.entries`: the signed, canonical JSON log entry and the hash chain
- :mod:`~gnau_service.audit.round_events`: what each round event records
- :mod:`~gnau_service.audit.replay`: replaying a round from its entries
- :mod:`~gnau_service.audit.timestamps`: the RFC 3339 UTC spelling entries use
"""
