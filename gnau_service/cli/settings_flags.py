"""The service's settings on a command line, for ``gnau serve`` and the commands that work on
its files (``gnau key``, ``gnau token``): the same flags, environment variables and ``--config``
file, merged the same way (see :func:`~gnau_service.server.process.config.load_settings`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

from gnau_service.server.process.config import SETTINGS, Settings, load_settings


def add_settings_flags(parser: argparse.ArgumentParser, names: Iterable[str] = SETTINGS) -> None:
    """``--config`` and the flags of the settings ``names`` (all of them by default)."""
    parser.add_argument("--config", type=Path, help="TOML file of settings [GNAU_CONFIG]")
    for name in names:
        setting = SETTINGS[name]
        kwargs: dict[str, object] = {"dest": name, "default": argparse.SUPPRESS}
        if setting.repeatable:
            kwargs["action"] = "append"
        help_text = f"{setting.meaning} [{setting.variable}]"
        parser.add_argument(setting.flag, help=help_text, **kwargs)  # type: ignore[arg-type]


def given_flags(args: argparse.Namespace) -> dict[str, object]:
    """The settings given as flags (and only those: the rest come from elsewhere)."""
    return {name: getattr(args, name) for name in SETTINGS if hasattr(args, name)}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags > ``GNAU_*`` environment > ``--config`` (or ``GNAU_CONFIG``) file > defaults.
    Raises :class:`~gnau_service.server.process.config.ConfigError`."""
    config_file = args.config or (
        Path(os.environ["GNAU_CONFIG"]) if "GNAU_CONFIG" in os.environ else None
    )
    return load_settings(config_file, os.environ, given_flags(args))
