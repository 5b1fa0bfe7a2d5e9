"""Where the clustered store keeps things in JetStream: every name, subject and key.

The layout is on disk: a cluster started by an earlier release reads what it wrote, so
each function here produces exactly the strings it always has.

Layout version 3 (the ``layout`` record says so; :data:`LAYOUT_VERSION`):

* a cluster keeps its channels in a fixed number of shared streams
  (``cluster.channel_streams``, :data:`DEFAULT_CHANNEL_STREAMS`): stream k is
  :func:`shared_stream_name` (``STAN_<cluster>_ch<k>``) over :func:`shared_stream_subjects`
  (``_STAN.ch.<cluster>.<k>.>``), and a channel is the subject
  :func:`channel_subject` (``_STAN.ch.<cluster>.<k>.<channel>``) of one of them;
* a new channel's k is :func:`channel_stream_index` (a SHA-256 of its name, modulo the
  number of streams), and its record keeps it: the k read back from the record is the
  one used, so a cluster whose number of streams changes never moves a channel;
* records (the KV bucket :func:`records_bucket`): ``server``, ``client.<id>``,
  ``channel.<channel>`` (its stream), ``state.<channel>`` (its messages' figures),
  ``sub.<channel>.<id>`` and :data:`LAYOUT_KEY` (``record_codec.py`` has their bytes).

Version 2 is the same without packs (several messages in one stream message,
``record_codec``, written when ``cluster.pack_bytes`` is set): a cluster is recorded in
version 3 once a node that writes packs serves it, and stays there; releases that read
only version 2 refuse to serve it rather than misread packs.

Version 1, which releases before 2 wrote and :mod:`conversion` reads once, kept each
channel in a stream of its own (:func:`legacy_stream_name` over
:func:`legacy_stream_subject`) and had no ``layout`` record.

Cluster IDs, channel names and client IDs may hold any character, while JetStream allows
fewer, so three escaping schemes are in use, each for what its names must be:

* KV keys and subject tokens (:func:`kv_key`): KV keys allow ``[-/_=.a-zA-Z0-9]`` and the
  store reads channel names and client IDs back from its keys, so the escaping is
  reversible: a plain part as it is, any other as ``=`` + its base64url.
* Stream names (:func:`legacy_stream_name`): no ``.``, ``*``, ``>`` or blank, and readable
  in ``nats stream ls``; nothing is read back from them, so every character outside
  ``[A-Za-z0-9_-]`` becomes ``_`` and a hash of the exact (cluster ID, channel) pair,
  always appended, keeps channels that read alike apart.
* Bucket names and shared stream names (:func:`records_bucket`,
  :func:`shared_stream_name`): ``[A-Za-z0-9_-]`` only; the same readable substitution,
  but the hash (of the cluster ID) is appended only when the ID was not kept as it is, so
  that a plain cluster's bucket is ``STAN_<cluster>_state`` and its streams
  ``STAN_<cluster>_ch0`` ...

Channel names go into subjects as they are: a STAN channel is a literal subject already.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

from stanpkg.plan.options import BY_PATH, int_default

__all__ = [
    "DEFAULT_CHANNEL_STREAMS",
    "LAYOUT_KEY",
    "LAYOUT_VERSION",
    "LEASE_KEY",
    "LEASE_PROBE_HEADER",
    "MAX_CHANNEL_STREAMS",
    "PLAIN_LAYOUT_VERSION",
    "READABLE_LAYOUTS",
    "SERVER_KEY",
    "channel_key",
    "channel_stream_index",
    "channel_subject",
    "checked_key",
    "client_key",
    "cluster_token",
    "kv_key",
    "kv_key_parts",
    "kv_stream",
    "kv_subject",
    "lease_bucket",
    "lease_holder_subject",
    "legacy_moved_subject",
    "legacy_overlaps",
    "legacy_stream_name",
    "legacy_stream_subject",
    "migrated_subject",
    "node_subject",
    "records_bucket",
    "shared_stream_name",
    "shared_stream_prefix",
    "shared_stream_subjects",
    "state_key",
    "sub_key",
]

LAYOUT_VERSION = 3  # what the ``layout`` record of a cluster that may hold packs says
PLAIN_LAYOUT_VERSION = 2  # and of one whose messages are a stream message each
READABLE_LAYOUTS = (PLAIN_LAYOUT_VERSION, LAYOUT_VERSION)
# cluster.channel_streams' default and maximum, from the options table.
DEFAULT_CHANNEL_STREAMS = int_default("cluster.channel_streams")
MAX_CHANNEL_STREAMS = int(BY_PATH["cluster.channel_streams"].maximum or 0)

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
# On the lease key's values: the holder subject (lease_holder_subject) where the node named
# answers while its process lives. Absent from the values of earlier releases.
LEASE_PROBE_HEADER = "Stan-Lease-Probe"
LAYOUT_KEY = kv_key("layout")  # the layout's version and number of streams: ``layout``


def client_key(client_id: str) -> str:
    """The key of a client's record: ``client_key("me")`` is ``client.me``."""
    return kv_key("client", client_id)


