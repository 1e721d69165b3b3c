"""``gnau key show`` prints the log's verifier keys; ``gnau key rotate`` hands the audit log
over to a new signing key.

- ``gnau key show [--target HOST:PORT]``: the log's origin, its current verifier key and every
  earlier one, from the service's database (the service's settings, as for ``rotate``) or, with
  ``--target``, from a running service. Exit 0, or 2 if they cannot be read.

- ``gnau key rotate [--dry-run] [--new-key PATH]`` with the service's settings (``--config``,
  ``--data-dir``, ``--database``, ``--key``, ``--origin``, and their ``GNAU_*`` variables).

The key file's key must be the log's current key. The new key is fresh (or, with ``--new-key``,
the key in PATH, which is created at 0600 if it does not exist). Without ``--new-key`` it is
staged beside the key file, the rotation entry is appended (signed by the old key), and the
staged key is renamed over the key file (:mod:`~gnau_service.server.process.key_handover`); run
again after a crash, the command finishes an interrupted rotation. With ``--new-key`` the key
file is left as it is: the operator delivers PATH to every process (a Kubernetes secret, say).

Running services need no restart: each checks, in every write batch, that its key is the log's
current key, rereads its key file if not, and refuses writes (UNAVAILABLE) until it has it
(docs/operations.md, "Rotating the log key"). Only public verifier keys are printed.

Exit statuses: 0 rotated (or, with ``--dry-run``, would rotate); 2 nothing was rotated: a
setting, the key file, the new key or the database cannot be used, or the key file does not
hold the log's current key.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Final

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.note import KeyFormatError
from gnau_service.audit.signing import LogSigner, load_private_key
from gnau_service.cli.failing import fail
from gnau_service.cli.remote import (
    TargetError,
    add_target_option,
    add_token_options,
    connect,
    refusal,
)
from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.common.private_files import KeyFileError, exclusive_lock
from gnau_service.server.process.config import ConfigError, Settings
from gnau_service.server.process.key_handover import (
    install_staged_key,
    staged_key_path,
    write_key_file,
)
from gnau_service.store import DatabaseUrlError, StoreError, open_reader, open_store

#: The settings that say where the log, its key and its origin are.
KEY_SETTINGS = ("data_dir", "database", "key", "origin")


class RotationRefused(Exception):  # noqa: N818  (a refusal, reported in one line)
    """Nothing was rotated, for the reason in the message."""


def add_key_arguments(key: argparse.ArgumentParser) -> None:
    commands = key.add_subparsers(dest="key_command", required=True, metavar="COMMAND")
    rotate = commands.add_parser(
        "rotate",
        help="hand the log over to a new key, and print its verifier key",
        description="Append a key-rotation entry signed by the current key, and install the "
        "new key in the key file (or in --new-key). Running services follow without a restart.",
    )
    rotate.add_argument(
        "--dry-run", action="store_true", help="check everything, change nothing, say what would be"
    )
    rotate.add_argument(
        "--new-key",
        type=Path,
        help="rotate to the Ed25519 PEM key in this file (created at 0600 if missing) and leave "
        "the key file as it is, for the operator to deliver",
    )
    add_settings_flags(rotate, KEY_SETTINGS)
    rotate.set_defaults(run=run_rotate)
    show = commands.add_parser(
        "show",
        help="print the log's current and earlier verifier keys, and where to publish them",
        description="Print the log's origin and verifier keys, newest first, from its database "
        "or (--target) a running service. Only public keys are printed.",
    )
    add_target_option(show, fallback=None, meaning="read the keys from this running service")
    add_token_options(show)
    add_settings_flags(show, KEY_SETTINGS)
    show.set_defaults(run=run_show)


#: Where verifiers should get the key: anywhere but the service itself.
PUBLISH_HINT: Final = (
    "publish the current key where verifiers can pin it apart from this service (your site, "
    "a regulator's register, the players' terms): a key fetched from the operator proves "
    'nothing about the operator (docs/operations.md, "Rotating the log key")'
)


def run_show(args: argparse.Namespace) -> int:
    try:
        origin, keys = _remote_keys(args) if args.target else _local_keys(settings_from_args(args))
    except (ConfigError, DatabaseUrlError, StoreError, TargetError, OSError) as error:
        return fail("key show", str(error))
    except grpc.RpcError as error:
        return fail("key show", refusal(args.target, error))
    if not keys:
        return fail("key show", f"the log {origin} has no key yet: start the service once")
    print(f"origin   {origin}")
    print(f"current  {keys[-1]}")
    for earlier in reversed(keys[:-1]):
        print(f"earlier  {earlier}")
    print(PUBLISH_HINT)
    return 0


def _local_keys(settings: Settings) -> tuple[str, list[str]]:
    with open_reader(settings.database_url) as reader:
        return settings.origin, reader.public_keys()


def _remote_keys(args: argparse.Namespace) -> tuple[str, list[str]]:
    with connect(args) as client:
        answer = client.get_public_keys(timeout=10)
    return answer.origin, list(answer.verifier_keys)


def run_rotate(args: argparse.Namespace) -> int:
    os.umask(0o077)  # every file this creates is private
    try:
        settings = settings_from_args(args)
        # Two rotations at once are serialised by the log's own lock (the second finds its key
        # retired); this one guards the staged file, which --new-key does not use (its key
        # file's directory may be a read-only secret mount).
        with (
            exclusive_lock(settings.key_path) if args.new_key is None else contextlib.nullcontext()
        ):
            lines = _rotate(settings, args.new_key, dry_run=args.dry_run)
    except (
        ConfigError,
        RotationRefused,
        KeyFileError,
        KeyFormatError,
        DatabaseUrlError,
        StoreError,
        OSError,
    ) as error:
        return fail("key rotate", str(error))
    print("\n".join(lines))
    return 0


def _rotate(settings: Settings, new_key: Path | None, *, dry_run: bool) -> list[str]:
    """Rotate (or, dry, check) and return what to print."""
    key_path, origin = settings.key_path, settings.origin
    old = LogSigner.from_key_file(origin, key_path)
    with open_reader(settings.database_url) as reader:
        current, size, used = reader.current_key(), reader.size(), reader.public_keys()
    if current is None:
        raise RotationRefused("the log has no key yet: start the service once, then rotate")
    if current != old.vkey:
        return _finish_interrupted(settings, current, new_key, dry_run=dry_run)
    private_key = (
        load_private_key(new_key)
        if new_key is not None and new_key.exists()
        else Ed25519PrivateKey.generate()
    )
    new = LogSigner.from_private_key(origin, private_key)
    if new.vkey in used:
        raise RotationRefused(f"the new key {new.vkey} has signed for this log before")
    target = staged_key_path(key_path) if new_key is None else new_key
    if dry_run:
        return [
            f"dry run: nothing written; the log has {size} entries",
            f"old {old.vkey}",
            f"new {new.vkey if new_key is not None and new_key.exists() else '(a fresh key)'}",
            f"the new key would be written to {target}"
            + ("" if new_key is not None else f", then renamed to {key_path}"),
        ]
    if new_key is None or not new_key.exists():
        write_key_file(target, private_key)  # first: the log must never name a key kept nowhere
    with open_store(settings.database_url, old) as store:
        entry = store.rotate_key(new)
    if new_key is None:
        install_staged_key(key_path)
    where = key_path if new_key is None else new_key
    return [
        f"rotated: entry {entry.index} hands the log over to the new key, now in {where}",
        f"old {old.vkey}",
        f"new {new.vkey}",
    ]


def _finish_interrupted(
    settings: Settings, current: str, new_key: Path | None, *, dry_run: bool
) -> list[str]:
    """The key file does not hold the current key: finish a rotation interrupted between its
    entry and its rename, report one already done to ``new_key``, or refuse."""
    key_path = settings.key_path
    staged = staged_key_path(key_path) if new_key is None else new_key
    if staged.exists() and LogSigner.from_key_file(settings.origin, staged).vkey == current:
        if new_key is not None:
            return [f"already rotated: {new_key} holds the log's current key", f"new {current}"]
        if dry_run:
            return [f"dry run: would finish an interrupted rotation: {staged} to {key_path}"]
        install_staged_key(key_path)
        return [f"finished an interrupted rotation: {key_path} holds the new key", f"new {current}"]
    raise RotationRefused(
        f"the key file {key_path} does not hold the log's current key {current}: run this "
        "with the current key (--key)"
    )
