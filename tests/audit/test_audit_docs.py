"""The runnable examples in the audit modules' docstrings and in docs/audit.md."""

from __future__ import annotations

import doctest
import importlib
import json
import re
from pathlib import Path

import pytest

from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.merkle import MemoryTree, leaf_hash
from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Receipt, verify_receipt
from gnau_service.audit.software import software_identity
from tests.audit import doc_examples
from tests.audit.logs import chain_failure
from tests.schemas.validation import errors as schema_errors

MODULES = ["merkle", "note", "checkpoint", "signing", "entries", "timestamps", "cosignature"]


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


@pytest.mark.parametrize("name", ["vkey", "entries", "checkpoint"])
def test_the_documented_examples_are_what_the_code_writes_today(name: str) -> None:
    """The page's bytes come from the code: the payload builders the service uses, the example
    key, fixed times. If this fails, the code changed what it writes: print the new blocks
    with ``python -m tests.audit.doc_examples`` and update docs/audit.md."""
    assert doc_example(name) == doc_examples.blocks()[name]


def test_the_documented_entries_are_every_round_event_and_a_start() -> None:
    kinds = [json.loads(line)["kind"] for line in doc_example("entries").splitlines()]
    assert kinds == [
        "SERVICE_STARTED",
        "ROUND_COMMITTED",
        "ROUND_DEALT",
        "ROUND_REVEALED",
        "ROUND_SETTLED",
    ]
    started = json.loads(doc_example("entries").splitlines()[0])["payload"]
    # What the service puts in its own start entry, but for the source hash.
    assert set(started["software"]) == set(software_identity())
    assert started["software"]["version"] == software_identity()["version"]


def test_the_documented_examples_follow_the_schemas() -> None:
    for line in doc_example("entries").splitlines():
        assert schema_errors("log-entry.schema.json", json.loads(line)) == []
    assert schema_errors("checkpoint.schema.json", doc_example("checkpoint")) == []


EXAMPLE_RECEIPT = Path(__file__).parents[2] / "docs" / "schemas" / "examples" / "receipt.json"


def test_the_example_receipt_is_the_example_rounds_and_verifies() -> None:
    text = EXAMPLE_RECEIPT.read_text(encoding="utf-8")
    assert text == doc_examples.example_receipt()
    assert schema_errors("receipt.schema.json", json.loads(text)) == []
    verifier = Verifier.from_vkey(doc_example("vkey").strip())
    report = verify_receipt(Receipt.from_text(text), [verifier])
    assert report.ok, report.summary()
    assert report.state == "settled" and report.checkpoint_size == 5


def test_an_old_v1_receipt_still_verifies() -> None:
    """receipt-v1.json is the example receipt as the service wrote it before player references
    (its seats name players by the platform's id), kept byte for byte."""
    text = EXAMPLE_RECEIPT.with_name("receipt-v1.json").read_text(encoding="utf-8")
    assert '"format":"gnau-dealer/revealed-round/v1"' in text.replace(" ", "")
    verifier = Verifier.from_vkey(doc_example("vkey").strip())
    report = verify_receipt(Receipt.from_text(text), [verifier])
    assert report.ok, report.summary()
    assert report.state == "settled"


def test_the_documented_examples_verify() -> None:
    verifier = Verifier.from_vkey(doc_example("vkey").strip())
    entries = [line.encode() for line in doc_example("entries").splitlines()]
    assert chain_failure(entries, verifier) is None
    tree = MemoryTree()
    for data in entries:
        tree.append(leaf_hash(data))
    signed = open_checkpoint(doc_example("checkpoint"), "gnau-dealer/example", [verifier])
    assert (signed.checkpoint.size, signed.checkpoint.root_hash) == (5, tree.root())
