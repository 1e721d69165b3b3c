"""``gnau witness``: run a C2SP tlog-witness for one or more Gnau Dealer logs (docs/witness.md).

- ``gnau witness keygen --name NAME --key PATH``: a new witness key in PATH (0600, never over an
  existing file); prints the verifier key (vkey) to give to the logs' clients.
- ``gnau witness serve --listen HOST:PORT --key PATH --logs LOGS.toml --database
  sqlite:////path``: serve ``POST <prefix>/add-checkpoint`` until SIGTERM.
- ``gnau witness evidence --database URL [--origin O] [--refusal KIND] [--full]``: the refused,
  validly signed checkpoints on record, one JSON object per line.

Exit statuses: 0 done; 2 a key, LOGS.toml, database or address cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from gnau_service.audit.note import NoteError
from gnau_service.cli.failing import fail
from gnau_service.cli.file_errors import problem
from gnau_service.common.private_files import KeyFileError
from gnau_service.edge.addresses import split_host_port
from gnau_service.server.process.structured_logs import configure_logging
from gnau_service.store import redacted_url, sqlite_path
from gnau_service.witness.keys import create_witness_key, load_witness_key
from gnau_service.witness.logs import LogsFileError, load_logs
from gnau_service.witness.server import RunningWitness, Witness, serve_until_signalled
from gnau_service.witness.state import WitnessState, WitnessStateError
from gnau_service.witness.verdict import Refusal


class WitnessSetupError(Exception):
    """A setting the witness cannot use; the message says which and why."""


def add_witness_arguments(witness: argparse.ArgumentParser) -> None:
    commands = witness.add_subparsers(dest="witness_command", required=True, metavar="COMMAND")

    keygen = commands.add_parser(
        "keygen",
        help="create a witness key file (0600) and print its verifier key",
        description="Write a new Ed25519 witness key (PRIVATE+KEY+... line, mode 0600) to --key, "
        "which must not exist, and print the cosignature/v1 verifier key for clients to pin.",
    )
    keygen.add_argument(
        "--name", required=True, help="the witness's name, a schema-less URL: witness.example/w1"
    )
    keygen.add_argument("--key", required=True, type=Path, help="the key file to create")
    keygen.set_defaults(run=run_keygen)

    serve = commands.add_parser(
        "serve",
        help="serve POST <prefix>/add-checkpoint (C2SP tlog-witness)",
        description="Cosign each submitted checkpoint that a trusted log key signed and that is "
        "consistent with the latest one cosigned; record refusals as evidence.",
    )
    serve.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: any)")
    serve.add_argument("--key", required=True, type=Path, help="the witness key file (0600)")
    serve.add_argument("--logs", required=True, type=Path, help="LOGS.toml: the logs followed")
    _add_database(serve)
    serve.add_argument(
        "--log-format", choices=("json", "console"), default="json", help="log line format"
    )
    serve.set_defaults(run=run_serve)

    evidence = commands.add_parser(
        "evidence",
        help="list the refused, validly signed checkpoints on record (JSON lines)",
        description="One JSON object per line, oldest first. root_mismatch rows are forks: two "
        "checkpoints of one size with different roots, both signed by the log.",
    )
    _add_database(evidence)
    evidence.add_argument("--origin", help="only this log")
    evidence.add_argument(
        "--refusal", choices=[kind.value for kind in Refusal], help="only this kind"
    )
    evidence.add_argument(
        "--full", action="store_true", help="include the notes and proofs (they make long lines)"
    )
    evidence.set_defaults(run=run_evidence)


def _add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database", required=True, help="sqlite:////absolute/path (or sqlite:///relative/path)"
    )


def _database_path(url: str) -> Path:
    path = sqlite_path(url)
    if path is None or url == "sqlite:///":
        raise WitnessSetupError(
            f"--database {redacted_url(url)[:100]!r}: a witness keeps its state in SQLite: "
            "use sqlite:////absolute/path"
        )
    return path


def run_keygen(args: argparse.Namespace) -> int:
    os.umask(0o077)
    try:
        signer = create_witness_key(args.key, args.name)
    except (KeyFileError, NoteError, OSError) as error:
        return fail("witness keygen", problem(error, named=args.key))
    print(signer.vkey)
    return 0


def run_serve(args: argparse.Namespace) -> int:
    os.umask(0o077)
    configure_logging(args.log_format)
    try:
        host, port = split_host_port(args.listen)
        witness = Witness(
            signer=load_witness_key(args.key),
            logs=load_logs(args.logs),
            state=WitnessState(_database_path(args.database)),
        )
    except (
        ValueError,
        KeyFileError,
        LogsFileError,
        WitnessStateError,
        WitnessSetupError,
        OSError,
    ) as error:
        return fail("witness serve", problem(error))

    def ready(running: RunningWitness) -> None:
        # One line on stdout, for whoever started it (a test, an operator): where, and the key.
        where = " ".join(f"{host}:{port}" for host, port in running.addresses)
        print(f"witness {witness.signer.name} listening on {where}", flush=True)
        print(f"vkey {witness.signer.vkey}", flush=True)

    try:
        asyncio.run(serve_until_signalled(witness, host, port, ready))
    except OSError as error:
        return fail("witness serve", f"cannot listen on {args.listen}: {problem(error)}")
    finally:
        witness.state.close()
    return 0


def run_evidence(args: argparse.Namespace) -> int:
    try:
        path = _database_path(args.database)
        if not path.is_file():
            raise WitnessSetupError(f"there is no witness database at {path}")
        state = WitnessState(path)
        rows = state.evidence(args.origin, Refusal(args.refusal) if args.refusal else None)
    except (WitnessSetupError, WitnessStateError) as error:
        return fail("witness evidence", str(error))
    for row in rows:
        record: dict[str, object] = {
            "id": row.id,
            "origin": row.origin,
            "refusal": row.refusal.value,
            "status": row.status,
            "reason": row.reason,
            "old_size": row.old_size,
            "latest_size": row.latest_size,
            "first_seen": row.first_seen,
            "last_seen": row.last_seen,
            "times": row.times,
        }
        if args.full:
            record |= {
                "checkpoint": row.checkpoint,
                "proof": list(row.proof),
                "latest_checkpoint": row.latest_checkpoint,
            }
        print(json.dumps(record, ensure_ascii=False))
    return 0