def channel_key(channel: str) -> str:
    """The key of a channel's record: ``channel_key("orders")`` is ``channel.orders``,
    ``channel_key("a.b")`` is ``channel.=YS5i``."""
    return kv_key("channel", channel)


def state_key(channel: str) -> str:
    """The key of a channel's figures (messages, bytes, first and last sequence):
    ``state_key("orders")`` is ``state.orders``."""
    return kv_key("state", channel)


def sub_key(channel: str, sub_id: int) -> str:
    """The key of a subscription's record: ``sub_key("orders", 3)`` is ``sub.orders.3``."""
    return kv_key("sub", channel, str(sub_id))


# -- buckets and their streams -------------------------------------------------------------


def records_bucket(cluster_id: str) -> str:
    """The KV bucket of the cluster's records: ``records_bucket("test-cluster")`` is
    ``STAN_test-cluster_state``; an ID with other characters than ``[A-Za-z0-9_-]``, or
    longer than 60, gets a hash: ``records_bucket("a.b")`` is ``STAN_a_b_<10 hex>_state``."""
    return f"STAN_{_cluster_part(cluster_id)}_state"


def _cluster_part(cluster_id: str) -> str:
    """The cluster ID in a bucket's or a shared stream's name: itself when it is made of
    ``[A-Za-z0-9_-]`` and 60 characters at most, else readable with a hash."""
    safe = _readable(cluster_id)
    if safe != cluster_id or len(safe) > 60:
        # "a.b" and "a_b" read alike: a hash of the exact ID keeps their state apart.
        safe = f"{safe[:48]}_{hashlib.sha256(cluster_id.encode()).hexdigest()[:10]}"
    return safe


def lease_bucket(cluster_id: str) -> str:
    """The KV bucket of the cluster's lease: the records' + ``_lease``, so
    ``lease_bucket("test-cluster")`` is ``STAN_test-cluster_state_lease``."""
    return records_bucket(cluster_id) + "_lease"


def lease_holder_subject(cluster_id: str, node_id: str) -> str:
    """Where a node's lease connection answers while its process lives (standbys ask
    whether the holder they read is still there, lease.py): ``_STAN.lease.<cluster>.<node>``,
    each ID as one subject token (:func:`kv_key`), so ``lease_holder_subject("c1", "a")``
    is ``_STAN.lease.c1.a``."""
    return f"_STAN.lease.{cluster_token(cluster_id)}.{kv_key(node_id)}"


def kv_stream(bucket: str) -> str:
    """The stream JetStream keeps a KV bucket in: ``kv_stream("B")`` is ``KV_B``."""
    return f"KV_{bucket}"


def kv_subject(bucket: str, key: str = "") -> str:
    """The subject of a key of a KV bucket (its prefix when ``key`` is empty):
    ``kv_subject("B", "client.me")`` is ``$KV.B.client.me``, ``kv_subject("B")`` is
    ``$KV.B.``."""
    return f"$KV.{bucket}.{key}"


def node_subject(cluster_id: str, node_id: str) -> str:
    """Where a running node answers for its node ID: a second node of that ID is refused,
    and a stopping serving node finds which peers run (``handover.py``)."""
    return f"_STAN.node.{cluster_id}.{node_id}"


def migrated_subject(cluster_id: str) -> str:
    """Where ``stanpkg migrate`` tells the serving node which channels it added (a JSON
    list of names; the serving node loads them and answers ``+OK <n>`` or ``-ERR ...``),
    beside the reference's ``_STAN.raft.<cluster>.node.add``/``remove`` requests:
    ``migrated_subject("c1")`` is ``_STAN.raft.c1.migrated``."""
    return f"_STAN.raft.{cluster_id}.migrated"


