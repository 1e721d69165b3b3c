"""The witnesses a log asks to cosign, as configured: ``URL=VKEY``.

Apart from :mod:`~gnau_service.server.process.witnessing` (which talks to them over HTTP), so that
reading the settings imports no HTTP client and no store.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnau_service.audit.cosignature import WitnessKey
from gnau_service.audit.note import NoteError
from gnau_service.audit.witness_protocol import ADD_CHECKPOINT_PATH


class WitnessSpecError(ValueError):
    """A ``--witness`` value that is not ``URL=VKEY``."""


@dataclass(frozen=True)
class WitnessEndpoint:
    """A witness: its submission prefix (``http(s)://host[:port][/path]``) and its key.

    >>> endpoint = WitnessEndpoint.parse(
    ...     "http://127.0.0.1:8080/w=remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
    ... )
    >>> endpoint.add_checkpoint_url, endpoint.key.name
    ('http://127.0.0.1:8080/w/add-checkpoint', 'remora.n621.de')
    """

    url: str
    key: WitnessKey

    @classmethod
    def parse(cls, text: str) -> WitnessEndpoint:
        """``URL=VKEY``: the URL ends at the first ``=`` (a vkey's base64 may hold more)."""
        url, equals, vkey = text.strip().partition("=")
        if not equals or not url.startswith(("http://", "https://")) or url[-3:] == "://":
            raise WitnessSpecError(
                f"expected URL=VKEY with an http:// or https:// URL, got {text[:120]!r}"
            )
        try:
            key = WitnessKey.from_vkey(vkey.strip())
        except NoteError as error:
            raise WitnessSpecError(f"witness {url}: {error}") from None
        return cls(url.rstrip("/"), key)

    @property
    def add_checkpoint_url(self) -> str:
        return self.url + ADD_CHECKPOINT_PATH
