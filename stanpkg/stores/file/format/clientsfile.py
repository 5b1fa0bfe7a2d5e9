"""``clients.dat``: typed records, 1 = add (``spb.ClientInfo``), 2 = delete (§4)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord
from stanpkg.stores.file.format.appender import RecordAppender
from stanpkg.stores.file.format.errors import InvalidRecordTypeError
from stanpkg.stores.file.format.framing import CrcFunc, crc32_func, encode_record
from stanpkg.stores.file.format.rewrite import rewrite_records
from stanpkg.stores.file.format.typed_replay import TypedFileReplay, replay_typed_records
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientsReplay(TypedFileReplay):
    """Live clients (insertion order) + the compaction bookkeeping of §4.1."""

    clients: dict[str, ClientRecord]
    delete_records: int


def replay_clients(
    path: str, *, crc: CrcFunc | None = None, truncate_bad_eof: bool = False, repair: bool = False
) -> ClientsReplay:
    """Replay adds/deletes in order; the survivors are the recovered clients.

    ``repair`` cuts a zero tail off the file (the reference's recovery write).
    """
    clients: dict[str, ClientRecord] = {}
    deletes = 0

    def apply(offset: int, rec_type: int, payload: bytes) -> None:
        nonlocal deletes
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

    replayed = replay_typed_records(
        path, apply, crc=crc, truncate_bad_eof=truncate_bad_eof, repair=repair, what="client"
    )
    return ClientsReplay(clients=clients, delete_records=deletes, **replayed.bookkeeping())


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
