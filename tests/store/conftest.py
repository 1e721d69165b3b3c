from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.signing import LogSigner
from tests.postgres import fresh_database

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture
def signer() -> LogSigner:
    return LogSigner.from_private_key("gnau-dealer/test", Ed25519PrivateKey.generate())


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database, once for each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gnau.db'}"
    else:
        with fresh_database() as url:
            yield url
