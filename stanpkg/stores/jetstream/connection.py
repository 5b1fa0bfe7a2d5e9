"""The clustered store's one connection to JetStream, and the JetStream API spoken on it.

The JetStream API — streams, KV buckets, direct gets, acknowledged publishes — is JSON
request/reply over plain NATS, so the clustered store speaks it through stanpkg's own
``NatsConnection``, the one its channel writes use: one connection per node, one reconnect
policy, one vocabulary of errors (:class:`JetStreamError` and the store's other
StoreErrors). A second client (nats-py) would be a second connection, reconnecting on its
own terms and failing with its own exceptions.

The connection reconnects forever with short waits: while a JetStream cluster elects a
leader, or a node restarts, requests fail for a while and then work again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from stanpkg.stores.base import StoreError
from stanpkg.transport.connection import NatsConnection, decode_headers, encode_headers
from stanpkg.transport.errors import ConnectionClosedError, NatsError, NoRespondersError

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = [
    "API_TIMEOUT",
    "ASK_AGAIN_EVERY",
    "BATCH_WRONG_LAST_SEQUENCE",
    "NO_RESPONDERS",
    "STREAM_NAME_IN_USE",
    "STREAM_NOT_FOUND",
    "WRONG_LAST_SEQUENCE",
    "ConnectionClosed",
    "Elections",
    "JetStreamError",
    "Outgoing",
    "Pipeline",
    "Reply",
    "ack_sequence",
    "api_failure",
    "connect",
    "elections_of",
    "first_answer",
    "js_api",
    "raise_if_cancelled",
    "wait_ready",
]

API_TIMEOUT = 5.0  # seconds for JetStream to answer a request or a write (and to connect)
# A request that may meet a stream electing or moving its leader is sent again this often
# (first_answer): the new leader answers none sent before it was elected.
ASK_AGAIN_EVERY = 0.25
# JetStream announces each stream leader it elects here (in the stream's account).
LEADER_ELECTED = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.*"
RECONNECT_WAIT = 0.25  # seconds between attempts while a cluster elects or restarts
ENABLED_CHECK_TIMEOUT = 2.0  # at most, for the first look at JetStream when connecting
READY_POLL = 2.0  # at most, for one INFO request while waiting for JetStream
NO_RESPONDERS = 503  # the status of a request nobody subscribes to

# JetStream's err_codes.
JETSTREAM_NOT_ENABLED_FOR_ACCOUNT = 10039
STREAM_NAME_IN_USE = 10058  # create: the stream exists with another configuration
STREAM_NOT_FOUND = 10059
WRONG_LAST_SEQUENCE = 10071  # an expected last (subject) sequence did not match
BATCH_WRONG_LAST_SEQUENCE = 10164  # the same for an atomic batch

Outgoing = tuple[str, bytes, Mapping[str, str] | None]  # subject, data, headers
T = TypeVar("T")


class JetStreamError(StoreError):
    """JetStream refused a request or a write (``err_code``: JetStream's), or it was not
    answered (``err_code`` 0; ``status`` 503: nobody serves it — no stream for the
    subject, no leader, or no JetStream)."""

    def __init__(self, description: str, err_code: int = 0, status: int = 0) -> None:
        super().__init__(description)
        self.err_code = err_code
        self.status = status


class ConnectionClosed(JetStreamError):
    """The connection is closed: nothing sent on it is answered any more."""


class Reply(NamedTuple):
    """An answer received by a :class:`Pipeline`: ``status`` 0 for a message, else the
    status code of a header-only answer (404 not found, 503 no responders...)."""

    status: int
    headers: dict[str, str]
    data: bytes


def raise_if_cancelled() -> None:
    """For the retry loops that take a TimeoutError for "try again": Python 3.11's
    ``asyncio.wait_for`` can turn a cancellation that meets a timeout into that
    TimeoutError, and a node told to stop would then retry on. A task that was asked to
    stop still says so."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


async def first_answer(
    ask: Callable[[], Coroutine[Any, Any, T]],
    *,
    timeout: float,
    every: float,
    woken_by: NatsConnection | None = None,
) -> T:
    """The first answer to ``ask()``, asked again every ``every`` seconds until one comes,
    for ``timeout`` seconds at most (then TimeoutError, or the last attempt's error);
    asked again at once when JetStream announces a stream leader's election on
    ``woken_by`` (a connection :func:`connect` opened; see :class:`Elections`).

    A stream electing a leader never answers the requests sent before its election: one
    request waits out its whole timeout, while one sent just after is answered at once."""
    loop = asyncio.get_running_loop()
    elections = elections_of(woken_by) if woken_by is not None else None
    deadline = loop.time() + timeout
    pending: set[asyncio.Future[Any]] = set()
    elected: asyncio.Future[None] | None = None
    error: BaseException = TimeoutError()
    try:
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise error
            pending.add(loop.create_task(ask()))
            if elections is not None and (elected is None or elected.done()):
                elected = elections.next()
            done, pending = await asyncio.wait(
                pending | {elected} if elected is not None else pending,
                timeout=min(every, left),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if elected is not None:
                pending.discard(elected)
                done.discard(elected)
            answered = [task for task in done if task.exception() is None]
            for task in done:  # each failure looked at: none is left unretrieved
                error = task.exception() or error
            if answered:
                return cast("T", answered[0].result())
    finally:
        if elected is not None:
            elected.cancel()
        for task in pending:
            task.cancel()
            # A request answered in the same loop turn is not cancelled (wait_for returns
            # its answer) and may still fail: its error is looked at here, or asyncio logs
            # "Task exception was never retrieved" from a finalizer. That log, run by the
            # garbage collector in the middle of an ast.parse, makes CPython 3.11 raise
            # "SystemError: AST constructor recursion depth mismatch" (its traceback
            # formatting parses source too), which crashed pytest.
            task.add_done_callback(_retrieve)


class Elections:
    """The stream leader elections JetStream announces to one connection (its advisories).

    Why: after the serving node's death the streams it led elect new leaders (4-9 s),
    and a new leader answers only what is asked after its election. A request that waits
    for one (:func:`first_answer`) is asked again the moment it is announced instead of
    at its next turn (ASK_AGAIN_EVERY): a quarter of a second at most off each step of a
    failover, and the polling stays as a fallback (an announcement can be missed)."""

    def __init__(self, conn: NatsConnection) -> None:
        self._waiting: set[asyncio.Future[None]] = set()
        conn.subscribe(LEADER_ELECTED, self._elected)

    def next(self) -> asyncio.Future[None]:
        """Done at the next election announced (a future of the running loop: the
        connection's own)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.add(future)
        future.add_done_callback(self._waiting.discard)
        return future

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when an election is announced meanwhile."""
        elected = self.next()
        try:
            await asyncio.wait_for(asyncio.shield(elected), seconds)
        except TimeoutError:
            pass
        finally:
            elected.cancel()

    def _elected(self, _subject: str, _reply: str, _data: bytes) -> None:
        for future in list(self._waiting):
            if not future.done():
                future.set_result(None)


# The Elections of each connection connect() opened, by id (NatsConnection takes no weak
# references once compiled); closed ones are forgotten as new ones come.
_elections: dict[int, tuple[NatsConnection, Elections]] = {}


def elections_of(conn: NatsConnection) -> Elections | None:
    """The announced elections of ``conn`` (None for one :func:`connect` did not open)."""
    found = _elections.get(id(conn))
    return found[1] if found is not None and found[0] is conn else None


def _follow_elections(conn: NatsConnection) -> None:
    for key, (known, _) in list(_elections.items()):
        if known.is_closed:
            del _elections[key]
    _elections[id(conn)] = (conn, Elections(conn))


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


# -- the connection ----------------------------------------------------------------------


async def connect(
    endpoint: NatsEndpoint,
    *,
    name: str,
    timeout: float = API_TIMEOUT,
    on_disconnected: Callable[[], None] | None = None,
) -> NatsConnection:
    """Connect, reconnecting forever afterwards (StoreError naming the URL when no server
    answers within ``timeout``), and check that JetStream is there at all (StoreError if
    it is disabled). JetStream may still be electing: :func:`wait_ready` waits for it.
    ``on_disconnected`` is called each time the connection drops (it reconnects)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:  # servers not up yet are tried again until the timeout, as reconnects are
        try:
            conn = await asyncio.wait_for(
                NatsConnection.open(
                    endpoint,
                    name=name,
                    max_reconnect=-1,  # a cluster restarting is no reason to give up
                    reconnect_wait=RECONNECT_WAIT,
                    connect_timeout=min(2.0, timeout),
                    on_disconnected=on_disconnected,
                ),
                max(0.0, deadline - loop.time()),
            )
            break
        except (NatsError, OSError, TimeoutError) as exc:
            raise_if_cancelled()
            if loop.time() + RECONNECT_WAIT >= deadline:
                raise StoreError(
                    f"unable to connect to the NATS server at {endpoint.url} "
                    f"within {timeout:g} s: {_describe(exc)}"
                ) from exc
        await asyncio.sleep(RECONNECT_WAIT)
    try:
        await _check_jetstream_enabled(conn, endpoint.url, min(timeout, ENABLED_CHECK_TIMEOUT))
    except BaseException:
        await conn.close()
        raise
    _follow_elections(conn)
    return conn


async def _check_jetstream_enabled(conn: NatsConnection, url: str, timeout: float) -> None:
    """No responders to the JetStream API means no server of the cluster runs JetStream;
    an answer, an error or silence (an election) means it does."""
    try:
        answer = await js_api(conn, "INFO", None, timeout=timeout)
    except JetStreamError as exc:
        if _jetstream_absent(exc):
            raise _not_enabled(url) from exc
        return  # maybe electing: wait_ready decides
    if _jetstream_absent(api_failure("read the JetStream account", answer)):
        raise _not_enabled(url)


def _not_enabled(url: str) -> StoreError:
    return StoreError(
        f"the NATS server at {url} does not have JetStream enabled (clustered mode needs it)"
    )


async def wait_ready(conn: NatsConnection, timeout: float) -> None:
    """Until JetStream answers: a clustered JetStream needs its meta leader, i.e. a quorum
    of its servers up and routed. StoreError when it does not within ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if conn.is_closed:
            raise StoreError(f"the connection to {conn.client_url} is closed")
        remaining = deadline - loop.time()
        try:
            answer = await js_api(conn, "INFO", None, timeout=max(0.1, min(READY_POLL, remaining)))
            if "error" not in answer:
                return
            failure = api_failure("read the JetStream account", answer)
        except JetStreamError as exc:
            raise_if_cancelled()
            failure = exc
        if conn.is_closed:
            raise StoreError(f"the connection to {conn.client_url} is closed") from failure
        if _jetstream_absent(failure):
            raise _not_enabled(conn.client_url) from failure
        if loop.time() >= deadline:
            raise StoreError(
                f"JetStream at {conn.client_url} is not available after {timeout:g} s "
                f"(are a majority of the cluster's servers running and routed?): "
                f"{_describe(failure)}"
            )
        await asyncio.sleep(min(RECONNECT_WAIT, max(0.0, deadline - loop.time())))


def _jetstream_absent(error: JetStreamError) -> bool:
    """Nobody answers the JetStream API, or the account has no JetStream. A cluster
    without its meta leader answers with another error code, or not at all."""
    return error.status == NO_RESPONDERS or error.err_code == JETSTREAM_NOT_ENABLED_FOR_ACCOUNT


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# -- requests ----------------------------------------------------------------------------


async def js_api(
    conn: NatsConnection, subject: str, body: dict[str, Any] | None, *, timeout: float = API_TIMEOUT
) -> dict[str, Any]:
    """JetStream's JSON answer to ``$JS.API.<subject>`` (an "error" in it is the caller's
    to judge: see :func:`api_failure`); JetStreamError when none comes."""
    payload = json.dumps(body).encode() if body is not None else b""
    try:
        answer = await conn.request(f"$JS.API.{subject}", payload, timeout)
    except NatsError as exc:
        status = NO_RESPONDERS if isinstance(exc, NoRespondersError) else 0
        raise JetStreamError(
            f"JetStream did not answer $JS.API.{subject}: {exc}", status=status
        ) from exc
    try:
        result: dict[str, Any] = json.loads(answer)
    except ValueError:
        raise JetStreamError(f"unreadable answer to $JS.API.{subject}: {answer[:80]!r}") from None
    return result


def api_failure(action: str, answer: dict[str, Any]) -> JetStreamError:
    """The error of a JetStream answer (``err_code`` 0 when it has none)."""
    error = answer.get("error") or {}
    code = int(error.get("err_code") or 0)
    return JetStreamError(f"unable to {action}: {error.get('description')} ({code})", code)


def ack_sequence(reply: Reply) -> int:
    """The stream sequence of an acknowledged publish; JetStreamError when JetStream
    refused it or nobody stored it."""
    if reply.status:  # 503: nobody stores this subject right now
        raise JetStreamError(
            f"nats: status {reply.status} (no stream for the subject, or no leader)",
            status=reply.status,
        )
    try:
        answer = json.loads(reply.data)
    except ValueError:
        raise JetStreamError(f"unreadable answer: {reply.data[:80]!r}") from None
    error = answer.get("error")
    if error:
        raise JetStreamError(str(error.get("description", error)), int(error.get("err_code", 0)))
    return int(answer.get("seq", 0))


class Pipeline:
    """Requests with headers in flight at once on one connection, their answers on one
    reply subscription (``_INBOX.<nuid>.<token>``), headers and statuses included — a
    direct get's, a 404, a 503 — which the connection's own request/reply does not give."""

    def __init__(self, conn: NatsConnection) -> None:
        self.conn = conn
        self._prefix = ""
        self._tokens = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Reply]] = {}

    async def request(
        self,
        subject: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float = API_TIMEOUT,
    ) -> Reply:
        """The answer to one message; JetStreamError when none comes within ``timeout``
        (ConnectionClosed when the connection is closed)."""
        try:
            token, future = self._send(subject, data, headers)
        except NatsError as exc:
            raise self._not_sent(subject, exc) from exc
        try:
            await asyncio.wait([future], timeout=timeout)
            if not future.done():
                raise JetStreamError(f"no answer from {subject} within {timeout:g} s")
            return future.result()
        finally:
            self._forget(token, future)

    async def publish_all(
        self, writes: Sequence[Outgoing], *, timeout: float
    ) -> list[int | JetStreamError]:
        """Every write in flight at once, then every answer: the stored sequence, or the
        write's failure (refused, not answered within ``timeout``, not sent)."""
        sent: list[tuple[str, asyncio.Future[Reply]] | JetStreamError] = []
        try:
            for subject, data, headers in writes:
                try:
                    sent.append(self._send(subject, data, headers))
                except NatsError as exc:
                    sent.append(self._not_sent(subject, exc))
            futures = [item[1] for item in sent if isinstance(item, tuple)]
            if futures:
                self.conn.write_now()
                await asyncio.wait(futures, timeout=timeout)
            return [self._result(item, timeout) for item in sent]
        finally:
            for item in sent:
                if isinstance(item, tuple):
                    self._forget(*item)

    def _result(
        self, item: tuple[str, asyncio.Future[Reply]] | JetStreamError, timeout: float
    ) -> int | JetStreamError:
        if isinstance(item, JetStreamError):
            return item
        future = item[1]
        if not future.done():
            return JetStreamError(f"no answer from JetStream within {timeout:g} s")
        try:
            return ack_sequence(future.result())
        except JetStreamError as exc:
            return exc

    def _send(
        self, subject: str, data: bytes, headers: Mapping[str, str] | None
    ) -> tuple[str, asyncio.Future[Reply]]:
        conn = self.conn
        if not self._prefix:
            prefix = conn.new_inbox() + "."
            conn.subscribe(prefix + "*", self._on_reply, with_headers=True)
            self._prefix = prefix
        token = str(next(self._tokens))
        if headers:
            conn.publish_with_headers(
                subject, encode_headers(headers), data, reply=self._prefix + token
            )
        else:
            conn.publish(subject, data, reply=self._prefix + token)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        return token, future

    def _forget(self, token: str, future: asyncio.Future[Reply]) -> None:
        self._waiting.pop(token, None)
        future.cancel()  # no effect once answered

    def _not_sent(self, subject: str, exc: NatsError) -> JetStreamError:
        if isinstance(exc, ConnectionClosedError) or self.conn.is_closed:
            return ConnectionClosed(
                f"the connection to JetStream at {self.conn.client_url} is closed"
            )
        return JetStreamError(f"unable to send to {subject}: {exc}")

    def _on_reply(self, subject: str, reply: str, headers: bytes, payload: bytes) -> None:
        future = self._waiting.pop(subject[len(self._prefix) :], None)
        if future is None or future.done():
            return  # late: its request gave up
        status, fields = decode_headers(headers) if headers else (0, {})
        future.set_result(Reply(status, fields, payload))
