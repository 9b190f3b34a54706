"""Fuzz every loader for longer than CI does: the targets and mutations of
tests/test_fuzz.py (tests/corpus.py), with fresh randomness, in rounds until the time
given to each target is spent. Prints the cases run per target, how they ended, and
each finding (an exception that is not a WsperfError) with the falsifying input that
hypothesis shrank it to.

    python benchmarks/fuzz_loaders.py                     # 60 s per target
    python benchmarks/fuzz_loaders.py --seconds 300 --targets sanitizer_xml,ptx
    python benchmarks/fuzz_loaders.py --launches 1000     # also load a report of 1,000 launches

Needs the `test` extra (hypothesis). Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import ncu_report  # noqa: F401,E402  before pyarrow (see tests/conftest.py)

import corpus  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from wsperf.collectors.store import open_store  # noqa: E402

ROUND = {"ncu_report": 20}  # examples per hypothesis round; 200 for the others


def fuzz(target: str, seconds: float, tmp: Path) -> tuple[int, dict[str, int], list[str]]:
    tmp.mkdir(parents=True)
    store = open_store(None)
    targets = corpus.Targets(tmp, store)
    load = getattr(targets, target)
    seeds = corpus.seeds(target, tmp)
    outcomes: dict[str, int] = {}
    findings: list[str] = []
    end = time.monotonic() + seconds

    @settings(max_examples=ROUND.get(target, 200), deadline=None, database=None, derandomize=False,
              report_multiple_bugs=True, suppress_health_check=list(HealthCheck), print_blob=True)
    @given(seed=st.integers(0, len(seeds) - 1), mutate=corpus.mutations_for(target))
    def run(seed, mutate):
        outcome = load(mutate(seeds[seed]))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    while time.monotonic() < end:
        try:
            run()
        except BaseException as e:  # a finding: hypothesis has printed the shrunk input
            if isinstance(e, KeyboardInterrupt):
                raise
            errors = list(e.exceptions) if isinstance(e, BaseExceptionGroup) else [e]
            for err in errors:
                tb = traceback.extract_tb(err.__traceback__)[-1]
                findings.append(f"{type(err).__name__}: {str(err)[:160]} at {Path(tb.filename).name}:{tb.lineno}")
    store.close()
    return sum(outcomes.values()), outcomes, findings


def many_launches(n: int, tmp: Path) -> None:
    from wsperf.collectors.ncu import load_report

    path = tmp / f"launches{n}.ncu-rep"
    path.write_bytes(corpus.concatenated_report(n))
    con = open_store(None)
    t0 = time.monotonic()
    r = load_report(con, path, timeout_s=3600)
    took = time.monotonic() - t0
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(f"report of {r.launches} launches ({path.stat().st_size / 1e6:.0f} MB): loaded in {took:.1f} s, "
          f"{r.rows['metrics']:,} metric rows; peak RSS {rss / 1024:.0f} MiB (largest process)")
    con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="time per target")
    ap.add_argument("--targets", default=",".join(corpus.SEEDS), help="comma-separated, of: " + ", ".join(corpus.SEEDS))
    ap.add_argument("--launches", type=int, default=0, help="also load a report of this many launches")
    args = ap.parse_args()
    found = 0
    with tempfile.TemporaryDirectory(prefix="wsperf-fuzz-") as tmp:
        print(f"{'target':14} {'cases':>7} {'per s':>7}  outcomes")
        for target in args.targets.split(","):
            t0 = time.monotonic()
            cases, outcomes, findings = fuzz(target, args.seconds, Path(tmp) / target)
            rate = cases / (time.monotonic() - t0)
            print(f"{target:14} {cases:7} {rate:7.1f}  {outcomes}", flush=True)
            for f in dict.fromkeys(findings):
                print(f"  FINDING {f}")
            found += len(findings)
        if args.launches:
            many_launches(args.launches, Path(tmp))
    print(f"findings: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
