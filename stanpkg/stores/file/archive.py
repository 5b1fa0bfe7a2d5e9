"""Removing a slice whose messages are all gone: delete it, or hand it to the
``slice_archive_script`` (filestore.md §8.3).

With a script, ``msgs.N.dat``/``.idx`` are renamed to ``.dat.bak``/``.idx.bak`` and the
script runs in the background with the channel name and both paths (built from the
configured ``dir``, so relative if it is); it owns the files from then on. Its output is
logged with the reference's wording.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading

from stanpkg.stores.base import StoreLog

__all__ = ["BAK_SUFFIX", "SliceRemover"]

BAK_SUFFIX = ".bak"


class SliceRemover:
    def __init__(self, script: str, log: StoreLog) -> None:
        self.script = script
        self.log = log
        self._running: list[threading.Thread] = []

    def remove(self, channel: str, dat_path: str, idx_path: str) -> None:
        if not self.script:
            _unlink(dat_path, idx_path)
            return
        dat_bak, idx_bak = dat_path + BAK_SUFFIX, idx_path + BAK_SUFFIX
        try:
            os.rename(dat_path, dat_bak)
            os.rename(idx_path, idx_bak)
        except OSError:
            _unlink(dat_path, idx_path, dat_bak, idx_bak)
            return
        thread = threading.Thread(
            target=self._invoke,
            args=(channel, dat_bak, idx_bak),
            name=f"archive-{channel}",
            daemon=True,
        )
        self._running = [t for t in self._running if t.is_alive()]
        self._running.append(thread)
        thread.start()

    def _invoke(self, channel: str, dat_bak: str, idx_bak: str) -> None:
        try:
            done = subprocess.run(
                [self.script, channel, dat_bak, idx_bak],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            self.log.error(
                f'Error invoking archive script "{self.script}": '
                f"fork/exec {self.script}: {reason} (output=)"
            )
            return
        output = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            status = (
                f"exit status {done.returncode}"
                if done.returncode > 0
                else f"signal: {-done.returncode}"
            )
            self.log.error(
                f'Error invoking archive script "{self.script}": {status} (output={output})'
            )
            return
        self.log.notice(
            f"Output of archive script for {channel} ({dat_bak} and {idx_bak}): {output}"
        )

    def wait(self, timeout: float = 5.0) -> None:
        """Let running scripts finish (store closing)."""
        for thread in self._running:
            thread.join(timeout)
        self._running = [t for t in self._running if t.is_alive()]


def _unlink(*paths: str) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
