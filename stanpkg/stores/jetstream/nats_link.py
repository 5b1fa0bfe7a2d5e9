"""The clustered store's JetStream connection: nats-py, which speaks the JetStream and KV
APIs (stream management, key-value buckets with compare-and-set, ordered consumers)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import nats
from nats.aio.client import Client
from nats.errors import Error as NatsPyError
from nats.js import JetStreamContext

from stanpkg.stores.base import StoreError

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["JetStreamLink"]

RETRY_INTERVAL = 0.25  # while the JetStream cluster elects its meta leader


class JetStreamLink:
    def __init__(self, nc: Client, url: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=5.0)
        self.url = url

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
