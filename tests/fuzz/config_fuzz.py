"""Configuration fuzzing: generated and mutated inputs through ``stanpkg validate``.

    .venv/bin/python -m tests.fuzz.config_fuzz [--inputs 1000000] [--workers 1] [--seed 15]

Each input (tests/fuzz/config_inputs.py) is written to a worker's own directory (beside
the files it may include) and compiled in-process as ``stanpkg validate`` compiles it
(``compile_args``, as ``-sc FILE``, ``-c FILE`` or both, one input in three with flags of
the options table, with a fixed environment), then
rendered as validate renders a result (diagnostics as text and JSON; for a valid plan the
limits printout, ``--explain``, ``stanpkg plan``'s JSON and the embedded nats-server's
configuration). Running ``nats-server -t`` on that configuration (a child process) is
left out.

Every input must end in diagnostics or success within 1 s (``signal.setitimer`` in the
worker; the parent also kills a worker that stops reporting, e.g. stuck in C code).
Counts: diagnostics / success / tracebacks / hangs; every crashing or hanging input is
saved in tests/fuzz/crashes/ (``<kind>-<sha1>.conf`` and a ``.txt`` saying how it was
run and what happened). Exit status 1 when there was any.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import queue
import shlex
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from stanpkg.cli import explain
from stanpkg.node import embedded_config
from stanpkg.plan.compile import compile_args
from stanpkg.plan.dump import plan_to_dict
from stanpkg.plan.limits import render_store_limits
from stanpkg.transport.natsconf import render_config
from tests.fuzz.config_inputs import (
    ENVIRONMENT,
    load_seeds,
    make_flags,
    make_input,
    write_include_files,
)

CRASHES = Path(__file__).resolve().parent / "crashes"
WATCHDOG_S = 1.0
CHUNK = 500  # inputs a worker takes at a time
SAVED_PER_SIGNATURE = 5  # the same bug found again is counted, not saved again


class Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"no result within {WATCHDOG_S} s")


def argv_for(seed: int, index: int, path: Path, empty: Path) -> list[str]:
    """How input ``index`` is given: a streaming file, a NATS file, or one as each, with
    the flags of ``make_flags``."""
    flags = make_flags(seed, index)
    match index % 3:
        case 0:
            return [*flags, "-sc", str(path)]
        case 1:
            return [*flags, "-c", str(path)]
        case _:
            return [*flags, "-sc", str(empty), "-c", str(path)]


def validate(argv: list[str]) -> bool:
    """What ``stanpkg validate`` does with a configuration, short of running nats-server.
    True when it is valid."""
    result = compile_args(argv, ENVIRONMENT, positional_config=True)
    for diag in result.diagnostics:
        str(diag)
        json.dumps(diag.as_json(), ensure_ascii=False)
    if result.plan is None:
        return False
    render_store_limits(result.plan.store_limits)
    explain(result.plan)
    json.dumps(plan_to_dict(result.plan), ensure_ascii=False)
    # The embedded nats-server's configuration, which validate renders for nats-server -t
    # (and run for the server itself).
    render_config(embedded_config(result.plan))
    return True


@dataclass
class Finding:
    kind: str  # "traceback" or "hang"
    index: int
    argv: list[str]
    detail: str
    data: bytes

    @property
    def signature(self) -> str:
        """Where it failed: the exception and the innermost stanpkg frame."""
        lines = [ln.strip() for ln in self.detail.splitlines() if ln.strip()]
        frames = [ln for ln in lines if ln.startswith('File "') and "stanpkg" in ln]
        return f"{self.kind}|{lines[-1] if lines else ''}|{frames[-1] if frames else ''}"


@dataclass
class Counts:
    diagnostics: int = 0
    success: int = 0
    tracebacks: int = 0
    hangs: int = 0
    retried: int = 0  # over 1 s once, then within it (one-time work in the process)
    findings: list[Finding] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.diagnostics + self.success + self.tracebacks + self.hangs

    def add(self, other: Counts) -> None:
        self.diagnostics += other.diagnostics
        self.success += other.success
        self.tracebacks += other.tracebacks
        self.hangs += other.hangs
        self.retried += other.retried
        self.findings += other.findings


@contextmanager
def _watchdog() -> Iterator[None]:
    signal.setitimer(signal.ITIMER_REAL, WATCHDOG_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _timed(argv: list[str], counts: Counts) -> bool:
    """``validate(argv)`` within the watchdog. Past it, once more: the first use of a part
    of the compiler in a process may pay for one-time work (the schema validators are
    compiled on first use), which is not what the 1 s bound is about; an input that is slow
    in itself is slow again."""
    try:
        with _watchdog():
            return validate(argv)
    except Hang:
        counts.retried += 1
    with _watchdog():
        return validate(argv)


def run_range(seed: int, start: int, stop: int, seeds: list[bytes], work: Path) -> Counts:
    """Inputs ``start`` to ``stop`` of campaign ``seed``, in directory ``work``."""
    counts = Counts()
    path, empty = work / "fuzz.conf", work / "empty.conf"
    empty.write_text("", encoding="utf-8")
    signal.signal(signal.SIGALRM, _alarm)
    for index in range(start, stop):
        data = make_input(seed, index, seeds)
        path.write_bytes(data)
        argv = argv_for(seed, index, path, empty)
        shown = [a.replace(f"{work}/", "") for a in argv]  # as saved beside the input
        try:
            valid = _timed(argv, counts)
        except Hang:
            counts.hangs += 1
            counts.findings.append(Finding("hang", index, shown, traceback.format_exc(), data))
        except Exception:
            counts.tracebacks += 1
            counts.findings.append(Finding("traceback", index, shown, traceback.format_exc(), data))
        else:
            if valid:
                counts.success += 1
            else:
                counts.diagnostics += 1
    return counts


def _scratch() -> str | None:
    """A memory file system when there is one: each input is a file written and read."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _worker(
    seed: int, jobs: mp.Queue[tuple[int, int] | None], results: mp.Queue[object], slot: object
) -> None:
    seeds = load_seeds()
    with tempfile.TemporaryDirectory(prefix="config-fuzz-", dir=_scratch()) as tmp:
        work = Path(tmp)
        write_include_files(work)
        while (job := jobs.get()) is not None:
            start, stop = job
            slot.value = start  # type: ignore[attr-defined]
            results.put((job, run_range(seed, start, stop, seeds, work)))


