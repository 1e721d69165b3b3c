"""The README stays short, and every relative link of the README and the docs leads somewhere.

A link is followed to its file and, when it names one, to a heading of that file (as GitHub
makes a heading's anchor). Links inside code are not links; links to other sites are not
followed.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
README = REPOSITORY / "README.md"
#: The README is a newcomer's first page; everything longer belongs in docs/.
README_MAX_BYTES = 15_000

PAGES = [README, *sorted((REPOSITORY / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without its code blocks and code spans."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.

    >>> anchor("`gnau par`: what a rule set returns to the player")
    'gnau-par-what-a-rule-set-returns-to-the-player'
    >>> anchor("Rounds beside auditors' streams")
    'rounds-beside-auditors-streams'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, with GitHub's -1, -2 for repeated headings."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        name, n = anchor(heading), 1
        while name in found:
            name, n = f"{anchor(heading)}-{n}", n + 1
        found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page.read_text(encoding="utf-8")))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto:
    ]


def test_the_readme_stays_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes: move detail into docs/"


def test_the_pages_are_found_and_hold_links() -> None:
    assert REPOSITORY / "docs" / "benchmarks.md" in PAGES
    assert "docs/benchmarks.md" in relative_links(README)
    assert "docs/architecture.md" in relative_links(README)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPOSITORY)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, fragment = unquote(target).partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, broken


def test_headings_get_githubs_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Step 1: commit\n\n```\n# no heading\n```\n## Step 1: commit\n")
    assert anchors(page) == {"title", "step-1-commit", "step-1-commit-1"}


def test_links_in_code_are_not_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[a](a.md) `[b](b.md)`\n\n```\n[c](c.md)\n```\n![d](d.png) [e](https://x/e)\n")
    assert relative_links(page) == ["a.md", "d.png"]


#: The game's words a newcomer meets in the README and in gnau play's output.
GAME_WORDS = ("Duke", "Ox points", "ox as 6", "Single-Ox", "Double-Ox", "Ngau Tonku", "PAR")


def test_the_games_words_are_explained_before_the_readme_uses_them() -> None:
    from gnau_service.cli.play_commands import GLOSSARY_HINT

    text = prose(README.read_text(encoding="utf-8"))
    glossary = text.index("## Words of the game")
    for word in GAME_WORDS:
        assert text.find(word) >= glossary, f"{word!r} is used before the glossary explains it"
        assert word in text[glossary : text.index("## Two commands")], word
    page, _, heading = GLOSSARY_HINT.rpartition(": ")[2].partition("#")
    assert page == "README.md" and heading in anchors(README)
