"""How `wsperf analyze` of many reports at once (a nightly job) compares with reading
them bare.

    python benchmarks/bench_many.py [REPORT ...] [--count N] [--reps N]

REPORTs default to the N largest fixtures/reports/*.ncu-rep (N = --count, default 10).
Each repetition runs, in fresh processes as a user does, alternating so that a machine
busy with other work weighs on both alike (median of --reps, default 3):

  bare     python -c: import ncu_report, then for each report in turn: load it and read
           every value of every metric of every action, aggregate and instances (the
           typed accessors), in one process: what a script of ten lines does
  analyze  the `wsperf` console script: analyze REPORT ... --format json (to /dev/null),
           with the kernels' disassembly in the cache (collectors/cubin.py), as a
           nightly job on unchanged kernels has it

and prints the medians, the ratio of the medians and the median of each round's own
ratio (a machine whose speed drifts between rounds moves both sides alike), with the
number of CPUs this process may use (docs/speed.md has the figures and where the time
goes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_analyze import BARE  # this folder is on sys.path when a script of it runs

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"

# bench_analyze's bare read of one report (sys.argv[1]), run on each report in turn.
BARE_EACH = f"""
import sys
for report in sys.argv[1:]:
    sys.argv = [sys.argv[0], report]
    exec({BARE!r})
"""


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="*", type=Path)
    ap.add_argument("--count", type=int, default=10, help="how many fixture reports, when none is given (default 10)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    reports = args.reports or sorted(REPORTS.glob("*.ncu-rep"), key=lambda p: -p.stat().st_size)[:args.count]
    exe = shutil.which("wsperf", path=str(Path(sys.executable).parent)) or "wsperf"
    with tempfile.TemporaryDirectory(prefix="wsperf-bench-") as tmp:
        env = {**os.environ, "WSPERF_CACHE_DIR": tmp}
        runs = {
            "bare": [sys.executable, "-c", BARE_EACH, *map(str, reports)],
            "analyze": [exe, "analyze", *map(str, reports), "--format", "json"],
        }
        for cmd in runs.values():  # untimed: warm the page cache and the .pyc files, and fill the cache
            wall(cmd, env)
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.reps):
            for name, cmd in runs.items():
                times[name].append(wall(cmd, env))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:8s} median {med[k]:.3f} s   (min {min(v):.3f}, max {max(v):.3f}, n={len(v)})")
    per_round = statistics.median(a / b for a, b in zip(times["analyze"], times["bare"]))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"analyze / bare = {med['analyze'] / med['bare']:.2f}x, per round {per_round:.2f}x   "
          f"({len(reports)} reports, {sum(p.stat().st_size for p in reports) / 2**20:.1f} MiB, {cpus} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
