"""A SOFTWARE_VERIFIED entry holds exactly its own members (docs/audit.md, *Events of the log*),
in the service's bundle verifier and in the independent one: a member beyond them could carry
what the log must not hold."""

from __future__ import annotations

import pytest

from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import EntryKind, JsonValue
from tests.audit.logs import honest_log
from tests.independent import bundle as independent

#: A check that found one changed file, as docs/audit.md writes the payload (not built by the
#: service's code, so a change of its members shows here).
CHECKED: dict[str, JsonValue] = {
    "actor": "service",
    "result": "MISMATCHED",
    "manifest_sha256": "ab" * 32,
    "mismatches": [{"part": "file", "name": "gnau_service/web/js/app.js", "problem": "changed"}],
    "mismatch_count": 1,
    "detail": "",
}


def bundle_with(payload: dict[str, JsonValue]) -> list[bytes]:
    log = honest_log(rounds=1)
    log.append(EntryKind.SOFTWARE_VERIFIED, payload)
    log.checkpoint()
    return [line.encode() for line in log.bundle_lines()]


def test_a_software_check_as_documented_verifies_in_both() -> None:
    lines = bundle_with(CHECKED)
    report = verify_bundle(lines)
    assert report.ok, report.summary()
    assert independent.verify_bundle(b"".join(lines)).status == independent.VALID


@pytest.mark.parametrize(
    "payload",
    [
        {**CHECKED, "player_id": "alice"},  # a member beyond its own
        {key: value for key, value in CHECKED.items() if key != "mismatch_count"},
        {key: value for key, value in CHECKED.items() if key != "detail"},
    ],
    ids=["extra", "missing count", "missing detail"],
)
def test_a_software_check_with_other_members_is_refused_by_both(
    payload: dict[str, JsonValue],
) -> None:
    lines = bundle_with(payload)
    report = verify_bundle(lines)
    assert not report.ok
    assert report.failure is not None
    assert "SOFTWARE_VERIFIED's payload must hold exactly actor, detail, manifest_sha256, " in (
        report.failure.reason
    )
    verdict = independent.verify_bundle(b"".join(lines))
    assert verdict.status == independent.INVALID
    assert "SOFTWARE_VERIFIED's members" in verdict.reason
