"""Opening one connection to a NATS server: dial, INFO, optional TLS upgrade, CONNECT, PONG."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from stanpkg import __version__
from stanpkg.transport.auth import Credentials
from stanpkg.transport.errors import (
    DisconnectedError,
    NatsError,
    NatsTimeoutError,
    SecureConnectionWantedError,
)
from stanpkg.transport.protocol import ClientProtocol
from stanpkg.transport.servers import ServerAddress
from stanpkg.transport.tls import remote_alert_text

T = TypeVar("T")


@dataclass(frozen=True)
class ConnectSettings:
    """What every (re)connect needs: identity, credentials and TLS."""

    name: str
    credentials: Credentials
    tls: ssl.SSLContext | None
    tls_required: bool
    tls_hostname: str
    connect_timeout: float


async def until_deadline(deadline: float, fut: asyncio.Future[T]) -> T:
    """Await ``fut`` until the loop time ``deadline``; NatsTimeoutError after that."""
    remaining = deadline - asyncio.get_running_loop().time()
    try:
        return await asyncio.wait_for(fut, max(0.0, remaining))
    except TimeoutError as exc:
        raise NatsTimeoutError() from exc


def check_alive(proto: ClientProtocol) -> None:
    if proto.error is not None or proto.lost.done():
        raise proto.error or DisconnectedError("nats: connection closed")


async def open_protocol(
    make_protocol: Callable[[], ClientProtocol],
    server: ServerAddress,
    settings: ConnectSettings,
) -> ClientProtocol:
    """A connected, authenticated protocol, or an exception.

    Dial failures raise OSError (the caller turns them into "no servers available");
    everything after the TCP connection exists raises a NatsError.
    """
    loop = asyncio.get_running_loop()
    timeout = settings.connect_timeout
    deadline = loop.time() + timeout
    proto = make_protocol()
    try:
        await asyncio.wait_for(
            loop.create_connection(lambda: proto, server.host, server.port), timeout
        )
    except TimeoutError as exc:
        raise OSError(f"dial {server.url}: timeout") from exc
    try:
        info = await until_deadline(deadline, proto.info)
        wants_tls = settings.tls is not None or settings.tls_required or server.scheme == "tls"
        if wants_tls and not (info.get("tls_required") or info.get("tls_available")):
            raise SecureConnectionWantedError()
        # Like the Go client, upgrade when the server requires TLS even if not asked to.
        secure = wants_tls or bool(info.get("tls_required"))
        if secure:
            await _start_tls(proto, server, settings, deadline)
        check_alive(proto)
        connect = connect_fields(info, server, settings, secure)
        first_pong: asyncio.Future[None] = loop.create_future()
        proto.pongs.append(first_pong)
        assert proto.transport is not None
        proto.transport.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        await until_deadline(deadline, first_pong)
        # Whatever followed the PONG in the same read may already have broken it.
        check_alive(proto)
    except BaseException:
        if proto.transport is not None:
            proto.transport.abort()
        raise
    proto.ready = True
    return proto


async def _start_tls(
    proto: ClientProtocol, server: ServerAddress, settings: ConnectSettings, deadline: float
) -> None:
    loop = asyncio.get_running_loop()
    context = settings.tls or ssl.create_default_context()
    assert proto.transport is not None
    try:
        transport = await loop.start_tls(
            proto.transport,
            proto,
            context,
            server_hostname=settings.tls_hostname or server.host,
            ssl_handshake_timeout=max(0.1, deadline - loop.time()),
        )
    except ssl.SSLCertVerificationError as exc:
        raise NatsError(f"tls: failed to verify certificate: {exc.verify_message}") from exc
    except ssl.SSLError as exc:
        raise NatsError(remote_alert_text(exc) or f"tls: {exc.reason or exc}") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise NatsError(f"tls: handshake failed: {exc}") from exc
    # uvloop's transports implement the interface without subclassing asyncio.Transport.
    proto.transport = cast(asyncio.Transport, transport)


def connect_fields(
    info: dict[str, Any], server: ServerAddress, settings: ConnectSettings, tls: bool
) -> dict[str, Any]:
    """The CONNECT options. Headers + no_responders make requests to nobody fail fast."""
    fields: dict[str, Any] = {
        "verbose": False,
        "pedantic": False,
        "tls_required": tls,
        "name": settings.name,
        "lang": "python-stanpkg",
        "version": __version__,
        "protocol": 1,
        "echo": True,
        "headers": True,
        "no_responders": True,
    }
    # Credentials in the URL win over the options, as in the Go client.
    if server.user:
        fields["user"] = server.user
        fields["pass"] = server.password
    elif server.token:
        fields["auth_token"] = server.token
    else:
        fields.update(settings.credentials.connect_fields(str(info.get("nonce", ""))))
    return fields
