"""Request/reply over one wildcard inbox subscription, like the Go client's response mux.

The first request subscribes to ``_INBOX.<nuid>.*``; each request then only adds a token to
a dict and publishes with ``reply = _INBOX.<nuid>.<token>`` — no SUB/UNSUB per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from stanpkg.transport.errors import NatsTimeoutError, NoRespondersError
from stanpkg.transport.parser import MsgHandler, StatusHandler


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(NatsTimeoutError())


class RequestMux:
    def __init__(
        self,
        new_inbox: Callable[[], str],
        subscribe: Callable[[str, MsgHandler, StatusHandler], object],
        publish: Callable[[str, bytes, str], None],
    ) -> None:
        self._new_inbox = new_inbox
        self._subscribe = subscribe
        self._publish = publish
        self._prefix = ""
        self._waiters: dict[str, asyncio.Future[bytes]] = {}
        self._seq = 0

    async def request(self, subject: str, payload: bytes, timeout: float) -> bytes:
        if not self._prefix:
            prefix = self._new_inbox() + "."
            self._subscribe(prefix + "*", self._on_response, self._on_status)
            self._prefix = prefix
        self._seq += 1
        token = str(self._seq)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bytes] = loop.create_future()
        self._waiters[token] = waiter
        timer = loop.call_later(timeout, _expire, waiter)
        try:
            self._publish(subject, payload, self._prefix + token)
            return await waiter
        finally:
            timer.cancel()
            self._waiters.pop(token, None)

    def fail_all(self, error: Exception) -> None:
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(error)

    def _on_response(self, subject: str, reply: str, payload: bytes) -> None:
        waiter = self._waiters.get(subject[len(self._prefix) :])
        if waiter is not None and not waiter.done():
            waiter.set_result(payload)

    def _on_status(self, subject: str, status: int) -> None:
        waiter = self._waiters.get(subject[len(self._prefix) :])
        if status == 503 and waiter is not None and not waiter.done():
            waiter.set_exception(NoRespondersError())
