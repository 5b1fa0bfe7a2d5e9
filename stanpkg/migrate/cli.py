"""``stanpkg migrate`` (wired into ``stanpkg.cli``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from stanpkg.migrate.destination import Destination, DestinationError
from stanpkg.migrate.run import MigrateError, Request, Summary, migrate
from stanpkg.migrate.source_factory import open_source_store
from stanpkg.migrate.source_store import SourceError
from stanpkg.pipeline.options import ChannelSelector, OptionError
from stanpkg.plan.compile import compile_args
from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["EXIT_DIFFERENT", "migrate_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DIFFERENT = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT
PROG = "stanpkg migrate"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Copy a standalone server's store (read-only) into JetStream in the "
        "layout of stanpkg's clustered mode, keeping every sequence. Run again after an "
        "interruption: it continues where it stopped.",
    )
    parser.add_argument(
        "--config", required=True, metavar="SRC.conf", help="the standalone server's config"
    )
    parser.add_argument("--nats", required=True, metavar="URL", help="the destination NATS")
    parser.add_argument("--creds", metavar="FILE", help="a .creds file for the destination")
    parser.add_argument("--cluster-id", help="the cluster's ID (default: the source's)")
    parser.add_argument("--channels", help="channel names/patterns, comma-separated (orders.>)")
    parser.add_argument(
        "--replicas",
        type=int,
        help="replicas of new streams (default: the cluster's state bucket's, else one per "
        "NATS server the connection knows of, at most 5)",
    )
    parser.add_argument("--dry-run", action="store_true", help="read and plan, write nothing")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="compare every channel afterwards (exit 3 if any differs)",
    )
    parser.add_argument(
        "--replace", action="store_true", help="delete a destination stream of another channel"
    )
    parser.add_argument(
        "--permissive", action="store_true", help="skip damaged records and list them"
    )
    parser.add_argument(
        "--keep-encrypted",
        action="store_true",
        help="copy encrypted payloads as stored (for a cluster with the same key)",
    )
    parser.add_argument(
        "--parallel", type=int, default=4, metavar="N", help="channels written at once (4)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--progress-every", type=float, default=2.0, metavar="SECONDS", help="0: no progress"
    )
    return parser


def migrate_main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.replicas is not None and not 1 <= args.replicas <= 5:
        return _fail("--replicas must be between 1 and 5", EXIT_USAGE)
    if args.parallel < 1:
        return _fail("--parallel must be at least 1", EXIT_USAGE)
    compiled = compile_args(["-sc", args.config], os.environ)
    if compiled.plan is None:
        problems = "; ".join(str(d) for d in compiled.diagnostics) or compiled.usage_error
        return _fail(f"{args.config}: {problems}", EXIT_FAILED)
    plan = compiled.plan
    try:
        selector = ChannelSelector.parse(args.channels)
        source = open_source_store(
            plan,
            wants_channel=selector.matches,
            permissive=args.permissive,
            keep_encrypted=args.keep_encrypted,
        )
    except (OptionError, SourceError) as exc:
        return _fail(str(exc), EXIT_FAILED)
    info = source.server_info
    cluster_id = args.cluster_id or (info.cluster_id if info else "") or plan.cluster_id
    request = Request(
        cluster_id=cluster_id,
        discover_prefix=plan.discover_prefix,
        dry_run=args.dry_run,
        verify=args.verify,
        replace=args.replace,
        parallel=args.parallel,
    )
    as_json = args.format == "json"

    def emit(line: str) -> None:
        print(line if as_json else f"{PROG}: {line}", file=sys.stderr, flush=True)

    progress = {
        "interval": args.progress_every,
        "as_json": as_json,
        "terminal": sys.stderr.isatty(),
    }
    try:
        summary = asyncio.run(_run(args, source, request, emit, progress))
    except (SourceError, DestinationError, MigrateError) as exc:
        return _fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail("interrupted: run the same command again to continue", EXIT_INTERRUPTED)
    print(json.dumps(summary.as_dict(), indent=2) if as_json else summary.text())
    return EXIT_OK if summary.verified else EXIT_DIFFERENT


async def _run(args, source, request, emit, progress) -> Summary:  # type: ignore[no-untyped-def]
    destination = await Destination.open(
        NatsEndpoint(args.nats, credentials=args.creds or ""), request.cluster_id, args.replicas
    )
    try:
        return await migrate(source, destination, request, emit, progress)
    finally:
        await destination.close()


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code
