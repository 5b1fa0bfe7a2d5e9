"""``stanpkg export`` and ``stanpkg archive-slice`` (wired into ``stanpkg.cli``)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING

from stanpkg.pipeline import archive
from stanpkg.pipeline.export import FORMATS, ExportRequest, prepare_export, run_export
from stanpkg.pipeline.options import OptionError
from stanpkg.pipeline.progress import DEFAULT_INTERVAL
from stanpkg.pipeline.session import DEFAULT_MASTER
from stanpkg.pipeline.state import open_state_store
from stanpkg.stores.file.format import FileStoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["archive_slice_main", "export_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stanpkg export",
        description="Export new messages of a FILE store with Spark, partitioned by channel "
        "and date. Runs are incremental: the last exported sequence of each channel is "
        "kept under --out.",
    )
    parser.add_argument("--dir", help="the datastore directory (default: the config's dir)")
    parser.add_argument(
        "--config", help="the server's configuration file (limits, CRC, encryption, dir)"
    )
    parser.add_argument("--out", required=True, help="output directory or Hadoop URI")
    parser.add_argument("--channels", help="channel names/patterns, comma-separated (orders.>)")
    parser.add_argument("--format", choices=FORMATS, default="parquet")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (local[*])")
    parser.add_argument(
        "--encryption-key-env", metavar="VAR", help="environment variable holding the key"
    )
    parser.add_argument("--archive-dir", help="archived slices (default: <dir>.archive)")
    parser.add_argument(
        "--include-removed",
        action="store_true",
        help="also messages the limits removed that are still on disk (by default only "
        "what the server serves)",
    )
    parser.add_argument(
        "--include-archived",
        action="store_true",
        help="also the slices the archive script kept, and .bak slices",
    )
    parser.add_argument(
        "--permissive", action="store_true", help="skip damaged records instead of failing"
    )
    parser.add_argument(
        "--progress-every",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help="when stderr is not a terminal, a progress line this often (default: "
        f"{DEFAULT_INTERVAL:g}; 0: none); on a terminal Spark shows its progress bar",
    )
    return parser


def export_main(argv: list[str]) -> int:
    try:
        args = _export_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not args.dir and not args.config:
        print("stanpkg export: give --dir or --config", file=sys.stderr)
        return EXIT_USAGE
    key: bytes | None = None
    if args.encryption_key_env:
        value = os.environ.get(args.encryption_key_env, "")
        if not value:
            print(f"stanpkg export: ${args.encryption_key_env} is not set", file=sys.stderr)
            return EXIT_USAGE
        key = os.fsencode(value)
    request = ExportRequest(
        out=args.out,
        datastore=args.dir,
        config=args.config,
        channels=args.channels,
        format=args.format,
        encryption_key=key,
        include_removed=args.include_removed,
        include_archived=args.include_archived,
        archive_dir=args.archive_dir,
        permissive=args.permissive,
    )
    interactive = sys.stderr.isatty()

    def progress(line: str) -> None:
        print(f"stanpkg export: {line}", file=sys.stderr, flush=True)

    spark: SparkSession | None = None
    created = False
    try:
        local_out = "://" not in args.out or args.out.startswith("file://")
        if not local_out:  # the state lives on a filesystem only Spark can reach
            spark, created = _session(args.master, interactive)
        store = open_state_store(args.out, spark)
        job = prepare_export(request, store)
        for warning in job.warnings:
            progress(f"warning: {warning}")
        if job.empty:
            print(f"nothing new to export to {args.out}")
            return EXIT_OK
        if spark is None:
            spark, created = _session(args.master, interactive)
        every = 0.0 if interactive else args.progress_every
        result = run_export(spark, job, store, progress, progress_every=every)
    except (OptionError, FileStoreError, ValueError, OSError) as exc:
        print(f"stanpkg export: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # Spark's errors wrap the worker's traceback: show its point
        print(f"stanpkg export: {_spark_error(exc)}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if spark is not None and created:
            spark.stop()
    print(result.summary())
    return EXIT_OK


def _session(master: str, progress: bool) -> tuple[SparkSession, bool]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # an optional dependency: say how to add it
        raise RuntimeError(
            f"exporting needs PySpark ({exc}) and Java 17 or newer: "
            "pip install 'stanpkg[spark]' into stanpkg's environment "
            "(deb/rpm installs: sudo /usr/lib/stanpkg/make-venv --extra spark, "
            "and a JRE such as openjdk-17-jre-headless)"
        ) from None

    from stanpkg.pipeline.session import spark_session

    existed = SparkSession.getActiveSession() is not None
    return spark_session(master, app_name="stanpkg export", progress=progress), not existed


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


def _spark_error(exc: BaseException) -> str:
    """The last ``SomethingError: …`` line of a wrapped Python traceback, or the first."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    found = [line for line in lines if _ERROR_LINE.match(line)]
    return found[-1] if found else (lines[0] if lines else type(exc).__name__)


def archive_slice_main(argv: list[str]) -> int:
    """``stanpkg archive-slice CHANNEL DATFILE IDXFILE`` (a slice_archive_script)."""
    return archive.main(argv)
