"""A Spark standalone cluster on this machine: a master and workers started with the
launcher the pyspark package ships (``bin/spark-class``), and a session on it.

Executors are separate JVMs started by the workers, each with its own Python workers (the
interpreter PYSPARK_PYTHON names, where stanpkg is installed): nothing is shared with the
test process but the files on disk and the network.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.stores.file.helpers import free_port

_READY_SECONDS = 90


def stop_spark() -> None:
    """Stop the running SparkContext, if any (the JVM stays, ready for the next one)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()


class StandaloneCluster:
    """``workers`` workers of ``cores`` cores each, registered with one master."""

    def __init__(self, workdir: Path, *, workers: int = 2, cores: int = 1) -> None:
        import pyspark

        self.workdir = workdir
        home = Path(pyspark.__file__).resolve().parent
        self.launcher = str(home / "bin" / "spark-class")
        (workdir / "conf").mkdir(parents=True, exist_ok=True)  # no spark-env.sh, defaults
        self.env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(workdir / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        try:
            self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(self.port)],
                b"I have been elected leader",
            )
            for i in range(workers):
                self._start(
                    f"worker{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    [self.url, "--host", "127.0.0.1", "--cores", str(cores), "--memory", "1g",
                     "--work-dir", str(workdir / f"worker{i}")],
                    b"Successfully registered with master",
                )  # fmt: skip
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, main: str, args: list[str], ready: bytes) -> None:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [self.launcher, main, "--webui-port", str(free_port()), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # its executors too, stopped with it
            )
        self.procs.append((proc, log))
        deadline = time.monotonic() + _READY_SECONDS
        while ready not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Spark {name} did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)

    def session(self, app_name: str) -> Any:
        """A session on the cluster, once both executors have registered."""
        from pyspark.sql import SparkSession

        stop_spark()  # one SparkContext per process: the local one steps aside
        spark = (
            SparkSession.builder.master(self.url)
            .appName(app_name)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "768m")
            .config("spark.cores.max", str(len(self.procs) - 1))
            .config("spark.task.maxFailures", "4")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        deadline = time.monotonic() + _READY_SECONDS
        while self.executors(spark) < len(self.procs) - 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"executors did not register: {self.executors(spark)}")
            time.sleep(0.2)
        return spark

    @staticmethod
    def executors(spark: Any) -> int:
        """Executors registered with the driver (the driver left out)."""
        return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1

    def stop(self) -> None:
        for proc, _log in reversed(self.procs):  # workers (with their executors) first
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
