"""What a start reads, and on a first start makes, before anything serves: the log key and the
tokens. The one process of ``gnau serve``, or the supervisor of its workers before any starts
(so workers never race to make them), calls these."""

from __future__ import annotations

import structlog

from gnau_service.audit.signing import LogSigner, ensure_private_key
from gnau_service.server.grpc.auth import Credentials
from gnau_service.server.process.config import Settings
from gnau_service.server.process.token_reload import FileVersion, file_version
from gnau_service.server.process.tokens import TokenFile, first_start_tokens, read_token_file

log = structlog.get_logger("gnau.server")


def open_signer(settings: Settings) -> LogSigner:
    """The log key from ``--key``, or the data directory's, generated on first start."""
    if settings.key is None:
        key_file = ensure_private_key(settings.data_dir)
        if key_file.created:
            log.warning("generated a new log signing key", path=str(key_file.path))
        return LogSigner.from_key_file(settings.origin, key_file.path)
    return LogSigner.from_key_file(settings.origin, settings.key)


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
