"""The FILE store: the Go server's on-disk layout (spec/filestore.md) behind the store
interface of :mod:`stanpkg.stores.base`.

Opening (at ``create_store`` time, before NATS starts) creates the root, takes the
directory lock and handles the ``truncate_bad_eof`` witness; ``recover`` then reads
``server.dat``, ``clients.dat`` and every channel directory, in the reference's order and
with its error texts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterable

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import (
    BaseStore,
    ChannelStore,
    ClientRecord,
    LockableStore,
    RecoveredChannel,
    RecoveredState,
    ServerInfo,
    StoreError,
    StoreLog,
)
from stanpkg.stores.file import recovery
from stanpkg.stores.file.archive import SliceRemover
from stanpkg.stores.file.clients import ClientsFile
from stanpkg.stores.file.config import FileStoreConfig
from stanpkg.stores.file.format.channel import (
    ChannelInfo,
    ChannelJob,
    LogLine,
    truncation_lines,
)
from stanpkg.stores.file.format.clientsfile import CLIENTS_FILE, ClientsReplay, replay_clients
from stanpkg.stores.file.format.errors import CorruptedRecordError, FileStoreError
from stanpkg.stores.file.format.framing import (
    DIR_MODE,
    VERSION_HEADER,
    crc32_func,
    private_opener,
)
from stanpkg.stores.file.format.serverfile import SERVER_FILE, read_server_file, write_server_file
from stanpkg.stores.file.format.truncation import (
    TRUNCATE_WITNESS,
    acquire_truncate_witness,
    clear_truncate_witness,
)
from stanpkg.stores.file.handles import HandlePool
from stanpkg.stores.file.lock import RootDirLock
from stanpkg.stores.file.messages import FileMessageStore
from stanpkg.stores.file.recovery import (
    RecoveryProgress,
    record_error_lines,
    recover_channels,
    store_size,
)
from stanpkg.stores.file.store_context import StoreContext
from stanpkg.stores.file.subscriptions import FileSubscriptionStore
from stanpkg.stores.file.syncing import Syncer

__all__ = ["FileStore"]

TICK_SECONDS = 1.0  # background work: idle files, auto-sync
IDLE_CLOSE_SECONDS = 1.0  # files of old slices unused this long are closed
SUMMARY_AFTER_SECONDS = 1.0  # recoveries longer than this log a summary line


def _try_lock(lock: RootDirLock, root: str) -> bool:
    """False when another server holds it; StoreError when it cannot be tried."""
    try:
        return lock.try_acquire()
    except OSError as exc:
        raise StoreError(f'unable to lock the store directory "{root}": {exc}') from exc


class FileStore(BaseStore, LockableStore):
    type_name = "FILE"

    def __init__(self, config: FileStoreConfig, log: StoreLog) -> None:
        super().__init__(config.store_limits, log)
        root = config.root
        if not root:
            raise StoreError("for FILE stores, root directory must be specified")
        # A start refused before recovery ends (close() without a successful recover())
        # leaves the directory as it found it: what this store created goes again.
        self._created_root = not os.path.isdir(root)
        self._recovered = False
        try:
            os.makedirs(root, mode=DIR_MODE, exist_ok=True)
        except OSError as exc:
            # Go's wording of the cause: "mkdir <path>: permission denied"
            cause = f"mkdir {exc.filename or root}: {(exc.strerror or str(exc)).lower()}"
            raise StoreError(f"unable to create the root directory [{root}]: {cause}") from exc
        options = config.options
        self._lock = RootDirLock(root)
        if config.lock_root and not _try_lock(self._lock, root):
            raise StoreError(
                f'the store directory "{root}" is in use by another server '
                f'(lock file "{self._lock.path}" is held)'
            )
        try:
            if options.truncate_bad_eof:
                acquire_truncate_witness(root)
            else:
                clear_truncate_witness(root)
        except (FileStoreError, OSError) as exc:
            self._lock.abandon()
            reason = exc.reason if isinstance(exc, FileStoreError) else str(exc)
            raise StoreError(reason) from exc
        crc = crc32_func(options.crc_poly)
        self.config = config
        self.env = StoreContext(
            config=config,
            log=log,
            crc=crc,
            check_crc=crc if options.crc else None,
            pool=HandlePool(options.file_descriptors_limit),
            syncer=Syncer(),
            remover=SliceRemover(options.slice_archive_script, log),
        )
        self._auto_sync_s = options.auto_sync / 1e9  # <= 0 disables
        self._server_path = os.path.join(root, SERVER_FILE)
        self._clients = ClientsFile(self.env, os.path.join(root, CLIENTS_FILE))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._next_auto_sync = 0.0
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        """FT mode (``lock_root`` off): the ``.rootdir.lck`` record lock, which the
        kernel releases if this process dies, so it is never lost while we run."""
        return _try_lock(self._lock, self.config.root)

    # -- recovery ---------------------------------------------------------------------

    def recover(self) -> RecoveredState | None:
        self._start_background()
        info = self._recover_server_file()
        self._clients = ClientsFile(self.env, self._clients.path, self._replay_clients())
        names = sorted(e.name for e in os.scandir(self.config.root) if e.is_dir())
        if info is None:
            if not names:
                self._recovered = True
                return None
            # v0.23.2 would start empty here and later overwrite these channels' messages.
            self.log.warn(
                "Server information was not recovered, however channels are present. "
                "Will initialize server and restart recovery!"
            )
            info = self._default_server_info()
            self.init(info)
        channels = self._recover_channels(names)
        clients = list(self._clients.clients.values())
        self._recovered = True
        return RecoveredState(info=info, clients=clients, channels=channels)

    def _recover_server_file(self) -> ServerInfo | None:
        path = self._server_path
        try:
            if not os.path.exists(path):
                with open(path, "xb", opener=private_opener) as f:
                    f.write(VERSION_HEADER)
                return None
            return read_server_file(path, crc=self.env.check_crc)
        except (FileStoreError, OSError) as exc:
            if isinstance(exc, CorruptedRecordError):
                self.log.error(f'Server file "{path}" corrupted: {exc.reason}')
            if isinstance(exc, FileStoreError):
                self._log_lines(record_error_lines(exc, self.config.root))
            raise StoreError(f'unable to recover server file "{path}": {exc}') from exc

    def _replay_clients(self) -> ClientsReplay | None:
        path = self._clients.path
        if not os.path.exists(path):
            # the reference creates it at every open
            with open(path, "xb", opener=private_opener) as f:
                f.write(VERSION_HEADER)
            return None
        try:
            replay = replay_clients(
                path,
                crc=self.env.check_crc,
                truncate_bad_eof=self.config.options.truncate_bad_eof,
                repair=True,
            )
        except (FileStoreError, OSError) as exc:
            if isinstance(exc, FileStoreError):
                self._log_lines(record_error_lines(exc, self.config.root))
            raise StoreError(f'unable to recover client file "{path}": {exc}') from exc
        self._log_lines(truncation_lines(replay.truncation_log))
        return replay

    def _recover_channels(self, names: list[str]) -> list[RecoveredChannel]:
        cfg, options = self.config, self.config.options
        now = time.time_ns()
        jobs = [
            ChannelJob(
                cfg.root,
                name,
                now,
                self.limits.for_channel(name),
                crc_poly=options.crc_poly,
                do_crc=options.crc,
                truncate_bad_eof=options.truncate_bad_eof,
                repair=True,
            )
            for name in names
        ]
        workers = min(max(1, options.parallel_recovery), len(jobs))
        use_processes = workers > 1 and store_size(cfg.root, names) >= recovery.PROCESS_THRESHOLD
        progress = RecoveryProgress(len(jobs), self.log.notice, recovery.PROGRESS_INTERVAL)
        results: dict[str, ChannelInfo] = {}
        for result in recover_channels(jobs, workers, progress, use_processes):
            self._log_lines(result.log)
            if result.info is None:
                raise StoreError(result.error)
            results[result.name] = result.info
        if progress.elapsed() >= SUMMARY_AFTER_SECONDS:
            self.log.notice(
                f"Recovered {progress.messages:,} messages of {len(jobs)} channel(s) in "
                f"{progress.elapsed():.2f}s ({progress.rate():,.0f} msgs/s)"
            )
        return [self._open_recovered(results[name]) for name in names]

    def _open_recovered(self, info: ChannelInfo) -> RecoveredChannel:
        name, channel_dir, limits = info.name, info.path, info.limits
        for dropped in info.removed_slices:
            self.env.remover.remove(name, dropped.dat_path, dropped.idx_path)
        msgs = FileMessageStore(self.env, name, channel_dir, limits, info)
        subs = FileSubscriptionStore(self.env, name, channel_dir, limits, info.subs)
        store = ChannelStore(name, msgs, subs, limits)
        self.channels[name] = store
        return RecoveredChannel(store, subs.recovered())

    def _log_lines(self, lines: Iterable[LogLine]) -> None:
        emit = {"INF": self.log.notice, "WRN": self.log.warn, "ERR": self.log.error}
        for level, text in lines:
            emit[level](text)

    def _default_server_info(self) -> ServerInfo:
        return ServerInfo.for_cluster(self.config.cluster_id, self.config.discover_prefix)

    # -- server info and clients ------------------------------------------------------

    def init(self, info: ServerInfo) -> None:
        self._start_background()
        try:
            write_server_file(self._server_path, info, crc=self.env.crc, atomic=True)
        except (OSError, FileStoreError) as exc:
            raise StoreError(f'unable to write server file "{self._server_path}": {exc}') from exc

    def add_client(self, record: ClientRecord) -> None:
        self._clients.add(record)

    def delete_client(self, client_id: str) -> None:
        self._clients.delete(client_id)

    # -- channels ---------------------------------------------------------------------

    def _new_channel(self, name: str, limits: Limits) -> ChannelStore:
        channel_dir = os.path.join(self.config.root, name)
        try:
            os.makedirs(channel_dir, mode=DIR_MODE, exist_ok=True)
            subs = FileSubscriptionStore(self.env, name, channel_dir, limits)
        except (OSError, FileStoreError) as exc:
            raise StoreError(f"unable to create channel {name!r}: {exc}") from exc
        msgs = FileMessageStore(self.env, name, channel_dir, limits)
        return ChannelStore(name, msgs, subs, limits)

    def delete_channel(self, name: str) -> None:
        channel = self.channels.pop(name, None)
        if channel is None:
            return
        for part in (channel.msgs, channel.subs):
            assert isinstance(part, FileMessageStore | FileSubscriptionStore)
            part.discard()  # no fsync of files about to be deleted
        self._remove_channel(name)

    def _remove_channel(self, name: str) -> None:
        try:
            shutil.rmtree(os.path.join(self.config.root, name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"unable to delete channel {name!r}: {exc}") from exc

    # -- background work --------------------------------------------------------------

    def _start_background(self) -> None:
        if self._ticker is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # used without an event loop (tools, tests): no timers
        self._loop = loop
        self._next_auto_sync = time.monotonic() + self._auto_sync_s
        self._ticker = loop.call_later(TICK_SECONDS, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        self.env.pool.close_idle(IDLE_CLOSE_SECONDS)
        now = time.monotonic()
        for channel in self.channels.values():
            assert isinstance(channel.msgs, FileMessageStore)
            channel.msgs.drop_cache_if_idle(now)
        if self._auto_sync_s > 0 and time.monotonic() >= self._next_auto_sync:
            self._next_auto_sync = time.monotonic() + self._auto_sync_s
            task = self._loop.create_task(self._auto_sync())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._ticker = self._loop.call_later(TICK_SECONDS, self._tick)

    async def _auto_sync(self) -> None:
        for channel in self.channels.values():
            assert isinstance(channel.subs, FileSubscriptionStore)
            channel.subs.write_out()
        try:
            await self.env.syncer.sync()
        except StoreError as exc:
            self.log.error(f"Error during automatic sync: {exc}")

    # -- closing ----------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for task in self._background:
            task.cancel()
        try:
            for channel in self.channels.values():  # hand every buffer to the OS, then
                assert isinstance(channel.subs, FileSubscriptionStore)
                channel.subs.write_out()
            self.env.syncer.sync_now()  # one parallel fsync of everything, then close
            super().close()
            self._clients.close()
        except OSError as exc:
            raise StoreError(f"unable to close the store: {exc}") from exc
        finally:
            self.env.pool.close_all()
            self.env.syncer.close()
            self.env.remover.wait()
            if self._recovered:
                self._lock.release()
            else:
                self._abandon()

    def _abandon(self) -> None:
        """A refused start: the lock file, the truncate_bad_eof witness and the root
        directory go if this start made them (the root only while empty)."""
        if self.config.options.truncate_bad_eof:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.config.root, TRUNCATE_WITNESS))
        self._lock.abandon()
        if self._created_root:
            with contextlib.suppress(OSError):
                os.rmdir(self.config.root)
