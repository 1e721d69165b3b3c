"""The fast canonical-JSON path writes the same bytes as the RFC 8785 reference encoder."""

from typing import Any

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.entries import _plain, canonical_json

LIMIT = 2**53 - 1
keys = st.one_of(
    st.text(max_size=8), st.sampled_from(["a", "A", "_", "é", "\u2028", "\x7f", "\ud7ff"])
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.integers(-LIMIT, LIMIT),
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x3F)),  # control characters and quotes
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150)
@given(st.dictionaries(keys, values, max_size=6))
def test_fast_path_bytes_equal_rfc8785(value: dict[str, Any]) -> None:
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, ValueError):
        return  # not representable: the fast path must not be taken for it
    assert canonical_json(value, 0) == expected


def test_values_outside_the_fast_path_are_recognised() -> None:
    assert not _plain({"x": 1.5})
    assert not _plain({"x": 2**53})
    assert not _plain({"é": 1})
    assert _plain({"a": [1, "é", None, True, {"b": -(2**53 - 1)}]})
