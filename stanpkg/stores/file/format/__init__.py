"""FILE store on-disk format (spec/filestore.md): codecs, readers, writers, the channel
recovery and the read API.

The running store (:mod:`stanpkg.stores.file`) is built on this package, which never
imports it; the data pipeline uses ``open_datastore`` directly. Records are the store
interface's (:mod:`stanpkg.stores.base`), limits the plan's.
"""

from stanpkg.stores.file.format.channel import (
    ChannelInfo,
    ChannelJob,
    ChannelRecoveryError,
    LogLine,
    recover_channel,
)
from stanpkg.stores.file.format.clientsfile import (
    ClientsFileWriter,
    ClientsReplay,
    compact_clients_file,
    replay_clients,
)
from stanpkg.stores.file.format.datastore import Datastore, open_datastore
from stanpkg.stores.file.format.errors import (
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
from stanpkg.stores.file.format.framing import IEEE_POLY, RecordScan, check_version, crc32_func
from stanpkg.stores.file.format.index import IndexEntry, encode_index_record, summarize_index
from stanpkg.stores.file.format.limits import NO_LIMITS, LimitsSpec, apply_limits, limits_for
from stanpkg.stores.file.format.msgwriter import (
    ChannelWriter,
    MessageSliceWriter,
    SliceLimits,
    auto_slice_limits,
)
from stanpkg.stores.file.format.reader import SliceReader, StoredMessage
from stanpkg.stores.file.format.serverfile import read_server_file, write_server_file
from stanpkg.stores.file.format.slices import SliceInfo, discover_slices, recover_slice
from stanpkg.stores.file.format.subsfile import (
    SubsFileWriter,
    SubsReplay,
    compact_subs_file,
    replay_subs,
)
from stanpkg.stores.file.format.truncation import (
    acquire_truncate_witness,
    clear_truncate_witness,
)

__all__ = [
    "IEEE_POLY",
    "NO_LIMITS",
    "ChannelInfo",
    "ChannelJob",
    "ChannelRecoveryError",
    "ChannelWriter",
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
    "LimitsSpec",
    "LogLine",
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
    "limits_for",
    "open_datastore",
    "read_server_file",
    "recover_channel",
    "recover_slice",
    "replay_clients",
    "replay_subs",
    "summarize_index",
    "write_server_file",
]
