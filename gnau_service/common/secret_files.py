"""Whether the service takes a secret file (a key, a token list), and what to tell the operator.

The rule is strict on purpose: a secret file must be readable by the service and by nobody else
through group or other permission bits, whoever owns it. A root-owned file at 0440 whose group
is the service's (what a Kubernetes secret volume with ``fsGroup`` looks like, kubernetes#57923)
is refused too: every process of that group, in any container of the pod, could read the key.
Such mounts are copied to a private file first (an init container does it in the manifest).

The decision is a pure function of the file's mode and owner and of the process's identity, so
it is tested for every combination; :func:`may_read` follows the kernel's rule for the owner,
group and other bits (root reads anything).

>>> secret_file_problem(0o600, 10001, 10001, 10001, frozenset({10001})) is None
True
>>> secret_file_problem(0o440, 0, 10001, 10001, frozenset({10001}))
<SecretFileProblem.SHARED: 'shared'>
>>> secret_file_problem(0o400, 0, 0, 10001, frozenset({10001}))
<SecretFileProblem.UNREADABLE: 'unreadable'>
"""

from __future__ import annotations

from collections.abc import Set
from enum import StrEnum
from typing import Final

#: The bits that let anyone but the owner at the file.
GROUP_AND_OTHER_BITS: Final = 0o077
#: Where an operator reads how the deployments give the service private copies of secrets.
DEPLOYING_DOC: Final = "docs/operations.md, 'Deploying'"


class SecretFileProblem(StrEnum):
    UNREADABLE = "unreadable"  # the process may not read it at all
    SHARED = "shared"  # group or others may access it


def may_read(mode: int, owner_uid: int, owner_gid: int, uid: int, groups: Set[int]) -> bool:
    """Whether a process with ``uid`` and ``groups`` may read a file: the owner's bits if it is
    the owner, else the group's if it is in the file's group, else the others' (root: always).

    >>> may_read(0o040, 0, 5, 7, {5}), may_read(0o044, 7, 5, 7, {5}), may_read(0o000, 7, 5, 0, {0})
    (True, False, True)
    """
    if uid == 0:
        return True
    if uid == owner_uid:
        return bool(mode & 0o400)
    if owner_gid in groups:
        return bool(mode & 0o040)
    return bool(mode & 0o004)


def secret_file_problem(
    mode: int, owner_uid: int, owner_gid: int, uid: int, groups: Set[int]
) -> SecretFileProblem | None:
    """What is wrong with a secret file for this process; None if the service may use it."""
    if not may_read(mode, owner_uid, owner_gid, uid, groups):
        return SecretFileProblem.UNREADABLE
    if mode & GROUP_AND_OTHER_BITS:
        return SecretFileProblem.SHARED
    return None


def refusal(
    what: str,
    where: str,
    problem: SecretFileProblem,
    *,
    mode: int,
    owner_uid: int,
    owner_gid: int,
    uid: int,
) -> str:
    """One line: what is wrong with the file, and the command that puts it right.

    >>> refusal("key file", "/k.pem", SecretFileProblem.SHARED, mode=0o640, owner_uid=7,
    ...         owner_gid=7, uid=7)
    'key file /k.pem has mode 0640, which lets group or others access it; run: chmod 600 /k.pem'
    """
    if problem is SecretFileProblem.SHARED and uid in (0, owner_uid):
        # The service's own file (or root's process): narrowing the mode is all it takes.
        return (
            f"{what} {where} has mode {mode:04o}, which lets group or others access it; "
            f"run: chmod 600 {where}"
        )
    shape = f"belongs to uid {owner_uid} and gid {owner_gid} with mode {mode:04o}"
    if problem is SecretFileProblem.UNREADABLE:
        why = f"so the service (uid {uid}) cannot read it"
    elif mode & 0o007:
        why = "so every user may access it"
    else:
        why = f"so every member of group {owner_gid} may access it"
    return (
        f"{what} {where} {shape}, {why}; the service needs a copy of its own with mode 0600: "
        f"run as root: install -m 600 -o {uid} {where} <private path>, and point the setting "
        f"at the copy (a Kubernetes secret volume mounts files like this: copy them in an init "
        f"container, as deploy/kubernetes/gnau-dealer.yaml does; see {DEPLOYING_DOC})"
    )
