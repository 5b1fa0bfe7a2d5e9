"""FILE store on-disk format (spec/filestore.md): codecs, readers, writers, read API.

The store itself (stanpkg.stores.base) sits on top of this package; the data pipeline uses
``open_datastore`` directly.
"""

from stanpkg.stores.filestore.clientsfile import (
    ClientRecord,
    ClientsFileWriter,
    ClientsReplay,
    compact_clients_file,
    replay_clients,
)
from stanpkg.stores.filestore.datastore import ChannelInfo, Datastore, open_datastore
from stanpkg.stores.filestore.errors import (
    CorruptedRecordError,
    FileStoreError,
    FileVersionError,
    IndexFileError,
    IndexMismatchError,
    IndexVerificationError,
    InvalidRecordTypeError,
    InvalidSliceNameError,
    MessageDecryptionError,
    RecordDecodeError,
    RecordError,
    ServerFileSizeError,
    TruncateWitnessError,
    UnexpectedEOFError,
)
from stanpkg.stores.filestore.framing import IEEE_POLY, RecordScan, check_version, crc32_func
from stanpkg.stores.filestore.index import IndexEntry, encode_index_record, summarize_index
from stanpkg.stores.filestore.limits import ChannelLimits, apply_limits
from stanpkg.stores.filestore.msgwriter import (
    ChannelWriter,
    MessageSliceWriter,
    SliceLimits,
    auto_slice_limits,
)
from stanpkg.stores.filestore.reader import SliceReader, StoredMessage
from stanpkg.stores.filestore.serverfile import read_server_file, write_server_file
from stanpkg.stores.filestore.slices import SliceInfo, discover_slices, recover_slice
from stanpkg.stores.filestore.subsfile import (
    SubscriptionRecord,
    SubsFileWriter,
    SubsReplay,
    compact_subs_file,
    replay_subs,
)
from stanpkg.stores.filestore.truncation import (
    acquire_truncate_witness,
    clear_truncate_witness,
)

__all__ = [
    "IEEE_POLY",
    "ChannelInfo",
    "ChannelLimits",
    "ChannelWriter",
    "ClientRecord",
    "ClientsFileWriter",
    "ClientsReplay",
    "CorruptedRecordError",
    "Datastore",
    "FileStoreError",
    "FileVersionError",
    "IndexEntry",
    "IndexFileError",
    "IndexMismatchError",
    "IndexVerificationError",
    "InvalidRecordTypeError",
    "InvalidSliceNameError",
    "MessageDecryptionError",
    "MessageSliceWriter",
    "RecordDecodeError",
    "RecordError",
    "RecordScan",
    "ServerFileSizeError",
    "SliceInfo",
    "SliceLimits",
    "SliceReader",
    "StoredMessage",
    "SubsFileWriter",
    "SubsReplay",
    "SubscriptionRecord",
    "TruncateWitnessError",
    "UnexpectedEOFError",
    "acquire_truncate_witness",
    "apply_limits",
    "auto_slice_limits",
    "check_version",
    "clear_truncate_witness",
    "compact_clients_file",
    "compact_subs_file",
    "crc32_func",
    "discover_slices",
    "encode_index_record",
    "open_datastore",
    "read_server_file",
    "recover_slice",
    "replay_clients",
    "replay_subs",
    "summarize_index",
    "write_server_file",
]
