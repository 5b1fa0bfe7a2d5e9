"""kill -9 of a stanpkg server at seeded random moments, many rounds, one store.

    .venv/bin/python -m bench.faults.kill9 [--rounds 50] [--seed 15] [--store FILE|SQL]

With ``--store POSTGRES`` the SQL store runs on a private PostgreSQL cluster made for the
run (tests/faults/postgres.py: root and the PostgreSQL server binaries needed).

The workload and the checks are those of tests/faults/test_kill9.py (tests/faults/kill9.py):
a publisher with acks, a durable subscriber with manual acks that closes and reconnects,
a kill -9 per round, a restart on the same store. SQL runs on SQLite unless
``--sql-source`` names a PostgreSQL DSN (with ``--sql-driver postgres``).
Exit status 1 when anything acknowledged was lost or a durable position moved.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults.kill9 import run_kill9
from tests.faults.postgres import PrivatePostgres
from tests.server.conftest import start_nats_process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--store", choices=("FILE", "SQL", "POSTGRES"), default="FILE")
    parser.add_argument("--sql-driver", default="sqlite")
    parser.add_argument("--sql-source", default="")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kill9-") as tmp_name:
        tmp = Path(tmp_name)
        nats, url = start_nats_process(tmp / "nats")
        postgres = None
        if opts.store == "FILE":
            args = ["-st", "FILE", "--dir", str(tmp / "store")]
        elif opts.store == "POSTGRES":
            postgres = PrivatePostgres()
            postgres.create()
            args = ["-st", "SQL", "--sql_driver", "postgres", "--sql_source", postgres.dsn]
        else:
            source = opts.sql_source or str(tmp / "store.db")
            args = ["-st", "SQL", "--sql_driver", opts.sql_driver, "--sql_source", source]
        started = time.monotonic()
        try:
            report = asyncio.run(run_kill9(url, args, tmp, rounds=opts.rounds, seed=opts.seed))
        finally:
            if postgres is not None:
                postgres.destroy()
            nats.kill()
            nats.wait(10)
    print(
        f"store {opts.store}, {report.rounds} kills, seed {opts.seed}, "
        f"{time.monotonic() - started:.0f} s"
    )
    print(
        f"  acknowledged publishes: {report.acked_publishes}, all found: "
        f"{not any('lost' in p for p in report.problems)}"
    )
    print(f"  unconfirmed at a kill (may or may not be stored): {report.unconfirmed_publishes}")
    print(f"  stored: {report.stored}")
    print(f"  durable reconnects: {report.reconnects}")
    print(
        f"  redelivered after a restart (acked just before the kill): "
        f"{report.redelivered_after_restart}"
    )
    print(f"  requests cut by a kill: {report.cut_by_kill[:5]}")
    print(f"  problems: {len(report.problems)}")
    for problem in report.problems[:20]:
        print(f"    {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
