"""What every part of one FILE store shares: configuration, log, open-file pool, syncer."""

from __future__ import annotations

from dataclasses import dataclass

from stanpkg.stores.base import StoreLog
from stanpkg.stores.file.archive import SliceRemover
from stanpkg.stores.file.config import FileStoreConfig
from stanpkg.stores.file.format.framing import CrcFunc
from stanpkg.stores.file.handles import HandlePool
from stanpkg.stores.file.syncing import Syncer

__all__ = ["StoreContext"]


@dataclass(eq=False)
class StoreContext:
    config: FileStoreConfig
    log: StoreLog
    crc: CrcFunc  # always used to write
    check_crc: CrcFunc | None  # used to verify reads (None when do_crc is off)
    pool: HandlePool
    syncer: Syncer
    remover: SliceRemover
