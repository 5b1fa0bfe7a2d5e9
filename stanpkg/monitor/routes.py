"""The monitoring HTTP application: ``/streaming/*`` as the reference serves them,
``/metrics``, ``/healthz``, and everything else forwarded to the embedded nats-server.

Documents are gathered on the event loop (paced, see :mod:`pacing`) and encoded in a
worker thread, so a large answer never holds up message delivery for long.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from aiohttp import web

from stanpkg.monitor import documents, metrics
from stanpkg.monitor.documents import Document, Paging
from stanpkg.monitor.gojson import go_atoi, go_json_pieces
from stanpkg.monitor.pacing import gc_paused, release
from stanpkg.monitor.proxy import NatsMonitorProxy
from stanpkg.server.log import Logger
from stanpkg.server.monitoring_views import ServerView

__all__ = ["MonitorApp", "plain_error"]

ROOT_PATH = "/streaming"
SERVER_PATH = "/streaming/serverz"
STORE_PATH = "/streaming/storez"
CLIENTS_PATH = "/streaming/clientsz"
CHANNELS_PATH = "/streaming/channelsz"
FT_ACTIVE_PATH = "/streaming/isFTActive"
METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"

_ROOT_PAGE = f"""<html lang="en">
  <head>
    <title>NATS Streaming monitoring</title>
    <style type="text/css">
      body {{ font-family: "Century Gothic", CenturyGothic, AppleGothic, sans-serif; }}
      a {{ margin-left: 32px; }}
    </style>
  </head>
  <body>
    <h1>NATS Streaming</h1>
    <a href=.{SERVER_PATH}>server</a><br/>
    <a href=.{STORE_PATH}>store</a><br/>
    <a href=.{CLIENTS_PATH}>clients</a><br/>
    <a href=.{CHANNELS_PATH}>channels</a><br/>
    <a href=.{METRICS_PATH}>metrics</a><br/>
    <a href=https://docs.nats.io/legacy/stan/intro/monitoring/>help</a>
  </body>
</html>
"""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def plain_error(status: int, text: str) -> web.Response:
    """Go's ``http.Error``: plain text, one trailing newline."""
    return web.Response(
        status=status,
        body=(text + "\n").encode(),
        headers={"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"},
    )


def _wants_gzip(request: web.Request) -> bool:
    """``Accept-Encoding`` lists gzip with a non-zero quality (Prometheus always does)."""
    for item in request.headers.get("Accept-Encoding", "").split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() != "gzip":
            continue
        name, _, quality = params.partition("=")
        if name.strip().lower() != "q":
            return True
        try:
            return float(quality) > 0
        except ValueError:
            return False
    return False


