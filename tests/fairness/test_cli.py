"""``gnau round verify``: exit 0 valid, 1 invalid (naming the check), 2 bad input."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gnau_service.cli import fairness_commands
from gnau_service.cli.main import main

from .conftest import FAIRNESS_VECTORS, load_json, sample_revealed_round


@dataclass
class Run:
    status: int
    out: str
    err: str


@pytest.fixture
def round_verify(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Run]:
    """Run ``gnau round verify ARGS`` in-process."""

    def run(*args: str, stdin: str = "") -> Run:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        status = main(["round", "verify", *args])
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err)

    return run


def _write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("vector_path", FAIRNESS_VECTORS, ids=lambda path: path.stem)
def test_a_valid_round_exits_0_with_one_line(
    round_verify: Callable[..., Run], tmp_path: Path, vector_path: Path
) -> None:
    revealed = load_json(vector_path)["revealed_round"]
    result = round_verify(_write(tmp_path, revealed))
    assert result.status == fairness_commands.EXIT_VALID == 0
    assert result.out.count("\n") == 1
    assert result.out.startswith(f"round {revealed['round_id']} verifies:")
    assert result.err == ""


def test_standard_input_is_read_for_a_dash(round_verify: Callable[..., Run]) -> None:
    result = round_verify("-", stdin=json.dumps(sample_revealed_round().to_json()))
    assert result.status == 0
    assert "verifies" in result.out


def test_standard_input_is_read_without_a_file(round_verify: Callable[..., Run]) -> None:
    """So that ``gnau round get ID --json | gnau round verify`` works as the docs print it."""
    result = round_verify(stdin=json.dumps(sample_revealed_round().to_json()))
    assert result.status == 0
    assert "verifies" in result.out
    assert round_verify(stdin="{").err.startswith("gnau round verify: standard input: ")


def test_an_invalid_round_exits_1_naming_the_check(
    round_verify: Callable[..., Run], tmp_path: Path
) -> None:
    document: dict[str, Any] = sample_revealed_round().to_json()
    document["seats"][1]["client_seed"] = "ff"
    result = round_verify(_write(tmp_path, document))
    assert result.status == fairness_commands.EXIT_INVALID == 1
    (line,) = result.out.splitlines()
    assert line.startswith("round table-5/round-9 does NOT verify: lock: the seats and beacon")
    assert result.err == ""


def test_a_tampered_hand_names_the_seat(round_verify: Callable[..., Run]) -> None:
    document: dict[str, Any] = sample_revealed_round().to_json()
    cards = document["hands"][2]["cards"]
    cards[0], cards[1] = cards[1], cards[0]
    result = round_verify("-", stdin=json.dumps(document))
    assert result.status == 1
    assert "does NOT verify: hand of seat 4: the deal gives" in result.out
    assert result.out.count("\n") == 1


def test_later_failures_are_listed_after_the_reason(round_verify: Callable[..., Run]) -> None:
    document: dict[str, Any] = sample_revealed_round().to_json()
    document["server_seed"] = "00" * 32
    result = round_verify("-", stdin=json.dumps(document))
    assert result.status == 1
    first, *later = result.out.splitlines()
    assert "does NOT verify: commitment:" in first
    assert first.endswith("(and 5 more checks)")
    assert [line.split(":")[0] for line in later] == ["  also failed"] * 5
    assert later[0].startswith("  also failed: deck:")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (b"\xff\xfe{}", "cannot read: not UTF-8 text"),
        (b"{not json", "not JSON: Expecting property name enclosed in double quotes at line 1"),
        (b"{}", "format is missing"),
        (b'{"format": "gnau-dealer/revealed-round/v1"}', "round_id is missing"),
    ],
)
def test_bad_input_exits_2_with_one_line_on_stderr(
    round_verify: Callable[..., Run], tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "round.json"
    if content is not None:
        path.write_bytes(content)
    result = round_verify(str(path))
    assert result.status == fairness_commands.EXIT_BAD_INPUT == 2
    assert result.out == ""
    assert result.err.startswith(f"gnau round verify: {path}: ")
    assert message in result.err
    assert result.err.count("\n") == 1
    assert "Traceback" not in result.err


def test_an_upper_case_reference_is_refused_saying_lower_case(
    round_verify: Callable[..., Run],
) -> None:
    """Hex is read in either case, a player reference only in lower case: the one exception
    (docs/fairness.md, *Step 4: reveal*), and the refusal says so."""
    document: dict[str, Any] = sample_revealed_round().to_json()
    reference = document["seats"][0]["player_ref"]
    document["seats"][0]["player_ref"] = "p-" + reference[2:].upper()
    result = round_verify("-", stdin=json.dumps(document))
    assert result.status == 2
    assert result.err.startswith("gnau round verify: standard input: seats[0].player_ref must ")
    assert "lower-case hex digits" in result.err
    # Upper-case hex anywhere else is the same round.
    document["seats"][0]["player_ref"] = reference
    document["server_seed"] = document["server_seed"].upper()
    assert round_verify("-", stdin=json.dumps(document)).status == 0


def test_a_field_error_names_the_field(round_verify: Callable[..., Run]) -> None:
    document: dict[str, Any] = sample_revealed_round().to_json()
    del document["seats"][0]["stake"]
    result = round_verify("-", stdin=json.dumps(document))
    assert result.status == 2
    assert result.err == "gnau round verify: standard input: seats[0].stake is missing\n"


def test_a_directory_is_bad_input(round_verify: Callable[..., Run], tmp_path: Path) -> None:
    result = round_verify(str(tmp_path))
    assert result.status == 2
    assert "cannot read: Is a directory" in result.err


def test_the_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["round", "verify", "--help"])
    assert exited.value.code == 0
    assert "- or none for standard input" in " ".join(capsys.readouterr().out.split())
