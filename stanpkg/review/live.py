"""A running server's state, read from its monitoring endpoints (docs/monitoring.md):
``/streaming/serverz``, ``/streaming/storez``, every page of
``/streaming/channelsz?subs=1``, and ``/varz`` (the embedded NATS server's, for the port
clients connect to; absent with an external NATS server).

Only what ``--against`` needs is kept. Every failure (refused connection, TLS, HTTP
status, a body that is not the expected JSON) is a :class:`LiveError` that says which URL
and why; nothing here raises anything else.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from stanpkg.plan.redact import redact_urls

PAGE = 1024  # the monitoring endpoints' default page
TIMEOUT = 10.0  # seconds per request


class LiveError(Exception):
    """The running server could not be read (the message shows no URL's password)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact_urls(message))


@dataclass(frozen=True)
class LiveChannel:
    name: str
    msgs: int
    bytes: int
    first_seq: int
    last_seq: int
    subs_count: int


@dataclass(frozen=True)
class LiveServer:
    url: str  # the monitoring base, without a trailing slash
    cluster_id: str
    server_id: str
    state: str  # STANDALONE, FT_ACTIVE, FT_STANDBY, CLUSTERED
    store_type: str  # as the server prints it: MEMORY, FILE, SQL, RAFT_FILE, ...
    total_msgs: int
    channels: tuple[LiveChannel, ...]
    nats_port: int = 0  # the embedded NATS server's client port (0: not known)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"


def base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LiveError(f'--against needs a monitoring URL such as http://host:8222, got "{url}"')
    return url.rstrip("/")


def tls_context(cafile: str = "") -> ssl.SSLContext:
    """How an ``https`` monitoring URL is verified: with ``cafile``, else the system's CAs."""
    try:
        return ssl.create_default_context(cafile=cafile or None)
    except (OSError, ssl.SSLError) as exc:
        raise LiveError(f'cannot use CA file "{cafile}": {exc}') from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, http.client.HTTPException):
        return "not an HTTP answer (is this a monitoring port?)"
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        if not isinstance(exc.reason, BaseException):
            return str(exc.reason)
        exc = exc.reason
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):  # socket.timeout too
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    return str(getattr(exc, "strerror", None) or exc or exc.__class__.__name__)


def get_json(url: str, context: ssl.SSLContext | None) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT, context=context) as response:
            body = response.read()
    except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError is an OSError
        raise LiveError(f"cannot read {url}: {_reason(exc)}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise LiveError(f"{url} did not answer JSON (is this a monitoring port?)") from None


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _document(url: str, context: ssl.SSLContext | None) -> dict[str, Any]:
    doc = get_json(url, context)
    if not isinstance(doc, dict):
        raise LiveError(f"{url} did not answer a JSON object")
    return doc


def _channels(base: str, context: ssl.SSLContext | None) -> list[LiveChannel]:
    channels: list[LiveChannel] = []
    offset = 0
    while True:
        url = f"{base}/streaming/channelsz?subs=1&offset={offset}&limit={PAGE}"
        page = _document(url, context)
        for doc in page.get("channels") or ():
            if isinstance(doc, dict) and isinstance(doc.get("name"), str):
                channels.append(
                    LiveChannel(
                        doc["name"],
                        _int(doc, "msgs"),
                        _int(doc, "bytes"),
                        _int(doc, "first_seq"),
                        _int(doc, "last_seq"),
                        _int(doc, "subs_count"),
                    )
                )
        count, total = _int(page, "count"), _int(page, "total")
        offset += PAGE
        if count == 0 or offset >= total:
            return channels


def _nats_port(base: str, context: ssl.SSLContext | None) -> int:
    try:
        varz = _document(f"{base}/varz", context)
    except LiveError:
        return 0  # an external NATS server: no /varz of ours
    return _int(varz, "port")


def read_server(url: str, cafile: str = "") -> LiveServer:
    base = base_url(url)
    context = tls_context(cafile) if base.startswith("https:") else None
    serverz = _document(f"{base}/streaming/serverz", context)
    if "server_id" not in serverz:
        raise LiveError(f"{base}/streaming/serverz is not a NATS Streaming server's answer")
    storez = _document(f"{base}/streaming/storez", context)
    return LiveServer(
        base,
        str(serverz.get("cluster_id", "")),
        str(serverz.get("server_id", "")),
        str(serverz.get("state", "")),
        str(storez.get("type", "")),
        _int(storez, "total_msgs"),
        tuple(_channels(base, context)),
        _nats_port(base, context),
    )
