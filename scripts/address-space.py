"""How much address space (`ulimit -v`) `wsperf analyze` needs on this machine.

    python scripts/address-space.py [REPORT] [--mib 1000 1200 ...] [--floor]

Runs `wsperf analyze REPORT -f json` (default: the bundled gemm_wgmma_tma report) under
each RLIMIT_AS given and prints, per limit, the exit status and the last line of stderr.
wsperf refuses limits under `min_address_space()` (collectors/limits.py) with one line
before anything loads; without --floor this script lifts that floor for its runs (it sets
MIN_ADDRESS_SPACE and PER_CORE to 0 in the process it starts), so that what shows is where, and how,
the command itself fails: that is what the floor was chosen from, on a 2-core and on a
16-core machine (threads reserve address space, so cores change the answer). Each limit
is run --reps times (default 3): near the edge the outcome varies from run to run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import sys
from wsperf.collectors import limits
if {lift}:
    limits.MIN_ADDRESS_SPACE = limits.PER_CORE = 0
from wsperf.cli.entry import main
sys.argv = ["wsperf", "analyze", {report!r}, "-f", "json"]
sys.exit(main())
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", default=str(ROOT / "fixtures" / "reports" / "gemm_wgmma_tma.ncu-rep"))
    ap.add_argument("--mib", type=int, nargs="+", default=[500, 1000, 1200, 1400, 1600, 1800, 2048, 2500, 3000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--floor", action="store_true", help="keep wsperf's floor (see what a user sees)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs; wsperf analyze {args.report}; floor {'kept' if args.floor else 'lifted'}")
    code = RUN.format(lift=not args.floor, report=args.report)
    for mib in args.mib:
        for _ in range(args.reps):
            def limit(m: int = mib) -> None:
                resource.setrlimit(resource.RLIMIT_AS, (m << 20, m << 20))

            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limit,
                               timeout=300)
            last = (p.stderr.strip().splitlines() or [""])[-1]
            print(f"{mib:6d} MiB  exit {p.returncode:3d}  {last[:140]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
