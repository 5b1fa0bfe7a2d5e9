"""The clustered store on JetStream: its one connection and the JetStream API spoken on it
(``jetstream_api``), key-value buckets (``kv``), the lease that decides which node serves
(``lease``), the replicated records in a KV bucket (``kvmap``), and the channels as
subjects of a fixed number of shared streams (``shared_streams``, ``channel_log``,
``stream_writer``, ``stream_reader``, ``stream_management``; a cluster of the earlier
stream-per-channel layout is converted by ``conversion``); every name, key and record
format in JetStream is ``layout``'s and ``records``'. Everything replicated lives in
JetStream; stanpkg runs no consensus of its own (docs/clustering.md)."""

from stanpkg.stores.jetstream.jetstream_api import JetStreamError
from stanpkg.stores.jetstream.kv import KvBucket
from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.layout import kv_key, kv_key_parts
from stanpkg.stores.jetstream.lease import Lease

__all__ = ["JetStreamError", "KvBucket", "Lease", "ReplicatedMap", "kv_key", "kv_key_parts"]
