"""``gnau table``, ``gnau operator`` and ``gnau gaming`` (issue 38): each change is made on the
service's database with its key, and is a signed entry naming the console as its actor; a
refusal is one line on stderr, exit status 2, and changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.round_events import VoidReason
from gnau_service.audit.signing import LogSigner
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.refusals import RulesNotApproved, TableDisabled
from gnau_service.rules.house_rules import HouseRules, PayoutTable
from gnau_service.server.process.key_handover import write_key_file
from gnau_service.store import open_store
from tests.conftest import Run
from tests.dealers import fresh

ORIGIN = "gnau-dealer/cli-test"
DEFAULT_RULES = HouseRules()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "data"
    directory.mkdir()
    write_key_file(directory / "log-signing-key.pem", Ed25519PrivateKey.generate())
    yield directory


def signer_of(data_dir: Path) -> LogSigner:
    return LogSigner.from_key_file(ORIGIN, data_dir / "log-signing-key.pem")


def entries(data_dir: Path, kind: EntryKind) -> list[dict[str, Any]]:
    signer = signer_of(data_dir)
    with open_store(f"sqlite:///{data_dir / 'gnau.db'}", signer) as store:
        return [decode_entry(data, signer.verifier).payload for data in store.entries_of_kind(kind)]


def test_add_set_disable_and_list_a_table(gnau: Callable[..., Run], data_dir: Path) -> None:
    where = ["--data-dir", str(data_dir), "--origin", ORIGIN]
    added = gnau(
        "table", "add", "casino-a", "blackwood-1", "--currency", "JPY",
        "--rules", "default", "--rules", "payout=multiplier,decks=2",
        "--min-stake", "100", "--max-stake", "50000", "--max-seats", "5", *where,
    )  # fmt: skip
    assert added.status == 0, added.err
    assert "added table 'blackwood-1' of 'casino-a', version 1" in added.out
    assert (
        gnau("table", "set", "casino-a", "blackwood-1", "--max-stake", "90000", *where).status == 0
    )
    assert gnau("table", "disable", "casino-a", "blackwood-1", *where).status == 0
    listed = gnau("table", "list", *where)
    assert listed.status == 0, listed.err
    [line] = listed.json_lines
    config = line["config"]
    assert isinstance(config, dict)
    assert (line["operator"], line["table_id"], line["version"]) == ("casino-a", "blackwood-1", 3)
    assert config["currency"] == {"code": "JPY", "exponent": 0}  # ISO 4217: the yen has none
    assert (config["min_stake"], config["max_stake"], config["max_seats"]) == (100, 90_000, 5)
    assert config["enabled"] is False
    assert config["rule_sets"] == [
        HouseRules().as_dict(),
        HouseRules(payout=PayoutTable.MULTIPLIER, decks=2).as_dict(),
    ]
    changes = entries(data_dir, EntryKind.TABLE_CHANGED)
    assert [(c["actor"], c["version"]) for c in changes] == [
        ("console", 1),
        ("console", 2),
        ("console", 3),
    ]


def test_the_dealer_follows_the_catalogue_the_cli_changes(
    gnau: Callable[..., Run], data_dir: Path
) -> None:
    where = ["--data-dir", str(data_dir), "--origin", ORIGIN]
    added = gnau("table", "add", "casino-a", "t", "--currency", "EUR", "--rules", "default", *where)
    assert added.status == 0, added.err
    signer = signer_of(data_dir)

    def shuffle(rules: HouseRules = DEFAULT_RULES) -> str:
        with open_store(f"sqlite:///{data_dir / 'gnau.db'}", signer) as store:
            view = asyncio.run(
                Dealer(store).shuffle("t", rules, fresh(), operator="casino-a", actor="token:p")
            )
            asyncio.run(
                Dealer(store).void(
                    view.record.round_id,
                    VoidReason.TABLE_CLOSED,
                    "",
                    fresh(),
                    operator="casino-a",
                    actor="token:p",
                )
            )
            return view.record.round_id

    shuffle()
    with pytest.raises(RulesNotApproved):
        shuffle(HouseRules(decks=2))
    assert gnau("gaming", "disable", *where).status == 0
    with pytest.raises(TableDisabled):
        shuffle()
    assert "already was" in gnau("gaming", "disable", *where).out
    assert gnau("gaming", "enable", *where).status == 0
    assert gnau("operator", "set", "casino-a", "--disable", *where).status == 0
    with pytest.raises(TableDisabled):
        shuffle()
    assert gnau("operator", "set", "casino-a", "--enable", *where).status == 0
    shuffle()
    assert [e["enabled"] for e in entries(data_dir, EntryKind.GAMING_CHANGED)] == [False, True]
    operators = entries(data_dir, EntryKind.OPERATOR_CHANGED)
    assert [(e["actor"], e["config"]) for e in operators] == [
        ("console", {"enabled": False, "rtp_band": None}),
        ("console", {"enabled": True, "rtp_band": None}),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["table", "add", "casino-a", "t", "--currency", "EURO", "--rules", "default"],
         "'EURO' is not an ISO 4217 code"),
        (["table", "add", "casino-a", "t", "--currency", "EUR"], "name the approved rule sets"),
        (["table", "add", "Casino-A", "t", "--currency", "EUR", "--rules", "default"],
         "operator 'Casino-A' is not"),
        (["table", "add", "casino-a", "t", "--currency", "EUR", "--rules", "decks=9"], "decks"),
        (["table", "add", "casino-a", "t", "--currency", "EUR", "--rules", "default",
          "--min-stake", "10", "--max-stake", "5"], "min_stake must be 1 to max_stake"),
        (["table", "set", "casino-a", "nowhere", "--max-stake", "5"], "no table 'nowhere'"),
        (["operator", "set", "casino-a", "--rtp-band", "0.9"], "--rtp-band must be LOW:HIGH"),
    ],
)  # fmt: skip
def test_a_refusal_is_one_line_and_changes_nothing(
    gnau: Callable[..., Run], data_dir: Path, args: list[str], message: str
) -> None:
    refused = gnau(*args, "--data-dir", str(data_dir), "--origin", ORIGIN)
    assert refused.status == 2
    assert refused.err.count("\n") == 1 and message in refused.err, refused.err
    listed = gnau("table", "list", "--data-dir", str(data_dir), "--origin", ORIGIN)
    assert listed.out == ""


def test_a_band_that_an_approved_rule_set_falls_outside_is_refused(
    gnau: Callable[..., Run], data_dir: Path
) -> None:
    where = ["--data-dir", str(data_dir), "--origin", ORIGIN]
    added = gnau("table", "add", "casino-a", "t", "--currency", "EUR", "--rules", "default", *where)
    assert added.status == 0
    # The default rule set returns 57273199987/60403728840 (about 94.82%): outside 95%-98%.
    refused = gnau("operator", "set", "casino-a", "--rtp-band", "0.95:0.98", *where)
    assert refused.status == 2 and "outside its operator's RTP band" in refused.err
    assert entries(data_dir, EntryKind.OPERATOR_CHANGED) == []
    assert gnau("operator", "set", "casino-a", "--rtp-band", "0.94:0.98", *where).status == 0
    [changed] = entries(data_dir, EntryKind.OPERATOR_CHANGED)
    assert changed["config"] == {"enabled": True, "rtp_band": {"low": "47/50", "high": "49/50"}}
    # Nor can a table approve a rule set outside the band once it is set: this one returns 100%.
    refused = gnau(
        "table", "set", "casino-a", "t", "--rules", "default",
        "--rules", "ten_is_duke=true,three_six_pair=true,tie=push,suited_double=true", *where,
    )  # fmt: skip
    assert refused.status == 2 and "outside its operator's RTP band" in refused.err, refused.err
