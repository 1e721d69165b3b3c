"""Generated protobuf code of the Gnau Dealer API (package ``gnau.v1``). Do not edit.

Regenerate with ``scripts/generate_stubs.sh`` from ``proto/gnau/v1/*.proto``.
"""
