"""The README's code runs as printed: its Python snippet against a real ``gnau serve``, and its
layout names every package of ``gnau_service``."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gnau_service.rules.settlement import LARGEST_PAYOUT
from tests.serving import REPO, served

README = (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.system
def test_the_python_snippet_plays_a_round_as_printed(tmp_path: Path) -> None:
    (snippet,) = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert '"127.0.0.1:50051"' in snippet
    # As make serve runs it: its data in ./gnau-data, beside where the snippet runs.
    with served(tmp_path / "gnau-data") as service:
        code = snippet.replace('"127.0.0.1:50051"', f'"{service.target}"')
        ran = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert ran.returncode == 0, ran.stderr
    state, delta = ran.stdout.split()
    assert state == "ROUND_STATE_SETTLED"
    assert abs(int(delta)) <= 500 * LARGEST_PAYOUT, delta  # one seat's stake, paid at most so


def test_the_layout_names_every_package() -> None:
    layout = README[README.index("## How it fits together") :]
    packages = sorted(path.parent.name for path in (REPO / "gnau_service").glob("*/__init__.py"))
    assert packages, "no packages found"
    for package in packages:
        assert re.search(rf"^  {package}/ ", layout, re.MULTILINE), package


def gnau_lines(text: str) -> list[str]:
    """Every ``gnau`` command of the text's shell blocks, one per pipeline stage, comments cut."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            for stage in line.split("#", 1)[0].split("|"):
                if stage.strip().startswith("gnau "):
                    commands.append(stage.strip())
    return commands


def indented_gnau_lines(text: str) -> list[str]:
    """The ``gnau`` commands of the text's indented code blocks (four spaces)."""
    return [line.strip() for line in text.splitlines() if line.startswith("    gnau ")]


def test_every_gnau_command_of_the_integration_guide_parses_as_printed() -> None:
    from gnau_service.cli.main import build_parser

    guide = (REPO / "docs" / "integration.md").read_text(encoding="utf-8")
    commands = gnau_lines(guide) + indented_gnau_lines(guide)
    assert commands, "the guide shows no gnau command"
    for command in commands:
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit as refused:
            raise AssertionError(f"docs/integration.md's {command!r} does not parse") from refused


def test_every_gnau_command_of_the_readme_parses_as_printed() -> None:
    from gnau_service.cli.main import build_parser

    commands = gnau_lines(README)
    assert len(commands) >= 8, commands
    for command in commands:
        words = shlex.split(command)[1:]
        try:
            build_parser().parse_args(words)
        except SystemExit as refused:  # argparse's usage error
            raise AssertionError(f"the README's {command!r} does not parse") from refused


@pytest.mark.system
def test_make_serve_installs_the_runtime_alone() -> None:
    """No npm and no test tools: ``make serve`` works where only Python and make are."""
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "serve"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    commands = dry.stdout.splitlines()
    assert not any("npm" in command for command in commands), commands
    (install,) = [command for command in commands if "pip install" in command]
    assert install.endswith("-e ./clients/python -e ."), install  # no [test] extra
    assert commands[-1].endswith("gnau serve --log-format console")
