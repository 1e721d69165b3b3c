"""The actor an entry names: the four forms, and nothing else."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.actors import (
    CONSOLE,
    MAX_ACTOR_BYTES,
    SERVICE,
    TOKEN_NAME_PATTERN,
    cert_actor,
    check_actor,
    token_actor,
)
from gnau_service.server.process.tokens import NAME_PATTERN

# The token file's name rule, written out here as docs/configuration.md states it.
TOKEN_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def test_the_audit_layer_names_tokens_by_the_token_files_rule() -> None:
    assert TOKEN_NAME_PATTERN.pattern == NAME_PATTERN.pattern == TOKEN_NAME


@pytest.mark.parametrize(
    "actor",
    [
        "service",
        "console",
        "token:casino-a-platform",
        "token:a",
        "token:" + "a" * 64,
        "cert:platform.casino-a.example",
        "cert:Platform A (EU) Ström",
        "cert:" + "é" * 125,  # 5 + 250 bytes
    ],
)
def test_an_actor_of_the_forms_passes(actor: str) -> None:
    assert check_actor(actor) is None


@pytest.mark.parametrize(
    ("actor", "says"),
    [
        (None, "is not a string"),
        (["service"], "is not a string"),
        ("", "is not service, console, token:NAME or cert:CN"),
        ("Service", "is not service, console"),
        ("service ", "is not service, console"),
        ("operator", "is not service, console"),
        ("token:", "not a token name"),
        ("token:-leading-dash", "not a token name"),
        ("token:" + "a" * 65, "not a token name"),
        ("token:alice smith", "not a token name"),
        ("cert:", "names no certificate"),
        ("cert:a\x00b", "holds a control character"),
        ("cert:a\x7fb", "holds a control character"),
        ("cert:line\nbreak", "holds a control character"),
        ("cert:" + "a" * 252, f"longer than {MAX_ACTOR_BYTES} bytes"),
        ("cert:" + "é" * 126, f"longer than {MAX_ACTOR_BYTES} bytes"),
        ("cert:\ud800", "lone surrogate"),
    ],
)
def test_anything_else_is_refused_with_its_reason(actor: object, says: str) -> None:
    problem = check_actor(actor)
    assert problem is not None and says in problem, problem


def test_the_builders_write_the_forms() -> None:
    assert (SERVICE, CONSOLE) == ("service", "console")
    assert token_actor("casino-a-platform") == "token:casino-a-platform"
    assert cert_actor("platform.example") == "cert:platform.example"
    with pytest.raises(ValueError, match="not a token name"):
        token_actor("Alice Smith")
    with pytest.raises(ValueError, match="control character"):
        cert_actor("evil\r\nline")
    with pytest.raises(ValueError, match="names no certificate"):
        cert_actor("")


@given(st.from_regex(re.compile(TOKEN_NAME), fullmatch=True))
def test_every_token_name_the_file_allows_makes_an_actor(name: str) -> None:
    assert check_actor(token_actor(name)) is None


@given(st.text(max_size=300))
def test_an_actor_passes_exactly_when_it_is_one_of_the_forms(text: str) -> None:
    """check_actor against the rules written out again, over any text, bare and as a
    certificate's name (the form that takes the most)."""
    for actor in (text, "cert:" + text):
        in_form = (
            actor in ("service", "console")
            or (actor.startswith("token:") and re.fullmatch(TOKEN_NAME, actor[6:]) is not None)
            or (actor.startswith("cert:") and len(actor) > len("cert:"))
        )
        fits = len(actor.encode("utf-8")) <= MAX_ACTOR_BYTES
        has_control = any(ord(c) < 0x20 or ord(c) == 0x7F for c in actor)
        assert (check_actor(actor) is None) == (in_form and fits and not has_control), actor
