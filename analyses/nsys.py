"""What an Nsight Systems timeline says: where the GPU time goes, where the GPU waits.

Every figure is SQL over the tables `collectors/nsys.py` fills (queries/nsys_*.sql, one
file per question), returned as frozen dataclasses; nothing here draws or prints.

- `summarize_nsys`: per-kernel statistics (count, total, mean, median, p10/p90, share
  of kernel time), idle gaps per stream with the `gpu-waits-on-host` finding
  (launch-bound or host-bound), overlap across streams per device, NVTX range totals.
- `match_ncu`: which nsys kernel each Nsight Compute launch is (name and launch
  configuration) and its share of GPU time, so a verdict can lead with what it costs
  ("62% of GPU time; serialized-roles confirmed"); `rank_by_gpu_time` orders analyses
  that way.
- `timeline`: the spans of the top kernels per stream, for the timeline chart.
- `compare_nsys`: the regression gate on nsys kernel durations (many launches per side,
  compare's Mann-Whitney rule and thresholds), as compare's own result type.
- `record_nsys_run`, `nsys_history`, `run_export_ids`: runs of exports in a `--db` store
  (`analyze EXPORT --db`), their kernel durations per run (`history --source nsys`), and
  the exports a run label names (`compare --db LABEL LABEL`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Iterable, Mapping

import duckdb
import yaml

from wsperf.analyses.analyze import KernelAnalysis
from wsperf.analyses.compare import CompareResult, KernelComparison, decide
from wsperf.analyses.config import AnalysisConfig
from wsperf.analyses.history import HistoryPoint, RecordedRun, RunMeta, insert_run
from wsperf.analyses.sql import check_kernel_regex
from wsperf.analyses.hypotheses import Status
from wsperf.collectors.errors import InputError, StoreError
from wsperf.queries import read_query

GAPS_QUERY = "nsys_stream_gaps"
TIMELINE_MAX_SPANS = 20_000  # spans handed to a chart at most (a browser draws ~10^4 marks comfortably)
_HEADER = re.compile(r"\A\s*/\*(.*?)\*/", re.S)


@dataclass(frozen=True)
class ExportInfo:
    """One loaded export (nsys_exports) and its GPUs."""

    export_id: int
    path: str
    nsys_version: str | None
    export_schema: str | None
    session_start_utc: datetime | None
    command: str | None
    gpus: tuple[str, ...]  # 'device_id: name (sm_XY, N SMs)', every GPU the target had
    kernels: int
    absent_columns: tuple[str, ...]


@dataclass(frozen=True)
class KernelStat:
    """One kernel (demangled name) over all its launches (nsys_kernel_stats.sql); ns."""

    kernel: str
    short_name: str | None
    launches: int
    total_ns: int
    mean_ns: float
    median_ns: float
    p10_ns: float
    p90_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float | None  # None with one launch
    share: float  # of all kernel time in the exports, 0..1
    configs: int  # distinct (grid, block) it ran with
    streams: int


@dataclass(frozen=True)
class StreamGaps:
    """Idle time of one stream between its GPU operations, and the gpu-waits-on-host
    finding (nsys_stream_gaps.sql; its header defines every figure)."""

    export_id: int
    global_pid: int | None  # NULL where the export has no globalPid column
    device_id: int | None
    context_id: int | None
    stream_id: int | None
    kernels: int
    copies: int
    span_ns: int
    busy_ns: int
    gaps: int
    idle_ns: int
    host_wait_ns: int
    host_late_gaps: int
    median_gap_ns: float | None
    median_kernel_ns: float | None
    median_launch_call_ns: float | None
    host_wait_share: float | None
    status: Status
    kind: str  # 'launch-bound' or 'host-bound' (meaningful when confirmed)

    @property
    def pid(self) -> int | None:
        return None if self.global_pid is None else (self.global_pid >> 24) & 0xFFFFFF

    @property
    def summary(self) -> str:
        share = f"{self.host_wait_share:.0%}" if self.host_wait_share is not None else "n/a"
        if self.status is Status.no_data:
            return f"{self.gaps:,} gaps: too few to judge"
        says = (f"the GPU waited on the CPU {share} of the stream's span ({_ms(self.host_wait_ns)} in "
                f"{self.host_late_gaps:,} of {self.gaps:,} gaps)")
        if self.status is Status.confirmed:
            why = (f"median kernel {_us(self.median_kernel_ns)} <= median launch call {_us(self.median_launch_call_ns)}"
                   if self.kind == "launch-bound" else "the CPU was busy elsewhere between launches")
            return f"{self.kind}: {says}; {why}"
        return says


@dataclass(frozen=True)
class DeviceOverlap:
    """Kernel concurrency on one device (nsys_overlap.sql); ns."""

    export_id: int
    device_id: int | None
    kernels: int
    streams: int
    span_ns: int
    kernel_ns: int  # sum of kernel durations (counts overlapped time once per kernel)
    busy_ns: int  # time at least one kernel ran
    overlap_ns: int  # time two or more ran at once
    idle_ns: int  # span with no kernel running
    max_concurrent: int
    busy_share: float | None
    overlap_share: float | None  # overlap_ns / busy_ns


@dataclass(frozen=True)
class NvtxRange:
    """Totals of one NVTX range name (nsys_nvtx_ranges.sql); ns."""

    domain: str | None
    text: str | None
    kind: str
    ranges: int
    total_ns: int
    median_ns: float
    min_ns: int
    max_ns: int
    kernels: int  # kernels launched from the range's thread while it was open
    kernel_ns: int  # their GPU time


@dataclass(frozen=True)
class NsysSummary:
    """Everything the timeline says about the loaded exports."""

    exports: tuple[ExportInfo, ...]
    kernel_time_ns: int  # all kernels' durations summed
    kernels: tuple[KernelStat, ...]  # most time first
    streams: tuple[StreamGaps, ...]  # most host wait first
    devices: tuple[DeviceOverlap, ...]
    nvtx: tuple[NvtxRange, ...]
    thresholds: Mapping[str, Any]  # of the gpu-waits-on-host finding, as applied

    def findings(self) -> list[StreamGaps]:
        """The streams where the GPU waits on the CPU."""
        return [s for s in self.streams if s.status is Status.confirmed]


@dataclass(frozen=True)
class KernelTime:
    """The nsys side of one Nsight Compute launch (nsys_ncu_match.sql)."""

    launch_id: int
    nsys_kernel: str  # demangled name in the export (the first, when several configurations matched)
    launches: int  # nsys launches of that name and configuration
    total_ns: int
    median_ns: float
    share: float  # of all kernel time in the exports
    name_share: float  # every configuration of the kernel
    matched_by: str  # 'mangled', 'demangled' or 'function'
    nsys_gpu: str | None = None  # the GPU(s) the matched nsys kernels ran on, e.g. 'NVIDIA GeForce RTX 3060'
    ncu_gpu: str | None = None  # the profiled launch's GPU, e.g. 'NVIDIA H200'

    @property
    def other_gpu(self) -> bool:
        """The timeline ran on another GPU than the profile: the two are not one run, and
        its share of GPU time may not hold for the profiled one."""
        return bool(self.nsys_gpu and self.ncu_gpu) and self.ncu_gpu not in self.nsys_gpu.split(", ")


@dataclass(frozen=True)
class RankedAnalysis:
    """A launch's verdicts with its kernel's share of GPU time (None: not in the timeline)."""

    analysis: KernelAnalysis
    time: KernelTime | None

    @property
    def headline(self) -> str:
        """e.g. '62% of GPU time; serialized-roles confirmed'."""
        confirmed = [f.id for f in self.analysis.findings if f.status is Status.confirmed]
        verdict = ", ".join(confirmed) + " confirmed" if confirmed else "no hypothesis confirmed"
        cost = f"{self.time.share:.0%} of GPU time" if self.time else "not in the Nsight Systems timeline"
        if self.time and self.time.other_gpu:
            cost += (f" (the timeline ran on {self.time.nsys_gpu}, the profile on {self.time.ncu_gpu}: not one run, "
                     "the share may not hold)")
        return f"{cost}; {verdict}"


@dataclass(frozen=True)
class TimelineSpan:
    """One kernel on one stream, for the timeline chart (times in ns from the first kernel)."""

    stream: str  # 'pid P dev D stream S'
    kernel: str  # short name; 'other' for kernels outside the top ones
    start_ns: int
    end_ns: int


# -- the finding's header ----------------------------------------------------------------


@cache
def gaps_header() -> dict[str, Any]:
    """The YAML header of nsys_stream_gaps.sql: finding, question, threshold, remedy."""
    m = _HEADER.match(read_query(GAPS_QUERY))
    doc = yaml.safe_load(m.group(1).split("\n\n", 1)[0]) if m else None
    if not isinstance(doc, dict) or "threshold" not in doc:
        raise InputError(f"queries/{GAPS_QUERY}.sql: header lacks its thresholds")
    return doc


def _thresholds(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    defaults = dict(gaps_header()["threshold"])
    for k, v in (overrides or {}).items():
        if k not in defaults:
            raise InputError(f"gpu-waits-on-host has no threshold {k!r}; it has {', '.join(sorted(defaults))}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise InputError(f"gpu-waits-on-host threshold {k} = {v!r}: give a number >= 0")
        defaults[k] = v
    return defaults


# -- queries -----------------------------------------------------------------------------


def export_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Every loaded export, in load order."""
    return [r[0] for r in con.execute("SELECT export_id FROM nsys_exports ORDER BY export_id").fetchall()]


