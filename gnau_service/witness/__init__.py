"""A C2SP tlog-witness: cosigns a log's checkpoints once they are consistent with the last one.

Floors: :mod:`.protocol` (request and response bodies, limits), :mod:`.logs` (``LOGS.toml``),
:mod:`.verdict` (the pure rule set), :mod:`.state` (SQLite: latest checkpoints and evidence, one
transaction per submission), :mod:`.keys` (the key file), :mod:`.server` (aiohttp). It uses the
audit floor (notes, checkpoints, Merkle proofs, cosignatures) and store-level SQLite helpers,
never the dealer's server. docs/witness.md is the operator's and regulator's guide.
"""
