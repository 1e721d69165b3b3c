"""Which secret files the service takes, for every way they are mounted, and what it says.

The pure decision is compared with the kernel's own for every mode and owner shape (a shell
running as the service user reports which files it may read), and the real reader is run with
the service user's identity on the files that Kubernetes, Compose and an operator produce.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gnau_service.common.private_files import KeyFileError, read_private_file
from gnau_service.common.secret_files import SecretFileProblem, secret_file_problem
from tests.identity import (
    OTHER_GID,
    SERVICE_GID,
    SERVICE_UID,
    STRANGER_UID,
    as_identity,
    require_root,
    shared_directory,
    write_owned,
)

GROUPS = frozenset({SERVICE_GID, OTHER_GID})
UNREADABLE, SHARED = SecretFileProblem.UNREADABLE, SecretFileProblem.SHARED

# (mount shape, mode, owner uid, owner gid, process uid, expected): each line says why.
MOUNT_SHAPES = [
    # A Kubernetes secret volume, defaultMode 0400, no fsGroup: root's alone.
    ("kubernetes secret 0400", 0o400, 0, 0, SERVICE_UID, UNREADABLE),
    # With fsGroup the kubelet makes it 0440 root:fsGroup (kubernetes#57923).
    ("kubernetes secret with fsGroup", 0o440, 0, SERVICE_GID, SERVICE_UID, SHARED),
    # The init container's copy, and a file the service wrote itself.
    ("init container copy", 0o600, SERVICE_UID, SERVICE_GID, SERVICE_UID, None),
    ("own file 0400", 0o400, SERVICE_UID, SERVICE_GID, SERVICE_UID, None),
    ("own file 0640", 0o640, SERVICE_UID, SERVICE_GID, SERVICE_UID, SHARED),
    ("own file 0604", 0o604, SERVICE_UID, SERVICE_GID, SERVICE_UID, SHARED),
    # A Compose secret is a bind mount: the host file's owner and mode, as they are.
    ("compose secret of the host user", 0o600, 1000, 1000, SERVICE_UID, UNREADABLE),
    ("compose secret chowned to 10001", 0o600, SERVICE_UID, SERVICE_GID, SERVICE_UID, None),
    ("readable via a supplementary group", 0o640, 0, OTHER_GID, SERVICE_UID, SHARED),
    ("world-readable", 0o644, 0, 0, SERVICE_UID, SHARED),
    # Root reads anything; only the bits count then.
    ("root, its own 0400", 0o400, 0, 0, 0, None),
    ("root, the service user's 0600", 0o600, SERVICE_UID, SERVICE_GID, 0, None),
    ("root, fsGroup 0440", 0o440, 0, SERVICE_GID, 0, SHARED),
]


@pytest.mark.parametrize(
    ("mode", "owner_uid", "owner_gid", "uid", "expected"),
    [shape[1:] for shape in MOUNT_SHAPES],
    ids=[shape[0] for shape in MOUNT_SHAPES],
)
def test_mount_shapes(
    mode: int, owner_uid: int, owner_gid: int, uid: int, expected: SecretFileProblem | None
) -> None:
    groups = frozenset({0}) if uid == 0 else GROUPS
    assert secret_file_problem(mode, owner_uid, owner_gid, uid, groups) == expected


OWNERS = [
    (SERVICE_UID, SERVICE_GID),
    (SERVICE_UID, 0),
    (0, SERVICE_GID),
    (0, OTHER_GID),
    (0, 0),
    (STRANGER_UID, STRANGER_UID),
]


def test_every_mode_and_owner_agrees_with_the_kernel() -> None:
    """512 modes x 6 owners: unreadable exactly when the kernel refuses the service user, shared
    exactly when a group or other bit is set, and nothing else is refused."""
    require_root()
    with shared_directory() as directory:
        files = {}
        for owner_uid, owner_gid in OWNERS:
            for mode in range(0o1000):
                path = directory / f"{owner_uid}-{owner_gid}-{mode:03o}"
                files[path.name] = (mode, owner_uid, owner_gid)
                write_owned(path, b"secret", mode, owner_uid, owner_gid)
        shell = subprocess.run(
            ["/bin/sh", "-c", 'cd "$1" && for f in *; do [ -r "$f" ] && echo "$f"; done; true',
             "sh", str(directory)],
            user=SERVICE_UID, group=SERVICE_GID, extra_groups=sorted(GROUPS),
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    readable = set(shell.stdout.split())
    assert 0 < len(readable) < len(files)
    for name, (mode, owner_uid, owner_gid) in files.items():
        expected = UNREADABLE if name not in readable else SHARED if mode & 0o077 else None
        got = secret_file_problem(mode, owner_uid, owner_gid, SERVICE_UID, GROUPS)
        assert got == expected, f"mode {mode:04o}, owner {owner_uid}:{owner_gid}"


# --- The real reader, as the service user ---------------------------------------------------------


def read_as_service(path: Path) -> bytes:
    with as_identity(SERVICE_UID, SERVICE_GID, (SERVICE_GID,)):
        return read_private_file(path, "token file")


def test_the_service_reads_its_own_private_copy() -> None:
    require_root()
    with shared_directory() as directory:
        path = write_owned(directory / "tokens.json", b"{}", 0o600, SERVICE_UID, SERVICE_GID)
        assert read_as_service(path) == b"{}"


def test_a_root_only_secret_names_the_copy_to_make() -> None:
    require_root()
    with shared_directory() as directory:
        path = write_owned(directory / "tokens.json", b"{}", 0o400, 0, 0)
        with pytest.raises(KeyFileError) as caught:
            read_as_service(path)
    message = str(caught.value)
    assert f"token file {path} belongs to uid 0 and gid 0 with mode 0400" in message
    assert "so the service (uid 10001) cannot read it" in message
    assert f"install -m 600 -o 10001 {path} <private path>" in message
    assert "init container" in message and "docs/operations.md" in message
    assert "\n" not in message


def test_a_kubernetes_fsgroup_mount_is_refused_with_what_to_do() -> None:
    """The kubelet's shape: ..data/ holds the files, the names are symlinks into it."""
    require_root()
    with shared_directory() as directory:
        data = directory / "..2026_11_30_18_00_00.123"
        data.mkdir()
        write_owned(data / "tokens.json", b"{}", 0o440, 0, SERVICE_GID)
        (directory / "..data").symlink_to(data.name)
        (directory / "tokens.json").symlink_to("..data/tokens.json")
        with pytest.raises(KeyFileError) as caught:
            read_as_service(directory / "tokens.json")
    message = str(caught.value)
    assert "belongs to uid 0 and gid 10001 with mode 0440" in message
    assert "so every member of group 10001 may access it" in message
    assert "install -m 600 -o 10001" in message
    assert "deploy/kubernetes/gnau-dealer.yaml" in message


def test_a_hidden_file_still_says_it_cannot_be_opened() -> None:
    """When a directory on the way is closed to the service, there is no mode to talk about."""
    require_root()
    with shared_directory() as directory:
        closed = directory / "closed"
        closed.mkdir(mode=0o700)
        path = write_owned(closed / "tokens.json", b"{}", 0o600, SERVICE_UID, SERVICE_GID)
        with pytest.raises(KeyFileError, match=r"cannot open token file .*: Permission denied"):
            read_as_service(path)
