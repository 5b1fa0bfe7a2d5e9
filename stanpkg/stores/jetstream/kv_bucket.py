"""JetStream key-value buckets, spoken by hand on the store's one connection.

A bucket is the stream ``KV_<bucket>`` over ``$KV.<bucket>.>`` keeping the last message
of each key; a key's revision is that message's stream sequence. A read is a direct get
of the key's last message (any replica answers it), a write a publish expecting the key's
revision (``Nats-Expected-Last-Subject-Sequence``: 0 for a key without one), a deletion
an empty message marked ``KV-Operation: DEL``. That is all the lease needs, a few headers
on the JetStream API that ``connection`` speaks already: nats-py's KeyValue would bring
a second connection with its own reconnects and its own errors.

Buckets are created with the configuration nats-py's ``create_key_value`` sends (earlier
releases created them through it), and a bucket that exists is taken as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stanpkg.stores.jetstream.connection import (
    API_TIMEOUT,
    BATCH_WRONG_LAST_SEQUENCE,
    NO_RESPONDERS,
    STREAM_NAME_IN_USE,
    STREAM_NOT_FOUND,
    WRONG_LAST_SEQUENCE,
    JetStreamError,
    Pipeline,
    ack_sequence,
    api_failure,
    js_api,
)
from stanpkg.stores.jetstream.layout import checked_key, kv_stream, kv_subject
from stanpkg.transport.connection import NatsConnection

__all__ = [
    "DELETE",
    "KV_OPERATION",
    "REMOVED",
    "KvBucket",
    "WrongRevision",
    "bucket_config",
    "ensure_bucket",
]

KV_OPERATION = "KV-Operation"  # on a deletion marker
DELETE = "DEL"
REMOVED = ("DEL", "PURGE")  # the KV-Operation of a key's deletion marker
EXPECTED_REVISION = "Nats-Expected-Last-Subject-Sequence"
NOT_FOUND = 404  # the status of a direct get of a key without a message
DUPLICATE_WINDOW_NS = 120 * 10**9


class WrongRevision(JetStreamError):
    """A compare-and-set failed: the key is not at the revision the write expected."""


def bucket_config(bucket: str, replicas: int) -> dict[str, Any]:
    """The stream of a bucket keeping one value per key, as nats-py 2.16's
    ``create_key_value(bucket=, history=1, replicas=, direct=True)`` sends it: JetStream
    accepts the same configuration again, so that several nodes may create a bucket at
    once. Direct gets: any replica answers a read, also while the stream elects."""
    return {
        "name": kv_stream(bucket),
        "subjects": [kv_subject(bucket) + ">"],
        "max_consumers": -1,
        "max_msgs": -1,
        "discard": "new",
        "discard_new_per_subject": False,
        "max_msgs_per_subject": 1,  # history 1
        "num_replicas": replicas,
        "no_ack": False,
        "duplicate_window": DUPLICATE_WINDOW_NS,
        "sealed": False,
        "deny_delete": True,
        "deny_purge": False,
        "allow_rollup_hdrs": True,
        "allow_direct": True,
        "allow_msg_ttl": True,
        "max_age": 0,
    }


async def ensure_bucket(conn: NatsConnection, bucket: str, *, replicas: int) -> None:
    """Open the bucket, or create it (:func:`bucket_config`) when it does not exist; one
    that exists is taken with its configuration. JetStreamError when JetStream refuses
    or does not answer."""
    name = kv_stream(bucket)
    answer = await js_api(conn, f"STREAM.INFO.{name}", None)
    error = answer.get("error")
    if error and error.get("err_code") == STREAM_NOT_FOUND:
        answer = await js_api(conn, f"STREAM.CREATE.{name}", bucket_config(bucket, replicas))
        error = answer.get("error")
        if error and error.get("err_code") == STREAM_NAME_IN_USE:
            # Created meanwhile by another node, with another configuration (another
            # release's): taken as it is.
            answer = await js_api(conn, f"STREAM.INFO.{name}", None)
            error = answer.get("error")
    if error:
        raise api_failure(f"open the KV bucket {bucket}", answer)
    if int(answer.get("config", {}).get("max_msgs_per_subject", 0)) < 1:
        raise JetStreamError(f"stream {name} is no KV bucket (it keeps no message per key)")


class KvBucket:
    """The keys of one bucket: read, created, updated and deleted by revision."""

    def __init__(self, conn: NatsConnection, bucket: str) -> None:
        self.bucket = bucket
        self._pipeline = Pipeline(conn)
        self._direct_get = f"$JS.API.DIRECT.GET.{kv_stream(bucket)}"

    @classmethod
    async def ensure(cls, conn: NatsConnection, bucket: str, *, replicas: int) -> KvBucket:
        """The bucket, created if missing (:func:`ensure_bucket`)."""
        await ensure_bucket(conn, bucket, replicas=replicas)
        return cls(conn, bucket)

    async def get(self, key: str, *, timeout: float = API_TIMEOUT) -> tuple[int, bytes] | None:
        """(revision, value) of the key; None when it has none or was deleted."""
        entry = await self.entry(key, timeout=timeout)
        return None if entry is None else (entry[0], entry[1])

    async def entry(
        self, key: str, *, timeout: float = API_TIMEOUT
    ) -> tuple[int, bytes, dict[str, str]] | None:
        """(revision, value, headers) of the key; None when it has none or was deleted."""
        last = await self._last(key, timeout)
        if last is None or last[2]:
            return None
        return last[0], last[1], last[3]

    async def create(
        self, key: str, value: bytes, *, headers: Mapping[str, str] | None = None
    ) -> int:
        """Write the key's first value, or its first after a deletion: its revision.
        WrongRevision when the key has a value."""
        try:
            return await self._write(key, value, {**(headers or {}), EXPECTED_REVISION: "0"})
        except WrongRevision:
            last = await self._last(key, API_TIMEOUT)
            if last is None or not last[2]:
                raise
            # Over its deletion marker.
            return await self.update(key, value, last=last[0], headers=headers)

    async def update(
        self, key: str, value: bytes, *, last: int, headers: Mapping[str, str] | None = None
    ) -> int:
        """Write the key if it is at revision ``last``: its new revision. WrongRevision
        when it is not. ``headers``: stored with the value."""
        return await self._write(key, value, {**(headers or {}), EXPECTED_REVISION: str(last)})

    async def delete(self, key: str, *, last: int = 0) -> None:
        """Delete the key; only if it is at revision ``last`` when that is not 0
        (WrongRevision when it is not)."""
        headers = {KV_OPERATION: DELETE}
        if last > 0:
            headers[EXPECTED_REVISION] = str(last)
        await self._write(key, b"", headers)

    async def _last(
        self, key: str, timeout: float
    ) -> tuple[int, bytes, bool, dict[str, str]] | None:
        """(revision, value, deleted, headers) of the key's last message; None when it has
        none."""
        subject = kv_subject(self.bucket, checked_key(key))
        request = json.dumps({"last_by_subj": subject}).encode()
        reply = await self._pipeline.request(self._direct_get, request, timeout=timeout)
        if reply.status == NOT_FOUND:
            return None
        if reply.status:
            absent = " (no stream answers it)" if reply.status == NO_RESPONDERS else ""
            raise JetStreamError(
                f"{self._direct_get} answered with status {reply.status}{absent}",
                status=reply.status,
            )
        revision = int(reply.headers.get("Nats-Sequence", 0))
        return revision, reply.data, reply.headers.get(KV_OPERATION) in REMOVED, reply.headers

    async def _write(self, key: str, value: bytes, headers: dict[str, str]) -> int:
        subject = kv_subject(self.bucket, checked_key(key))
        reply = await self._pipeline.request(subject, value, headers)
        try:
            return ack_sequence(reply)
        except JetStreamError as exc:
            if exc.err_code in (WRONG_LAST_SEQUENCE, BATCH_WRONG_LAST_SEQUENCE):
                raise WrongRevision(f"{subject}: {exc}", exc.err_code) from None
            raise
