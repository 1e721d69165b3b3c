"""What went wrong with a file, said once.

Python's ``str(OSError)`` names the file (``[Errno 2] No such file or directory: 'r.json'``), and
the command's own message usually names it too (``cannot verify r.json: ...``): the file then
appears twice. :func:`problem` gives the reason alone when the caller already names the file,
and the file with its reason when the failing file is another one (a pinned checkpoint beside a
receipt, a bundle's ``.partial`` beside the bundle).

>>> from pathlib import Path
>>> missing = FileNotFoundError(2, "No such file or directory", "r.json")
>>> problem(missing, named=Path("r.json")), problem(missing, named=Path("pin.txt"))
('No such file or directory', 'r.json: No such file or directory')
>>> problem(ValueError("not a receipt"))
'not a receipt'
"""

from __future__ import annotations

import os
from pathlib import Path


def problem(error: BaseException, *, named: Path | None = None) -> str:
    """``error`` in words for a message that already names the file ``named``."""
    if not isinstance(error, OSError) or not error.strerror:
        return str(error)
    if error.filename is None:
        return error.strerror
    failing = Path(os.fsdecode(error.filename))
    if named is not None and failing == named:
        return error.strerror
    return f"{failing}: {error.strerror}"
