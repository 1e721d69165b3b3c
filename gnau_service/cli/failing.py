"""How a command refuses: one line on stderr, ``gnau COMMAND: MESSAGE``, and exit status 2 (the
input could not be used; main.py lists the statuses).

>>> import contextlib, io
>>> said = io.StringIO()
>>> with contextlib.redirect_stderr(said):
...     status = fail("receipt get", "no such round")
>>> status, said.getvalue()
(2, 'gnau receipt get: no such round\\n')
"""

from __future__ import annotations

import sys


def fail(command: str, message: str) -> int:
    """Say why ``gnau command`` stops, and give the exit status it stops with."""
    print(f"gnau {command}: {message}", file=sys.stderr)
    return 2
