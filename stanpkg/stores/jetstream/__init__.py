"""The clustered store on JetStream: the connection (``link``), the lease that decides
which node serves (``lease``), the replicated records in KV buckets (``kvmap``), and one
stream per channel (``stream_writer``, ``stream_reader``, ``stream_management``); every
name, key and record format in JetStream is ``layout``'s and ``records``'. Everything
replicated lives in JetStream; stanpkg runs no consensus of its own
(docs/clustering.md)."""

from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.layout import kv_key, kv_key_parts
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.link import JetStreamLink

__all__ = ["JetStreamLink", "Lease", "ReplicatedMap", "kv_key", "kv_key_parts"]
