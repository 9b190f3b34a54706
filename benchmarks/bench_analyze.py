"""How long `wsperf analyze REPORT` takes, end to end, against a bare ncu_report read.

    python benchmarks/bench_analyze.py [REPORT] [--reps N] [--profile]

REPORT defaults to fixtures/reports/gemm_wgmma_tma.ncu-rep (one launch, --set full).
Each repetition runs, in fresh processes as a user does, alternating so that a machine
busy with other work weighs on both alike (median of N, default 5):

  bare     python -c: import ncu_report, load the report, read every value of every
           metric of every action, aggregate and instances (the typed accessors)
  analyze  the `wsperf` console script: analyze REPORT (text output to /dev/null):
           interpreter start, imports, reader processes, DuckDB store, roles, hypotheses,
           with the kernel's disassembly in the cache (collectors/cubin.py): what a
           report of code analyzed before costs (a nightly job on unchanged kernels, the
           same report with other options, a compare's baseline)
  cold     the same with an empty disassembly cache each time (a new kernel: nvdisasm runs)
  serial   cold, with WSPERF_NO_PRESTART=1: the readers start only when the load begins
           (after the command's imports), as before collectors/prestart.py
  help     `wsperf --help`

and prints the medians and the ratios to bare: of the medians, and the median of each
round's own ratio (a machine whose speed drifts between rounds moves both sides alike). wsperf's bytecode is compiled first, as an
installed program has it: where PYTHONDONTWRITEBYTECODE is set (some CI images and
containers set it), Python would otherwise compile every module changed since its last
.pyc on every run (~35 ms a command on this package's hot path, and more in the reader). Targets: analyze <= 1.0 s wall and <= 4x
bare (2-core CPU machine). With --profile, one analyze in this process under cProfile
(the top 25 by cumulative time) and the slowest imports (-X importtime) follow.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "fixtures" / "reports" / "gemm_wgmma_tma.ncu-rep"
TARGET_S, TARGET_RATIO = 1.0, 4.0

BARE = """
import sys, ncu_report
im = ncu_report.IMetric
get = {im.ValueKind_DOUBLE: im.as_double, im.ValueKind_FLOAT: im.as_double, im.ValueKind_UINT32: im.as_uint64,
       im.ValueKind_UINT64: im.as_uint64, im.ValueKind_STRING: im.as_string}
ctx = ncu_report.load_report(sys.argv[1])
n = 0
for ri in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(ri)
    for ai in range(rng.num_actions()):
        action = rng.action_by_idx(ai)
        for name in action.metric_names():
            m = action.metric_by_name(name)
            f = get.get(m.kind())
            n += 1 + m.num_instances()
            if f:
                f(m)
            k = m.num_instances()
            if k and get.get(m.kind(0)):
                g = get[m.kind(0)]
                for j in range(k):
                    g(m, j)
print(n)
"""


def wall(cmd: list[str]) -> float:
    env = None
    if cmd and cmd[0] == "env":  # env NAME=VALUE CMD...
        env = {**os.environ, **dict(a.split("=", 1) for a in cmd[1:] if "=" in a and not a.startswith("/"))}
        cmd = [a for a in cmd[1:] if not ("=" in a and not a.startswith("/"))]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    exe = shutil.which("wsperf", path=str(Path(sys.executable).parent)) or "wsperf"
    for pkg in ("wsperf", "wsperf.cli", "wsperf.collectors", "wsperf.analyses"):
        spec = importlib.util.find_spec(pkg)
        for d in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(d, quiet=1, maxlevels=0)
    with tempfile.TemporaryDirectory(prefix="wsperf-bench-") as tmp:
        kept = f"WSPERF_CACHE_DIR={tmp}/kept"

        def cold() -> str:  # a new, empty cache directory for each run
            return f"WSPERF_CACHE_DIR={tempfile.mkdtemp(dir=tmp)}"

        runs = {
            "bare": lambda: [sys.executable, "-c", BARE, str(args.report)],
            "analyze": lambda: ["env", kept, exe, "analyze", str(args.report)],
            "cold": lambda: ["env", cold(), exe, "analyze", str(args.report)],
            "serial": lambda: ["env", cold(), "WSPERF_NO_PRESTART=1", exe, "analyze", str(args.report)],
            "help": lambda: [exe, "--help"],
        }
        for cmd in runs.values():  # untimed: warm the page cache and the .pyc files, and fill `kept`
            wall(cmd())
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.reps):
            for name, cmd in runs.items():
                times[name].append(wall(cmd()))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:8s} median {med[k]:.3f} s   (min {min(v):.3f}, max {max(v):.3f}, n={len(v)})")
    def paired(a: str, b: str) -> str:  # the median of each round's own ratio: drift between rounds cancels
        return f"{statistics.median(x / y for x, y in zip(times[a], times[b])):.2f}x"

    print(f"serial / cold = {med['serial'] / med['cold']:.2f}x, per round {paired('serial', 'cold')}"
          "   (what starting the readers early saves)")
    print(f"cold / bare = {med['cold'] / med['bare']:.2f}x, per round {paired('cold', 'bare')}"
          "   (a kernel not disassembled before)")
    print(f"analyze / bare = {med['analyze'] / med['bare']:.2f}x, per round {paired('analyze', 'bare')}"
          f"   (target <= {TARGET_RATIO:.0f}x; analyze target <= {TARGET_S:.1f} s)")
    print(f"report: {args.report}")
    if args.profile:
        profile(exe, args.report)
    return 0


def profile(exe: str, report: Path) -> None:
    code = ("import cProfile, pstats, sys\n"
            f"sys.argv = ['wsperf', 'analyze', {str(report)!r}]\n"
            "from wsperf.cli.main import app\n"
            "pr = cProfile.Profile(); pr.enable()\n"
            "try:\n    app()\nexcept SystemExit:\n    pass\n"
            "pr.disable(); pstats.Stats(pr, stream=sys.stderr).sort_stats('cumulative').print_stats(25)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    print(p.stderr)
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import wsperf.cli.main"], capture_output=True,
                       text=True)
    rows = [line.split("|") for line in p.stderr.splitlines() if line.startswith("import time:")][1:]
    rows.sort(key=lambda r: -int(r[1]))
    print("slowest imports of wsperf.cli.main (cumulative us | module):")
    for r in rows[:20]:
        print(f"  {int(r[1]):>9} | {r[2].rstrip()}")


if __name__ == "__main__":
    sys.exit(main())