def _rows(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = con.execute(read_query(query), params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _exports(con: duckdb.DuckDBPyConnection, ids: list[int]) -> tuple[ExportInfo, ...]:
    gpus: dict[int, list[str]] = {}
    for eid, dev, name, cc, sms in con.execute(
            "SELECT export_id, device_id, name, compute_capability, sm_count FROM nsys_gpus "
            "WHERE list_contains($ids, export_id) ORDER BY export_id, device_id", {"ids": ids}).fetchall():
        arch = f"sm_{cc.replace('.', '')}" if cc else "sm_?"
        gpus.setdefault(eid, []).append(f"{dev}: {name} ({arch}, {sms} SMs)")
    return tuple(
        ExportInfo(eid, path, ver, schema, start, cmd, tuple(gpus.get(eid, [])), n, tuple(absent or ()))
        for eid, path, ver, schema, start, cmd, n, absent in con.execute(
            "SELECT export_id, path, nsys_version, export_schema, session_start_utc, command, kernels, absent_columns "
            "FROM nsys_exports WHERE list_contains($ids, export_id) ORDER BY export_id", {"ids": ids}).fetchall())


def summarize_nsys(con: duckdb.DuckDBPyConnection, exports: Iterable[int] | None = None,
                   thresholds: Mapping[str, Any] | None = None) -> NsysSummary:
    """Kernel statistics, stream gaps with their finding, overlap and NVTX totals of the
    given exports (default: every loaded export), taken together."""
    ids = sorted(set(exports)) if exports is not None else export_ids(con)
    if not ids:
        raise InputError("no Nsight Systems export is loaded; give an `nsys export --type sqlite` file")
    th = _thresholds(thresholds)
    p = {"exports": ids}
    kernels = tuple(KernelStat(r["kernel_demangled"], r["kernel_short"], r["launches"], r["total_ns"], r["mean_ns"],
                               r["median_ns"], r["p10_ns"], r["p90_ns"], r["min_ns"], r["max_ns"], r["stddev_ns"],
                               r["share"] or 0.0, r["configs"], r["streams"])
                    for r in _rows(con, "nsys_kernel_stats", p))
    streams = tuple(StreamGaps(
        r["export_id"], r["global_pid"], r["device_id"], r["context_id"], r["stream_id"], r["kernels"], r["copies"],
        r["span_ns"], r["busy_ns"], r["gaps"], r["idle_ns"], r["host_wait_ns"], r["host_late_gaps"],
        r["median_gap_ns"], r["median_kernel_ns"], r["median_launch_call_ns"], r["host_wait_share"],
        Status(r["status"]), r["kind"]) for r in _rows(con, GAPS_QUERY, {**p, **th}))
    devices = tuple(DeviceOverlap(r["export_id"], r["device_id"], r["kernels"], r["streams"], r["span_ns"],
                                  r["kernel_ns"], r["busy_ns"], r["overlap_ns"], r["idle_ns"], r["max_concurrent"],
                                  r["busy_share"], r["overlap_share"]) for r in _rows(con, "nsys_overlap", p))
    nvtx = tuple(NvtxRange(r["domain"], r["text"], r["kind"], r["ranges"], r["total_ns"], r["median_ns"], r["min_ns"],
                           r["max_ns"], r["kernels"], r["kernel_ns"]) for r in _rows(con, "nsys_nvtx_ranges", p))
    return NsysSummary(_exports(con, ids), sum(k.total_ns for k in kernels), kernels, streams, devices, nvtx, th)


def match_ncu(con: duckdb.DuckDBPyConnection, launch_ids: Iterable[int],
              exports: Iterable[int] | None = None) -> dict[int, KernelTime]:
    """The nsys kernel of each Nsight Compute launch that has one in the exports."""
    ids = sorted(set(exports)) if exports is not None else export_ids(con)
    out: dict[int, KernelTime] = {}
    for r in _rows(con, "nsys_ncu_match", {"exports": ids, "ids": sorted(set(launch_ids))}):
        seen = out.get(r["launch_id"])
        if seen is None:
            out[r["launch_id"]] = KernelTime(r["launch_id"], r["nsys_kernel"], r["launches"], r["total_ns"],
                                             r["median_ns"], r["share"] or 0.0, r["name_share"] or 0.0,
                                             r["matched_by"], r["nsys_gpu"], r["ncu_gpu"])
        else:  # several nsys names of one function and configuration: their time together
            out[r["launch_id"]] = KernelTime(seen.launch_id, seen.nsys_kernel, seen.launches + r["launches"],
                                             seen.total_ns + r["total_ns"], seen.median_ns,
                                             seen.share + (r["share"] or 0.0),
                                             seen.name_share + (r["name_share"] or 0.0), seen.matched_by,
                                             ", ".join(sorted({*(seen.nsys_gpu or "").split(", "),
                                                               *(r["nsys_gpu"] or "").split(", ")} - {""})) or None,
                                             seen.ncu_gpu)
    return out


def rank_by_gpu_time(analyses: Iterable[KernelAnalysis], times: Mapping[int, KernelTime]) -> list[RankedAnalysis]:
    """The analyses, the kernels that take most GPU time first; those not in the
    timeline last, in their own order."""
    ranked = [RankedAnalysis(a, times.get(a.summary.launch_id)) for a in analyses]
    return sorted(ranked, key=lambda r: -(r.time.share if r.time else -1.0))


def timeline(con: duckdb.DuckDBPyConnection, exports: Iterable[int] | None = None, top: int = 5,
             max_spans: int = TIMELINE_MAX_SPANS) -> tuple[TimelineSpan, ...]:
    """Kernel spans per stream for the top `top` kernels by GPU time (others as 'other'),
    the first `max_spans` in time order."""
    ids = sorted(set(exports)) if exports is not None else export_ids(con)
    rows = con.execute(
        """WITH k AS (SELECT * FROM nsys_kernels WHERE list_contains($ids, export_id)),
           top AS (SELECT kernel_demangled FROM k GROUP BY ALL ORDER BY sum(duration_ns) DESC, kernel_demangled
                   LIMIT $top),
           t0 AS (SELECT min(start_ns) AS t0 FROM k)
           SELECT 'pid ' || ((k.global_pid >> 24) & 16777215) || ' dev ' || coalesce(k.device_id::VARCHAR, '?')
                  || ' stream ' || coalesce(k.stream_id::VARCHAR, '?') AS stream,
                  CASE WHEN top.kernel_demangled IS NULL THEN 'other' ELSE coalesce(k.kernel_short, k.kernel_demangled)
                  END AS kernel,
                  k.start_ns - t0 AS start_ns, k.end_ns - t0 AS end_ns
           FROM k CROSS JOIN t0 LEFT JOIN top USING (kernel_demangled)
           ORDER BY k.start_ns, k.record_id LIMIT $max""",
        {"ids": ids, "top": top, "max": max_spans}).fetchall()
    return tuple(TimelineSpan(*r) for r in rows)


def _us(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:.1f} us"


def _ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.2f} ms"


# -- compare: the regression gate on nsys timings ----------------------------------------


def compare_nsys(con: duckdb.DuckDBPyConnection, base: Iterable[int], cand: Iterable[int],
                 config: AnalysisConfig | None = None, base_label: str = "base",
                 cand_label: str = "candidate", kernel: str | None = None) -> CompareResult:
    """Kernel durations of the base exports against the candidate ones, with the rule of
    `analyses.compare` (two-sided Mann-Whitney below alpha *and* a median change beyond
    the `duration_ns` threshold; with too few launches to reach alpha, the wide
    threshold), every launch of a kernel one sample; `kernel`, a regular expression (RE2)
    on the demangled name, keeps only those. Kernels match by demangled name and
    launch configuration, then by name alone when that pairs one configuration with one.
    The result is compare's own type, so its renderers and exit codes apply; its
    base/cand launch ids are the kernels' `nsys_kernels.record_id`s (no ncu launch)."""
    config = config or AnalysisConfig()
    rows = _rows(con, "nsys_compare", {"base": sorted(set(base)), "cand": sorted(set(cand)), "kernel": kernel})
    sides: dict[str, dict[tuple, dict[str, Any]]] = {"base": {}, "cand": {}}
    for r in rows:
        key = (r["kernel_demangled"], r["grid_x"], r["grid_y"], r["grid_z"], r["block_x"], r["block_y"], r["block_z"],
               r["cluster_x"], r["cluster_y"], r["cluster_z"])
        sides[r["side"]][key] = r
    b, c = sides["base"], sides["cand"]
    pairs = [(b[k], c[k], "name+config") for k in b if k in c]
    left_b = {k: v for k, v in b.items() if k not in c}
    left_c = {k: v for k, v in c.items() if k not in b}
    for name in sorted({k[0] for k in left_b} & {k[0] for k in left_c}):
        kb = [k for k in left_b if k[0] == name]
        kc = [k for k in left_c if k[0] == name]
        if len(kb) == len(kc) == 1:  # the launch configuration changed
            pairs.append((left_b.pop(kb[0]), left_c.pop(kc[0]), "name"))
    kernels = []
    for rb, rc, how in sorted(pairs, key=lambda p: -p[1]["total_ns"]):
        base_med, cand_med = rb["median_ns"], rc["median_ns"]
        fig = decide({"name": "duration_ns", "kind": "timing", "unit": "ns",
                      "base_values": [float(v) for v in rb["durations"]],
                      "cand_values": [float(v) for v in rc["durations"]],
                      "base": base_med, "cand": cand_med,
                      "delta_pct": (cand_med - base_med) / base_med * 100 if base_med else None,
                      "base_detail": None, "cand_detail": None}, config)
        kernels.append(KernelComparison(
            rc["kernel_short"] or rc["kernel_demangled"], rb["kernel_demangled"], rc["kernel_demangled"], how,
            f"grid {rc['grid_x']}x{rc['grid_y']}x{rc['grid_z']} block {rc['block_x']}x{rc['block_y']}x{rc['block_z']}",
            tuple(rb["record_ids"]), tuple(rc["record_ids"]), (fig,), ()))
    return CompareResult(base_label, cand_label, tuple(kernels),
                         tuple(sorted({k[0] for k in left_b})), tuple(sorted({k[0] for k in left_c})))


# -- runs of exports: history and compare by label ---------------------------------------


def record_nsys_run(con: duckdb.DuckDBPyConnection, meta: RunMeta, export_ids: Iterable[int]) -> RecordedRun:
    """Write the run `meta` and link it to the loaded `export_ids` (nsys_run_exports); its
    GPU is the exports' GPU names. Call inside the transaction that loaded them."""
    ids = sorted(set(export_ids))
    if not ids:
        raise InputError("no Nsight Systems export to record a run for")
    ((gpu,),) = con.execute("SELECT string_agg(DISTINCT name, ', ' ORDER BY name) FROM nsys_gpus "
                            "WHERE list_contains($ids, export_id)", {"ids": ids}).fetchall()
    run_id, label = insert_run(con, meta, gpu, None)
    con.execute("INSERT INTO nsys_run_exports SELECT $run_id, unnest($ids::INTEGER[])", {"run_id": run_id, "ids": ids})
    return RecordedRun(run_id, label, len(ids))


def _has_nsys_runs(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'nsys_run_exports'").fetchall())


def run_export_ids(con: duckdb.DuckDBPyConnection, label: str) -> list[int] | None:
    """The exports the run `label` recorded; None when no run of exports has that label."""
    if not _has_nsys_runs(con):
        return None
    rows = con.execute("SELECT x.export_id FROM runs AS r JOIN nsys_run_exports AS x USING (run_id) "
                       "WHERE r.label = ? ORDER BY x.export_id", [label]).fetchall()
    return [r[0] for r in rows] or None


def nsys_history(con: duckdb.DuckDBPyConnection, kernel: str | None = None, tags: Iterable[str] = (),
                 last: int | None = None) -> list[HistoryPoint]:
    """One point per (run of exports, kernel), oldest run first: launches and the
    median, min and max of their durations (metric 'duration_ns', ns), from
    queries/nsys_history.sql. Same inputs and checks as `analyses.history.history`."""
    tags = list(tags)
    if last is not None and last < 1:
        raise InputError(f"--last {last}: give a number of runs >= 1")
    check_kernel_regex(kernel)
    if not _has_nsys_runs(con) or not con.execute("SELECT 1 FROM nsys_run_exports LIMIT 1").fetchall():
        raise InputError("no run of Nsight Systems exports is recorded in this store: record one with "
                         "`wsperf analyze EXPORT.sqlite --db FILE` (add --label NAME --tag nightly to name it)")
    try:
        rows = con.execute(read_query("nsys_history"), {"tags": tags, "last": last, "kernel": kernel}).fetchall()
    except duckdb.Error as e:
        raise StoreError(f"reading the runs failed: {str(e).strip().splitlines()[0]}") from None
    if not rows:
        what = [f"tag(s) {', '.join(tags)}"] if tags else []
        what += [f"--kernel {kernel!r}"] if kernel else []
        raise InputError(f"no run of Nsight Systems exports matches {' and '.join(what) or 'the selection'}")
    return [HistoryPoint(run_id, label, commit, branch, started, tuple(tg), k, d, "duration_ns", n, med, lo, hi)
            for run_id, label, commit, branch, started, tg, k, d, n, med, lo, hi in rows]
