"""A round receipt, verified from docs/receipts.md: the document's shape, then the seven steps
of The checks, in order, the verdict naming the first that fails."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.independent.common import VerificationError, check, is_int, read_json, utf8
from tests.independent.entries import ROUND_KINDS, Entry, read_entry
from tests.independent.fairness import check_round, read_round
from tests.independent.merkle import check_consistency, leaf_hash, root_from_inclusion
from tests.independent.notes import (
    COSIGNATURE_V1,
    Key,
    TrustedKey,
    cosigners,
    open_checkpoint,
    read_vkey,
    trusted_keys,
)
from tests.independent.rounds import (
    AFTER,
    check_one_operator,
    check_payload,
    check_settlement,
    check_void,
    published,
)

FORMAT = "gnau-dealer/round-receipt/v1"
MEMBERS = {"format", "round_id", "round", "entries", "checkpoint", "key_rotations", "consistency"}
HASH = re.compile(r"[0-9a-f]{64}")
STEPS = ("fairness", "entries", "round", "outcome", "checkpoint", "inclusion", "consistency")

VALID, INVALID, UNREADABLE, CANNOT_CHECK = "VALID", "INVALID", "UNREADABLE", "CANNOT_CHECK"
EXIT_STATUS = {VALID: 0, INVALID: 1, UNREADABLE: 2, CANNOT_CHECK: 2}


@dataclass
class Verdict:
    status: str
    step: str = ""  # the step that failed, or could not be checked
    reason: str = ""
    passed: tuple[str, ...] = ()
    #: A valid receipt's round's operator, as its entries name it; None where they name none.
    operator: str | None = None

    @property
    def exit_status(self) -> int:
        """As ``gnau receipt verify``."""
        return EXIT_STATUS[self.status]


class _CannotCheckError(Exception):
    """The receipt carries no consistency proof from the pin: nothing is known to be wrong."""


def _hashes(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= 64
        and all(isinstance(h, str) and HASH.fullmatch(h) for h in value)
    )


def read_document(text: str) -> dict[str, Any]:
    """The shape of docs/receipts.md, The document: else the receipt is unreadable."""
    receipt = read_json(text)
    check(isinstance(receipt, dict) and set(receipt) == MEMBERS, "not the members of a receipt")
    check(receipt["format"] == FORMAT, f"the format is not {FORMAT}")
    check(isinstance(receipt["round_id"], str), "round_id is not a string")
    check(receipt["round"] is None or isinstance(receipt["round"], dict), "round")
    entries = receipt["entries"]
    check(isinstance(entries, list) and 1 <= len(entries) <= 4, "entries: not 1 to 4 objects")
    for item in entries:
        check(
            isinstance(item, dict) and set(item) == {"index", "entry", "inclusion_proof"}, "entry"
        )
        check(is_int(item["index"]) and isinstance(item["entry"], str), "an entry's types")
        check(_hashes(item["inclusion_proof"]), "an inclusion proof")
    check(isinstance(receipt["checkpoint"], str), "checkpoint is not a string")
    rotations = receipt["key_rotations"]
    check(isinstance(rotations, list) and all(isinstance(n, str) for n in rotations), "rotations")
    consistency = receipt["consistency"]
    if consistency is not None:
        check(
            isinstance(consistency, dict) and set(consistency) == {"first_size", "proof"},
            "consistency's members",
        )
        check(is_int(consistency["first_size"]) and _hashes(consistency["proof"]), "consistency")
    assert isinstance(receipt, dict)
    return receipt


def verify_receipt(
    text: str,
    pinned_keys: list[str],
    pin: str | None = None,
    witnesses: Sequence[str] = (),
    quorum: int = 0,
) -> Verdict:
    """The verdict on a receipt's text, against the pinned log keys (vkeys), a checkpoint seen
    earlier, and witness keys of which ``quorum`` must have cosigned the checkpoint."""
    try:
        receipt = read_document(text)
        keys = [read_vkey(k) for k in pinned_keys]
        check(keys, "no pinned key")
        witness_keys = [read_vkey(w, COSIGNATURE_V1) for w in witnesses]
        check(0 <= quorum <= len(witness_keys), "a quorum of more witnesses than given")
    except VerificationError as error:
        return Verdict(UNREADABLE, "", str(error))
    steps = _Steps(receipt, keys, witness_keys, quorum)
    try:
        steps.run(pin)
    except _CannotCheckError as error:
        return Verdict(CANNOT_CHECK, steps.step, str(error), tuple(steps.passed))
    except VerificationError as error:
        return Verdict(INVALID, steps.step, str(error), tuple(steps.passed))
    operator = steps.entries[0].payload.get("operator")
    return Verdict(VALID, "", "", tuple(steps.passed), operator)


class _Steps:
    def __init__(self, receipt: dict[str, Any], keys: list[Key], witnesses: list[Key], quorum: int):
        self.receipt, self.keys, self.witnesses, self.quorum = receipt, keys, witnesses, quorum
        self.round_id: str = receipt["round_id"]
        self.step, self.passed = STEPS[0], list[str]()
        self.round: dict[str, Any] | None = None
        self.entries: list[Entry] = []
        self.trusted: list[TrustedKey] = []

    def _next(self, step: str) -> None:
        self.passed.append(self.step)
        self.step = step

    def run(self, pin: str | None) -> None:
        self.fairness()
        self._next("entries")
        self.check_entries()
        self._next("round")
        self.check_round()
        self._next("outcome")
        self.outcome()
        self._next("checkpoint")
        size, root = self.checkpoint()
        self._next("inclusion")
        self.inclusion(size, root)
        if pin is not None:
            self._next("consistency")
            self.consistency(pin, size, root)
        self.passed.append(self.step)

    def fairness(self) -> None:
        if self.receipt["round"] is None:
            return
        self.round = read_round(self.receipt["round"])
        check(self.round["round_id"] == self.round_id, "the round is another round")
        check_round(self.round)

    def check_entries(self) -> None:
        for pinned in self.keys:
            self.trusted += trusted_keys(pinned, self.receipt["key_rotations"])
        last: str | None = None
        for item in self.receipt["entries"]:
            entry = read_entry(utf8(item["entry"], "an entry"))
            candidates = [t for t in self.trusted if t.key.key_id.hex() == entry.key_id]
            check(candidates, f"entry {entry.index}: signed by a key that is not trusted")
            check(
                any(entry.signed_by(t.key) for t in candidates),
                f"entry {entry.index}: the signature does not verify",
            )
            check(
                any(
                    entry.signed_by(t.key)
                    and (t.since is None or t.since <= entry.time)
                    and (t.until is None or entry.time <= t.until)
                    for t in candidates
                ),
                f"entry {entry.index}: its key was not the log's key at {entry.time_text}",
            )
            check(entry.index == item["index"], f"entry {entry.index} is listed as another")
            check(not self.entries or entry.index > self.entries[-1].index, "entries out of order")
            check(
                entry.kind in ROUND_KINDS and entry.round_id == self.round_id,
                f"entry {entry.index} is not an event of this round",
            )
            check(entry.kind in AFTER[last], f"{entry.kind} after {last or 'nothing'}")
            check_payload(entry)
            self.entries.append(entry)
            check_one_operator(self.entries)
            last = entry.kind
        kinds = {e.kind for e in self.entries}
        check(kinds & {"ROUND_REVEALED", "ROUND_VOIDED"}, "no entry reveals the seed")

    def check_round(self) -> None:
        dealt = any(e.kind == "ROUND_DEALT" for e in self.entries)
        check((self.round is None) == (not dealt), "the round and the log disagree on a deal")
        if self.round is None:
            return
        deck = self.receipt["round"]["deck"]  # a void before the reveal logs none: step 1's
        logged = read_round(published(self.round_id, self.entries, deck))
        for name, value in self.round.items():
            check(logged[name] == value, f"{name} differs from what the log published")

    def outcome(self) -> None:
        last = self.entries[-1]
        if last.kind == "ROUND_SETTLED":
            assert self.round is not None  # a settled round was dealt (step round)
            check_settlement(self.round, last.payload)
        elif last.kind == "ROUND_VOIDED":
            check_void(self.round_id, self.entries, self.round)

    def checkpoint(self) -> tuple[int, bytes]:
        origin = self.keys[0].name
        keys = [t.key for t in self.trusted]
        checkpoint = open_checkpoint(self.receipt["checkpoint"], origin, keys)
        cosigned = cosigners(self.receipt["checkpoint"], self.witnesses)
        check(len(cosigned) >= self.quorum, f"{len(cosigned)} witnesses cosigned it")
        check(checkpoint.size > self.entries[-1].index, "the checkpoint does not reach the entries")
        return checkpoint.size, checkpoint.root

    def inclusion(self, size: int, root: bytes) -> None:
        for item in self.receipt["entries"]:
            leaf = leaf_hash(item["entry"].encode())
            proof = [bytes.fromhex(h) for h in item["inclusion_proof"]]
            found = root_from_inclusion(leaf, item["index"], size, proof)
            check(found == root, f"entry {item['index']} is not in the checkpoint's tree")

    def consistency(self, pin: str, size: int, root: bytes) -> None:
        origin, keys = self.keys[0].name, [t.key for t in self.trusted]
        pinned = open_checkpoint(pin, origin, keys)
        if pinned.size == 0:
            return
        if pinned.size > size:
            raise _CannotCheckError("the pin is newer than the receipt: fetch it again")
        if pinned.size == size:
            check(pinned.root == root, f"two signed roots for size {size}: a fork")
            return
        proof = self.receipt["consistency"]
        if proof is None or proof["first_size"] != pinned.size:
            raise _CannotCheckError(
                f"no consistency proof from {pinned.size}: fetch it with the pin"
            )
        hashes = [bytes.fromhex(h) for h in proof["proof"]]
        check_consistency(pinned.size, size, hashes, pinned.root, root)
