"""HmacDrbg against every NIST CAVP HMAC_DRBG (SHA-256) known-answer vector."""

from __future__ import annotations

from typing import Any

import pytest

from gnau_service.fairness import DrbgError, HmacDrbg
from gnau_service.fairness.drbg import MAX_REQUEST_BYTES, RESEED_INTERVAL

from .conftest import REPO_ROOT, load_json

# A verbatim copy of the shared vectors file, so the tests need nothing outside the repository.
CAVP_FILE = REPO_ROOT / "tests" / "vectors" / "hmac-drbg-sha256.json"


def _cavp_cases() -> list[Any]:
    # A missing file must fail loudly, not skip: these vectors are the DRBG's only oracle.
    cases = []
    for variant, sections in load_json(CAVP_FILE)["variants"].items():
        for section in sections:
            personalization = next(line for line in section["header"] if "Personalization" in line)
            bits = personalization.strip("[]").split("= ")[1]
            for case in section["cases"]:
                case_id = f"{variant}-personalization{bits}-{case['COUNT']}"
                cases.append(pytest.param(variant, case, id=case_id))
    return cases


def test_every_cavp_section_is_used() -> None:
    """Both procedures (no reseed; reseed without prediction resistance), each with and without
    a personalization string: 4 sections of 15 cases."""
    assert len(_cavp_cases()) == 60


@pytest.mark.parametrize(("variant", "case"), _cavp_cases())
def test_cavp_known_answer(variant: str, case: dict[str, Any]) -> None:
    # CAVP procedure: instantiate, (reseed,) generate twice, compare the SECOND output.
    drbg = HmacDrbg(
        entropy_input=bytes.fromhex(case["EntropyInput"]),
        nonce=bytes.fromhex(case["Nonce"]),
        personalization_string=bytes.fromhex(case["PersonalizationString"]),
    )
    if variant == "pr_false":
        drbg.reseed(
            bytes.fromhex(case["EntropyInputReseed"]),
            bytes.fromhex(case["AdditionalInputReseed"]),
        )
    else:
        assert variant == "no_reseed"
    returned_bytes = len(case["ReturnedBits"]) // 2
    first_additional, second_additional = (bytes.fromhex(data) for data in case["AdditionalInput"])
    drbg.generate(returned_bytes, first_additional)
    assert drbg.generate(returned_bytes, second_additional).hex() == case["ReturnedBits"]


def test_additional_input_changes_the_output() -> None:
    # No CAVP case in the file has additional input, so check that it is mixed in at all.
    plain, mixed = (HmacDrbg(bytes(32), bytes(16)) for _ in range(2))
    assert plain.generate(32) != mixed.generate(32, additional_input=b"x")


def test_generate_boundaries_matter() -> None:
    """Each Generate call ends with an Update: one 64-byte call is not two 32-byte calls."""
    one, two = HmacDrbg(bytes(32), bytes(16)), HmacDrbg(bytes(32), bytes(16))
    whole = one.generate(64)
    assert whole[:32] == two.generate(32)
    assert whole[32:] != two.generate(32)


def test_odd_lengths_are_prefixes_of_whole_blocks() -> None:
    assert (
        HmacDrbg(bytes(32), bytes(16)).generate(33)
        == HmacDrbg(bytes(32), bytes(16)).generate(64)[:33]
    )
    assert HmacDrbg(bytes(32), bytes(16)).generate(0) == b""


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"entropy_input": bytes(31), "nonce": bytes(16)}, "entropy_input"),
        ({"entropy_input": bytes(32), "nonce": bytes(15)}, "nonce"),
        ({"entropy_input": "seed", "nonce": bytes(16)}, "entropy_input"),
        (
            {"entropy_input": bytes(32), "nonce": bytes(16), "personalization_string": None},
            "personalization_string",
        ),
    ],
)
def test_instantiate_refuses_bad_inputs(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(DrbgError, match=field) as raised:
        HmacDrbg(**arguments)
    assert raised.value.field == field


def test_generate_refuses_oversized_and_negative_requests() -> None:
    drbg = HmacDrbg(bytes(32), bytes(16))
    assert len(drbg.generate(MAX_REQUEST_BYTES)) == MAX_REQUEST_BYTES
    for size in (MAX_REQUEST_BYTES + 1, -1):
        with pytest.raises(DrbgError, match="num_bytes"):
            drbg.generate(size)


def test_reseed_is_required_after_the_interval() -> None:
    drbg = HmacDrbg(bytes(32), bytes(16))
    drbg._reseed_counter = RESEED_INTERVAL  # reaching it by generating would take ages
    drbg.generate(1)
    with pytest.raises(DrbgError, match="reseeded") as raised:
        drbg.generate(1)
    assert raised.value.field == "reseed_counter"
    drbg.reseed(bytes(32))
    assert len(drbg.generate(1)) == 1


def test_repr_hides_the_state() -> None:
    drbg = HmacDrbg(b"\xaa" * 32, bytes(16))
    assert "aa" not in repr(drbg).lower()
    assert "hidden" in repr(drbg)
