"""The export's memory: the last exported sequence of each channel, kept under the output.

Every run writes a new generation ``<out>/_stan_export/state.<n>.json``: written under a
temporary name, flushed, then renamed to a name no other file has. A reader takes the
highest generation, so a state file is always whole (an interrupted write leaves only a
temporary file, ignored) and no filesystem needs an atomic *replace* (object stores and
HDFS have none). Spark ignores ``_``-prefixed folders when reading the output back.

Local paths use ``os`` (with fsync); other URIs (``hdfs://``, ``s3a://`` …) go through
Hadoop's FileSystem of the Spark session.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = ["STATE_DIR", "ExportState", "StateStore", "open_state_store"]

STATE_DIR = "_stan_export"
_GENERATION = re.compile(r"^state\.([0-9]+)\.json$")
_KEEP = 5  # generations kept (older ones are deleted after a successful write)


@dataclass
class ExportState:
    """Last exported sequence per channel (the next run starts right after it)."""

    channels: dict[str, int] = field(default_factory=dict)
    generation: int = 0
    cluster_id: str | None = None
    datastore: str = ""
    updated: str = ""

    def to_json(self) -> bytes:
        doc = {
            "version": 1,
            "generation": self.generation,
            "updated": self.updated,
            "datastore": self.datastore,
            "cluster_id": self.cluster_id,
            "channels": {k: {"last_sequence": v} for k, v in sorted(self.channels.items())},
        }
        return json.dumps(doc, indent=2).encode() + b"\n"

    @classmethod
    def from_json(cls, data: bytes) -> ExportState:
        doc = json.loads(data)
        if doc.get("version") != 1:
            raise ValueError(f"unsupported export state version {doc.get('version')!r}")
        return cls(
            channels={k: int(v["last_sequence"]) for k, v in doc["channels"].items()},
            generation=int(doc["generation"]),
            cluster_id=doc.get("cluster_id"),
            datastore=doc.get("datastore", ""),
            updated=doc.get("updated", ""),
        )


class _Files(Protocol):
    def list(self) -> list[str]: ...
    def read(self, name: str) -> bytes: ...
    def write_new(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


class StateStore:
    """Reads and writes the generations of one output's state."""

    def __init__(self, files: _Files) -> None:
        self._files = files

    def load(self) -> ExportState:
        generations = sorted(
            (int(m.group(1)), name)
            for name in self._files.list()
            if (m := _GENERATION.match(name)) is not None
        )
        if not generations:
            return ExportState()
        _, name = generations[-1]
        try:
            return ExportState.from_json(self._files.read(name))
        except (ValueError, KeyError, TypeError) as exc:
            # Never silently start over: that would export everything again.
            raise ValueError(f"unreadable export state {name}: {exc}") from None

    def save(self, state: ExportState) -> ExportState:
        """Write ``state`` as the next generation; returns it with generation/time set."""
        state.generation += 1
        state.updated = datetime.now(UTC).isoformat(timespec="seconds")
        self._files.write_new(f"state.{state.generation}.json", state.to_json())
        for name in self._files.list():
            m = _GENERATION.match(name)
            if m is not None and int(m.group(1)) <= state.generation - _KEEP:
                self._files.delete(name)
        return state


class _LocalFiles:
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def list(self) -> list[str]:
        return os.listdir(self.directory) if os.path.isdir(self.directory) else []

    def read(self, name: str) -> bytes:
        with open(os.path.join(self.directory, name), "rb") as f:
            return f.read()

    def write_new(self, name: str, data: bytes) -> None:
        os.makedirs(self.directory, exist_ok=True)
        temp = os.path.join(self.directory, f".{name}.{uuid.uuid4().hex}.tmp")
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(temp, os.path.join(self.directory, name))
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self, name: str) -> None:
        os.unlink(os.path.join(self.directory, name))


class _HadoopFiles:
    """The same operations through the JVM's Hadoop FileSystem (py4j)."""

    def __init__(self, spark: Any, uri: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._dir = self._path(uri)
        self._fs = self._dir.getFileSystem(spark._jsc.hadoopConfiguration())

    def list(self) -> list[str]:
        if not self._fs.exists(self._dir):
            return []
        return [status.getPath().getName() for status in self._fs.listStatus(self._dir)]

    def read(self, name: str) -> bytes:
        stream = self._fs.open(self._path(self._dir, name))
        try:
            chunks = []
            buffer = bytearray(65536)
            while True:
                n = stream.read(buffer)
                if n <= 0:
                    break
                chunks.append(bytes(buffer[:n]))
            return b"".join(chunks)
        finally:
            stream.close()

    def write_new(self, name: str, data: bytes) -> None:
        temp = self._path(self._dir, f".{name}.{uuid.uuid4().hex}.tmp")
        stream = self._fs.create(temp, False)
        try:
            stream.write(bytearray(data))
            stream.hsync()
        finally:
            stream.close()
        if not self._fs.rename(temp, self._path(self._dir, name)):
            self._fs.delete(temp, False)
            raise OSError(f"could not rename the export state into {self._dir}/{name}")

    def delete(self, name: str) -> None:
        self._fs.delete(self._path(self._dir, name), False)


def open_state_store(out: str, spark: Any = None) -> StateStore:
    """The state store under output ``out`` (a local path, ``file:`` or a Hadoop URI)."""
    if "://" not in out or out.startswith("file://"):
        local = out[len("file://") :] if out.startswith("file://") else out
        return StateStore(_LocalFiles(os.path.join(local, STATE_DIR)))
    if spark is None:
        raise ValueError(f"{out}: a Spark session is needed to reach a non-local output")
    return StateStore(_HadoopFiles(spark, out.rstrip("/") + "/" + STATE_DIR))
