"""The rounds table's record of a round: its JSON text reads back as the same record, whether
parsed or remembered from when it was written."""

import json
from dataclasses import replace

import pytest

from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rounds import record as round_record
from gnau_service.rounds.record import RoundRecord, RoundState, parsed_record, record_text
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from tests.references import ref

SHUFFLED = RoundRecord(
    round_id="r-0123456789abcdef01234567",
    table_id="table 7",
    state=RoundState.SHUFFLED,
    rules=HouseRules(),
    commitment=bytes(range(32)),
    key_id="0a1b2c3d",
    created_at="2026-11-29T12:00:00.000001Z",
    updated_at="2026-11-29T12:00:00.000001Z",
    operator="casino-a",
    log_indices=(4,),
)
DEALT = replace(
    SHUFFLED,
    state=RoundState.DEALT,
    rules=HouseRules(ten_is_duke=True, tie=TieRule.PUSH, payout=PayoutTable.MULTIPLIER, decks=2),
    seats=(
        LockedSeat(1, ref("alice"), 100),
        LockedSeat(9, ref("bób ♠"), 10**12, client_seed=b"\x00\xff" * 32),
    ),
    beacon=Beacon("drand/quicknet/round/1234567", bytes(32)),
    transcript_hash=bytes(range(32, 64)),
    updated_at="2026-11-29T12:00:01Z",
    log_indices=(4, 9),
)
VOIDED = replace(
    DEALT, state=RoundState.VOIDED, void_reason='table closed: "power cut"', log_indices=(4, 9, 12)
)


@pytest.mark.parametrize("record", [SHUFFLED, DEALT, VOIDED], ids=["shuffled", "dealt", "voided"])
def test_a_record_reads_back_from_its_text_parsed_or_remembered(record: RoundRecord) -> None:
    text = record.to_json()
    assert RoundRecord.from_json(text) == record
    round_record._RECORDS_BY_TEXT.clear()
    assert parsed_record(text) == record  # parsed: nothing remembered
    written = record_text(record)
    assert written == text
    assert parsed_record(written) is record  # remembered


def test_a_record_from_before_operators_is_the_default_operator_s_and_stays_unnamed() -> None:
    """A record written before operators has no operator member: it reads as the default
    operator's round whose entries name no operator, and writes back without one."""
    document = json.loads(SHUFFLED.to_json())
    assert document.pop("operator") == "casino-a"
    old = RoundRecord.from_json(json.dumps(document, sort_keys=True))
    assert (old.operator, old.operator_logged) == ("default", False)
    assert "operator" not in json.loads(old.to_json())
    assert replace(old, operator_logged=True, operator="casino-a") == SHUFFLED


def test_the_remembered_records_are_bounded() -> None:
    round_record._RECORDS_BY_TEXT.clear()
    for n in range(round_record._MAX_RECORDS_BY_TEXT + 10):
        record_text(replace(SHUFFLED, log_indices=(n,)))
    assert len(round_record._RECORDS_BY_TEXT) <= round_record._MAX_RECORDS_BY_TEXT
    last = replace(SHUFFLED, log_indices=(round_record._MAX_RECORDS_BY_TEXT + 9,))
    assert parsed_record(last.to_json()) == last