def save(finding: Finding, seed: int) -> Path:
    CRASHES.mkdir(exist_ok=True)
    digest = hashlib.sha1(finding.data + "\0".join(finding.argv).encode()).hexdigest()[:12]
    base = CRASHES / f"{finding.kind}-{digest}"
    base.with_suffix(".conf").write_bytes(finding.data)
    mode = " ".join(shlex.quote(a) for a in finding.argv)
    base.with_suffix(".txt").write_text(
        f"seed {seed} input {finding.index}\nstanpkg validate {mode}\n\n{finding.detail}",
        encoding="utf-8",
    )
    return base.with_suffix(".conf")


def campaign(
    inputs: int, workers: int, seed: int, *, first: int = 0, progress_every: float = 60.0
) -> Counts:
    """Run inputs ``first`` .. ``first + inputs`` of campaign ``seed``."""
    ctx = mp.get_context("fork")
    jobs: mp.Queue[tuple[int, int] | None] = ctx.Queue()
    results: mp.Queue[object] = ctx.Queue()
    pending = {(s, min(s + CHUNK, first + inputs)) for s in range(first, first + inputs, CHUNK)}
    for job in sorted(pending):
        jobs.put(job)
    procs: dict[int, tuple[mp.process.BaseProcess, object]] = {}

    def start_worker(n: int) -> None:
        slot = ctx.Value("q", -1)
        proc = ctx.Process(target=_worker, args=(seed, jobs, results, slot), daemon=True)
        proc.start()
        procs[n] = (proc, slot)

    for n in range(workers):
        start_worker(n)
    total = Counts()
    saved: dict[str, int] = {}
    began = last_report = last_result = time.monotonic()
    while pending:
        try:
            job, counts = results.get(timeout=5)
        except queue.Empty:
            # No result for a long time: a worker is stuck where the alarm cannot reach.
            if time.monotonic() - last_result > CHUNK * WATCHDOG_S + 60:
                _recover_stuck(procs, pending, jobs, total, start_worker, seed)
                last_result = time.monotonic()
            continue
        last_result = time.monotonic()
        pending.discard(job)
        assert isinstance(counts, Counts)
        for finding in counts.findings:
            n = saved.get(finding.signature, 0)
            if n < SAVED_PER_SIGNATURE:
                saved[finding.signature] = n + 1
                save(finding, seed)
        counts.findings = [f for f in counts.findings if saved.get(f.signature, 0) <= 1]
        total.add(counts)
        if time.monotonic() - last_report >= progress_every:
            last_report = time.monotonic()
            print(_line(total, last_report - began), file=sys.stderr, flush=True)
    for _ in procs:
        jobs.put(None)
    for proc, _slot in procs.values():
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return total


def _recover_stuck(procs, pending, jobs, total, start_worker, seed) -> None:  # type: ignore[no-untyped-def]
    """Kill every worker, count the input each was on as a hang, requeue the rest of its
    range."""
    for n, (proc, slot) in list(procs.items()):
        proc.kill()
        proc.join()
        start = slot.value
        job = next((j for j in pending if j[0] == start), None)
        if job is not None:
            pending.discard(job)
            total.hangs += 1
            total.findings.append(Finding("hang", start, [], "worker stuck: killed", b""))
            if job[0] + 1 < job[1]:
                pending.add((job[0] + 1, job[1]))
                jobs.put((job[0] + 1, job[1]))
        start_worker(n)


def _line(c: Counts, elapsed: float) -> str:
    rate = c.total / elapsed if elapsed > 0 else 0.0
    return (
        f"{c.total} inputs in {elapsed:.0f} s ({rate:.0f}/s): {c.diagnostics} diagnostics, "
        f"{c.success} success, {c.tracebacks} tracebacks, {c.hangs} hangs "
        f"({c.retried} retried once)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--first", type=int, default=0, help="index of the first input")
    parser.add_argument("--progress-every", type=float, default=60.0, help="seconds")
    args = parser.parse_args()
    began = time.monotonic()
    counts = campaign(
        args.inputs, args.workers, args.seed, first=args.first, progress_every=args.progress_every
    )
    print(_line(counts, time.monotonic() - began))
    for finding in counts.findings:
        print(f"  {finding.kind} at input {finding.index}: {finding.signature}")
    return 1 if counts.tracebacks or counts.hangs else 0


if __name__ == "__main__":
    os.environ.pop("NATS_STREAMING_ENCRYPTION_KEY", None)  # only ENVIRONMENT counts
    sys.exit(main())
