"""The license the package declares is the one the repository holds, word for word."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt (also Debian's
#: /usr/share/common-licenses/Apache-2.0): the canonical text, unmodified.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_file_is_the_canonical_apache_2_0_text() -> None:
    data = (REPOSITORY / "LICENSE").read_bytes()
    assert hashlib.sha256(data).hexdigest() == APACHE_2_0_SHA256


def test_the_package_declares_it_as_an_spdx_expression() -> None:
    pyproject = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
