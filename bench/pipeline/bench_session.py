"""What live_bench.py and sink_bench.py share: their common options (message count,
channel counts, rounds, the Spark master, which server), the Spark session they run in,
started the same way and announced with the same header line, and their summary table."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def round_options(description: str) -> argparse.ArgumentParser:
    """The options both benchmarks take; a caller adds its own before ``parse_args``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--channels", default="1,10")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--server", choices=("stanpkg", "go"), default="stanpkg")
    return parser


def start_spark(args: argparse.Namespace, config: dict[str, str]) -> Any:
    """A Spark session on ``args.master`` (UI off, plus ``config``) with the ``stan``
    source and sink registered; prints the run's header line."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this venv's stanpkg
    # Imported here, once the caller has put the checkout on sys.path.
    from pyspark.sql import SparkSession

    from stanpkg.pipeline import register

    builder = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    print(
        f"{args.messages} messages of {args.size} B per round, {args.rounds} rounds, "
        f"master {args.master}, {args.server} server (memory store)",
        flush=True,
    )
    return spark


def print_table(columns: list[str], rows: list[str]) -> None:
    """The Markdown summary: a header of ``columns``, then ``rows`` (already ``| … |``)."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    print("\n".join(rows))
