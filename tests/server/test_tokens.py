"""The token file: hashes only, the older format still read, atomic and locked changes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.common.private_files import write_private_file
from gnau_service.server.grpc.auth import AuthConfigError, Caller, Credentials, Role
from gnau_service.server.process.token_reload import TokenReload, file_version
from gnau_service.server.process.tokens import (
    TokenNotFound,
    add_token,
    list_tokens,
    new_token,
    read_token_file,
    revoke_token,
)
from tests.server.conftest import TOKENS, write_tokens


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def role_of(credentials: Credentials, token: str) -> Role | None:
    caller = credentials.identify_token(token)
    return None if caller is None else caller.role


def test_the_older_format_is_read_as_hashes_named_after_them(tmp_path: Path) -> None:
    token_file = read_token_file(write_tokens(tmp_path / "tokens.json"))
    expected = {sha256_hex(token): Role(role) for role, token in TOKENS.items()}
    assert token_file.hashes == expected
    assert {record.name for record in token_file.records} == {
        "legacy-" + sha256_hex(token)[:8] for token in TOKENS.values()
    }
    assert all(record.created is None for record in token_file.records)
    # From before operators: an operator token is the default operator's, an auditor's sees all.
    assert {str(record.role): record.operator for record in token_file.records} == {
        "operator": "default",
        "auditor": "*",
        "public": None,
    }


def test_added_tokens_are_kept_only_as_hashes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    record, token = add_token(path, Role.AUDITOR, "ci-audit")
    text = path.read_text()
    assert token not in text
    assert json.loads(text) == {
        "tokens": [
            {
                "name": "ci-audit",
                "role": "auditor",
                "operator": "*",
                "sha256": sha256_hex(token),
                "created": record.created,
            }
        ]
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert role_of(Credentials(read_token_file(path).callers, {}), token) is Role.AUDITOR


def test_a_name_is_unique_and_revoking_removes_only_that_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _, kept = add_token(path, Role.OPERATOR, "ops")
    _, gone = add_token(path, Role.PUBLIC, "site")
    with pytest.raises(ValueError, match="already a token named ops"):
        add_token(path, Role.AUDITOR, "ops")
    assert revoke_token(path, "site").role is Role.PUBLIC
    with pytest.raises(TokenNotFound):
        revoke_token(path, "site")
    credentials = Credentials(read_token_file(path).callers, {})
    assert role_of(credentials, kept) is Role.OPERATOR
    assert role_of(credentials, gone) is None


def test_a_failed_hand_over_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    add_token(path, Role.OPERATOR, "ops")
    before = path.read_bytes()

    def cannot_deliver(token: str) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        add_token(path, Role.AUDITOR, "lost", cannot_deliver)
    assert path.read_bytes() == before


def test_listing_rewrites_the_older_format_with_hashes_only(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "tokens.json")
    records = list_tokens(path)
    text = path.read_text()
    assert not any(token in text for token in TOKENS.values())
    assert read_token_file(path).records == records
    assert read_token_file(path).legacy_tokens == {}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_concurrent_additions_lose_none(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    names = [f"t{number}" for number in range(16)]
    threads = [
        threading.Thread(target=add_token, args=(path, Role.AUDITOR, name)) for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(record.name for record in read_token_file(path).records) == sorted(names)


SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=24, max_size=48)


@settings(max_examples=60, deadline=None)
@given(secret=SECRET, shape=st.integers(min_value=0, max_value=5))
def test_no_refusal_quotes_the_file(
    tmp_path_factory: pytest.TempPathFactory, secret: str, shape: int
) -> None:
    documents: list[object] = [
        {"tokens": {secret: secret}},  # a token where its role should be
        {"tokens": {"x": "operator", secret: 7}},
        {"tokens": [{"name": secret + " !", "role": "operator", "sha256": "0" * 64}]},
        {"tokens": [{"name": "n", "role": secret, "sha256": "0" * 64}]},
        {"tokens": [{"name": "n", "role": "auditor", "sha256": secret}]},
        {secret: []},
    ]
    path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    path.write_text(json.dumps(documents[shape]))
    path.chmod(0o600)
    with pytest.raises(AuthConfigError) as refused:
        read_token_file(path)
    assert secret not in str(refused.value)
    assert str(path) in str(refused.value)


@settings(max_examples=50, deadline=None)
@given(
    known=st.dictionaries(st.text(min_size=1, max_size=40), st.sampled_from(Role), max_size=6),
    presented=st.text(max_size=40),
)
def test_a_token_has_the_role_of_its_hash_and_no_other(
    known: dict[str, Role], presented: str
) -> None:
    credentials = Credentials(
        {sha256_hex(token): Caller(role, f"token:{role}", None) for token, role in known.items()},
        {},
    )
    for token, role in known.items():
        assert role_of(credentials, token) is role
    assert role_of(credentials, presented) is known.get(presented)


async def test_a_change_between_the_start_s_read_and_the_watch_is_reread(tmp_path: Path) -> None:
    """The watch starts from the version the start read (taken before reading), not from the
    file as it is when the watch begins: a token added in between still takes effect."""
    path = write_tokens(tmp_path / "tokens.json")
    read = file_version(path)  # what the start read
    _, late = add_token(path, Role.AUDITOR, "late")  # changed before the watch is made
    applied: list[Credentials] = []
    reload = TokenReload(path, {}, applied.append, read=read)
    reload.start()
    try:
        for _ in range(500):  # the first poll, within about 5 s at the most
            if applied:
                break
            await asyncio.sleep(0.01)
    finally:
        await reload.stop()
    assert applied, "the change made before the watch began was never reread"
    assert applied[-1].tokens[sha256_hex(late)] == Caller(Role.AUDITOR, "token:late", None)


def test_no_new_token_starts_with_a_dash() -> None:
    """``--token -x...`` would be read as an option: one urlsafe token in 64 starts so."""
    tokens = [new_token() for _ in range(2000)]
    assert not [token for token in tokens if token.startswith("-")]
    assert len(set(tokens)) == len(tokens) and all(len(token) == 43 for token in tokens)


def test_each_token_belongs_to_its_operator(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _, casino_a = add_token(path, Role.OPERATOR, "casino-a-platform", operator="casino-a")
    _, local = add_token(path, Role.OPERATOR, "local")
    _, scoped = add_token(path, Role.AUDITOR, "casino-b-audit", operator="casino-b")
    _, regulator = add_token(path, Role.AUDITOR, "regulator", operator="*")
    _, site = add_token(path, Role.PUBLIC, "site")
    written = {
        item["name"]: item.get("operator") for item in json.loads(path.read_text())["tokens"]
    }
    assert written == {
        "casino-a-platform": "casino-a",
        "local": "default",
        "casino-b-audit": "casino-b",
        "regulator": "*",
        "site": None,
    }
    credentials = Credentials(read_token_file(path).callers, {})
    assert [credentials.identify_token(token) for token in (casino_a, local, scoped)] == [
        Caller(Role.OPERATOR, "token:casino-a-platform", "casino-a"),
        Caller(Role.OPERATOR, "token:local", "default"),
        Caller(Role.AUDITOR, "token:casino-b-audit", "casino-b"),
    ]
    assert credentials.identify_token(regulator) == Caller(Role.AUDITOR, "token:regulator", None)
    assert credentials.identify_token(site) == Caller(Role.PUBLIC, "token:site", None)


@pytest.mark.parametrize(
    ("role", "operator", "reason"),
    [
        (Role.OPERATOR, "*", "only an auditor may be of all operators"),
        (Role.AUDITOR, "Casino A", "is not 1 to 64 of a-z"),
        (Role.PUBLIC, "casino-a", "a public token has no operator"),
    ],
)
def test_a_token_for_no_operator_it_may_have_is_not_added(
    tmp_path: Path, role: Role, operator: str, reason: str
) -> None:
    path = tmp_path / "tokens.json"
    with pytest.raises(ValueError, match=reason):
        add_token(path, role, "refused", operator=operator)
    assert not path.exists()


@pytest.mark.parametrize(
    ("role", "operator"),
    [("operator", "*"), ("auditor", "Casino-A"), ("auditor", 7), ("public", "casino-a")],
)
def test_a_file_naming_an_operator_a_token_cannot_have_is_refused(
    tmp_path: Path, role: str, operator: object
) -> None:
    path = tmp_path / "tokens.json"
    record = {"name": "t", "role": role, "operator": operator, "sha256": "ab" * 32, "created": None}
    write_private_file(path, json.dumps({"tokens": [record]}).encode())
    with pytest.raises(AuthConfigError, match="token 1: the operator") as refused:
        read_token_file(path)
    assert "asino" not in str(refused.value)  # a file's values are never quoted
