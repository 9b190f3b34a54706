"""Which Nsight Compute metric measures each figure wsperf reads, per GPU architecture.

wsperf reads figures ("tensor pipe active", "DRAM throughput", ...), not one chip's metric
names: Nsight Compute names some counters differently, or only on some chips. Blackwell
datacenter parts (sm_100, chip gb100) count tcgen05 work in a pipe and a memory Hopper
does not have (`sm__pipe_tc_cycles_active`: UTCBAR/UTCCP/UTCSHIFT/UTC*MMA issue;
`sm__mem_tensor_cycles_active`: tensor memory), while Hopper's wgmma (and Blackwell's
UTC*MMA, by the catalogue's description of the hmma subpipe) runs on the tensor pipe
that both chips call `sm__pipe_tensor_cycles_active`.

This module is the one place that says which name to use where:

- `wsperf collect` requests `ncu_metrics(arch)` for the GPU it runs on;
- the store gets two views from `figures_sql()` (appended to queries/schema.sql):
  `metric_figures(figure, arch, metric, absent)`, this mapping as rows, and
  `figures(launch_id, arch, figure, metric, value, unit, no_data)`, one row per launch and
  figure with the value of the metric that measures it on the launch's architecture, or
  NULL and the reason (`no_data`): the chip has no such counter (a Blackwell-only figure
  on Hopper), or the report does not hold the metric (not in the sections collected).
  Hypotheses (queries/*.sql) and compare read `figures` by figure name.

Every name here is checked against ncu's own catalogue of each chip
(fixtures/metrics/, `ncu --query-metrics --chip CHIP`) by tests/test_metric_catalogue.py,
which also checks every metric name that collect, queries/*.sql and analyses/*.py name.
What was verified on real hardware and what was not: docs/blackwell.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# reports.arch / environment.Gpu.arch -> the chip whose catalogue ncu lists for it
# (`ncu --list-chips`; compute capability 9.0 = H100/H200, 10.0 = B200/GB200, 12.0 = the
# GeForce/RTX PRO Blackwell parts). A GPU of any other architecture gets only the names
# that are the same on all of these (`ncu_metrics`, the '*' rows of `metric_figures`).
CHIPS = {"sm_90": "gh100", "sm_100": "gb100", "sm_120": "gb202"}
ANY = "*"

_NO_TCGEN05 = ("no tcgen05 on {arch}: the UTC pipe and tensor memory exist on sm_100 only "
               "(Hopper's wgmma is counted in tensor_pipe_pct)")


@dataclass(frozen=True)
class Figure:
    """One figure and the metric that measures it on each architecture."""

    name: str                 # what SQL and compare read, e.g. 'tensor_pipe_pct'
    meaning: str              # what it measures, with its unit
    metrics: dict[str, str]   # arch -> Nsight Compute metric name; an arch missing has no such counter
    collect: bool = False     # requested by `wsperf collect` (else only in larger section sets, e.g. --set full)
    absent: str = ""          # no_data reason where `metrics` has no entry ({arch} filled in)

    def metric(self, arch: str | None) -> str | None:
        """The metric on `arch`; for an unmapped arch, the name shared by every mapped one."""
        if arch in CHIPS:
            return self.metrics.get(arch)
        names = {self.metrics.get(a) for a in CHIPS}
        return names.pop() if len(names) == 1 else None


def _everywhere(name: str) -> dict[str, str]:
    return {arch: name for arch in CHIPS}


# Order matters for the collected ones: it is the order of collect's --metrics list.
FIGURES = (
    *(Figure(name, meaning, _everywhere(metric), collect=True) for name, meaning, metric in (
        ("duration", "GPU time of the launch (ns, launches.duration_ns)", "gpu__time_duration.sum"),
        ("dram_throughput_pct", "DRAM throughput (% of peak, elapsed)",
         "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        ("sm_active_cycles", "cycles an SM had at least one warp resident (cycles, mean over SMs)",
         "sm__cycles_active.avg"),
        ("sm_elapsed_cycles", "elapsed SM cycles (cycles, mean over SMs)", "sm__cycles_elapsed.avg"),
        ("opcode_executed", "warp-level instructions executed per SASS opcode (inst; instances keyed by opcode)",
         "sass__inst_executed_per_opcode"),
        ("executed_instructions", "warp-level instructions executed (inst)", "smsp__inst_executed.sum"))),
    # Blackwell datacenter only (sm_100): the tcgen05 pipe and tensor memory.
    *(Figure(name, meaning, {"sm_100": metric}, collect=True, absent=_NO_TCGEN05) for name, meaning, metric in (
        ("tc_pipe_pct", "tcgen05 (UTC) pipe active: UTCBAR/UTCCP/UTCSHIFT/UTC*MMA issue (% of peak, elapsed)",
         "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed"),
        ("tc_pipe_instructions", "warp instructions executed by the tcgen05 (UTC) pipe (inst)",
         "sm__inst_executed_pipe_tc.sum"),
        ("tmem_pct", "tensor memory active (% of peak, elapsed)",
         "sm__mem_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
        ("tmem_instructions", "warp instructions executed by the tensor-memory pipe (inst)",
         "sm__inst_executed_pipe_tmem.sum"))),
    Figure("tensor_pipe_pct", "tensor pipe active, all MMA kinds (% of peak, elapsed; --set full)",
           _everywhere("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")),
    Figure("tma_pipe_pct", "TMA pipe active (% of peak, elapsed; --set full)",
           _everywhere("sm__pipe_tma_cycles_active.avg.pct_of_peak_sustained_elapsed")),
    Figure("achieved_occupancy_pct", "achieved occupancy (% of the SM's warp slots)",
           _everywhere("sm__warps_active.avg.pct_of_peak_sustained_active")),
    Figure("theoretical_occupancy_pct", "theoretical occupancy (% of the SM's warp slots; Occupancy section)",
           _everywhere("sm__maximum_warps_per_active_cycle_pct")),
    Figure("elapsed_cycles", "elapsed cycles of the slowest GPC (cycles)", _everywhere("gpc__cycles_elapsed.max")),
    *(Figure(f"occupancy_limit_{k}", f"CTAs per SM allowed by {what} (CTAs; launch attribute)",
             _everywhere(f"launch__occupancy_limit_{k}"))
      for k, what in (("blocks", "the CTA-slot limit"), ("registers", "registers"),
                      ("shared_mem", "shared memory"), ("warps", "warp slots"), ("barriers", "named barriers"))),
)
BY_NAME = {f.name: f for f in FIGURES}


def ncu_metrics(*archs: str) -> tuple[str, ...]:
    """The metrics `wsperf collect` requests on GPUs of `archs` ('sm_100', ...): each
    collected figure's metric, where it is the same name on all of them (mixed GPUs, or an
    unmapped arch, get only the names every chip shares)."""
    out = []
    for f in FIGURES:
        names = {f.metric(a) for a in archs or (ANY,)}
        if f.collect and len(names) == 1 and None not in names:
            out.append(names.pop())
    return tuple(out)


def _sql_text(s: str | None) -> str:
    return "NULL" if s is None else "'" + s.replace("'", "''") + "'"


def mapping_rows() -> list[tuple[str, str, str | None, str | None]]:
    """(figure, arch, metric, absent) for every figure on every mapped arch and on '*'."""
    rows = []
    for f in FIGURES:
        for arch in (*CHIPS, ANY):
            m = f.metric(None if arch == ANY else arch)
            why = None
            if m is None:
                why = (f.absent.format(arch=arch) if arch != ANY and f.absent else
                       f"wsperf maps no metric for {f.name} on this architecture (mapped: {', '.join(CHIPS)})")
            rows.append((f.name, arch, m, why))
    return rows


def figures_sql() -> str:
    """The `metric_figures` and `figures` views (idempotent), for the store's schema."""
    values = ",\n    ".join(f"({', '.join(_sql_text(v) for v in r)})" for r in mapping_rows())
    return f"""
-- Generated from wsperf.collectors.metrics (the per-architecture metric mapping).
CREATE OR REPLACE VIEW metric_figures AS
SELECT * FROM (VALUES
    {values}
) AS t(figure, arch, metric, absent);

-- One row per launch and figure: the value of the metric that measures the figure on the
-- launch's architecture (reports.arch; '*' rows for an unmapped one), or NULL and why.
CREATE OR REPLACE VIEW figures AS
SELECT l.launch_id,
       r.arch,
       f.figure,
       f.metric,
       m.value_double AS value,
       m.unit,
       CASE WHEN f.metric IS NULL THEN f.absent
            WHEN m.value_double IS NULL THEN 'the report holds no ' || f.metric || ' (not in the sections collected)'
       END AS no_data
FROM launches AS l
JOIN reports AS r USING (report_id)
JOIN metric_figures AS f
  ON f.arch = CASE WHEN r.arch IN (SELECT arch FROM metric_figures WHERE arch <> '{ANY}') THEN r.arch ELSE '{ANY}' END
LEFT JOIN metrics AS m ON m.launch_id = l.launch_id AND m.name = f.metric AND m.instance IS NULL;
"""
