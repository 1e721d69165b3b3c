"""The tables of docs/fairness.md, docs/audit.md and docs/receipts.md, read as a stranger reads
them: each table follows a ``<!-- table: NAME -->`` line, and its cells name members, tags and
values in code spans. The tests hold what the tables say to what the service writes and to the
schemas, so that a change of format fails until the docs follow it.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"

_CODE = re.compile(r"`([^`]+)`")
_PARENTHESES = re.compile(r"\([^()]*\)")


def doc_text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(name: str, heading: str) -> str:
    """The text of ``heading`` (a Markdown heading line) in ``docs/<name>``, up to the next
    heading of its level or above."""
    text = doc_text(name)
    assert heading in text, f"docs/{name} has no heading {heading!r}"
    level = len(heading) - len(heading.lstrip("#"))
    rest = text.split(heading + "\n", 1)[1]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def _cells(line: str) -> list[str]:
    """A table line's cells; a ``|`` inside a code span is the span's."""
    cells, current, in_code = [], "", False
    for char in line.strip().removeprefix("|").removesuffix("|"):
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append(current.strip())
            current = ""
        else:
            current += char
    cells.append(current.strip())
    return cells


def table(name: str, title: str) -> list[dict[str, str]]:
    """The rows of the table marked ``<!-- table: title -->`` in ``docs/<name>``, each a dict
    from the header's cells to the row's."""
    marker = f"<!-- table: {title} -->\n"
    text = doc_text(name)
    assert text.count(marker) == 1, f"docs/{name} has no one table {title!r}"
    lines = []
    for line in text.split(marker, 1)[1].splitlines():
        if not line.lstrip().startswith("|"):  # a table in a list item is indented
            break
        lines.append(_cells(line.lstrip()))
    header, _rule, *rows = lines
    return [dict(zip(header, row, strict=True)) for row in rows]


def code(cell: str) -> list[str]:
    """Every code span of a cell, in order."""
    return _CODE.findall(cell)


def top_level_code(cell: str) -> list[str]:
    """The code spans of a cell outside any parentheses: the members a cell lists, without
    the values its remarks name."""
    while _PARENTHESES.search(cell):
        cell = _PARENTHESES.sub("", cell)
    return code(cell)


def row(rows: list[dict[str, str]], column: str, value: str) -> dict[str, str]:
    """The one row whose ``column`` is ``value``."""
    found = [r for r in rows if r[column] == value]
    assert len(found) == 1, f"no one row with {column} = {value!r}: {rows}"
    return found[0]