# -- the channels' shared streams (layout 2) ----------------------------------------------


def cluster_token(cluster_id: str) -> str:
    """The cluster ID as one subject token (the KV key rule): ``cluster_token("c1")`` is
    ``c1``, ``cluster_token("a.b")`` is ``=YS5i``."""
    return kv_key(cluster_id)


def shared_stream_name(cluster_id: str, index: int) -> str:
    """Shared stream ``index`` of a cluster: ``shared_stream_name("my-cluster", 3)`` is
    ``STAN_my-cluster_ch3``; the cluster ID as in :func:`records_bucket`, so
    ``shared_stream_name("a.b", 0)`` is ``STAN_a_b_<10 hex>_ch0``."""
    return f"STAN_{_cluster_part(cluster_id)}_ch{index}"


def shared_stream_prefix(cluster_id: str, index: int) -> str:
    """What the subjects of shared stream ``index`` begin with, its channel's name after
    it: ``shared_stream_prefix("my-cluster", 3)`` is ``_STAN.ch.my-cluster.3.``."""
    return f"_STAN.ch.{cluster_token(cluster_id)}.{index}."


def shared_stream_subjects(cluster_id: str, index: int) -> str:
    """The subjects of shared stream ``index``: ``_STAN.ch.<cluster>.<index>.>``
    (``_STAN.ch`` is no subject of the STAN protocol)."""
    return shared_stream_prefix(cluster_id, index) + ">"


def channel_subject(cluster_id: str, index: int, channel: str) -> str:
    """A channel's subject in shared stream ``index``:
    ``channel_subject("my-cluster", 3, "orders.new")`` is
    ``_STAN.ch.my-cluster.3.orders.new`` (a JetStream consumer that does not know the
    index reads ``_STAN.ch.my-cluster.*.orders.new`` of the stream)."""
    return shared_stream_prefix(cluster_id, index) + channel


def channel_stream_index(channel: str, streams: int) -> int:
    """The shared stream of a new channel among ``streams``: the first 8 bytes of the
    SHA-256 of its name, big-endian, modulo ``streams`` (the same on every node and in
    every release; Python's ``hash`` is neither)."""
    digest = hashlib.sha256(channel.encode()).digest()
    return int.from_bytes(digest[:8], "big") % streams


# -- layout 1: a stream per channel (read by the conversion) ------------------------------


def legacy_stream_name(cluster_id: str, channel: str) -> str:
    """The stream of a channel in layout 1: ``STAN_<cluster>_<channel>_<hash>``, the
    cluster ID (40 characters at most) and the channel (120) made readable, and 10 hex
    digits of a hash of the exact pair: ``legacy_stream_name("c", "a.b")`` is
    ``STAN_c_a_b_<10 hex>``."""
    digest = hashlib.sha256(json.dumps([cluster_id, channel]).encode()).hexdigest()[:10]
    return f"STAN_{_readable(cluster_id)[:40] or '_'}_{_readable(channel)[:120] or '_'}_{digest}"


def legacy_stream_subject(cluster_id: str, channel: str) -> str:
    """The subject of a channel's stream in layout 1:
    ``legacy_stream_subject("my-cluster", "orders.new")`` is
    ``_STAN.ch.my-cluster.orders.new``."""
    return f"_STAN.ch.{cluster_token(cluster_id)}.{channel}"


def legacy_overlaps(channel: str, streams: int) -> bool:
    """Whether the layout-1 subject of ``channel`` is one of the subjects of a shared
    stream among ``streams`` (JetStream refuses two streams with overlapping subjects):
    a channel of two tokens at least whose first is such a stream's index, as ``3.x``'s
    ``_STAN.ch.<cluster>.3.x`` under ``_STAN.ch.<cluster>.3.>``."""
    first, dot, _ = channel.partition(".")
    return bool(dot) and first.isdigit() and str(int(first)) == first and int(first) < streams


def legacy_moved_subject(cluster_id: str, channel: str) -> str:
    """Where a layout-1 stream whose subject overlaps a shared stream's is moved while
    it is converted: ``_STAN.v1.<cluster>.<channel>`` (its messages stay; only new
    writes would go to the subject)."""
    return f"_STAN.v1.{cluster_token(cluster_id)}.{channel}"


def _readable(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text)
