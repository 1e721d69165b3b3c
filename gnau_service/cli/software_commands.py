"""``gnau software``: software authentication (docs/software.md).

- ``gnau software keygen --key PATH [--name NAME]``: a new Ed25519 release key in PATH (PKCS#8
  PEM, mode 0600; an existing file is never replaced), named NAME; prints its verifier key, the
  line the services' ``--release-key`` file holds. A real release signs with a key kept offline.
- ``gnau software manifest --key PATH [--output FILE]``: the manifest of this installation
  (every file of the package, every installed distribution, each with its SHA-256), signed by
  the release key in PATH, written to FILE (or stdout); its digest on stderr. The key's name is
  the name ``gnau software keygen`` gave it (``--name``, ``gnau-release`` by default).
- ``gnau software verify --manifest FILE --release-key FILE [--json]``: compares this
  installation with the manifest, once its signature by the release key verifies, and lists
  every changed, missing or extra file and distribution. ``--package-root DIR`` checks another
  copy of the package instead (an unpacked release, a test's copy).
- ``gnau software verify --target HOST:PORT --token T [--json]``: asks a running service to
  check itself against its own manifest (``AuditService.VerifySoftware``, operator or auditor),
  which logs the check naming the caller, and prints its answer as above.

Exit statuses: 0 written, or the installation matches; 1 it does not match, or the manifest does
not verify by the release key; 2 a file or key cannot be used, or the service refused the call
(one without a manifest: SOFTWARE_MANIFEST_NOT_CONFIGURED).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Final

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.note import NoteError, Signer
from gnau_service.audit.signing import load_private_key, private_key_pem
from gnau_service.audit.software_manifest import (
    Installation,
    Manifest,
    ManifestError,
    Mismatch,
    Outcome,
    Part,
    Problem,
    SoftwareCheck,
    check_software,
    read_release_key,
    sign_manifest,
)
from gnau_service.cli.failing import fail
from gnau_service.cli.file_errors import problem
from gnau_service.cli.remote import (
    TargetError,
    add_target_option,
    add_token_options,
    connect,
    refusal,
)
from gnau_service.common.private_files import KeyFileError, create_private_file

#: The release key's name when ``--name`` is not given.
DEFAULT_KEY_NAME: Final = "gnau-release"


def add_software_arguments(software: argparse.ArgumentParser) -> None:
    commands = software.add_subparsers(dest="software_command", required=True)
    key = commands.add_parser("keygen", help="create a release key and print its verifier key")
    key.add_argument(
        "--key", type=Path, required=True, help="where to write the key (PEM, mode 0600)"
    )
    key.add_argument("--name", default=DEFAULT_KEY_NAME, help="the key's name (gnau-release)")
    key.set_defaults(run=run_key)

    manifest = commands.add_parser(
        "manifest", help="write the signed manifest of this installation"
    )
    manifest.add_argument("--key", type=Path, required=True, help="the release key (PEM)")
    manifest.add_argument("--name", default=DEFAULT_KEY_NAME, help="the key's name")
    manifest.add_argument("--output", type=Path, help="the manifest file (default: stdout)")
    manifest.set_defaults(run=run_manifest)

    verify = commands.add_parser(
        "verify", help="check this installation against its signed manifest"
    )
    verify.add_argument("--manifest", type=Path, help="the signed manifest")
    verify.add_argument(
        "--release-key",
        type=Path,
        help="a file holding the release key's verifier key (NAME+ID+KEY)",
    )
    add_target_option(
        verify,
        fallback=None,
        meaning="instead, ask this running service to check itself against its manifest",
    )
    add_token_options(verify, role="an operator's or auditor's")
    verify.add_argument(
        "--package-root", type=Path, help="check this copy of the gnau_service package"
    )
    verify.add_argument("--json", action="store_true", help="the result as one JSON object")
    verify.set_defaults(run=run_verify)


def run_key(args: argparse.Namespace) -> int:
    path: Path = args.key
    key = Ed25519PrivateKey.generate()
    try:
        signer = Signer(args.name, key)
        created = create_private_file(path, private_key_pem(key))
    except NoteError as error:
        return fail("software keygen", str(error))
    except OSError as error:
        return fail("software keygen", f"cannot write {path}: {problem(error, named=path)}")
    if not created:
        return fail("software keygen", f"{path} already exists; it is never replaced")
    print(signer.verifier.vkey)
    return 0


def run_manifest(args: argparse.Namespace) -> int:
    try:
        signer = Signer(args.name, load_private_key(args.key))
    except (KeyFileError, NoteError) as error:
        return fail("software manifest", str(error))
    except OSError as error:
        return fail("software manifest", f"cannot read {args.key}: {problem(error)}")
    try:
        manifest = Manifest.of(Installation.running())
        signed = sign_manifest(manifest, signer)
    except ManifestError as error:
        return fail("software manifest", str(error))
    if args.output is None:
        sys.stdout.buffer.write(signed)
        sys.stdout.flush()
    else:
        try:
            args.output.write_bytes(signed)
        except OSError as error:
            return fail("software manifest", f"cannot write {args.output}: {problem(error)}")
    print(
        f"manifest sha256 {manifest.sha256}: {len(manifest.files)} files, "
        f"{len(manifest.distributions)} distributions, signed by {signer.verifier.vkey}",
        file=sys.stderr,
    )
    return 0


def run_verify(args: argparse.Namespace) -> int:
    if args.target:
        if args.manifest or args.release_key or args.package_root:
            return fail(
                "software verify",
                "--target asks the service to check itself against its own manifest: give no "
                "--manifest, --release-key or --package-root with it",
            )
        return _verify_remote(args)
    if args.manifest is None or args.release_key is None:
        return fail("software verify", "give --manifest and --release-key (or --target)")
    # A file that cannot be read is exit 2; one read that does not verify is exit 1.
    for path in (args.manifest, args.release_key):
        if not os.access(path, os.R_OK) or not path.is_file():
            return fail("software verify", f"cannot read {path}")
    try:
        read_release_key(args.release_key)
    except ManifestError as error:
        return fail("software verify", str(error))
    installation = Installation.running()
    if args.package_root is not None:
        if not args.package_root.is_dir():
            return fail("software verify", f"{args.package_root} is not a directory")
        installation = Installation(args.package_root, installation.distributions)
    found = check_software(args.manifest, args.release_key, installation)
    return _report(found, json_output=args.json)


def _verify_remote(args: argparse.Namespace) -> int:
    needs = "VerifySoftware needs an operator's or an auditor's token"
    try:
        with connect(args, token_required=needs) as client:
            answer = client.verify_software(timeout=REMOTE_SECONDS)
    except TargetError as error:
        return fail("software verify", str(error))
    except grpc.RpcError as error:
        return fail("software verify", refusal(args.target, error))
    try:
        found = SoftwareCheck(
            Outcome(answer.result),
            answer.manifest_sha256 or None,
            tuple(
                Mismatch(Part(listed.part), listed.name, Problem(listed.problem))
                for listed in answer.mismatches
            ),
            answer.detail,
        )
    except ValueError:  # a value this version does not know, from a newer service
        return fail("software verify", f"{args.target} answered a result this gnau cannot read")
    status = _report(found, json_output=args.json, count=answer.mismatch_count)
    print(f"logged as entry {answer.entry_index}", file=sys.stderr)
    return status


def _report(found: SoftwareCheck, *, json_output: bool, count: int | None = None) -> int:
    """Print ``found`` (``count`` mismatches in all, of which it lists the first) and give the
    exit status."""
    count = len(found.mismatches) if count is None else count
    if json_output:
        print(
            json.dumps(
                {
                    "result": str(found.outcome),
                    "manifest_sha256": found.manifest_sha256,
                    "mismatches": [mismatch.listed() for mismatch in found.mismatches],
                    "mismatch_count": count,
                    "detail": found.detail,
                },
            )
        )
    else:
        for line in found.lines():
            print(line)
        if count > len(found.mismatches):
            print(f"and {count - len(found.mismatches)} more (the service lists the first 100)")
    return 0 if found.outcome is Outcome.MATCHED else 1


#: How long a service's check may take: it reads every installed file.
REMOTE_SECONDS: Final = 120.0
