"""The client's pure helpers, and the examples in its docstrings."""

from __future__ import annotations

import doctest
import importlib

import pytest
from gnau_client import _common


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("localhost:50051", True),
        ("localhost", True),
        ("127.0.0.1:50051", True),
        ("127.8.9.10:1", True),
        ("[::1]:50051", True),
        ("::1", True),
        ("dns:///localhost:50051", True),
        ("ipv4:127.0.0.1:1,127.0.0.2:2", True),
        ("ipv6:[::1]:1", True),
        ("unix:/run/gnau.sock", True),
        ("unix-abstract:gnau", True),
        ("dealer.example:443", False),
        ("10.0.0.1:50051", False),
        ("[2001:db8::1]:443", False),
        ("ipv4:127.0.0.1:1,10.0.0.1:2", False),
        ("dns://8.8.8.8/localhost:50051", False),  # unrecognised forms are not trusted
        ("localhost.evil.example:1", False),
    ],
)
def test_is_local_target(target: str, local: bool) -> None:
    assert _common.is_local_target(target) is local


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.1, "0.1s"), (2.0, "2s"), (0.00001, "0.00001s"), (1.5, "1.5s")]
)
def test_durations_never_use_an_exponent(seconds: float, text: str) -> None:
    assert _common._duration(seconds) == text


@pytest.mark.parametrize(
    "module", ["gnau_client", "gnau_client._common", "gnau_client.client", "gnau_client.aio"]
)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0
