"""How fast `wsperf history` (and `analyze` of one new report) is on a year of runs.

    python benchmarks/bench_history.py [--kernels 4] [--small-runs 36] [--large-runs 365] [--reps 5] [--keep DIR]

Builds two stores from the real compare fixtures (fixtures/compare/*.ncu-rep.gz: the
section set of `wsperf collect`, ~7,800 metric rows per launch of which 409 are
aggregates) and measures them:

  store     the four fixture reports loaded by wsperf (24 launches, roles derived), then
            replicated in SQL into nightly runs: each run one report of K launches, one
            per kernel `ws_stream_k1` .. `ws_stream_kK`; launch j of kernel k in run r is a
            full copy of a real launch (every metric row, aggregate and per-PC, its SASS,
            stalls, opcodes, ncu rules and roles) of fixture k mod 4 (healthy a/b,
            serialized, cp.async), with its duration, cycles and counter aggregates
            scaled by a per-launch jitter (normal, 0.5%) and kernel k1 10% slower from
            60% of the year on (a regression for history to show). Runs are dated one a
            day, tagged nightly (every 7th also weekly).
            small: --small-runs runs (a month: ~1M metric rows); large: --large-runs (a
            year: ~10M)
  history   analyses.history.history on a read-only connection (as `wsperf history`):
            every kernel's duration; one kernel's sm__cycles_active.avg (a metrics-table
            figure); the last 30 weekly runs. Median of --reps after one warm-up
  analyze   on the large store: load one more real report (ws_stream_healthy) and run
            analyses.analyze.analyze restricted to its launch (what `wsperf analyze --db`
            does) against the same call over every launch in the store (what it did
            before runs were recorded)

Target: every history query < 1 s on the large store. It runs in a few minutes on a
2-core machine; it is not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ncu_report  # noqa: F401  before pyarrow, as the loader's readers do

from wsperf.analyses.analyze import analyze, launch_ids_of_reports
from wsperf.analyses.history import history
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store, transaction

ROOT = Path(__file__).resolve().parents[1]
COMPARE = sorted((ROOT / "fixtures" / "compare").glob("*.ncu-rep.gz"))
NEW_REPORT = ROOT / "fixtures" / "reports" / "ws_stream_healthy.ncu-rep"
TARGET_S = 1.0

# Per-launch tables copied row for row from the template launch (only launch_id changes).
_COPIED = ("sass", "stalls", "opcodes", "ncu_rules", "role_pcs")


def build(path: Path, runs: int, kernels: int) -> float:
    """The store at `path` (see the module docstring); returns the seconds it took."""
    t0 = time.perf_counter()
    con = open_store(path)
    loaded = load_reports(con, sorted(COMPARE))
    analyze(con)  # derives role_pcs for the templates
    con.execute("SELECT setseed(0.42)")
    with transaction(con, "synthetic runs"):
        # Template j of report i: the fixture launches in load order.
        con.execute("""CREATE TEMP TABLE tpl AS
                       SELECT launch_id, report_id, row_number() OVER (PARTITION BY report_id ORDER BY launch_id) - 1 AS j,
                              dense_rank() OVER (ORDER BY report_id) - 1 AS i
                       FROM launches""")
        ((base_launch, base_report, per_report),) = con.execute(
            "SELECT (SELECT max(launch_id) + 1 FROM launches), (SELECT max(report_id) + 1 FROM reports), (SELECT max(j) + 1 FROM tpl)"
        ).fetchall()
        con.execute(
            """CREATE TEMP TABLE plan AS
               SELECT r, k, t.launch_id AS tpl_id,
                      $bl + (r - 1) * $K + (k - 1) AS launch_id,
                      $br + r - 1 AS report_id,
                      -- Box-Muller: one normal deviate per launch
                      (1 + 0.005 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
                        * CASE WHEN k = 1 AND r >= 0.6 * $R THEN 1.10 ELSE 1.0 END AS f
               FROM range(1, $R + 1) AS rr(r), range(1, $K + 1) AS kk(k)
               JOIN tpl AS t ON t.i = (k - 1) % 4 AND t.j = r % $per
               ORDER BY launch_id""",
            {"bl": base_launch, "br": base_report, "K": kernels, "R": runs, "per": per_report})
        con.execute(
            """INSERT INTO runs
               SELECT r, printf('main@%s:%s', left(md5(r::VARCHAR), 12), strftime(ts, '%Y%m%dT%H%M%S')),
                      md5(r::VARCHAR) || left(md5((-r)::VARCHAR), 8), 'main', ts, 'ci-h200-1', 'NVIDIA H200',
                      '580.159.04', '2025.3.1.0',
                      CASE WHEN r % 7 = 0 THEN ['nightly', 'weekly'] ELSE ['nightly'] END, '0.1.0'
               FROM (SELECT r, TIMESTAMP '2025-12-01 02:00:00' + to_days(r::INTEGER - 1) AS ts
                     FROM range(1, $R + 1) AS rr(r))""", {"R": runs})
        con.execute(
            """INSERT INTO reports
               SELECT x.* REPLACE ($br + u.run_id - 1 AS report_id,
                                   printf('/nightly/%s/ws_stream.ncu-rep', strftime(u.started_at, '%Y-%m-%d')) AS path,
                                   sha256('synthetic ' || u.run_id) AS sha256, $K AS num_launches,
                                   u.started_at AS collected_at, u.started_at + INTERVAL 1 HOUR AS loaded_at)
               FROM runs AS u, (SELECT * FROM reports WHERE report_id = 1) AS x""", {"br": base_report, "K": kernels})
        con.execute("INSERT INTO run_reports SELECT run_id, $br + run_id - 1 FROM runs", {"br": base_report})
        con.execute(
            """INSERT INTO launches
               SELECT l.* REPLACE (p.launch_id AS launch_id, p.report_id AS report_id, 0 AS range_idx,
                                   p.k - 1 AS action_idx,
                                   replace(l.kernel_mangled, '9ws_stream', printf('%dws_stream_k%d', 11 + (p.k >= 10)::INT, p.k)) AS kernel_mangled,
                                   replace(l.kernel_demangled, 'ws_stream', 'ws_stream_k' || p.k) AS kernel_demangled,
                                   'ws_stream_k' || p.k AS kernel_function,
                                   l.elapsed_cycles * p.f AS elapsed_cycles, l.duration_ns * p.f AS duration_ns)
               FROM plan AS p JOIN launches AS l ON l.launch_id = p.tpl_id
               ORDER BY p.launch_id""")
        con.execute(
            """INSERT INTO metrics
               SELECT m.* REPLACE (p.launch_id AS launch_id,
                                   CASE WHEN m.instance IS NULL AND m.metric_type IN ('counter', 'throughput')
                                        THEN m.value_double * p.f ELSE m.value_double END AS value_double)
               FROM plan AS p JOIN metrics AS m ON m.launch_id = p.tpl_id
               ORDER BY p.launch_id""")
        for t in _COPIED:
            con.execute(f"""INSERT INTO {t} SELECT x.* REPLACE (p.launch_id AS launch_id)
                            FROM plan AS p JOIN {t} AS x ON x.launch_id = p.tpl_id ORDER BY p.launch_id""")
    con.execute("CHECKPOINT")
    con.close()
    assert len(loaded) == 4
    return time.perf_counter() - t0


def timed(fn, reps: int) -> tuple[float, object]:
    result = fn()  # warm-up: DuckDB's first read of the file's blocks
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def measure(path: Path, reps: int) -> dict[str, object]:
    con = open_store(path, read_only=True)
    ((metric_rows, launches, runs),) = con.execute(
        "SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM launches), (SELECT count(*) FROM runs)").fetchall()
    queries = {
        "all kernels, duration_ns": lambda: history(con),
        "ws_stream_k1, sm__cycles_active.avg": lambda: history(con, kernel="^ws_stream_k1$",
                                                               metric="sm__cycles_active.avg"),
        "last 30 weekly, duration_ns": lambda: history(con, tags=["weekly"], last=30),
    }
    out: dict[str, object] = {"metric_rows": metric_rows, "launches": launches, "runs": runs,
                              "bytes": path.stat().st_size, "queries": {}}
    for name, q in queries.items():
        t, points = timed(q, reps)
        out["queries"][name] = (t, len(points))
    con.close()
    return out


def measure_analyze(path: Path, reps: int) -> tuple[float, int, float, int]:
    con = open_store(path)
    (res,) = load_reports(con, [NEW_REPORT])
    ids = launch_ids_of_reports(con, [res.report_id])
    t_new, new = timed(lambda: analyze(con, launch_ids=ids), reps)
    t_all, every = timed(lambda: analyze(con), max(1, reps // 2))
    con.close()
    return t_new, len(new), t_all, len(every)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=4, help="kernels profiled per nightly run")
    ap.add_argument("--small-runs", type=int, default=36)
    ap.add_argument("--large-runs", type=int, default=365)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the stores in this directory and keep them")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="wsperf-bench-history-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        results = {}
        for size, runs in (("small", args.small_runs), ("large", args.large_runs)):
            path = where / f"history-{size}.duckdb"
            path.unlink(missing_ok=True)
            built = build(path, runs, args.kernels)
            results[size] = measure(path, args.reps)
            r = results[size]
            print(f"{size}: {r['runs']} runs, {r['launches']} launches, {r['metric_rows']:,} metric rows, "
                  f"store {r['bytes'] / 2**20:.1f} MiB, built in {built:.1f} s")
            for name, (t, n) in r["queries"].items():
                print(f"  history {name:<40} {t * 1000:8.1f} ms  ({n} points)")
        small, large = results["small"], results["large"]
        print(f"ratio large/small: metric rows {large['metric_rows'] / small['metric_rows']:.1f}x, "
              f"store size {large['bytes'] / small['bytes']:.1f}x")
        worst = 0.0
        for name in large["queries"]:
            ts, tl = small["queries"][name][0], large["queries"][name][0]
            worst = max(worst, tl)
            print(f"  history {name:<40} time {tl / ts:5.1f}x")
        t_new, n_new, t_all, n_all = measure_analyze(where / "history-large.duckdb", args.reps)
        print(f"analyze on the large store: the new report's {n_new} launch {t_new * 1000:.0f} ms; "
              f"every launch ({n_all}) {t_all * 1000:.0f} ms")
        ok = worst < TARGET_S
        print(f"target: history < {TARGET_S:g} s at {large['metric_rows']:,} metric rows: "
              f"{'met' if ok else 'MISSED'} (slowest {worst * 1000:.0f} ms)")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
