"""Test-wide settings, and the ``gnau`` command run in-process.

Hypothesis has no deadline (the first evaluation under a new set of house rules builds its
table), and in CI it is derandomised, so a red build is always reproducible.
"""

import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pytest
from hypothesis import settings

from gnau_service.cli.main import main

# `make test` must stay within four minutes on two cores: a property gets half Hypothesis's
# default examples there, unless it names its own number; `make test-slow` runs every property
# again under GNAU_HYPOTHESIS=thorough.
settings.register_profile("dev", deadline=None, max_examples=50)
settings.register_profile("ci", deadline=None, max_examples=50, derandomize=True, print_blob=True)
settings.register_profile("thorough", deadline=None, max_examples=500, print_blob=True)
_DEFAULT_PROFILE = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(os.environ.get("GNAU_HYPOTHESIS") or _DEFAULT_PROFILE)


@pytest.fixture(autouse=True)
def _umask_put_back() -> Iterator[None]:
    """A command run in-process may set the process's umask (those that write private files
    set 0077): no later test inherits it, whatever ran the command."""
    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)


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
    """Run ``gnau ARGS`` in-process, with ``stdin`` as its standard input and ``env`` added to
    the environment for the call. The process-wide state a command sets (the umask of those
    that write private files) is put back after each call."""

    def run(*args: str, stdin: str = "", env: Mapping[str, str] | None = None) -> Run:
        umask = os.umask(0o022)
        os.umask(umask)
        with monkeypatch.context() as patched:
            patched.setattr(sys, "stdin", io.StringIO(stdin))
            for name, value in (env or {}).items():
                patched.setenv(name, value)
            try:
                status = main(list(args))
            except SystemExit as exit_:  # argparse's own usage errors
                status = int(exit_.code or 0)
            finally:
                os.umask(umask)
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err)

    return run
