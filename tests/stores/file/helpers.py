"""Helpers for the FILE store tests: stores built from real plans, a log capture, and
``stanpkg run`` / node-nats-streaming processes for the integration tests."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import MessageBatch, MessageStore, ServerInfo, Store, StoredRun, StoreLog
from stanpkg.stores.encryption import EncryptingStore, encryption_from_plan
from stanpkg.stores.file import FileStore, FileStoreConfig, config_from_plan
from tests.ports import free_port as free_port  # re-exported for the tests that import it here

ROOT = Path(__file__).resolve().parents[3]
JS_DIR = ROOT / "tests" / "js"
READER_JS = Path(__file__).resolve().parent / "js" / "stan_read.js"
STANPKG = [sys.executable, "-c", "import sys; from stanpkg.cli import main; sys.exit(main())"]
T0 = 1_700_000_000_000_000_000


@dataclass
class LogCapture:
    lines: list[tuple[str, str]] = field(default_factory=list)

    def notice(self, text: str) -> None:
        self.lines.append(("INF", text))

    def warn(self, text: str) -> None:
        self.lines.append(("WRN", text))

    def error(self, text: str) -> None:
        self.lines.append(("ERR", text))

    def texts(self, level: str | None = None) -> list[str]:
        return [t for lv, t in self.lines if level is None or lv == level]

    def has(self, fragment: str) -> bool:
        return any(fragment in t for _, t in self.lines)


def plan_for(root: Path | str, *args: str, cluster_id: str = "test") -> Plan:
    compiled = compile_args(["-st", "file", "--dir", str(root), "-cid", cluster_id, *args], env={})
    assert compiled.plan is not None, compiled.diagnostics
    return compiled.plan


def config_for(root: Path | str, *args: str, **overrides: Any) -> FileStoreConfig:
    """The store's configuration for these flags; ``overrides`` name fields of the
    configuration or of its file options (``truncate_bad_eof=True``)."""
    from dataclasses import fields, replace

    config = config_from_plan(plan_for(root, *args))
    option_names = {f.name for f in fields(config.options)}
    options = {k: overrides.pop(k) for k in list(overrides) if k in option_names}
    return replace(config, options=replace(config.options, **options), **overrides)


def encrypting(store: Store, plan: Plan, log: StoreLog) -> Any:
    """``store`` as the store factory hands it out: wrapped when the plan encrypts."""
    encryption = encryption_from_plan(plan)
    if encryption is None:
        return store
    return EncryptingStore(store, encryption.key, encryption.cipher, log)


def open_store(
    root: Path | str, *args: str, log: LogCapture | None = None, **overrides: Any
) -> tuple[FileStore, LogCapture]:
    """A FILE store on ``root`` (behind the encrypting store when the flags encrypt)."""
    log = log or LogCapture()
    store = FileStore(config_for(root, *args, **overrides), log)
    return encrypting(store, plan_for(root, *args), log), log


def server_info(cluster_id: str = "test") -> ServerInfo:
    return ServerInfo(
        cluster_id,
        f"_STAN.discover.{cluster_id}",
        f"_STAN.pub.{cluster_id}",
        f"_STAN.sub.{cluster_id}",
        f"_STAN.unsub.{cluster_id}",
        f"_STAN.close.{cluster_id}",
        f"_STAN.subclose.{cluster_id}",
        f"_STAN.ack.{cluster_id}",
    )


def fresh_store(root: Path | str, *args: str, **overrides: Any) -> tuple[FileStore, LogCapture]:
    store, log = open_store(root, *args, **overrides)
    assert store.recover() is None
    store.init(server_info())
    return store, log


def payload(seq: int, size: int = 16) -> bytes:
    return f"msg-{seq}".encode().ljust(size, b".")


def records(
    channel: str,
    first: int,
    count: int,
    *,
    size: int = 16,
    stamp: int = T0,
    timestamp: int | None = None,
) -> list[bytes]:
    """The MsgProtos of messages ``first`` … (payloads :func:`payload`), stamped
    ``timestamp``, or ``stamp + sequence`` each without one."""
    return [
        pb.MsgProto(
            sequence=seq,
            subject=channel,
            data=payload(seq, size),
            timestamp=stamp + seq if timestamp is None else timestamp,
        ).SerializeToString()
        for seq in range(first, first + count)
    ]


def store_messages(
    msgs: MessageStore,
    channel: str,
    first: int,
    count: int,
    *,
    size: int = 16,
    timestamp: int | None = None,
) -> list[bytes]:
    """Store messages ``first`` … ``first + count - 1`` (which must be the next sequences)
    as one publish batch stamped ``timestamp``; without one, as one batch per message
    stamped ``T0 + sequence``. Returns their records (what ``lookup`` gives back)."""
    if timestamp is None:
        for seq in range(first, first + count):
            run = msgs.store(MessageBatch(T0 + seq, [("", payload(seq, size))]))
            assert run == StoredRun(seq, seq)
    else:
        messages = [("", payload(seq, size)) for seq in range(first, first + count)]
        assert msgs.store(MessageBatch(timestamp, messages)) == StoredRun(first, first + count - 1)
    return records(channel, first, count, size=size, timestamp=timestamp)


# -- processes ----------------------------------------------------------------------------


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged (exit {self.proc.poll()}):\n{self.log()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start_server(
    args: list[str], log_path: Path, *, env: dict[str, str] | None = None, timeout: float = 30
) -> ServerProcess:
    """``stanpkg run -a 127.0.0.1 -p <free port> <args>``; returns once ready or exited."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_STREAMING")}
    full_env.update(env or {})
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [*STANPKG, "run", "-a", "127.0.0.1", "-p", str(port), *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    server = ServerProcess(proc, port, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = server.log()
        if "Streaming Server is ready" in text or proc.poll() is not None:
            if proc.poll() is not None:
                proc.wait()
            return server
        time.sleep(0.05)
    server.stop(signal.SIGKILL)
    raise AssertionError(f"server did not become ready:\n{server.log()}")


@contextmanager
def running_server(args: list[str], log_path: Path, **kw: Any) -> Iterator[ServerProcess]:
    server = start_server(args, log_path, **kw)
    assert server.proc.poll() is None, f"server exited:\n{server.log()}"
    try:
        yield server
    finally:
        server.stop()


def node_available() -> bool:
    return (
        shutil.which("node") is not None
        and (JS_DIR / "node_modules" / "node-nats-streaming").is_dir()
    )


def require_node() -> None:
    if not node_available():
        pytest.skip("node and tests/js/node_modules/node-nats-streaming are needed")


def node_read(job: dict[str, Any], timeout: float = 30) -> dict[str, list[list[Any]]]:
    """Run the node-nats-streaming reader (see js/stan_read.js)."""
    env = dict(os.environ, NODE_PATH=str(JS_DIR / "node_modules"))
    done = subprocess.run(
        ["node", str(READER_JS), json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"node reader failed ({done.returncode}): {done.stderr}"
    result: dict[str, list[list[Any]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
