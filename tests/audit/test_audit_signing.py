"""Log key files, the log signer, and key rotation chains."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit import signing
from gnau_service.audit.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from gnau_service.audit.note import (
    KeyFormatError,
    Signer,
    UnverifiedNoteError,
    Verifier,
    sign_note,
)
from gnau_service.audit.signing import (
    KeyFileError,
    KeyRotation,
    LogSigner,
    RotationError,
    TrustedKey,
    ensure_private_key,
    load_private_key,
    trusted_keys,
)

ORIGIN = "gnau-dealer/test"


def write_key(
    path: Path, mode: int, key: object | None = None, password: bytes | None = None
) -> Path:
    private_key = key or Ed25519PrivateKey.generate()
    encryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    pem = private_key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    path.write_bytes(pem)
    path.chmod(mode)
    return path


# --- Loading --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_owner_only_key_files_load(tmp_path: Path, mode: int) -> None:
    key = Ed25519PrivateKey.generate()
    loaded = load_private_key(write_key(tmp_path / "key.pem", mode, key))
    assert loaded.public_key().public_bytes_raw() == key.public_key().public_bytes_raw()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o602, 0o610, 0o601, 0o666])
def test_key_files_open_to_group_or_others_are_refused(tmp_path: Path, mode: int) -> None:
    path = write_key(tmp_path / "key.pem", mode)
    with pytest.raises(KeyFileError) as caught:
        load_private_key(path)
    message = str(caught.value)
    assert str(path) in message
    assert f"{mode:04o}" in message
    assert "chmod 600" in message


def test_the_mode_of_a_symlink_target_is_what_counts(tmp_path: Path) -> None:
    target = write_key(tmp_path / "key.pem", 0o644)
    link = tmp_path / "link.pem"
    link.symlink_to(target)
    with pytest.raises(KeyFileError, match="0644"):
        load_private_key(link)


def test_unusable_key_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot open"):
        load_private_key(tmp_path / "missing.pem")
    directory = tmp_path / "dir"
    directory.mkdir(mode=0o700)
    with pytest.raises(KeyFileError, match="not a regular file"):
        load_private_key(directory)
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a key")
    garbage.chmod(0o600)
    with pytest.raises(KeyFileError, match="not an unencrypted PEM key"):
        load_private_key(garbage)
    encrypted = write_key(tmp_path / "enc.pem", 0o600, password=b"secret")
    with pytest.raises(KeyFileError, match="not an unencrypted PEM key"):
        load_private_key(encrypted)
    ecdsa = write_key(tmp_path / "ec.pem", 0o600, key=ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(KeyFileError, match="not Ed25519"):
        load_private_key(ecdsa)


# --- Creating -------------------------------------------------------------------------------------


def test_ensure_creates_a_0600_key_once(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the most permissive umask must not widen the mode
    try:
        first = ensure_private_key(tmp_path)
    finally:
        os.umask(old_umask)
    assert first.created
    assert first.path == tmp_path / signing.DEFAULT_KEY_FILENAME
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    content = first.path.read_bytes()
    load_private_key(first.path)

    second = ensure_private_key(tmp_path)
    assert not second.created
    assert second.path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [signing.DEFAULT_KEY_FILENAME]


def test_ensure_never_replaces_a_key_created_concurrently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    existing = write_key(tmp_path / "key.pem", 0o600)
    content = existing.read_bytes()
    # Another process creates the key between our existence check and our link.
    monkeypatch.setattr(Path, "exists", lambda self: False)
    result = ensure_private_key(tmp_path, "key.pem")
    assert not result.created
    assert existing.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key.pem"]  # no temporary left


# --- The log signer -------------------------------------------------------------------------------


def test_log_signer_signs_checkpoints_clients_can_open(tmp_path: Path) -> None:
    path = ensure_private_key(tmp_path).path
    log = LogSigner.from_key_file(ORIGIN, path)
    assert log.vkey.startswith(f"{ORIGIN}+{log.key_id.hex()}+")
    note = log.sign_checkpoint(3, bytes(32))
    opened = open_checkpoint(note.encode(), ORIGIN, [Verifier.from_vkey(log.vkey)])
    assert opened.checkpoint == Checkpoint(ORIGIN, 3, bytes(32))


def test_log_key_must_be_named_after_the_origin() -> None:
    with pytest.raises(KeyFormatError, match="named after the origin"):
        LogSigner(ORIGIN, Signer("gnau-dealer/other", Ed25519PrivateKey.generate()))


# --- Rotation -------------------------------------------------------------------------------------


def key(seed: int) -> Signer:
    return Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32))


A, B, C = key(1), key(2), key(3)
T1, T2, T3 = "2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z", "2026-01-01T00:00:00Z"


def rotate(old: Signer, new: Signer, time: str, signer: Signer | None = None) -> bytes:
    rotation = KeyRotation(old.verifier, new.verifier, time)
    if signer is None:
        return rotation.sign(old).encode()
    # A statement signed by another key than the old one, for the negative tests.
    return sign_note(rotation.to_note_text(), signer).encode()


def test_rotation_statement_text_form() -> None:
    text = KeyRotation(A.verifier, B.verifier, T1).to_note_text()
    assert text == (
        f"gnau-dealer/key-rotation/v1\nold {A.verifier.vkey}\nnew {B.verifier.vkey}\ntime {T1}\n"
    )
    assert KeyRotation.parse(text) == KeyRotation(A.verifier, B.verifier, T1)
    with pytest.raises(CheckpointError):
        Checkpoint.parse(text)  # a rotation can never pass for a checkpoint


def test_a_chain_of_rotations_yields_the_keys_in_order() -> None:
    chain = trusted_keys(A.verifier, [rotate(A, B, T1), rotate(B, C, T2)])
    assert chain == (
        TrustedKey(A.verifier, None, T1),
        TrustedKey(B.verifier, T1, T2),
        TrustedKey(C.verifier, T2, None),
    )
    assert trusted_keys(A.verifier, []) == (TrustedKey(A.verifier, None, None),)


def test_a_rotation_may_also_carry_the_new_keys_signature() -> None:
    note = KeyRotation(A.verifier, B.verifier, T1).sign(A, B)
    assert len(note.signatures) == 2
    assert trusted_keys(A.verifier, [note.encode()])[-1].verifier == B.verifier


def test_a_rotation_not_signed_by_the_current_key_is_refused() -> None:
    with pytest.raises(UnverifiedNoteError):
        trusted_keys(A.verifier, [rotate(A, B, T1, signer=B)])
    # Skipping a link: B -> C is signed by B, but the pinned A never handed over to B.
    with pytest.raises(UnverifiedNoteError):
        trusted_keys(A.verifier, [rotate(B, C, T2)])


def test_a_rotation_naming_another_old_key_is_refused() -> None:
    misdirected = rotate(B, C, T2, signer=A)  # signed by the current key, but names B as old
    with pytest.raises(RotationError, match="current key is"):
        trusted_keys(A.verifier, [misdirected])


def test_rotations_must_move_forward_in_time_and_never_back_to_a_key() -> None:
    with pytest.raises(RotationError, match="not after"):
        trusted_keys(A.verifier, [rotate(A, B, T2), rotate(B, C, T1)])
    with pytest.raises(RotationError, match="not after"):
        trusted_keys(A.verifier, [rotate(A, B, T2), rotate(B, C, T2)])
    with pytest.raises(RotationError, match="brings back"):
        trusted_keys(A.verifier, [rotate(A, B, T1), rotate(B, A, T3)])


def test_malformed_rotations_are_refused() -> None:
    with pytest.raises(RotationError):
        KeyRotation(A.verifier, A.verifier, T1)
    with pytest.raises(ValueError, match="RFC 3339"):
        KeyRotation(A.verifier, B.verifier, "yesterday")
    with pytest.raises(RotationError, match="signed by the key it replaces"):
        KeyRotation(A.verifier, B.verifier, T1).sign(B)
    good = KeyRotation(A.verifier, B.verifier, T1).to_note_text()
    for bad in (
        good.replace("v1", "v2"),
        good.replace("\nold ", "\nOld "),
        good + "extra\n",
        good.removesuffix("\n"),
        good.replace(B.verifier.vkey, "not-a-vkey"),
    ):
        with pytest.raises(RotationError):
            KeyRotation.parse(bad)
