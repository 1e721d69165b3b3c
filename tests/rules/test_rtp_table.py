"""The shipped table of every rule set's return to player (gnau_service/rules/return_to_player.csv):
it covers exactly the rule-set space, in its one form; it agrees with the sheets published in
docs/par/, with what the game's symmetry proves, and with the PAR code (a sample here, every rule
set under ``make test-slow``); and the service reads it without computing anything."""

from __future__ import annotations

import csv
import itertools
import os
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from importlib import resources
from pathlib import Path

import pytest

from gnau_service.rules import par
from gnau_service.rules.house_rules import HouseRules, every_rule_set
from gnau_service.rules.return_to_player import (
    TABLE,
    ReturnToPlayer,
    ReturnToPlayerError,
    read_table,
    table_text,
)

PAR_DOCS = Path(__file__).resolve().parents[2] / "docs" / "par"
#: The rule-set space as docs/rules.md states it, written out here rather than taken from the
#: code: five true/false rules, three tie rules, two payout tables, one to eight decks.
SPACE = {
    "ten_is_duke": ("false", "true"),
    "three_six_pair": ("false", "true"),
    "trips_make_ox": ("false", "true"),
    "five_small": ("false", "true"),
    "tie": ("dealer", "push", "high_card"),
    "payout": ("points", "multiplier"),
    "suited_double": ("false", "true"),
    "decks": tuple(str(decks) for decks in range(1, 9)),
}
#: Recomputed on every run: the default and rule sets that change every rule at least once,
#: each a second or two of CPU.
SAMPLE = [
    (),
    ("ten_is_duke=true", "three_six_pair=true", "decks=3"),
    ("trips_make_ox=false", "five_small=false", "payout=multiplier", "decks=5"),
    ("tie=high_card", "decks=2"),
    ("suited_double=true", "tie=push", "decks=7"),
]


def shipped_text() -> str:
    return (resources.files("gnau_service.rules") / TABLE).read_text(encoding="ascii")


def shipped() -> dict[HouseRules, Fraction]:
    return read_table(shipped_text())


def published_rtp() -> dict[HouseRules, Fraction]:
    """The RTP of each sheet published under docs/par/, read from its Markdown: its rules line
    and its RTP row."""
    published = {}
    for path in sorted(PAR_DOCS.glob("*.md")):
        if path.name == "README.md":
            continue
        text = path.read_text()
        (rules_line,) = re.findall(r"^- Rules: (.*)$", text, re.MULTILINE)
        (rtp,) = re.findall(r"^\| RTP \| ([0-9]+(?:/[0-9]+)?) \|", text, re.MULTILINE)
        rules = HouseRules.from_assignments(re.findall(r"`([a-z_]+=[a-z_0-9]+)`", rules_line))
        published[rules] = Fraction(rtp)
    return published


# -- its form ----------------------------------------------------------------------------------


def test_the_table_has_one_row_for_each_rule_set_of_the_space() -> None:
    lines = shipped_text().splitlines()
    assert lines[0].startswith("# ")
    header, *rows = list(csv.reader(lines[1:]))
    assert header == [*SPACE, "rtp"]
    keys = [tuple(row[:-1]) for row in rows]
    # Each rule set once, in the documented order: the last rule varying fastest.
    assert keys == list(itertools.product(*SPACE.values()))
    assert len(keys) == 2**5 * 3 * 2 * 8
    for row in rows:
        numerator, denominator = (int(part) for part in row[-1].split("/"))
        assert denominator > 0 and Fraction(numerator, denominator).denominator == denominator
        assert 0 < numerator <= denominator  # a return between nothing and the whole stake
    # The code's own enumeration is that space, in that order.
    assert [tuple(rules.as_text().values()) for rules in every_rule_set()] == keys


def test_the_table_is_in_its_one_written_form() -> None:
    # What the generator would write from the figures read back: byte for byte the file.
    assert table_text(shipped()) == shipped_text()


def _without_line(text: str, number: int) -> str:
    lines = text.split("\n")
    return "\n".join(lines[:number] + lines[number + 1 :])


def _doubled(match: re.Match[str]) -> str:
    return f",{2 * int(match[1])}/{2 * int(match[2])}\n"


def _swapped(text: str, first: int, second: int) -> str:
    lines = text.split("\n")
    lines[first], lines[second] = lines[second], lines[first]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: text.split("\n", 1)[1], "comment"),
        (lambda text: text.rstrip("\n"), "newline"),
        (lambda text: text.replace(",rtp\n", ",rtp,extra\n"), "header"),
        (lambda text: _without_line(text, 5), "a row for each"),
        (lambda text: _swapped(text, 2, 3), "line 3"),
        (lambda text: text.replace(",1,", ",01,", 1), "line"),
        (lambda text: re.sub(r",([0-9]+)/([0-9]+)\n", _doubled, text, count=1), "lowest terms"),
        (lambda text: re.sub(r"/([0-9]+)\n", r"/-\1\n", text, count=1), "rtp"),
    ],
)
def test_a_damaged_table_is_refused(damage: Callable[[str], str], message: str) -> None:
    with pytest.raises(ReturnToPlayerError, match=message):
        read_table(damage(shipped_text()))


# -- its figures, against what does not come from the table's generator --------------------------


def test_the_table_agrees_with_every_published_sheet() -> None:
    published = published_rtp()
    assert len(published) == 12
    table = shipped()
    assert {rules: table[rules] for rules in published} == published


def test_the_symmetric_games_return_exactly_the_stake() -> None:
    # With tie=push the player and the dealer are dealt alike, equal hands move nothing and every
    # win is priced by the winner's hand, whichever side it is: the game is fair, rtp exactly 1,
    # for every other rule. With tie=high_card, equal hands go to the higher single card, which
    # is never equal with one deck (one card of each rank and suit): fair again. Otherwise the
    # dealer takes equal hands (tie=dealer) or equal high cards (several decks): rtp below 1.
    for rules, rtp in shipped().items():
        fair = rules.tie == "push" or (rules.tie == "high_card" and rules.decks == 1)
        assert (rtp == 1) is fair, rules


@pytest.mark.parametrize("assignments", SAMPLE, ids=lambda a: " ".join(a) or "default")
def test_a_sample_of_the_table_is_its_par_sheets(assignments: tuple[str, ...]) -> None:
    rules = HouseRules.from_assignments(assignments)
    assert shipped()[rules] == par.par_sheet(rules).rtp


def _rtp(rules: HouseRules) -> Fraction:
    return par.par_sheet(rules).rtp


@pytest.mark.slow
def test_every_rule_set_of_the_table_is_its_par_sheets() -> None:
    # Tens of CPU-minutes: every sheet, on every core.
    rule_sets = every_rule_set()
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        computed = dict(zip(rule_sets, pool.map(_rtp, rule_sets, chunksize=4), strict=True))
    table = shipped()
    assert [rules for rules in rule_sets if computed[rules] != table[rules]] == []


# -- read, never computed --------------------------------------------------------------------------


def test_the_figures_are_read_from_the_table_without_computing_a_sheet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def computed(rules: HouseRules, seats: int) -> par.ParSheet:
        raise AssertionError(f"a PAR sheet was computed for {rules}")

    monkeypatch.setattr(par, "_par_sheet", computed)
    table = shipped()
    for rules in every_rule_set():
        assert ReturnToPlayer.of_rules(rules) == ReturnToPlayer(table[rules])
