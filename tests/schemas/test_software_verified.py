"""docs/schemas/payload-software-verified.schema.json against what the service writes (issue 42):
every payload a check makes validates, the schema's enums are the code's, and it refuses what
the service never writes. The service's own entries validate in
tests/server/test_software_checks.py."""

from __future__ import annotations

from typing import Any

import pytest

from gnau_service.audit.software_manifest import Mismatch, Outcome, Part, Problem, SoftwareCheck
from tests.schemas.validation import SCHEMA_DIR, errors, load

SCHEMA = "payload-software-verified.schema.json"
DIGEST = "ab" * 32
CHANGED = Mismatch(Part.FILE, "gnau_service/web/js/receipt.js", Problem.CHANGED)


def test_the_schema_names_the_codes_results_parts_and_problems() -> None:
    properties = load(SCHEMA_DIR / SCHEMA)["properties"]
    assert set(properties["result"]["enum"]) == {str(outcome) for outcome in Outcome}
    item = properties["mismatches"]["items"]["properties"]
    assert set(item["part"]["enum"]) == {str(part) for part in Part}
    assert set(item["problem"]["enum"]) == {str(problem) for problem in Problem}


@pytest.mark.parametrize(
    "check",
    [
        SoftwareCheck(Outcome.MATCHED, DIGEST),
        SoftwareCheck(Outcome.MISMATCHED, DIGEST, (CHANGED,)),
        SoftwareCheck(
            Outcome.MISMATCHED,
            DIGEST,
            tuple(Mismatch(Part.FILE, "x" * 400 + str(n), Problem.EXTRA) for n in range(150)),
        ),
        SoftwareCheck(Outcome.UNVERIFIED, detail="the manifest does not verify: ..."),
        SoftwareCheck(Outcome.NO_MANIFEST, detail="no software manifest is configured"),
    ],
)
def test_every_payload_a_check_makes_validates(check: SoftwareCheck) -> None:
    for actor in ("service", "token:regulator", "cert:platform.example"):
        assert errors(SCHEMA, check.payload(actor)) == []


def good() -> dict[str, Any]:
    return SoftwareCheck(Outcome.MISMATCHED, DIGEST, (CHANGED,)).payload("service")


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("actor", "root"),
        ("result", "OK"),
        ("manifest_sha256", "AB" * 32),
        ("mismatch_count", -1),
        ("mismatches", [{"part": "file", "name": "x", "problem": "changed", "seed": "s"}]),
        ("mismatches", [{"part": "dll", "name": "x", "problem": "changed"}]),
        ("mismatches", [{"part": "file", "name": "x", "problem": "ok"}] * 101),
        ("player_id", "alice"),
        ("detail", None),
    ],
)
def test_the_schema_refuses_what_the_service_never_writes(member: str, value: object) -> None:
    payload = good()
    payload[member] = value
    assert errors(SCHEMA, payload) != []
