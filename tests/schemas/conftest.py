"""Fixtures of the schema and receipt-script tests: one real service run per backend, shared
by every test of the session (playing the rounds is the slow part)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gnau_service.server.process.structured_logs import configure_logging
from tests.postgres import SERVICE_BACKENDS, fresh_database
from tests.schemas.served import Served, serve_and_play, settings_for
from tests.server.conftest import write_tokens


@pytest.fixture(scope="session", params=SERVICE_BACKENDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    configure_logging("json")
    directory = tmp_path_factory.mktemp(f"served-{request.param}")
    tokens = write_tokens(directory / "tokens.json")
    if request.param == "sqlite":
        yield serve_and_play(settings_for(directory / "data", tokens), "sqlite")
    else:
        with fresh_database() as url:
            yield serve_and_play(settings_for(directory / "data", tokens, url), "postgresql")
