"""What tests of the Dealer itself share: a store opened under a fresh test key, and a fresh
request's idempotency."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.signing import LogSigner
from gnau_service.rounds.dealer import Idempotency
from gnau_service.store import Store, open_store
from tests.postgres import database_of


@contextmanager
def opened_store(backend: str, directory: Path) -> Iterator[Store]:
    """A store on ``backend`` (a fresh PostgreSQL database, or a SQLite file in ``directory``),
    signing with a key made for this test alone."""
    signer = LogSigner.from_private_key("gnau-dealer/test", Ed25519PrivateKey.generate())
    with database_of(backend, directory / "gnau.db") as url, open_store(url, signer) as store:
        yield store


def fresh() -> Idempotency:
    """A new request: its own request id, and a fingerprint that no other request shares."""
    return Idempotency(str(uuid.uuid4()), "fingerprint")
