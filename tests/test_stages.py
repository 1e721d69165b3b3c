"""The test stages are what the README, the docs, the Makefile and CI say: CI runs `make test`,
then `make test-system`, then `make test-deploy`; and where a doc names the stage a test file
runs in, the file's markers put it there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
#: A test file named in prose with the stage that runs it: "`tests/x.py`, in `make test-slow`".
NAMED_STAGE = re.compile(r"`(tests/[\w/]+\.py)`[^.`\n]{0,20}?(?:in|part of) `make (test[\w-]*)`")
#: Which stage runs a module whose every test carries the marker.
STAGE_OF_MARKER = {"system": "test-system", "slow": "test-slow", "containers": "test-deploy"}


def module_markers(path: Path) -> set[str]:
    """The markers every test of a module carries: its ``pytestmark``'s, and those on each test."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    marked: set[str] = set()
    each: list[set[str]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "pytestmark":
            marked |= set(re.findall(r"pytest\.mark\.(\w+)", ast.unparse(node.value)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            decorators = " ".join(ast.unparse(decorator) for decorator in node.decorator_list)
            each.append(set(re.findall(r"pytest\.mark\.(\w+)", decorators)))
    return marked | (set.intersection(*each) if each else set())


def test_ci_runs_the_stages_in_order() -> None:
    ci = (REPOSITORY / ".ci" / "run").read_text(encoding="utf-8")
    stages = re.findall(r"^make (test[\w-]*)$", ci, re.MULTILINE)
    assert stages == ["test", "test-system", "test-deploy"]


def test_every_stage_the_readme_names_is_a_make_target() -> None:
    makefile = (REPOSITORY / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^(test[\w-]*):", makefile, re.MULTILINE))
    named = set(re.findall(r"`make (test[\w-]*)`", (REPOSITORY / "README.md").read_text()))
    assert named == {"test", "test-system", "test-deploy", "test-slow"}
    assert named <= targets


def test_make_test_leaves_out_what_the_other_stages_run() -> None:
    pyproject = (REPOSITORY / "pyproject.toml").read_text(encoding="utf-8")
    (addopts,) = re.findall(r"^addopts = (.*)$", pyproject, re.MULTILINE)
    for marker in STAGE_OF_MARKER:
        assert f"not {marker}" in addopts, marker


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_test_file_runs_in_the_stage_the_docs_name(page: Path) -> None:
    for path, stage in NAMED_STAGE.findall(page.read_text(encoding="utf-8")):
        markers = module_markers(REPOSITORY / path) & set(STAGE_OF_MARKER)
        assert {STAGE_OF_MARKER[marker] for marker in markers} <= {stage}, (path, stage)
        assert markers or stage == "test", (path, stage)
