"""Ed25519 signing through libsodium (PyNaCl): every signature the log's key makes.

libsodium signs faster than OpenSSL (``bench/bench_sequencer.py`` compares them), and signing
is on the sequencer's hot path, where it is about half the CPU an entry costs. Ed25519
signatures are deterministic (RFC 8032, section 5.1.6: the nonce is a hash of the key and the
message), so both libraries give the same bytes for the same key and message, and a log's entries
and checkpoints are byte-identical whichever signed them; the tests hold the two equal, on RFC
8032's vectors and on arbitrary keys and messages. The key itself stays a ``cryptography`` key
(generated, read from and written to PEM files there), as does every verification.

>>> from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
>>> key = Ed25519PrivateKey.generate()
>>> sign(secret_key(key), b"entry") == key.sign(b"entry")
True
"""

from __future__ import annotations

from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl.bindings import crypto_sign, crypto_sign_seed_keypair

SIGNATURE_SIZE: Final = 64


def secret_key(private_key: Ed25519PrivateKey) -> bytes:
    """libsodium's 64-byte form of ``private_key``: its RFC 8032 seed, then its public key."""
    _, secret = crypto_sign_seed_keypair(private_key.private_bytes_raw())
    return secret


def sign(secret: bytes, message: bytes) -> bytes:
    """The 64-byte Ed25519 signature of ``message`` by ``secret`` (see :func:`secret_key`)."""
    # crypto_sign returns the signature followed by the message.
    return crypto_sign(message, secret)[:SIGNATURE_SIZE]
