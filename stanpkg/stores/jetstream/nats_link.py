"""The clustered store's JetStream connection: nats-py, which speaks the JetStream and KV
APIs (stream management, key-value buckets with compare-and-set, ordered consumers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsPyError
from nats.js import JetStreamContext

from stanpkg.stores.base import StoreError

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["JetStreamLink", "Pipeline", "PublishFailed"]

RETRY_INTERVAL = 0.25  # while the JetStream cluster elects its meta leader


class JetStreamLink:
    def __init__(self, nc: Client, url: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=5.0)
        self.url = url
        self.pipeline = Pipeline(nc)

    @classmethod
    async def open(cls, endpoint: NatsEndpoint, *, name: str) -> JetStreamLink:
        servers = [u.strip() for u in endpoint.url.split(",") if u.strip()]
        try:
            nc = await nats.connect(
                servers,
                name=name,
                user=endpoint.user or None,
                password=endpoint.password or None,
                token=endpoint.token or None,
                user_credentials=endpoint.credentials or None,
                nkeys_seed=endpoint.nkey_seed_file or None,
                tls=endpoint.tls,
                tls_hostname=endpoint.tls_hostname or None,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=RETRY_INTERVAL,
                connect_timeout=2,
                error_cb=_ignore,
            )
        except (NatsPyError, OSError, TimeoutError) as exc:
            raise StoreError(f"unable to connect to NATS at {endpoint.url}: {exc}") from exc
        if not nc._server_info.get("jetstream"):
            with contextlib.suppress(Exception):
                await nc.close()
            raise StoreError(
                f"the NATS server at {endpoint.url} does not have JetStream enabled "
                "(clustered mode needs it)"
            )
        return cls(nc, endpoint.url)

    async def wait_ready(self, timeout: float) -> None:
        """Until JetStream answers (a clustered JetStream needs its meta leader, i.e. a
        quorum of its servers)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await self.js.account_info()
                return
            except (NatsPyError, TimeoutError) as exc:
                if loop.time() >= deadline:
                    raise StoreError(
                        f"JetStream at {self.url} is not available after {timeout:.0f} s "
                        f"(are the cluster's peers running?): {exc}"
                    ) from exc
            await asyncio.sleep(RETRY_INTERVAL)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.nc.close()


async def _ignore(exc: Exception) -> None:
    """Reconnection noise is expected while a cluster changes; failures surface as
    errors of the requests that need the connection."""


class PublishFailed(Exception):
    """JetStream refused a write (``err_code``, 0 for no answer / no stream leader)."""

    def __init__(self, description: str, err_code: int = 0) -> None:
        super().__init__(description)
        self.err_code = err_code


class Pipeline:
    """Many JetStream publishes in flight on one reply subscription, answers matched by
    token. nats-py's ``js.publish`` makes a request (a future, a timer) per message and
    its ``publish_async`` hangs on errors (nats.py issue 985): the clustered store's
    channel writes come here instead."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = nc.new_inbox()
        self._waiting: dict[str, asyncio.Future[int]] = {}
        self._count = 0
        self._sub: Subscription | None = None

    async def _on_reply(self, msg: Msg) -> None:
        future = self._waiting.pop(msg.subject.rpartition(".")[2], None)
        if future is None or future.done():
            return
        status = (msg.headers or {}).get("Status", "")
        if status and not msg.data:
            future.set_exception(PublishFailed(f"nats: status {status} (no stream leader?)"))
            return
        try:
            answer = json.loads(msg.data)
        except ValueError:
            future.set_exception(PublishFailed(f"unreadable answer: {msg.data[:80]!r}"))
            return
        error = answer.get("error")
        if error:
            future.set_exception(
                PublishFailed(str(error.get("description", error)), int(error.get("err_code", 0)))
            )
        else:
            future.set_result(int(answer.get("seq", 0)))

    async def publish_all(
        self, subject: str, writes: list[tuple[bytes, dict[str, str]]], timeout: float
    ) -> list[int | BaseException]:
        """Send every write, then wait for every answer: the stored sequence, or the
        failure (PublishFailed, TimeoutError) of each write."""
        if self._sub is None:
            self._sub = await self._nc.subscribe(f"{self._prefix}.*", cb=self._on_reply)
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = []
        for data, headers in writes:
            self._count += 1
            token = str(self._count)
            future: asyncio.Future[int] = loop.create_future()
            self._waiting[token] = future
            futures.append(future)
            await self._nc.publish(subject, data, reply=f"{self._prefix}.{token}", headers=headers)
        await self._nc.flush()
        done, _ = await asyncio.wait(futures, timeout=timeout)
        results: list[int | BaseException] = []
        for future in futures:
            if future in done:
                exc = future.exception()
                results.append(exc if exc is not None else future.result())
            else:
                future.cancel()
                results.append(TimeoutError("no answer from the stream"))
        for token in [t for t, f in self._waiting.items() if f.done()]:
            del self._waiting[token]
        return results