class MonitorApp:
    """Request handlers bound to one server; ``build()`` gives the aiohttp application."""

    def __init__(
        self,
        view: ServerView,
        *,
        version: str,
        go_version: str,
        executor: Executor,
        log: Logger,
        proxy: NatsMonitorProxy,
    ) -> None:
        self.view = view
        self.version = version
        self.go_version = go_version
        self.executor = executor
        self.log = log
        self.proxy = proxy
        self.nats_server_pid: int | None = None  # the embedded one's, for its process metrics

    def build(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        routes: dict[str, Handler] = {
            ROOT_PATH: self.root,
            SERVER_PATH: self.serverz,
            STORE_PATH: self.storez,
            CLIENTS_PATH: self.clientsz,
            CHANNELS_PATH: self.channelsz,
            FT_ACTIVE_PATH: self.is_ft_active,
            METRICS_PATH: self.metrics,
            HEALTH_PATH: self.healthz,
        }
        for path, handler in routes.items():  # exact paths, any method, as Go's mux
            app.router.add_route("*", path, handler)
        app.router.add_route("*", "/{tail:.*}", self.proxy.handle)
        app.on_response_prepare.append(_drop_server_header)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except ConnectionError as exc:
            transport = request.transport
            if transport is not None and not transport.is_closing():
                return self._internal_error(request, exc)  # not the client's leaving
            # The client hung up before or during the answer (a probe's or scraper's
            # timeout): normal. Raised on, aiohttp would log it as an unhandled error with
            # its traceback; a response it cannot send makes it drop the connection quietly.
            self.log.debug(f"Monitoring: client left during {request.path}")
            return web.Response(status=499, reason="Client Closed Request")
        except Exception as exc:
            return self._internal_error(request, exc)

    def _internal_error(self, request: web.Request, exc: Exception) -> web.Response:
        self.log.error(f"Monitoring: error handling {request.path}: {exc!r}")
        return plain_error(500, f"Internal error: {exc}")

    async def _run(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def _encode(self, request: web.Request, doc: Document) -> tuple[list[bytes], str]:
        """JSON, or JSONP when the query has a non-empty ``callback``; the document is
        emptied (``release``) once encoded."""
        callback = request.query.get("callback", "")
        pieces: list[bytes] = await self._run(_encode, doc, callback)
        for key in ("channels", "clients"):  # a list entry per channel / client
            if isinstance(doc.get(key), list):
                await release(doc[key])
        return pieces, "application/javascript" if callback else "application/json"

    async def _json(self, request: web.Request, doc: Document) -> web.StreamResponse:
        pieces, content_type = await self._encode(request, doc)
        return await _send(request, pieces, {"Content-Type": content_type})

    async def _big_json(
        self, request: web.Request, build: Awaitable[Document]
    ) -> web.StreamResponse:
        """A document with an object per client or subscription: built and encoded
        without garbage collection (pacing.gc_paused); sent after, however slow the
        reader."""
        with gc_paused():
            pieces, content_type = await self._encode(request, await build)
        return await _send(request, pieces, {"Content-Type": content_type})

    # -- /streaming/* -------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        return web.Response(
            body=_ROOT_PAGE.encode(), headers={"Content-Type": "text/html; charset=utf-8"}
        )

    async def serverz(self, request: web.Request) -> web.StreamResponse:
        try:
            doc = documents.serverz(self.view, version=self.version, go_version=self.go_version)
        except OSError as exc:
            return plain_error(500, f"Error getting file descriptors len: {exc}")
        return await self._json(request, doc)

    async def storez(self, request: web.Request) -> web.StreamResponse:
        return await self._json(request, documents.storez(self.view))

    @staticmethod
    def _paging(request: web.Request) -> tuple[Paging, bool]:
        query = request.query
        paging = Paging.of(go_atoi(query.get("offset", "")), go_atoi(query.get("limit", "")))
        return paging, go_atoi(query.get("subs", "")) == 1

    async def clientsz(self, request: web.Request) -> web.StreamResponse:
        return await self._one_or_list(
            request, "client", "Client", documents.clientz, documents.clientsz
        )

    async def channelsz(self, request: web.Request) -> web.StreamResponse:
        return await self._one_or_list(
            request, "channel", "Channel", documents.channelz, documents.channelsz
        )

    async def _one_or_list(
        self,
        request: web.Request,
        param: str,
        label: str,
        one: Callable[[ServerView, str, bool], Document | None],
        many: Callable[[ServerView, Paging, bool], Awaitable[Document]],
    ) -> web.StreamResponse:
        """``?<param>=<name>`` for one item (404 when unknown), else the paged list."""
        paging, with_subs = self._paging(request)
        name = request.query.get(param, "")
        if name:
            doc = one(self.view, name, with_subs)
            if doc is None:
                return plain_error(404, f"{label} {name} not found")
            return await self._json(request, doc)
        return await self._big_json(request, many(self.view, paging, with_subs))

    async def is_ft_active(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.view.state == "FT_ACTIVE" else 204)

    # -- /healthz -----------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        """nats-server's ``/healthz`` answer, for the streaming server: 503 while it has
        lost NATS (whichever NATS server it uses); else the embedded nats-server's own
        answer, or ``{"status":"ok"}`` with an external one."""
        link = self.view.nats_link()
        if not link.connected:
            error = f"streaming server lost its NATS connection: {link.error}"
            return web.json_response(
                {"status": "unavailable", "error": error}, status=503, dumps=_compact
            )
        if self.proxy.port is not None:
            return await self.proxy.handle(request)
        return web.json_response({"status": "ok"}, dumps=_compact)

    # -- /metrics -----------------------------------------------------------------------

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        exposition = metrics.negotiate(request.headers.get("Accept", ""))
        headers = {"Content-Type": exposition.content_type}
        gzip = _wants_gzip(request)
        if gzip:
            headers["Content-Encoding"] = "gzip"
        render = metrics.render_gzip if gzip else metrics.render
        with gc_paused():  # see pacing.py; the sending is outside
            snapshot = await metrics.collect(
                self.view,
                version=self.version,
                go_version=self.go_version,
                nats_server_pid=self.nats_server_pid,
            )
            pieces: list[bytes] = await self._run(render, snapshot, exposition)
            await release(snapshot.channels)
        return await _send(request, pieces, headers)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


async def _send(
    request: web.Request, pieces: list[bytes], headers: dict[str, str]
) -> web.StreamResponse:
    """Written piece by piece: one 100 MB write would be one long copy on the loop."""
    response = web.StreamResponse(headers=headers)
    response.content_length = sum(map(len, pieces))
    await response.prepare(request)
    for piece in pieces:
        await response.write(piece)
    await response.write_eof()
    return response


def _encode(doc: Document, callback: str) -> list[bytes]:
    pieces = [piece.encode() for piece in go_json_pieces(doc)]
    return [f"{callback}(".encode(), *pieces, b")"] if callback else pieces


async def _drop_server_header(request: web.Request, response: web.StreamResponse) -> None:
    # Go's net/http announces no server software; neither do we.
    response.headers.popall("Server", None)
