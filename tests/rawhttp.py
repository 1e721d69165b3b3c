"""Raw bytes to an HTTP port and its answer as the wire carries it: for requests no HTTP client
library would send (bad framing, control bytes, lies about the body)."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field

#: What the dealer's ports put on every answer (docs/web.md); the witness promises none.
SECURITY_HEADERS = (
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "x-frame-options",
)


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: its status line, headers (lower-case names) and body; or ``closed``."""

    status_line: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def closed(self) -> bool:
        return not self.status_line

    @property
    def status(self) -> int:
        return int(self.status_line.split(" ")[1]) if self.status_line else 0

    def json(self) -> dict[str, str]:
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return document


def parse_answer(data: bytes) -> Answer:
    """The first answer in ``data`` (an interim ``100 Continue`` is kept as its own answer)."""
    head, separator, rest = data.partition(b"\r\n\r\n")
    if not separator:
        return Answer()
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(rest)))
    return Answer(lines[0], headers, rest[:length])


async def exchange(
    port: int,
    request: bytes,
    *,
    timeout: float = 5.0,
    source: str | None = None,
    host: str = "127.0.0.1",
) -> Answer:
    """Send ``request`` on a new connection and read until the server closes it or one whole
    answer has arrived."""
    reader, writer = await asyncio.open_connection(
        host, port, local_addr=(source, 0) if source else None
    )
    data = b""
    try:
        writer.write(request)
        async with asyncio.timeout(timeout):
            while chunk := await reader.read(65536):
                data += chunk
                answer = parse_answer(data)
                if not answer.closed and len(answer.body) >= int(
                    answer.headers.get("content-length", 1 << 30)
                ):
                    return answer
    except (ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()
    return parse_answer(data)


def held_connection(port: int, source: str) -> socket.socket:
    """A connected socket that sends nothing (an idle client)."""
    held = socket.socket()
    held.bind((source, 0))
    held.connect(("127.0.0.1", port))
    return held
