"""The page's JavaScript modules, run under Node.js beside the Python they must agree with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest


def node() -> str:
    path = shutil.which("node")
    if path is None:
        reason = "node is not on PATH: the page's modules are checked with Node.js 20+"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run it", pytrace=False)
        pytest.skip(reason)
    return path


def run_module_script(script: str, payload: object) -> Any:
    """Run an ES module ``script`` that reads ``payload`` as JSON on its stdin and writes its
    answer as JSON; the answer, decoded (the test fails with Node's stderr if it did not run)."""
    result = subprocess.run(
        [node(), "--input-type=module", "-e", script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
