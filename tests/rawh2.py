"""Raw HTTP/2 frames to a gRPC port and the frames it sends back: for what no gRPC or HTTP/2
client would send (bad frames, broken HPACK, resets and floods). The frames are hyperframe's,
the header blocks hpack's; this module only puts them on a socket and reads them back.

A blocking socket, so that a test with the service in its own event loop runs a connection in a
thread (``asyncio.to_thread``)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import hpack
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from hyperframe.exceptions import HyperframeError
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    ExtensionFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
Headers = list[tuple[str, str]]


def grpc_headers(
    path: str,
    *,
    authority: str = "127.0.0.1",
    token: str | None = None,
    extra: Iterable[tuple[str, str]] = (),
) -> Headers:
    """A gRPC request's header list, as a conforming client sends it."""
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    if token is not None:
        headers.append(("authorization", f"Bearer {token}"))
    return headers + list(extra)


def grpc_message(payload: bytes, *, compressed: bool = False, length: int | None = None) -> bytes:
    """One length-prefixed gRPC message; ``length`` (up to 2**32 - 1) may lie about ``payload``."""
    declared = len(payload) if length is None else length
    return struct.pack(">BI", int(compressed), declared) + payload


def grpc_messages(data: bytes) -> list[bytes]:
    """The whole length-prefixed messages in ``data`` (a cut-off tail is left out)."""
    messages = []
    while len(data) >= 5:
        _, length = struct.unpack(">BI", data[:5])
        if len(data) < 5 + length:
            break
        messages.append(data[5 : 5 + length])
        data = data[5 + length :]
    return messages


def raw_frame(kind: int, stream_id: int, flags: int = 0, body: bytes = b"") -> ExtensionFrame:
    """A frame of any type code, flags and body, sent as given (a known type with a body of the
    wrong length, say)."""
    frame = ExtensionFrame(type=kind, stream_id=stream_id, flag_byte=flags, body=body)
    frame.body_len = len(body)  # hyperframe sets it only when it parses one
    return frame


def error_name(code: int) -> str:
    try:
        return ErrorCodes(code).name
    except ValueError:
        return f"0x{code:x}"


@dataclass
class Received:
    """What came back on one connection."""

    frames: list[Frame] = field(default_factory=list)
    #: Each stream's decoded header blocks in order (headers, then trailers).
    headers: dict[int, list[Headers]] = field(default_factory=dict)
    data: dict[int, bytes] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)  # END_STREAM seen
    resets: dict[int, int] = field(default_factory=dict)  # stream -> RST_STREAM error code
    goaway: GoAwayFrame | None = None
    ping_acks: list[bytes] = field(default_factory=list)
    closed: bool = False  # EOF or reset from the server
    faults: list[str] = field(default_factory=list)  # frames or blocks that could not be read

    def finished(self, stream_id: int) -> bool:
        return stream_id in self.ended or stream_id in self.resets

    def grpc_status(self, stream_id: int) -> int | None:
        """The stream's grpc-status (its trailers', or a Trailers-Only answer's)."""
        for block in reversed(self.headers.get(stream_id, [])):
            for name, value in block:
                if name == "grpc-status":
                    return int(value) if value.isdigit() else -1
        return None

    def header(self, stream_id: int, name: str) -> str | None:
        for block in self.headers.get(stream_id, []):
            for key, value in block:
                if key == name:
                    return value
        return None

    def summary(self) -> str:
        kinds = [type(frame).__name__.removesuffix("Frame") for frame in self.frames]
        goaway = (
            f" GOAWAY {error_name(self.goaway.error_code)} {self.goaway.additional_data[:80]!r}"
            if self.goaway
            else ""
        )
        resets = {stream: error_name(code) for stream, code in self.resets.items()}
        return f"frames {kinds[:40]} resets {resets}{goaway} closed={self.closed}"


