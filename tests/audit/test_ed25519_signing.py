"""libsodium's Ed25519 signatures (what the log's key signs with) are OpenSSL's, byte for byte."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit import ed25519_signing
from gnau_service.audit.note import Signer

# RFC 8032, section 7.1: TEST 1, 2, 3 and SHA(abc) (secret key, public key, message, signature).
RFC_8032_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC_8032_VECTORS)
def test_both_libraries_give_rfc_8032_s_signatures(
    secret: str, public: str, message: str, signature: str
) -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
    sodium_key = ed25519_signing.secret_key(key)
    assert sodium_key == bytes.fromhex(secret + public)
    assert ed25519_signing.sign(sodium_key, bytes.fromhex(message)).hex() == signature
    assert key.sign(bytes.fromhex(message)).hex() == signature


@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=4096))
def test_both_libraries_give_the_same_signature_for_any_key_and_message(
    seed: bytes, message: bytes
) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    signature = Signer("gnau-dealer/test", key).sign(message)
    assert signature == key.sign(message)
    key.public_key().verify(signature, message)  # raises if it does not verify
