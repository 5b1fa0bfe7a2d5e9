"""Where the clustered store keeps things in JetStream: every name, subject and key.

The layout is on disk: a cluster started by an earlier release reads what it wrote, so
each function here produces exactly the strings it always has. Cluster IDs, channel
names and client IDs may hold any character, while JetStream allows fewer, so three
escaping schemes are in use, each for what its names must be:

* KV keys and subject tokens (:func:`kv_key`): KV keys allow ``[-/_=.a-zA-Z0-9]`` and the
  store reads channel names and client IDs back from its keys, so the escaping is
  reversible: a plain part as it is, any other as ``=`` + its base64url.
* Stream names (:func:`stream_name`): no ``.``, ``*``, ``>`` or blank, and readable in
  ``nats stream ls``; nothing is read back from them, so every character outside
  ``[A-Za-z0-9_-]`` becomes ``_`` and a hash of the exact (cluster ID, channel) pair,
  always appended, keeps channels that read alike apart.
* Bucket names (:func:`records_bucket`): ``[A-Za-z0-9_-]`` only; the same readable
  substitution, but the hash (of the cluster ID) is appended only when the ID was not
  kept as it is, so that a plain cluster's bucket is ``STAN_<cluster>_state``.

Channel names go into subjects as they are: a STAN channel is a literal subject already.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

__all__ = [
    "LEASE_KEY",
    "SERVER_KEY",
    "channel_key",
    "checked_key",
    "client_key",
    "cluster_token",
    "kv_key",
    "kv_key_parts",
    "kv_stream",
    "kv_subject",
    "lease_bucket",
    "records_bucket",
    "stream_name",
    "stream_subject",
    "sub_key",
]

_PLAIN = re.compile(r"[a-zA-Z0-9][-_a-zA-Z0-9]*")  # kept as is, for readable keys
_VALID_KEY = re.compile(r"[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*")
_ENCODED = "="  # marks a base64url part; never the first character of a plain part
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")  # what a readable name replaces by "_"

# -- KV keys (reversible) ------------------------------------------------------------------


def kv_key(*parts: str) -> str:
    """A valid KV key for any strings: plain parts as they are, the others (and empty
    ones) as ``=`` + base64url, joined by '.'. ``kv_key("client", "me")`` is
    ``client.me``, ``kv_key("channel", "a.b")`` is ``channel.=YS5i``."""
    if not parts:
        raise ValueError("a KV key needs at least one part")
    return ".".join(part if _PLAIN.fullmatch(part) else _encode(part) for part in parts)


def kv_key_parts(key: str) -> tuple[str, ...]:
    """The inverse of :func:`kv_key`: ``kv_key_parts("channel.=YS5i")`` is
    ``("channel", "a.b")``."""
    return tuple(
        _decode(token) if token.startswith(_ENCODED) else token for token in key.split(".")
    )


def checked_key(key: str) -> str:
    """``key`` itself when it is a valid KV key, else ValueError: keys become subjects,
    and a bad one would write elsewhere or fail the whole batch. ``checked_key("a.b")``
    is ``a.b``; ``checked_key("a b")`` raises."""
    if not _VALID_KEY.fullmatch(key):
        raise ValueError(f"invalid KV key {key!r} (make keys with kv_key)")
    return key


def _encode(part: str) -> str:
    return _ENCODED + base64.urlsafe_b64encode(part.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    raw = token[len(_ENCODED) :]
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()


# -- the records' keys ---------------------------------------------------------------------

SERVER_KEY = kv_key("server")  # the server info: ``server``
LEASE_KEY = "leader"  # the lease bucket's one key, holding the serving node's ID


def client_key(client_id: str) -> str:
    """The key of a client's record: ``client_key("me")`` is ``client.me``."""
    return kv_key("client", client_id)


def channel_key(channel: str) -> str:
    """The key of a channel's record: ``channel_key("orders")`` is ``channel.orders``,
    ``channel_key("a.b")`` is ``channel.=YS5i``."""
    return kv_key("channel", channel)


def sub_key(channel: str, sub_id: int) -> str:
    """The key of a subscription's record: ``sub_key("orders", 3)`` is ``sub.orders.3``."""
    return kv_key("sub", channel, str(sub_id))


# -- buckets and their streams -------------------------------------------------------------


def records_bucket(cluster_id: str) -> str:
    """The KV bucket of the cluster's records: ``records_bucket("test-cluster")`` is
    ``STAN_test-cluster_state``; an ID with other characters than ``[A-Za-z0-9_-]``, or
    longer than 60, gets a hash: ``records_bucket("a.b")`` is ``STAN_a_b_<10 hex>_state``."""
    safe = _readable(cluster_id)
    if safe != cluster_id or len(safe) > 60:
        # "a.b" and "a_b" read alike: a hash of the exact ID keeps their state apart.
        safe = f"{safe[:48]}_{hashlib.sha256(cluster_id.encode()).hexdigest()[:10]}"
    return f"STAN_{safe}_state"


def lease_bucket(cluster_id: str) -> str:
    """The KV bucket of the cluster's lease: the records' + ``_lease``, so
    ``lease_bucket("test-cluster")`` is ``STAN_test-cluster_state_lease``."""
    return records_bucket(cluster_id) + "_lease"


def kv_stream(bucket: str) -> str:
    """The stream JetStream keeps a KV bucket in: ``kv_stream("B")`` is ``KV_B``."""
    return f"KV_{bucket}"


def kv_subject(bucket: str, key: str = "") -> str:
    """The subject of a key of a KV bucket (its prefix when ``key`` is empty):
    ``kv_subject("B", "client.me")`` is ``$KV.B.client.me``, ``kv_subject("B")`` is
    ``$KV.B.``."""
    return f"$KV.{bucket}.{key}"


# -- channels' streams ---------------------------------------------------------------------


def cluster_token(cluster_id: str) -> str:
    """The cluster ID as one subject token (the KV key rule): ``cluster_token("c1")`` is
    ``c1``, ``cluster_token("a.b")`` is ``=YS5i``."""
    return kv_key(cluster_id)


def stream_name(cluster_id: str, channel: str) -> str:
    """The stream of a channel: ``STAN_<cluster>_<channel>_<hash>``, the cluster ID (40
    characters at most) and the channel (120) made readable, and 10 hex digits of a hash
    of the exact pair: ``stream_name("c", "a.b")`` is ``STAN_c_a_b_<10 hex>``."""
    digest = hashlib.sha256(json.dumps([cluster_id, channel]).encode()).hexdigest()[:10]
    return f"STAN_{_readable(cluster_id)[:40] or '_'}_{_readable(channel)[:120] or '_'}_{digest}"


def stream_subject(cluster_id: str, channel: str) -> str:
    """The subject of a channel's stream: ``stream_subject("my-cluster", "orders.new")``
    is ``_STAN.ch.my-cluster.orders.new`` (``_STAN.ch`` is no subject of the STAN
    protocol; a consumer finds a cluster's channels with ``_STAN.ch.<cluster>.>``)."""
    return f"_STAN.ch.{cluster_token(cluster_id)}.{channel}"


def _readable(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text)
