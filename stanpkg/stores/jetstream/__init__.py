"""The clustered store on JetStream: its one connection and the JetStream API spoken on it
(``connection``), key-value buckets (``kv_bucket``), the lease that decides which node serves
(``lease``), the replicated records in a KV bucket (``records_map``), and the channels as
subjects of a fixed number of shared streams (``shared_streams``, ``channel_log``,
``stream_writer``, ``stream_reader``, ``stream_management``; a cluster of the earlier
stream-per-channel layout is converted by ``conversion``); every name, key and record
format in JetStream is ``layout``'s and ``record_codec``'s. Everything replicated lives in
JetStream; stanpkg runs no consensus of its own (docs/clustering.md)."""

from stanpkg.stores.jetstream.connection import JetStreamError
from stanpkg.stores.jetstream.kv_bucket import KvBucket
from stanpkg.stores.jetstream.layout import kv_key, kv_key_parts
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.records_map import ReplicatedMap

__all__ = ["JetStreamError", "KvBucket", "Lease", "ReplicatedMap", "kv_key", "kv_key_parts"]