class Connection:
    """One HTTP/2 connection as a client, from ``source`` (an address of 127/8, say) if given."""

    def __init__(
        self, port: int, *, host: str = "127.0.0.1", source: str | None = None, timeout: float = 5
    ) -> None:
        self.sock = socket.create_connection(
            (host, port), timeout=timeout, source_address=(source, 0) if source else None
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.received = Received()
        self._buffer = b""
        self._block: tuple[int, bool, bytes] | None = None  # stream, END_STREAM, fragments
        #: The header table size each SETTINGS sent and not yet acknowledged allows the server
        #: (None: it leaves it as it was); the server's encoder keeps to it once it ACKs.
        self._unacknowledged: list[int | None] = []
        #: The ACKs owed to the server's SETTINGS and PINGs, sent once the client has sent
        #: something (its preface, or what a test sends instead).
        self._replies: list[Frame] = []
        self._sent_any = False

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def half_close(self) -> None:
        """The client's end of the connection (SHUT_WR), reading on."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.received.closed = True

    def start(self, settings: dict[int, int] | None = None) -> bool:
        """The client preface and a SETTINGS frame (empty: every default)."""
        self._unacknowledged.append((settings or {}).get(SettingCodes.HEADER_TABLE_SIZE))
        return self.send_bytes(PREFACE + SettingsFrame(settings=settings or {}).serialize())

    def send(self, *frames: Frame) -> bool:
        self._unacknowledged += [
            frame.settings.get(SettingCodes.HEADER_TABLE_SIZE)
            for frame in frames
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags and not frame.stream_id
        ]
        return self.send_bytes(b"".join(frame.serialize() for frame in frames))

    def send_bytes(self, data: bytes) -> bool:
        """Send ``data``, then take what has come back so far (a server closing the connection
        may reset it, and what it sent last is lost unless read first); False if the server
        has closed the connection (or not read for ``timeout`` seconds)."""
        self._sent_any = True
        if not self._sendall(data):
            return False
        self.drain()
        return not self.received.closed

    def _sendall(self, data: bytes) -> bool:
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(data)
        except OSError:
            self.received.closed = True
            return False
        return True

    def header_block(self, headers: Sequence[tuple[str, str]], *, huffman: bool = True) -> bytes:
        """``headers`` HPACK-encoded with this connection's encoder (its dynamic table); without
        Huffman coding, long values take hpack much less time."""
        return bytes(self.encoder.encode(list(headers), huffman=huffman))

    def request(
        self, stream_id: int, headers: Sequence[tuple[str, str]], message: bytes | None
    ) -> bool:
        """A whole request: HEADERS, then ``message`` in one DATA frame that ends the stream
        (or HEADERS that end it, if no message)."""
        block = HeadersFrame(stream_id, self.header_block(headers), flags=["END_HEADERS"])
        if message is None:
            block.flags.add("END_STREAM")
            return self.send(block)
        return self.send(block, DataFrame(stream_id, message, flags=["END_STREAM"]))

    def read(self, seconds: float, until: Callable[[Received], bool] | None = None) -> Received:
        """Read frames for up to ``seconds``: until the server closes the connection, or
        ``until`` holds. Answers the server's SETTINGS and PINGs as a client must."""
        deadline = time.monotonic() + seconds
        while not self.received.closed and not (until and until(self.received)):
            left = deadline - time.monotonic()
            if left <= 0 or not self._receive(left):
                break
        return self.received

    def drain(self) -> None:
        """Take what has come in, without waiting."""
        while not self.received.closed and self._receive(0):
            pass

    def _receive(self, timeout: float) -> bool:
        """Take what comes within ``timeout`` seconds (0: what is there); False if nothing."""
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(65536)
        except (TimeoutError, BlockingIOError):
            return False
        except OSError:  # reset
            chunk = b""
        if not chunk:
            self.received.closed = True
            return False
        self._buffer += chunk
        self._parse()
        if self._replies and self._sent_any:
            replies, self._replies = self._replies, []
            self._sendall(b"".join(frame.serialize() for frame in replies))
        return True

    def _parse(self) -> None:
        while len(self._buffer) >= 9:
            try:
                frame, length = Frame.parse_frame_header(memoryview(self._buffer[:9]))
                if len(self._buffer) < 9 + length:
                    return
                frame.parse_body(memoryview(self._buffer[9 : 9 + length]))
            except HyperframeError as error:
                self.received.faults.append(f"an unreadable frame: {error!r}")
                self.received.closed = True
                return
            self._buffer = self._buffer[9 + length :]
            self._take(frame)

    def _take(self, frame: Frame) -> None:
        got = self.received
        got.frames.append(frame)
        if isinstance(frame, SettingsFrame):
            if "ACK" not in frame.flags:
                self._replies.append(SettingsFrame(flags=["ACK"]))
            elif self._unacknowledged and (size := self._unacknowledged.pop(0)) is not None:
                # Only ever raised: a server may still send a block encoded under the old size
                # just after its ACK, which hpack would refuse.
                allowed = max(size, self.decoder.max_allowed_table_size)
                self.decoder.max_allowed_table_size = allowed
        elif isinstance(frame, PingFrame):
            if "ACK" in frame.flags:
                got.ping_acks.append(frame.opaque_data)
            else:
                self._replies.append(PingFrame(0, frame.opaque_data, flags=["ACK"]))
        elif isinstance(frame, GoAwayFrame):
            got.goaway = frame
        elif isinstance(frame, RstStreamFrame):
            got.resets[frame.stream_id] = frame.error_code
        elif isinstance(frame, DataFrame):
            got.data[frame.stream_id] = got.data.get(frame.stream_id, b"") + frame.data
            if "END_STREAM" in frame.flags:
                got.ended.add(frame.stream_id)
        elif isinstance(frame, HeadersFrame):
            self._block = (frame.stream_id, "END_STREAM" in frame.flags, frame.data)
        elif isinstance(frame, ContinuationFrame) and self._block:
            stream, ends, fragments = self._block
            self._block = (stream, ends, fragments + frame.data)
        if isinstance(frame, HeadersFrame | ContinuationFrame) and "END_HEADERS" in frame.flags:
            self._end_block()

    def _end_block(self) -> None:
        if self._block is None:
            return
        stream, ends, fragments = self._block
        self._block = None
        try:
            decoded = self.decoder.decode(fragments, raw=True)
        except hpack.HPACKError as error:
            self.received.faults.append(f"stream {stream}: an undecodable header block {error!r}")
            return
        # Field values are octets (RFC 9113, 8.2.1), UTF-8 or not: a byte that is not is kept as
        # a backslash escape.
        self.received.headers.setdefault(stream, []).append(
            [(_text(name), _text(value)) for name, value in decoded]
        )
        if ends:
            self.received.ended.add(stream)


def _text(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", "backslashreplace")
