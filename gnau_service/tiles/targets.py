"""Where ``gnau tiles publish`` writes the log's tiles: one driver per storage, as Tessera has.

A :class:`Target` holds objects by path (``checkpoint``, ``tile/0/000``, ...) and offers:

- :meth:`~Target.put_new`: write a tile only if nothing is at its path. An object already there
  with the same bytes is the same tile (a run that stopped before its checkpoint wrote it):
  nothing is written. An object with *other* bytes is a fork or a rewrite of history, which is
  never overwritten: :class:`TileConflict`.
- :meth:`~Target.put`: replace the one mutable object, ``checkpoint``, at once (a reader sees
  the old one or the new one, never a mix);
- :meth:`~Target.get` and :meth:`~Target.exists`: read back.

Two drivers:

- :class:`DirectoryTarget`: a directory a web server serves. A tile is written to a temporary
  file beside its final name, flushed to disk, then hard-linked to that name, which fails if
  the name exists: a crash leaves a whole tile or none, never a torn one under a tile's name.
  The directory is flushed after each new name. The web server sets the headers (see
  :data:`~gnau_service.audit.tiles.TILE_CACHE_CONTROL`).
- :class:`S3Target`: an S3-compatible bucket (AWS S3, SeaweedFS, MinIO, R2, ...) through boto3,
  with ``If-None-Match: *`` on every tile: the bucket, not this process, refuses a second
  writer (412). The store must honour conditional writes (the ones named do). The headers are
  the HTTP port's (:mod:`gnau_service.server.http.routes`; a test holds them equal).

:func:`open_target` reads ``--to``: a directory, or ``s3://bucket[/prefix]``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final, Protocol

from gnau_service.audit.tiles import TILE_CACHE_CONTROL, TILE_CONTENT_TYPE
from gnau_service.common.private_files import create_file, replace_file, sync_directory

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: Published files are read by anyone the web server in front of the directory serves.
PUBLIC_MODE: Final = 0o644
S3_SCHEME: Final = "s3://"
#: How often a conditional write is tried again while the bucket answers that another one to the
#: same key is in flight (AWS: 409 ConditionalRequestConflict).
_CONFLICT_RETRIES: Final = 5


class TargetError(Exception):
    """The target cannot be read or written (unreachable, refused, misconfigured)."""


class TileConflict(TargetError):  # noqa: N818  (the condition it reports)
    """An object already at a tile's path holds other bytes: a fork, or a rewritten log. It is
    never overwritten."""

    def __init__(self, where: str, path: str, existing: int, ours: int) -> None:
        super().__init__(
            f"{where}: {path} already holds {existing:,} bytes that differ from the log's "
            f"{ours:,}: the target holds another history of this log (a fork) or another log; "
            "nothing was overwritten"
        )
        self.path = path


class Target(Protocol):
    """Storage for a log's tiles, by path relative to the log's prefix."""

    def put_new(self, path: str, data: bytes) -> bool:
        """Write a tile if its path is free: True if written, False if the same bytes are
        already there. Raises :class:`TileConflict` if other bytes are."""
        ...

    def put(self, path: str, data: bytes, content_type: str, cache_control: str) -> None:
        """Replace the object at ``path`` (the checkpoint) at once."""
        ...

    def get(self, path: str) -> bytes | None:
        """The object at ``path``, or None if there is none."""
        ...

    def exists(self, path: str) -> bool:
        """Whether there is an object at ``path``."""
        ...


def _checked_path(path: str) -> str:
    """``path`` if it is a plain relative path (what ``tile_path`` and ``checkpoint`` are)."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{path!r} is not a relative path inside the target")
    return path


# --- A directory ----------------------------------------------------------------------------------


