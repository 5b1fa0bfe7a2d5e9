"""The embedded nats-server's own endpoints (``/varz``, ``/connz``, ``/routez``, ``/subsz``,
…) on the streaming server's monitoring port.

The reference serves them from the same HTTP mux because it links nats-server in; ours
is a child process whose HTTP monitor listens on a private loopback port
(``EmbeddedNatsConfig.internal_monitor_port``), and every path that is not a streaming
one is forwarded there as is.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

__all__ = ["NatsMonitorProxy", "not_found"]

# Per-connection headers (RFC 9110 §7.6.1) and the ones aiohttp recomputes.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_TIMEOUT = aiohttp.ClientTimeout(total=30)


def not_found() -> web.Response:
    """Go's ``http.NotFound``."""
    return web.Response(
        status=404,
        body=b"404 page not found\n",
        headers={"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"},
    )


def _forwardable(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    # items() repeats a header sent several times (Set-Cookie, Vary…): all are kept.
    return CIMultiDict(
        (name, value) for name, value in headers.items() if name.lower() not in _NOT_FORWARDED
    )


class NatsMonitorProxy:
    """Forwards requests to ``http://127.0.0.1:<port>``; 404 while there is no port
    (external NATS server), 502 when nats-server does not answer."""

    def __init__(self) -> None:
        self.port: int | None = None
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No decompression: a compressed answer goes back to the caller unchanged.
            self._session = aiohttp.ClientSession(timeout=_TIMEOUT, auto_decompress=False)
        return self._session

    async def handle(self, request: web.Request) -> web.Response:
        if self.port is None:
            return not_found()
        url = f"http://127.0.0.1:{self.port}{request.raw_path}"
        body = await request.read()
        try:
            async with self._client().request(
                request.method,
                url,
                headers=_forwardable(request.headers),
                data=body or None,
                allow_redirects=False,
            ) as upstream:
                payload = await upstream.read()
                headers = _forwardable(upstream.headers)
                return web.Response(status=upstream.status, body=payload, headers=headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.Response(
                status=502,
                body=f"NATS server monitoring unavailable: {exc}\n".encode(),
                headers={"Content-Type": "text/plain; charset=utf-8"},
            )
