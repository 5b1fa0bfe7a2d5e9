"""The clustered store's connection to JetStream, through nats-py (which speaks the
JetStream and KV APIs: streams, key-value buckets with compare-and-set, ordered consumers).

The connection reconnects forever with short waits: while a JetStream cluster elects a
leader, or a node restarts, requests fail for a while and then work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import ssl
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError, NoRespondersError
from nats.errors import Error as NatsPyError
from nats.js import JetStreamContext
from nats.js.errors import APIError, BucketNotFoundError, ServiceUnavailableError
from nats.js.kv import KeyValue

from stanpkg.stores.base import StoreError

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = [
    "REQUEST_TIMEOUT",
    "JetStreamLink",
    "PublishFailed",
    "Write",
    "first_answer",
    "raise_if_cancelled",
]

RECONNECT_WAIT = 0.25  # seconds between attempts while a cluster elects or restarts
REQUEST_TIMEOUT = 5.0  # default for JetStream API requests
JETSTREAM_NOT_ENABLED_FOR_ACCOUNT = 10039

Write = tuple[str, bytes, Mapping[str, str] | None]  # subject, data, headers
T = TypeVar("T")


def raise_if_cancelled() -> None:
    """For the retry loops that take a TimeoutError for "try again": Python 3.11's
    ``asyncio.wait_for`` can turn a cancellation that meets a timeout into that
    TimeoutError, and a node told to stop would then retry on. A task that was asked to
    stop still says so."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


