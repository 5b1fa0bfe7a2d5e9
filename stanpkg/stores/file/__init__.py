"""The FILE store: Go-compatible on-disk datastore behind the store interface.

The on-disk format itself (framing, slices, index, clients/subs/server files) lives in
:mod:`stanpkg.stores.file.format`; this package is the running store built on it.
"""

from stanpkg.stores.file.config import CompactionPolicy, FileStoreConfig, config_from_plan
from stanpkg.stores.file.store import FileStore

__all__ = ["CompactionPolicy", "FileStore", "FileStoreConfig", "config_from_plan"]