class DirectoryTarget:
    """A directory: tiles created exclusively and durably, the checkpoint replaced atomically.

    Files are written as :mod:`gnau_service.common.private_files` writes them, at
    :data:`PUBLIC_MODE`: a temporary ``.NAME.HEX.tmp`` beside the final name, synced, then linked
    (a tile) or renamed (the checkpoint) into place; one a crash leaves behind is never read,
    and may be deleted.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def __str__(self) -> str:
        return str(self.root)

    def put_new(self, path: str, data: bytes) -> bool:
        final = self._file(path)
        self._make_parents(final)
        try:
            if create_file(final, data, PUBLIC_MODE):
                return True
            existing = final.read_bytes()
        except OSError as error:
            raise TargetError(f"cannot create {final}: {error.strerror}") from None
        if existing != data:
            raise TileConflict(str(self.root), path, len(existing), len(data))
        return False

    def put(self, path: str, data: bytes, content_type: str, cache_control: str) -> None:
        del content_type, cache_control  # the web server in front of the directory sets them
        final = self._file(path)
        self._make_parents(final)
        try:
            replace_file(final, data, PUBLIC_MODE)
        except OSError as error:
            raise TargetError(f"cannot replace {final}: {error.strerror}") from None

    def get(self, path: str) -> bytes | None:
        try:
            return self._file(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise TargetError(f"cannot read {self._file(path)}: {error.strerror}") from None

    def exists(self, path: str) -> bool:
        return self._file(path).is_file()

    def _file(self, path: str) -> Path:
        return self.root / _checked_path(path)

    def _make_parents(self, final: Path) -> None:
        """Create the missing directories above ``final``, each flushed into its parent."""
        missing = []
        directory = final.parent
        while not directory.is_dir():
            missing.append(directory)
            if directory in (self.root, directory.parent):
                break
            directory = directory.parent
        for directory in reversed(missing):
            try:
                directory.mkdir(exist_ok=True)
            except OSError as error:
                raise TargetError(f"cannot create {directory}: {error.strerror}") from None
            sync_directory(directory.parent)


# --- An S3-compatible bucket ----------------------------------------------------------------------


def _error_code(error: Exception) -> tuple[str, int]:
    """The S3 error code and HTTP status of a botocore ClientError."""
    response: dict[str, Any] = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


class S3Target:
    """A bucket (under ``prefix``, if any), written with conditional puts."""

    def __init__(self, bucket: str, prefix: str, client: S3Client) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client

    def __str__(self) -> str:
        return f"{S3_SCHEME}{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def key(self, path: str) -> str:
        path = _checked_path(path)
        return f"{self.prefix}/{path}" if self.prefix else path

    def put_new(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        for _ in range(_CONFLICT_RETRIES):
            try:
                self.client.put_object(
                    Bucket=self.bucket,
                    Key=self.key(path),
                    Body=data,
                    ContentType=TILE_CONTENT_TYPE,
                    CacheControl=TILE_CACHE_CONTROL,
                    IfNoneMatch="*",
                )
            except ClientError as error:
                code, status = _error_code(error)
                if status == 412 or code == "PreconditionFailed":
                    existing = self.get(path)
                    if existing is None:  # deleted meanwhile: try again
                        continue
                    if existing != data:
                        raise TileConflict(str(self), path, len(existing), len(data)) from None
                    return False
                if status == 409 or code == "ConditionalRequestConflict":
                    continue  # another conditional write to the key is in flight
                raise TargetError(self._failure("write", path, error)) from None
            except BotoCoreError as error:
                raise TargetError(self._failure("write", path, error)) from None
            return True
        raise TargetError(f"{self}: {path}: conditional writes kept conflicting")

    def put(self, path: str, data: bytes, content_type: str, cache_control: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.key(path),
                Body=data,
                ContentType=content_type,
                CacheControl=cache_control,
            )
        except (BotoCoreError, ClientError) as error:
            raise TargetError(self._failure("write", path, error)) from None

    def get(self, path: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key(path))
            return answer["Body"].read()
        except ClientError as error:
            code, status = _error_code(error)
            if code != "NoSuchBucket" and (status == 404 or code == "NoSuchKey"):
                return None
            raise TargetError(self._failure("read", path, error)) from None
        except BotoCoreError as error:
            raise TargetError(self._failure("read", path, error)) from None

    def exists(self, path: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            # A HEAD's 404 has no body to tell a missing bucket from a missing key: a pass reads
            # the checkpoint with a GET first, which does.
            self.client.head_object(Bucket=self.bucket, Key=self.key(path))
        except ClientError as error:
            code, status = _error_code(error)
            if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
                return False
            raise TargetError(self._failure("read", path, error)) from None
        except BotoCoreError as error:
            raise TargetError(self._failure("read", path, error)) from None
        return True

    def _failure(self, doing: str, path: str, error: Exception) -> str:
        code, status = _error_code(error)
        if code or status:
            return f"{self}: cannot {doing} {path}: {code or 'error'} (HTTP {status})"
        # A botocore error without a response (unreachable endpoint, no credentials): its
        # message names the endpoint, never a secret.
        return f"{self}: cannot {doing} {path}: {error}"


# --- --to -----------------------------------------------------------------------------------------


def parse_s3_url(to: str) -> tuple[str, str]:
    """The bucket and prefix of ``s3://bucket[/prefix]``.

    >>> parse_s3_url("s3://tiles"), parse_s3_url("s3://tiles/logs/gnau/")
    (('tiles', ''), ('tiles', 'logs/gnau'))
    """
    bucket, _, prefix = to.removeprefix(S3_SCHEME).partition("/")
    if not bucket:
        raise ValueError(f"{to!r} names no bucket: use s3://bucket or s3://bucket/prefix")
    prefix = prefix.strip("/")
    if prefix:
        _checked_path(prefix)
    return bucket, prefix


def open_target(to: str, *, endpoint_url: str | None = None) -> Target:
    """The target ``--to`` names: ``s3://bucket[/prefix]`` (credentials and region as boto3
    finds them: environment, ``~/.aws``, instance roles; ``endpoint_url`` for a store other
    than AWS), or a directory (created if missing). Raises ValueError for one it cannot use."""
    if to.startswith(S3_SCHEME):
        bucket, prefix = parse_s3_url(to)
        try:
            # Imported here: boto3 takes a while to import, and a directory does not need it.
            # It is the s3 extra's: the service and its image do without it.
            import boto3  # noqa: PLC0415
        except ImportError:
            raise ValueError(
                "an s3:// target needs boto3: pip install 'gnau-service[s3]' (or boto3)"
            ) from None

        client = boto3.client("s3", endpoint_url=endpoint_url)
        return S3Target(bucket, prefix, client)
    if "://" in to:
        raise ValueError(f"{to!r}: --to is a directory or s3://bucket[/prefix]")
    if endpoint_url is not None:
        raise ValueError("--endpoint-url is for an s3:// target, not a directory")
    if not to:
        raise ValueError("--to names no directory")
    return DirectoryTarget(Path(to))