async def first_answer(
    ask: Callable[[], Coroutine[Any, Any, T]], *, timeout: float, every: float
) -> T:
    """The first answer to ``ask()``, asked again every ``every`` seconds until one comes,
    for ``timeout`` seconds at most (then TimeoutError, or the last attempt's error).

    A stream electing a leader never answers the requests sent before its election: one
    request waits out its whole timeout, while one sent just after is answered at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending: set[asyncio.Task[T]] = set()
    error: BaseException = TimeoutError()
    try:
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise error
            pending.add(loop.create_task(ask()))
            done, pending = await asyncio.wait(
                pending, timeout=min(every, left), return_when=asyncio.FIRST_COMPLETED
            )
            answered = [task for task in done if task.exception() is None]
            for task in done:  # each failure looked at: none is left unretrieved
                error = task.exception() or error
            if answered:
                return answered[0].result()
    finally:
        for task in pending:
            task.cancel()
            # A request answered in the same loop turn is not cancelled (wait_for returns
            # its answer) and may still fail: its error is looked at here, or asyncio logs
            # "Task exception was never retrieved" from a finalizer. That log, run by the
            # garbage collector in the middle of an ast.parse, makes CPython 3.11 raise
            # "SystemError: AST constructor recursion depth mismatch" (its traceback
            # formatting parses source too), which crashed pytest.
            task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


class PublishFailed(Exception):
    """JetStream refused a write (``err_code`` 0: no answer, no stream or no leader)."""

    def __init__(self, description: str, err_code: int = 0) -> None:
        super().__init__(description)
        self.err_code = err_code


class JetStreamLink:
    """One nats-py connection (``nc``) and its JetStream context (``js``)."""

    def __init__(self, nc: Client, url: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=REQUEST_TIMEOUT)
        self.url = url
        self._reply_prefix = nc.new_inbox()
        self._replies: Subscription | None = None
        self._waiting: dict[str, asyncio.Future[int]] = {}
        self._tokens = itertools.count(1)

    @classmethod
    async def open(
        cls, endpoint: NatsEndpoint, *, name: str, timeout: float = 5.0
    ) -> JetStreamLink:
        """Connect (StoreError naming the URL when no server answers within ``timeout``)
        and check that JetStream is there at all (StoreError if it is disabled). JetStream
        may still be electing: :meth:`wait_ready` waits for it."""
        nc = Client()
        try:
            # With unlimited reconnects nats-py retries the first connect forever too:
            # the timeout is ours.
            await asyncio.wait_for(_connect(nc, endpoint, name), timeout)
        except (NatsPyError, OSError, TimeoutError) as exc:
            cause = nc.last_error or exc
            with contextlib.suppress(Exception):
                await nc.close()
            raise StoreError(
                f"unable to connect to the NATS server at {endpoint.url} "
                f"within {timeout:g} s: {_describe(cause)}"
            ) from exc
        link = cls(nc, endpoint.url)
        try:
            await link._check_jetstream_enabled(min(timeout, 2.0))
        except BaseException:
            await link.close()
            raise
        return link

    async def _check_jetstream_enabled(self, timeout: float) -> None:
        """No responders to the JetStream API means no server of the cluster runs
        JetStream; an answer, an error or silence (an election) means it does."""
        try:
            await asyncio.wait_for(self.js.account_info(), timeout)
        except (NatsPyError, TimeoutError) as exc:
            if _jetstream_absent(exc):
                raise self._not_enabled() from exc
            # otherwise maybe electing: wait_ready decides

    def _not_enabled(self) -> StoreError:
        return StoreError(
            f"the NATS server at {self.url} does not have JetStream enabled "
            "(clustered mode needs it)"
        )

    async def wait_ready(self, timeout: float) -> None:
        """Until JetStream answers: a clustered JetStream needs its meta leader, i.e. a
        quorum of its servers up and routed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            try:
                await asyncio.wait_for(self.js.account_info(), max(0.1, min(2.0, remaining)))
                return
            except ConnectionClosedError as exc:
                raise StoreError(f"the connection to {self.url} is closed") from exc
            except (NatsPyError, TimeoutError) as exc:
                raise_if_cancelled()
                if _jetstream_absent(exc):
                    raise self._not_enabled() from exc
                failure = exc
            if loop.time() >= deadline:
                raise StoreError(
                    f"JetStream at {self.url} is not available after {timeout:g} s "
                    f"(are a majority of the cluster's servers running and routed?): "
                    f"{_describe(failure)}"
                )
            await asyncio.sleep(min(RECONNECT_WAIT, max(0.0, deadline - loop.time())))

    async def key_value(self, bucket: str, *, replicas: int) -> KeyValue:
        """The bucket, created (history 1, ``replicas``) if missing. Several nodes may
        create it at once: JetStream accepts the same configuration again."""
        try:
            return await self.js.key_value(bucket)
        except BucketNotFoundError:
            # Direct gets: any replica answers a read, also while the stream elects.
            return await self.js.create_key_value(
                bucket=bucket, history=1, replicas=replicas, direct=True
            )

    async def publish_all(
        self, writes: Sequence[Write], *, timeout: float
    ) -> list[int | Exception]:
        """Every write in flight at once on one reply subscription, then every answer: the
        stored sequence, or the write's failure (PublishFailed, TimeoutError, a closed
        connection). nats-py's ``js.publish`` pays a timer and a request per write and its
        ``publish_async`` hangs on errors (nats.py issue 985)."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = []
        try:
            if self._replies is None:
                self._replies = await self.nc.subscribe(
                    f"{self._reply_prefix}.*", cb=self._on_reply
                )
            for subject, data, headers in writes:
                token = str(next(self._tokens))
                future: asyncio.Future[int] = loop.create_future()
                self._waiting[token] = future
                futures.append(future)
                await self.nc.publish(
                    subject,
                    data,
                    reply=f"{self._reply_prefix}.{token}",
                    headers=dict(headers) if headers else None,
                )
            await self.nc.flush(timeout=max(1, int(timeout)))
        except (NatsPyError, OSError) as exc:
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
            failures: list[int | Exception] = [exc] * (len(writes) - len(futures))
        else:
            failures = []
        if futures:
            await asyncio.wait(futures, timeout=timeout)
        results: list[int | Exception] = []
        for future in futures:
            if not future.done():
                future.cancel()
                results.append(TimeoutError(f"no answer from JetStream within {timeout:g} s"))
            elif (failure := future.exception()) is not None:
                results.append(failure if isinstance(failure, Exception) else PublishFailed(""))
            else:
                results.append(future.result())
        self._waiting = {t: f for t, f in self._waiting.items() if not f.done()}
        return results + failures

    async def _on_reply(self, msg: Msg) -> None:
        future = self._waiting.pop(msg.subject.rpartition(".")[2], None)
        if future is None or future.done():
            return
        status = (msg.headers or {}).get("Status", "")
        if status and not msg.data:  # 503: nobody stores this subject right now
            future.set_exception(
                PublishFailed(f"nats: status {status} (no stream for the subject, or no leader)")
            )
            return
        try:
            answer = json.loads(msg.data)
        except ValueError:
            future.set_exception(PublishFailed(f"unreadable answer: {msg.data[:80]!r}"))
            return
        error = answer.get("error")
        if error:
            description = str(error.get("description", error))
            future.set_exception(PublishFailed(description, int(error.get("err_code", 0))))
        else:
            future.set_result(int(answer.get("seq", 0)))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.nc.close()


async def _connect(nc: Client, endpoint: NatsEndpoint, name: str) -> None:
    tls = endpoint.tls
    if tls is None and endpoint.tls_required:
        tls = ssl.create_default_context()
    await nc.connect(
        [url.strip() for url in endpoint.url.split(",") if url.strip()],
        name=name,
        user=endpoint.user or None,
        password=endpoint.password or None,
        token=endpoint.token or None,
        user_credentials=endpoint.credentials or None,
        nkeys_seed=endpoint.nkey_seed_file or None,
        tls=tls,
        tls_hostname=endpoint.tls_hostname or None,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=RECONNECT_WAIT,  # type: ignore[arg-type]  # nats-py says int
        connect_timeout=2,
        error_cb=_ignore,
    )


def _jetstream_absent(exc: BaseException) -> bool:
    """No server answers the JetStream API (nats-py turns the "no responders" status into
    a ServiceUnavailableError without a JetStream error code), or the account has no
    JetStream. A cluster without its meta leader answers with an error code, or not
    at all."""
    if isinstance(exc, NoRespondersError):
        return True
    if isinstance(exc, ServiceUnavailableError) and exc.err_code is None:
        return True
    return isinstance(exc, APIError) and exc.err_code == JETSTREAM_NOT_ENABLED_FOR_ACCOUNT


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _ignore(exc: Exception) -> None:
    """Reconnection noise is expected while a cluster changes; failures surface as
    errors of the requests that need the connection."""
