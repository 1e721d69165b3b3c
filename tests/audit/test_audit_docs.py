"""The runnable examples in the audit modules' docstrings and in docs/audit.md."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.entries import check_chain
from gnau_service.audit.merkle import MemoryTree, leaf_hash
from gnau_service.audit.note import Verifier

MODULES = ["merkle", "note", "checkpoint", "signing", "entries", "timestamps"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"gnau_service.audit.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


DOC = Path(__file__).parents[2] / "docs" / "audit.md"


def doc_example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```\w*\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert match, f"no example {name!r} in {DOC}"
    return match.group(1)


def test_the_documented_examples_verify() -> None:
    verifier = Verifier.from_vkey(doc_example("vkey").strip())
    entries = [line.encode() for line in doc_example("entries").splitlines()]
    assert check_chain(entries, verifier) is None
    tree = MemoryTree()
    for data in entries:
        tree.append(leaf_hash(data))
    signed = open_checkpoint(doc_example("checkpoint"), "gnau-dealer/example", [verifier])
    assert (signed.checkpoint.size, signed.checkpoint.root_hash) == (2, tree.root())
