"""The ``-r/--remote_syslog`` address: one parser for ``validate`` (a positioned error)
and for the server that dials it (``stanpkg/server/syslog.py``), so both accept exactly
the same addresses."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

__all__ = ["Address", "SocketType", "parse_remote_syslog"]

Address = str | tuple[str, int]
SocketType = socket.SocketKind | None


def parse_remote_syslog(url: str) -> tuple[Address, SocketType]:
    """(address, socket type) for ``udp://host:port``, ``tcp://host:port`` or
    ``unix:///path``; ValueError naming what is wrong otherwise. A unix socket's type is
    left open (None): the standard library tries a datagram socket, then a stream one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("udp", "tcp"):
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f'invalid syslog address "{url}": {exc}') from None
        if not parts.hostname or port is None:
            raise ValueError(f'invalid syslog address "{url}": expected {scheme}://host:port')
        kind = socket.SOCK_DGRAM if scheme == "udp" else socket.SOCK_STREAM
        return (parts.hostname, port), kind
    if scheme == "unix":
        if not parts.path:
            raise ValueError(f'invalid syslog address "{url}": expected unix:///path')
        return parts.path, None
    raise ValueError(f'invalid syslog address "{url}": network must be udp, tcp or unix')
