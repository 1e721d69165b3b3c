import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gnau_service.cli.main import main

# The in-process service on each backend, for the commands that read it over gRPC (--target).
from tests.server.conftest import service, settings  # noqa: F401


@dataclass
class Run:
    status: int
    out: str
    err: str

    @property
    def json_lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines()]


@pytest.fixture
def gnau(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Run]:
    """Run ``gnau ARGS`` in-process, with ``stdin`` as its standard input."""

    def run(*args: str, stdin: str = "") -> Run:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's own usage errors
            status = int(exit_.code or 0)
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err)

    return run
