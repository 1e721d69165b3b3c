"""What a start reads, and on a first start makes, before anything serves: the log key and the
tokens. The one process of ``gnau serve``, or the supervisor of its workers before any starts
(so workers never race to make them), calls these. And the store, as every process that writes
the log opens it (:func:`open_service_store`)."""

from __future__ import annotations

import structlog

from gnau_service.audit.signing import LogSigner, ensure_private_key
from gnau_service.server.grpc.auth import Credentials
from gnau_service.server.process.config import Settings
from gnau_service.server.process.database_wait import when_reachable
from gnau_service.server.process.key_handover import key_file_source
from gnau_service.server.process.token_reload import FileVersion, file_version
from gnau_service.server.process.tokens import TokenFile, first_start_tokens, read_token_file
from gnau_service.store import Store, open_store

log = structlog.get_logger("gnau.server")


def open_signer(settings: Settings) -> LogSigner:
    """The log key from ``--key``, or the data directory's, generated on first start."""
    if settings.key is None:
        key_file = ensure_private_key(settings.data_dir)
        if key_file.created:
            log.warning("generated a new log signing key", path=str(key_file.path))
        return LogSigner.from_key_file(settings.origin, key_file.path)
    return LogSigner.from_key_file(settings.origin, settings.key)


async def open_service_store(settings: Settings, signer: LogSigner) -> Store:
    """The store of ``--database``, as a serving process and the sequencer's process open it:
    signing with ``signer``, and with the key file's key once another process (``gnau key
    rotate``, another replica) has rotated it; migrated if ``--migrate``; the database waited
    for as :mod:`~gnau_service.server.process.database_wait` says; a schema made or migrated
    is logged."""
    store = await when_reachable(
        lambda: open_store(
            settings.database_url,
            signer,
            key_file_source(settings.origin, settings.key_path),
            migrate=settings.migrate,
            lease_seconds=settings.sequencer_lease_seconds,
        ),
        settings.database_wait_seconds,
    )
    if store.migrated:
        # Migration 1 makes the tables: a new database (or one from before versions).
        log.warning(
            "created the database schema"
            if store.migrated[0].version == 1
            else "migrated the database schema",
            migrations=[str(migration) for migration in store.migrated],
        )
    return store


def open_credentials(settings: Settings) -> tuple[TokenFile, str | None, FileVersion]:
    """The token file, the operator token made if this is the first start (for the command line
    to show once: it never goes into the logs), and the version of the token file that was
    read, taken before reading it, so that the watch sees any later change."""
    token = (
        first_start_tokens(settings.tokens_path, settings.operator_token_path)
        if settings.tokens is None
        else None
    )
    version = file_version(settings.tokens_path)
    return read_token_file(settings.tokens_path), token, version


def credentials_of(token_file: TokenFile, settings: Settings) -> Credentials:
    """The callers of the file's tokens and of the mTLS common names ``--mtls-role`` maps."""
    return Credentials(token_file.callers, dict(settings.mtls_roles))
