"""make test-deploy's summary: each phase's time and the figures it measured."""

from __future__ import annotations

import pytest

from tests.containers.podman import summary_lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in summary_lines():
        terminalreporter.write_line(line)
