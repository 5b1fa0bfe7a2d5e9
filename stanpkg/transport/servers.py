"""NATS server URLs and the pool a connection (re)connects to."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from stanpkg.transport.errors import NatsError

DEFAULT_PORT = 4222
_SCHEMES = ("nats", "tls")


@dataclass(eq=False)
class ServerAddress:
    host: str
    port: int
    scheme: str = "nats"
    user: str = ""
    password: str = ""
    token: str = ""
    implicit: bool = False  # learned from INFO connect_urls, not configured
    reconnects: int = 0
    last_attempt: float = 0.0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.port)


def parse_url(text: str) -> ServerAddress:
    """``nats://[user:pass@|token@]host[:port]``, ``tls://...`` or a bare ``host[:port]``."""
    raw = text.strip()
    if "://" not in raw:
        raw = "nats://" + raw
    try:
        parts = urlsplit(raw)
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise NatsError(f"nats: invalid url {text.strip()!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise NatsError(f"nats: unsupported url scheme {scheme!r} in {text.strip()!r}")
    address = ServerAddress(host=parts.hostname or "localhost", port=port, scheme=scheme)
    if parts.username is not None:
        if parts.password is None:
            address.token = unquote(parts.username)
        else:
            address.user = unquote(parts.username)
            address.password = unquote(parts.password)
    return address


def parse_urls(text: str) -> list[ServerAddress]:
    """A comma-separated URL list, as the Go client accepts."""
    urls = [parse_url(part) for part in text.split(",") if part.strip()]
    if not urls:
        raise NatsError("nats: no servers available for connection")
    return urls


class ServerPool:
    """Configured servers plus those the cluster advertises; round-robin on reconnect."""

    def __init__(self, servers: list[ServerAddress]) -> None:
        self.servers = servers
        self.current = servers[0]

    def add_advertised(self, urls: list[str]) -> bool:
        """Learn servers from INFO ``connect_urls``; True if any was new."""
        known = {s.key for s in self.servers}
        added = False
        for url in urls:
            try:
                address = parse_url(url)
            except NatsError:
                continue
            if address.key not in known:
                address.implicit = True
                address.scheme = self.current.scheme
                self.servers.append(address)
                known.add(address.key)
                added = True
        return added

    def next_candidate(self, max_reconnect: int) -> ServerAddress | None:
        """The next server after the current one that still has reconnect attempts left."""
        if max_reconnect >= 0:
            self.servers = [s for s in self.servers if s.reconnects < max_reconnect]
        if not self.servers:
            return None
        try:
            index = self.servers.index(self.current) + 1
        except ValueError:
            index = 0
        server = self.servers[index % len(self.servers)]
        self.current = server
        return server
