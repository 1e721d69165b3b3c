"""A listening address as the settings spell it: ``host:port``, an IPv6 host in brackets."""

from __future__ import annotations

from gnau_service.common.quoting import quoted


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets, ``[::1]:8080``) as the host and the port number.

    >>> split_host_port("127.0.0.1:8080"), split_host_port("[::1]:0")
    (('127.0.0.1', 8080), ('::1', 0))
    >>> split_host_port("8080")
    Traceback (most recent call last):
    ...
    ValueError: expected host:port, got '8080'
    """
    host, colon, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected host:port, got {quoted(address)}")
    return host, int(port)
