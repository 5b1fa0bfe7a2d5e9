"""``clients.dat`` (filestore.md §4): unbuffered add/delete records and their compaction."""

from __future__ import annotations

from collections.abc import Callable

from stanpkg.stores.base import ClientRecord, StoreError
from stanpkg.stores.file.compaction import CompactionSchedule
from stanpkg.stores.file.format.clientsfile import (
    ClientsFileWriter,
    ClientsReplay,
    compact_clients_file,
)
from stanpkg.stores.file.format.errors import FileStoreError
from stanpkg.stores.file.handles import AppendFile
from stanpkg.stores.file.store_context import StoreContext

__all__ = ["ClientsFile"]


class ClientsFile:
    def __init__(self, env: StoreContext, path: str, replay: ClientsReplay | None = None) -> None:
        self.env = env
        self.path = path
        self._file: AppendFile[ClientsFileWriter] = AppendFile(
            env.pool, path, lambda: ClientsFileWriter(path, crc=env.crc)
        )
        self.clients: dict[str, ClientRecord] = {}
        self._deletes = self._size = 0
        if replay is not None:
            self.clients = dict(replay.clients)
            self._deletes = replay.delete_records
            self._size = replay.records_size
        self._compaction = CompactionSchedule(env.config.compaction)

    def add(self, record: ClientRecord) -> None:
        self._write(lambda w: w.add(record))
        self.clients.pop(record.id, None)
        self.clients[record.id] = record

    def delete(self, client_id: str) -> None:
        self._write(lambda w: w.delete(client_id))
        self.clients.pop(client_id, None)
        self._deletes += 1
        self._maybe_compact()

    def _write(self, op: Callable[[ClientsFileWriter], int]) -> None:
        try:
            self._size += self._file.append_with(op)
        except OSError as exc:
            raise StoreError(f"unable to write client record: {exc}") from exc
        self.env.syncer.mark_dirty(self._file)

    def _maybe_compact(self) -> None:
        deletes = self._deletes
        if not self._compaction.due(self._size, deletes, deletes + len(self.clients)):
            return
        self._file.close()  # appends must go to the new file after the rename
        try:
            self._size = compact_clients_file(
                self.env.config.root, self.clients.values(), crc=self.env.crc
            )
        except (OSError, FileStoreError) as exc:
            self.env.log.error(f"Unable to compact clients file: {exc}")
            return
        self._deletes = 0

    def close(self) -> None:
        self.env.syncer.sync_now([self._file])
        self._file.close()
