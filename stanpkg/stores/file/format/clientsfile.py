"""``clients.dat``: typed records, 1 = add (``spb.ClientInfo``), 2 = delete (§4)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord
from stanpkg.stores.file.format.appender import RecordAppender
from stanpkg.stores.file.format.errors import InvalidRecordTypeError, RecordDecodeError
from stanpkg.stores.file.format.framing import (
    CrcFunc,
    RecordScan,
    check_version,
    crc32_func,
    encode_record,
)
from stanpkg.stores.file.format.rewrite import rewrite_records
from stanpkg.stores.file.format.truncation import truncate_file, truncate_or_raise
from stanpkg.stores.record_protos import client_from_proto, client_to_proto

__all__ = [
    "CLIENTS_FILE",
    "CLIENT_ADD",
    "CLIENT_DELETE",
    "ClientsFileWriter",
    "ClientsReplay",
    "compact_clients_file",
    "replay_clients",
]

CLIENTS_FILE = "clients.dat"
CLIENT_ADD = 1
CLIENT_DELETE = 2


@dataclass(frozen=True, slots=True)
class ClientsReplay:
    """Live clients (insertion order) + the compaction bookkeeping of §4.1."""

    clients: dict[str, ClientRecord]
    delete_records: int
    records_size: int  # bytes of records (version header excluded)
    end: int  # offset after the last good record: appends go there
    zero_tail_at: int | None
    truncated_at: int | None  # set when truncate_bad_eof cut a bad record
    # The reference's log lines of that truncation (empty when nothing was cut).
    truncation_log: tuple[str, ...] = ()


def replay_clients(
    path: str, *, crc: CrcFunc | None = None, truncate_bad_eof: bool = False, repair: bool = False
) -> ClientsReplay:
    """Replay adds/deletes in order; the survivors are the recovered clients.

    ``repair`` cuts a zero tail off the file (the reference's recovery write).
    """
    with open(path, "rb") as f:
        data = f.read()
    check_version(data, path)
    clients: dict[str, ClientRecord] = {}
    deletes = 0
    scan = RecordScan(data, path, typed=True, crc=crc)
    with truncate_or_raise(path, truncate_bad_eof) as truncation:
        for offset, rec_type, start, size in scan:
            payload = data[start : start + size]
            try:
                if rec_type == CLIENT_ADD:
                    info = spb.ClientInfo.FromString(payload)
                    clients.pop(info.ID, None)
                    clients[info.ID] = client_from_proto(info)
                elif rec_type == CLIENT_DELETE:
                    clients.pop(spb.ClientDelete.FromString(payload).ID, None)
                    deletes += 1
                else:
                    raise InvalidRecordTypeError(
                        f"invalid client record type: {rec_type}", path=path, offset=offset
                    )
            except DecodeError as exc:
                raise RecordDecodeError(
                    f"invalid client record: {exc}", path=path, offset=offset
                ) from None
    if repair and scan.zero_tail_at is not None:
        truncate_file(path, scan.zero_tail_at)
    return ClientsReplay(
        clients=clients,
        delete_records=deletes,
        records_size=scan.end - 4,
        end=scan.end,
        zero_tail_at=scan.zero_tail_at,
        truncated_at=truncation.offset,
        truncation_log=tuple(truncation.log),
    )


class ClientsFileWriter(RecordAppender):
    """Appends add/delete records; unbuffered by default, like the reference."""

    def __init__(
        self,
        path: str,
        *,
        crc: CrcFunc | None = None,
        buffer_size: int = 0,
        truncate_at: int | None = None,
    ) -> None:
        super().__init__(path, crc=crc, buffer_size=buffer_size, truncate_at=truncate_at)

    def add(self, client: ClientRecord) -> int:
        return self.append(client_to_proto(client).SerializeToString(), CLIENT_ADD)

    def delete(self, client_id: str) -> int:
        return self.append(spb.ClientDelete(ID=client_id).SerializeToString(), CLIENT_DELETE)


def compact_clients_file(
    root: str, clients: Iterable[ClientRecord], *, crc: CrcFunc | None = None
) -> int:
    """Rewrite ``clients.dat`` with one add record per live client (temp file + rename).

    Returns the new records size. Like the reference: flushed, not fsync'ed.
    """
    crc = crc or crc32_func()
    out = bytearray()
    for client in clients:
        out += encode_record(client_to_proto(client).SerializeToString(), crc, CLIENT_ADD)
    rewrite_records(root, CLIENTS_FILE, os.path.join(root, CLIENTS_FILE), out, fsync=False)
    return len(out)
