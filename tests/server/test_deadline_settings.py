"""The rounds' deadlines as settings: a flag, a variable and a file key each, as max_stake is;
whole seconds from 1 to 7 days, refused otherwise with the setting and its source named."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnau_service.rounds.deadlines import Deadlines
from gnau_service.server.process.config import SETTINGS, ConfigError, Settings, load_settings
from tests.serving import gnau

WEEK = 7 * 24 * 3600


def test_the_defaults_are_ten_minutes_to_deal_and_an_hour_to_settle() -> None:
    settings = load_settings(None, {}, {})
    assert (settings.deal_deadline_seconds, settings.settle_deadline_seconds) == (600, 3600)
    assert settings.deadlines == Deadlines(deal_seconds=600, settle_seconds=3600)


def test_each_is_named_as_the_design_names_it() -> None:
    deal, settle = SETTINGS["deal_deadline_seconds"], SETTINGS["settle_deadline_seconds"]
    assert (deal.flag, deal.variable) == ("--deal-deadline", "GNAU_DEAL_DEADLINE")
    assert (settle.flag, settle.variable) == ("--settle-deadline", "GNAU_SETTLE_DEADLINE")


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    config = tmp_path / "gnau.toml"
    config.write_text("deal_deadline_seconds = 30\nsettle_deadline_seconds = 120\n")
    from_file = load_settings(config, {}, {})
    assert from_file.deadlines == Deadlines(deal_seconds=30, settle_seconds=120)
    environ = {"GNAU_DEAL_DEADLINE": "40", "GNAU_SETTLE_DEADLINE": "1_800"}
    from_env = load_settings(config, environ, {})
    assert from_env.deadlines == Deadlines(deal_seconds=40, settle_seconds=1800)
    flags = {"deal_deadline_seconds": "50"}
    assert load_settings(config, environ, flags).deadlines == Deadlines(50, 1800)


@pytest.mark.parametrize("seconds", ["1", str(WEEK)])
def test_the_bounds_are_taken(seconds: str) -> None:
    settings = load_settings(None, {"GNAU_SETTLE_DEADLINE": seconds}, {})
    assert settings.settle_deadline_seconds == int(seconds)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "must be 1 to 604800 seconds, not 0"),
        (str(WEEK + 1), f"must be 1 to 604800 seconds, not {WEEK + 1}"),
        ("-5", "must be 1 to 604800 seconds, not -5"),
        ("1.5", "must be a whole number, not '1.5'"),
        ("ten", "must be a whole number, not 'ten'"),
    ],
)
def test_a_deadline_out_of_range_is_refused_naming_its_source(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {"GNAU_DEAL_DEADLINE": value}, {})
    assert str(refused.value) == (
        f"setting 'deal_deadline_seconds' (from environment variable GNAU_DEAL_DEADLINE): {says}"
    )


def test_a_toml_float_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "gnau.toml"
    config.write_text("settle_deadline_seconds = 60.0\n")
    with pytest.raises(ConfigError, match=r"settle_deadline_seconds.*config file"):
        load_settings(config, {}, {})


def test_serve_refuses_a_bad_deadline_at_start() -> None:
    result = gnau("serve", "--settle-deadline", "0", "--log-format", "console")
    assert result.returncode == 2, result.stderr
    assert "settle_deadline_seconds" in result.stderr and "--settle-deadline" in result.stderr


def test_the_settings_dataclass_defaults_match_the_deadlines_defaults() -> None:
    assert Settings().deadlines == Deadlines()
