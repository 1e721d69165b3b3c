"""``gnau par``, and the published sheets under docs/par/ that it writes."""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest

from gnau_service.cli.par_commands import (
    INDEX_HEADER,
    PUBLISHED,
    published_sheets,
    significant_text,
    summary_markdown,
)
from tests.conftest import Run

Gnau = Callable[..., Run]
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "par"
# The fast run regenerates these; the slow run every published sheet.
FAST = {"default", "tie-high_card", "suited_double-true", "decks-8"}


def test_json_holds_exact_fractions_and_their_decimals(gnau: Gnau) -> None:
    run = gnau("par", "--json", "--rule", "tie=push")
    assert run.status == 0, run.err
    (sheet,) = run.json_lines
    assert sheet["rules"]["tie"] == "push"  # type: ignore[index]
    assert sheet["rtp"] == {"fraction": "1", "decimal": "1"}
    assert sheet["deals"] == 3_986_646_103_440
    outcomes = sheet["outcomes"]
    assert isinstance(outcomes, list)
    total = sum(Fraction(row["probability"]["fraction"]) for row in outcomes)
    assert total == 1
    assert all(row["deals"] > 0 for row in outcomes)
    variance = Fraction(sheet["variance"]["fraction"])  # type: ignore[index]
    assert sheet["standard_deviation"] == pytest.approx(float(variance) ** 0.5)


def test_text_names_the_rules_and_the_figures(gnau: Gnau) -> None:
    run = gnau("par", "--rule", "decks=2")
    assert run.status == 0, run.err
    assert "decks=2" in run.out.splitlines()[0]
    assert re.search(r"House edge\s+0\.05162", run.out)
    assert "Dealer's expected result" not in run.out


@pytest.mark.slow
def test_text_with_seats_gives_the_dealers_figures(gnau: Gnau) -> None:
    run = gnau("par", "--rule", "decks=2", "--seats", "3")
    assert run.status == 0, run.err
    assert re.search(r"Dealer's expected result, 3 seats\s+0\.15487", run.out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rule", "tie=sometimes"], "house rule 'tie' must be one of"),
        (["--seats", "10"], "--seats must be from 1 to 9 with 1 deck(s), got 10"),
    ],
)
def test_bad_input_is_a_usage_error(gnau: Gnau, args: list[str], message: str) -> None:
    run = gnau("par", *args)
    assert run.status == 2
    assert message in run.err
    assert not run.out


@pytest.mark.parametrize(
    ("stem", "assignments"), [entry for entry in PUBLISHED if entry[0] in FAST], ids=str
)
def test_published_sheet_is_what_gnau_par_prints(
    gnau: Gnau, stem: str, assignments: tuple[str, ...]
) -> None:
    _check_sheet(gnau, stem, assignments)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stem", "assignments"), [entry for entry in PUBLISHED if entry[0] not in FAST], ids=str
)
def test_every_other_published_sheet_is_what_gnau_par_prints(
    gnau: Gnau, stem: str, assignments: tuple[str, ...]
) -> None:
    _check_sheet(gnau, stem, assignments)


def _check_sheet(gnau: Gnau, stem: str, assignments: tuple[str, ...]) -> None:
    args = [arg for assignment in assignments for arg in ("--rule", assignment)]
    run = gnau("par", "--markdown", *args)
    assert run.status == 0, run.err
    assert (DOCS / f"{stem}.md").read_text() == run.out, f"rerun make par-sheets ({stem})"


def test_the_summary_tables_list_every_published_sheet() -> None:
    """The index lists every sheet, each row's figures are in its sheet, and the README links to
    the index and quotes the default row's figures."""
    index = (DOCS / "README.md").read_text()
    assert index.startswith(INDEX_HEADER)
    table = index[len(INDEX_HEADER) :]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    readme = (ROOT / "README.md").read_text()
    assert "(docs/par/README.md)" in readme
    default = re.match(r"\| \[default\]\([^)]*\) \| ([0-9.]+%) \| ([0-9.]+%) \|", rows[0])
    assert default is not None, rows[0]
    assert f"returns {default[1]} (house edge {default[2]})" in readme
    assert [re.match(r"\| \[([^\]]+)\]", row)[1] for row in rows] == [  # type: ignore[index]
        stem for stem, _ in PUBLISHED
    ]
    for row in rows:
        stem, rtp = re.match(r"\| \[([^\]]+)\]\([^)]*\) \| ([0-9.]+)%", row).groups()  # type: ignore[union-attr]
        sheet = (DOCS / f"{stem}.md").read_text()
        exact_rtp = re.search(r"^\| RTP \| ([0-9/]+) \|", sheet, re.MULTILINE)[1]  # type: ignore[index]
        assert f"{100 * float(Fraction(exact_rtp)):.4f}" == rtp


@pytest.mark.slow
def test_the_summary_table_is_regenerated_exactly() -> None:
    sheets = [(stem, sheet) for stem, _, sheet in published_sheets()]
    assert (DOCS / "README.md").read_text() == INDEX_HEADER + summary_markdown(sheets)


def test_decimals_are_rounded_not_cut() -> None:
    assert significant_text(Fraction(2, 3), 3) == "0.667"
    assert significant_text(Fraction(-1, 8), 2) == "-0.12"  # half to even
    assert significant_text(Fraction(10**15, 3), 4) == "333300000000000"
