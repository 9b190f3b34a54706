"""`wsperf compare BASE CANDIDATE`: what changed between two sets of launches, and
whether it is a regression.

Result types (the contract shared by the renderers, the charts and the JSON output),
then the comparison:

1. Launches are matched by (demangled name, grid, block, cluster); what is left, by
   (function name, grid, block, cluster) when that pairs one group with one group (the
   template arguments differ), then by function name alone when one-to-one (the launch
   configuration changed). The rest is only on one side.
2. Every figure of a matched kernel is read per launch in one SQL query (medians and
   deltas there too). Noisy figures (duration, shares) are tested: a change needs the
   two-sided Mann-Whitney p-value below alpha *and* a median change beyond the figure's
   threshold; when the sample sizes cannot reach alpha at all (one launch per side), a
   wide threshold alone decides and the note says so. Exact figures (registers, shared
   memory, launch shape, instruction families, executed instructions) compare as values.
3. The hypothesis catalogue runs on both sides; one confirmed on most candidate launches
   but not on most base launches is a regression even when the time is flat.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from functools import cache
from math import comb, erfc, sqrt
from pathlib import Path
from typing import Callable, Sequence

import duckdb

from wsperf.analyses.analyze import prepare, unmet_line
from wsperf.analyses.sql import check_kernel_regex
from wsperf.analyses.config import AnalysisConfig
from wsperf.analyses.evidence import gather
from wsperf.analyses.handoffs import evidence_correctness
from wsperf.analyses.history import launch_ids_for_run
from wsperf.analyses.hypotheses import Status, catalogue, evaluate
from wsperf.collectors.errors import InputError, UnverifiedError
from wsperf.collectors.ncu import load_reports


class Change(str, enum.Enum):
    """What one figure did between base and candidate."""

    regression = "regression"      # worse beyond the noise model and the threshold
    improvement = "improvement"    # better beyond the noise model and the threshold
    changed = "changed"            # an exact figure differs with no better/worse direction
    unchanged = "unchanged"        # within noise / equal
    insufficient = "insufficient"  # too few samples or a side lacks the figure


@dataclass(frozen=True)
class FigureChange:
    """One figure of one matched kernel, base against candidate."""

    name: str                       # e.g. 'duration_ns', 'registers_per_thread', 'family:tma', 'wait_share:consumer'
    kind: str                       # 'timing' (noisy, tested), 'exact' (deterministic), 'share' (sampled ratio)
    unit: str                       # 'ns', 'registers', 'bytes', 'instructions', 'share', 'present'
    base_values: tuple[float, ...]  # every sample on the base side (one per launch)
    cand_values: tuple[float, ...]  # every sample on the candidate side
    base: float | None              # the side's summary: median for timings/shares, the value for exact figures
    cand: float | None
    delta_pct: float | None         # (cand - base) / base * 100; None when base is 0 or missing
    p_value: float | None           # two-sided Mann-Whitney U p-value (timings/shares with enough samples)
    threshold_pct: float | None     # the minimum effect size that counts (from the config or the defaults)
    change: Change
    note: str = ""                  # why, in one sentence (e.g. 'one sample per side: wide threshold 10%')
    # each side's detail: the launch dims as written ('2x1x1'; 'none': no cluster) for grid,
    # block and cluster, the occupancy limiter for ctas_per_sm, else None
    base_detail: str | None = None
    cand_detail: str | None = None


@dataclass(frozen=True)
class VerdictChange:
    """One hypothesis on one matched kernel: base status -> candidate status."""

    hypothesis: str
    base_status: str                # 'confirmed' | 'rejected' | 'no_data' | 'absent'
    cand_status: str
    base_summary: str
    cand_summary: str
    regression: bool                # newly confirmed on the candidate
    resolved: bool = False          # confirmed on the base, no longer on the candidate (an improvement)
    base_confirmed: int = 0         # base launches on which it is confirmed
    cand_confirmed: int = 0         # candidate launches on which it is confirmed

    @property
    def changed(self) -> bool:
        return self.base_status != self.cand_status or self.regression or self.resolved


@dataclass(frozen=True)
class KernelComparison:
    """One kernel matched across the two sides."""

    kernel: str                     # function name shown to the user (e.g. 'ws_stream')
    base_name: str                  # demangled name on the base side
    cand_name: str                  # demangled name on the candidate side
    matched_by: str                 # 'name+config' | 'function+config' (template arguments differ) | ...
    launch_config: str              # 'grid 396x1x1 block 160x1x1 cluster none' of the candidate
    base_launch_ids: tuple[int, ...]
    cand_launch_ids: tuple[int, ...]
    figures: tuple[FigureChange, ...]
    verdicts: tuple[VerdictChange, ...]
    base_launch_config: str = ""    # the same of the base (matched by function name, it may differ)

    @property
    def regression(self) -> bool:
        return any(f.change is Change.regression for f in self.figures) or any(v.regression for v in self.verdicts)


@dataclass(frozen=True)
class CompareResult:
    """Everything `wsperf compare` says."""

    base: str                       # what the user named (path or run label)
    candidate: str
    kernels: tuple[KernelComparison, ...]
    only_base: tuple[str, ...] = field(default=())   # kernels with no match on the candidate side
    only_cand: tuple[str, ...] = field(default=())   # kernels new on the candidate side
    # the candidate's launches that do not meet the config's `expect` ('launch 3 (k): tma')
    unmet: tuple[str, ...] = field(default=())

    @property
    def regression(self) -> bool:
        return any(k.regression for k in self.kernels)


# ---------------------------------------------------------------------------------------
# The two sides: report files, bundle directories or run labels in a --db store.

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Side:
    """What one side of the comparison names, and its launches in the store."""

    label: str                      # as the user wrote it, joined with ', '
    launch_ids: tuple[int, ...]


def resolve_side(con: duckdb.DuckDBPyConnection, names: Sequence[str], *, db: Path | None = None,
                 progress: Progress | None = None) -> Side:
    """Load each of `names` into the store `con` and return its launches: a report file
    (`.ncu-rep`, `.ncu-repz`, `.ncu-rep.gz`), a bundle directory from `wsperf collect`, or, with `db`
    (the store `con` was opened on), a run label recorded there. The same report named on
    both sides loads once and gives the same launches."""
    ids: list[int] = []
    for name in names:
        p = Path(name)
        if p.exists():
            evidence = gather(con, [p])
            if evidence.hang is not None:
                raise InputError(f"{name}: the repro hung in this bundle, so it has no profile to compare; "
                                 f"see `wsperf analyze {name}`")
            if evidence_correctness(evidence).broken:
                raise InputError(f"{name}: the sanitizer found correctness errors in this bundle, so it has no "
                                 f"profile to compare; see `wsperf analyze {name}`")
            ver = evidence.verification
            if ver is not None and not ver.verified:
                # Never a clean comparison on a side whose correctness nobody checked whole.
                raise UnverifiedError(f"{name}: correctness is unverified in this bundle ({'; '.join(ver.problems)}); "
                                      f"see `wsperf analyze {name}`")
            if not evidence.reports:
                raise InputError(f"{name}: this bundle holds no Nsight Compute report (collected with "
                                 "--no-profile?); collect again with the profile")
            for r in load_reports(con, evidence.reports, progress):
                ids += [lid for (lid,) in con.execute(
                    "SELECT launch_id FROM launches WHERE report_id = ? ORDER BY launch_id", [r.report_id]).fetchall()]
        elif db is None:
            raise InputError(f"{name}: no such report file or bundle directory (a run label needs --db FILE)")
        else:
            ids += _run_launches(con, name, db)
    return Side(", ".join(names), tuple(dict.fromkeys(ids)))


def _run_launches(con: duckdb.DuckDBPyConnection, label: str, db: Path) -> list[int]:
    ids = launch_ids_for_run(con, label)  # InputError when no run has the label
    if not ids:
        raise InputError(f"run {label!r} in {db} holds no kernel launches; compare runs that loaded reports")
    return list(ids)


# ---------------------------------------------------------------------------------------
# Matching launches across the sides.


@dataclass(frozen=True)
class _Group:
    """Launches of one side that share a kernel and a launch configuration."""

    demangled: str
    function: str
    dims: tuple[int, ...]  # grid xyz, block xyz, cluster xyz
    launch_ids: tuple[int, ...]

    @property
    def config(self) -> str:
        g, b, c = self.dims[:3], self.dims[3:6], self.dims[6:]
        return (f"grid {'x'.join(map(str, g))} block {'x'.join(map(str, b))} cluster "
                + ("x".join(map(str, c)) if any(v > 1 for v in c) else "none"))


def _groups(con: duckdb.DuckDBPyConnection, ids: Sequence[int], kernel: str | None) -> list[_Group]:
    """The launches `ids` (those matching `kernel`) grouped by kernel and configuration."""
    check_kernel_regex(kernel)
    rows = con.execute(
        """SELECT coalesce(kernel_demangled, kernel_mangled, '?') AS demangled,
                  coalesce(kernel_function, kernel_demangled, kernel_mangled, '?') AS function,
                  [grid_x, grid_y, grid_z, block_x, block_y, block_z,
                   coalesce(cluster_x, 0), coalesce(cluster_y, 0), coalesce(cluster_z, 0)] AS dims,
                  list(launch_id ORDER BY launch_id) AS launch_ids
           FROM launches
           WHERE list_contains($ids, launch_id)
             AND ($kernel IS NULL OR regexp_matches(kernel_demangled, $kernel)
                  OR regexp_matches(kernel_mangled, $kernel))
           GROUP BY ALL ORDER BY min(launch_id)""",
        {"ids": list(ids), "kernel": kernel}).fetchall()
    return [_Group(d, f, tuple(v or 0 for v in dims), tuple(lids)) for d, f, dims, lids in rows]


_Pair = tuple[_Group, _Group, str]  # base group, candidate group, matched_by


def match(base: list[_Group], cand: list[_Group]) -> tuple[list[_Pair], list[_Group], list[_Group]]:
    """Pairs of (base group, candidate group, matched_by), then the unmatched of each side."""
    pairs: list[_Pair] = []
    left, right = list(base), list(cand)
    for how, key in (("name+config", lambda g: (g.demangled, g.dims)),
                     ("function+config", lambda g: (g.function, g.dims)),
                     ("function", lambda g: g.function)):
        by_b: dict[object, list[_Group]] = {}
        by_c: dict[object, list[_Group]] = {}
        for g in left:
            by_b.setdefault(key(g), []).append(g)
        for g in right:
            by_c.setdefault(key(g), []).append(g)
        for k, bs in by_b.items():
            cs = by_c.get(k, [])
            # Only one group with one group: two instantiations of a template in one
            # run cannot be told apart by their function name.
            if len(bs) == 1 and len(cs) == 1:
                pairs.append((bs[0], cs[0], how))
                left.remove(bs[0])
                right.remove(cs[0])
    return pairs, left, right


# ---------------------------------------------------------------------------------------
# Figures: one row per (launch, figure), then per (matched kernel, figure) both sides'
# samples, medians and the relative change.

# Instruction paths compared by presence (the families of summary.Families). Losing one is
# a regression, except a slower path replaced by the architecture's faster one of the same
# kind (then the fast path's arrival is the improvement); gaining local memory is one.
FAMILIES = ("tcgen05", "wgmma", "mma.sync", "tma", "cp.async", "mbarrier", "setmaxnreg", "cluster-barrier",
            "local-memory")
_FAST = {"tcgen05": "tensor", "wgmma": "tensor", "tma": "copy"}
_SLOW = {"mma.sync": "tensor", "cp.async": "copy"}

_FIGURES_SQL = """
WITH sel AS (
    SELECT unnest($k) AS k, unnest($side) AS side, unnest($lid) AS launch_id
),
ids AS (SELECT DISTINCT launch_id FROM sel),
l AS (
    SELECT l.*,
           EXISTS (SELECT 1 FROM sass AS s WHERE s.launch_id = l.launch_id)
           OR EXISTS (SELECT 1 FROM opcodes AS o WHERE o.launch_id = l.launch_id) AS has_instr,
           least(occupancy_limit_blocks, occupancy_limit_registers, occupancy_limit_shared_mem,
                 occupancy_limit_warps, occupancy_limit_barriers) AS ctas_per_sm
    FROM launches AS l WHERE launch_id IN (SELECT launch_id FROM ids)
),
-- Figures by name, whatever the architecture's metric names (the `figures` view,
-- collectors/metrics.py).
m AS (
    SELECT launch_id,
           max(value) FILTER (WHERE figure = 'dram_throughput_pct') AS dram_pct,
           max(value) FILTER (WHERE figure = 'sm_active_cycles')
               / nullif(max(value) FILTER (WHERE figure = 'sm_elapsed_cycles'), 0) AS sm_active,
           -- In --set full reports (SpeedOfLight), not in collect's smaller set: absent on
           -- both sides, the figure is left out.
           max(value) FILTER (WHERE figure = 'tensor_pipe_pct') AS tensor_pipe_pct
    FROM figures
    WHERE launch_id IN (SELECT launch_id FROM ids)
      AND figure IN ('dram_throughput_pct', 'sm_active_cycles', 'sm_elapsed_cycles', 'tensor_pipe_pct')
    GROUP BY launch_id
),
fam AS (SELECT unnest($families) AS family, generate_subscripts($families, 1) AS i),
f AS (SELECT * FROM instruction_families WHERE launch_id IN (SELECT launch_id FROM ids)),
-- Executed instructions per family, except mbarrier: its count includes the try-wait
-- retries, which scale with waiting (0.4% spread over twelve launches of one build, +25%
-- in the one-stage build); the wait shares carry that.
executed_fam AS (SELECT DISTINCT family FROM f WHERE executed IS NOT NULL AND family <> 'mbarrier'),
fig(launch_id, ord, name, kind, unit, value, detail) AS (
    SELECT launch_id, 0, 'duration_ns', 'timing', 'ns', duration_ns, NULL FROM l
    UNION ALL SELECT launch_id, 1, 'sm_active', 'share', 'share', sm_active, NULL FROM m
    UNION ALL SELECT launch_id, 2, 'achieved_occupancy_pct', 'share', '%', achieved_occupancy_pct, NULL FROM l
    UNION ALL SELECT launch_id, 3, 'dram_throughput_pct', 'share', '%', dram_pct, NULL FROM m
    UNION ALL SELECT launch_id, 7, 'tensor_pipe_pct', 'share', '%', tensor_pipe_pct, NULL FROM m
    UNION ALL SELECT launch_id, CASE role WHEN 'producer' THEN 4 WHEN 'consumer' THEN 5 ELSE 6 END,
                     'wait_share:' || role, 'share', 'share', wait_share, NULL
              FROM roles WHERE launch_id IN (SELECT launch_id FROM ids)
    UNION ALL SELECT launch_id, 10, 'grid', 'exact', 'CTAs', grid_x * grid_y * grid_z,
                     printf('%dx%dx%d', grid_x, grid_y, grid_z) FROM l
    UNION ALL SELECT launch_id, 11, 'block', 'exact', 'threads', block_x * block_y * block_z,
                     printf('%dx%dx%d', block_x, block_y, block_z) FROM l
    -- ncu reports cluster dims 0 without a cluster: one CTA per 'cluster'.
    UNION ALL SELECT launch_id, 12, 'cluster', 'exact', 'CTAs',
                     greatest(coalesce(cluster_x, 0) * coalesce(cluster_y, 0) * coalesce(cluster_z, 0), 1),
                     CASE WHEN coalesce(cluster_x, 0) * coalesce(cluster_y, 0) * coalesce(cluster_z, 0) > 1
                          THEN printf('%dx%dx%d', cluster_x, cluster_y, cluster_z) ELSE 'none' END FROM l
    UNION ALL SELECT launch_id, 13, 'registers_per_thread', 'exact', 'registers', registers_per_thread, NULL FROM l
    UNION ALL SELECT launch_id, 14, 'static_smem_bytes', 'exact', 'bytes', static_smem_bytes, NULL FROM l
    UNION ALL SELECT launch_id, 15, 'dynamic_smem_bytes', 'exact', 'bytes', dynamic_smem_bytes, NULL FROM l
    UNION ALL SELECT launch_id, 16, 'ctas_per_sm', 'exact', 'CTAs', ctas_per_sm,
                     CASE ctas_per_sm WHEN occupancy_limit_shared_mem THEN 'shared memory'
                                      WHEN occupancy_limit_registers THEN 'registers'
                                      WHEN occupancy_limit_warps THEN 'warps'
                                      WHEN occupancy_limit_barriers THEN 'barriers'
                                      ELSE 'CTA slots' END FROM l
    -- Present: what ran decides; without execution counts, what the SASS holds (the rule
    -- of summary.Families).
    UNION ALL SELECT l.launch_id, 20 + fam.i, 'family:' || fam.family, 'exact', 'present',
                     CASE WHEN coalesce(CASE WHEN f.executed IS NOT NULL THEN f.executed > 0
                                             ELSE f.static_count > 0 END, false) THEN 1 ELSE 0 END, NULL
              FROM l CROSS JOIN fam LEFT JOIN f ON f.launch_id = l.launch_id AND f.family = fam.family
              WHERE l.has_instr
    UNION ALL SELECT l.launch_id, 40, 'executed:' || e.family, 'exact', 'instructions', coalesce(f.executed, 0), NULL
              FROM l CROSS JOIN executed_fam AS e LEFT JOIN f ON f.launch_id = l.launch_id AND f.family = e.family
              WHERE l.has_instr
),
agg AS (
    SELECT sel.k, fig.ord, fig.name, any_value(fig.kind) AS kind, any_value(fig.unit) AS unit,
           list(fig.value::DOUBLE ORDER BY fig.launch_id) FILTER (WHERE sel.side = 'base') AS base_values,
           list(fig.value::DOUBLE ORDER BY fig.launch_id) FILTER (WHERE sel.side = 'cand') AS cand_values,
           CASE WHEN any_value(fig.unit) = 'present'
                THEN (avg(fig.value) FILTER (WHERE sel.side = 'base') > 0.5)::INT
                ELSE median(fig.value::DOUBLE) FILTER (WHERE sel.side = 'base') END AS base,
           CASE WHEN any_value(fig.unit) = 'present'
                THEN (avg(fig.value) FILTER (WHERE sel.side = 'cand') > 0.5)::INT
                ELSE median(fig.value::DOUBLE) FILTER (WHERE sel.side = 'cand') END AS cand,
           mode(fig.detail) FILTER (WHERE sel.side = 'base') AS base_detail,
           mode(fig.detail) FILTER (WHERE sel.side = 'cand') AS cand_detail
    FROM sel JOIN fig USING (launch_id)
    WHERE fig.value IS NOT NULL AND NOT isnan(fig.value::DOUBLE)  -- NaN: ncu could not compute it
    GROUP BY sel.k, fig.ord, fig.name
)
SELECT k, name, kind, unit, coalesce(base_values, []) AS base_values, coalesce(cand_values, []) AS cand_values,
       base::DOUBLE AS base, cand::DOUBLE AS cand,
       CASE WHEN unit <> 'present' THEN (cand - base) / nullif(base, 0) * 100 END AS delta_pct,
       base_detail, cand_detail
FROM agg
-- A family (or its executed count) absent on both sides says nothing.
WHERE NOT (unit IN ('present', 'instructions') AND coalesce(base, 0) = 0 AND coalesce(cand, 0) = 0)
ORDER BY k, ord, name
"""

# Direction of the noisy figures: True = higher is worse, False = lower is worse, None =
# a significant change is reported as changed (no better or worse on its own: DRAM
# throughput and occupancy follow the work done; a producer waiting more may just be
# faster).
_WORSE_WHEN_HIGHER = {"duration_ns": True, "sm_active": False, "wait_share:consumer": True}


def _figures(con: duckdb.DuckDBPyConnection, pairs: list[_Pair],
             config: AnalysisConfig) -> list[list[FigureChange]]:
    k, side, lid = [], [], []
    for i, (b, c, _) in enumerate(pairs):
        for which, g in (("base", b), ("cand", c)):
            k += [i] * len(g.launch_ids)
            side += [which] * len(g.launch_ids)
            lid += list(g.launch_ids)
    out: list[list[FigureChange]] = [[] for _ in pairs]
    cur = con.execute(_FIGURES_SQL, {"k": k, "side": side, "lid": lid, "families": list(FAMILIES)})
    cols = [d[0] for d in cur.description]
    for row in cur.fetchall():
        r = dict(zip(cols, row))
        out[r["k"]].append(decide(r, config))
    return [_replaced_paths(figs) for figs in out]


def _replaced_paths(figs: list[FigureChange]) -> list[FigureChange]:
    """A slow path (mma.sync, cp.async) that no longer runs is a regression unless a
    faster path of the same kind runs on the candidate instead."""
    def family(f: FigureChange) -> str | None:
        return f.name.split(":", 1)[1] if f.unit == "present" else None

    fast_now = {_FAST[family(f)] for f in figs if family(f) in _FAST and f.cand}
    out = []
    for f in figs:
        fam = family(f)
        if fam in _SLOW and f.base and f.cand == 0:
            kind = _SLOW[fam]
            f = (replace(f, change=Change.changed, note=f"{fam} no longer runs: the faster {kind} path replaced it")
                 if kind in fast_now else
                 replace(f, change=Change.regression,
                         note=f"{fam} no longer runs and no faster {kind} path replaced it"))
        out.append(f)
    return out


def decide(r: dict, config: AnalysisConfig) -> FigureChange:
    """The change of one figure, by its kind: tested (timing, share) or exact. `r` is a
    row of the figures query: name, kind, unit, base_values, cand_values, base and cand
    (medians; for presence, 1 when present on most launches), delta_pct, base_detail and
    cand_detail (launch dims or the occupancy limiter, else None)."""
    name, kind, unit = r["name"], r["kind"], r["unit"]
    bv, cv = tuple(r["base_values"]), tuple(r["cand_values"])
    base, cand, delta = r["base"], r["cand"], r["delta_pct"]
    thr = config.compare.threshold(name)

    def fc(change: Change, note: str, p: float | None = None, threshold: float | None = thr) -> FigureChange:
        return FigureChange(name, kind, unit, bv, cv, base, cand, None if delta is None else round(delta, 3),
                            p, threshold, change, note, r["base_detail"], r["cand_detail"])

    if not bv or not cv:
        missing = "base" if not bv else "candidate"
        return fc(Change.insufficient, f"the {missing} launches lack this figure (not collected)")
    if kind == "exact":
        return _decide_exact(r, thr, fc)
    return _decide_tested(r, thr, config, fc)


def _decide_exact(r: dict, thr: float | None, fc: Callable[..., FigureChange]) -> FigureChange:
    name, base, cand, delta = r["name"], r["base"], r["cand"], r["delta_pct"]
    detail = ""
    if r["base_detail"] != r["cand_detail"] and r["base_detail"] is not None:
        detail = f"{r['base_detail']} -> {r['cand_detail']}"
    elif r["cand_detail"]:
        detail = f"limited by {r['cand_detail']}" if name == "ctas_per_sm" else r["cand_detail"]
    if name.startswith("family:"):
        fam = name.split(":", 1)[1]
        if base == cand:
            return fc(Change.unchanged, "present on both sides" if base else "", threshold=None)
        lost = bool(base)
        if fam == "local-memory":
            return fc(Change.improvement if lost else Change.regression,
                      "local memory (spills) gone" if lost else "local memory (spills) appeared", threshold=None)
        if lost and fam in _FAST:
            return fc(Change.regression, f"{fam} no longer runs: the {_FAST[fam]} work left the fast path",
                      threshold=None)
        if not lost and fam in _FAST:
            return fc(Change.improvement, f"{fam} now runs", threshold=None)
        if lost and fam not in _SLOW:  # mbarrier, setmaxnreg, cluster barrier: the pipeline lost a tool
            return fc(Change.regression, f"{fam} no longer runs", threshold=None)
        # A slow path lost is decided with the other families (_replaced_paths).
        return fc(Change.changed, f"{fam} {'no longer runs' if lost else 'now runs'}", threshold=None)
    if name.startswith("executed:"):
        tol = thr or 0.0
        if base == cand or (delta is not None and abs(delta) <= tol):
            return fc(Change.unchanged, f"within {tol:g}%" if base != cand else "")
        worse = Change.regression if (cand or 0) > (base or 0) else Change.improvement
        return fc(worse if name == "executed:local-memory" else Change.changed,
                  f"executed instructions differ by more than {tol:g}%")
    # Launch shape, registers, shared memory, occupancy limit: any difference is a change.
    return fc(Change.unchanged if base == cand else Change.changed, detail, threshold=None)


def _decide_tested(r: dict, thr: float | None, config: AnalysisConfig,
                   fc: Callable[..., FigureChange]) -> FigureChange:
    name, base, cand, delta = r["name"], r["base"], r["cand"], r["delta_pct"]
    bv, cv = r["base_values"], r["cand_values"]
    cs = config.compare
    thr = thr if thr is not None else 0.0
    # Shares (0..1) and percentages must also move `share_points` percentage points, so
    # that a tiny share doubling (0.2% -> 0.4%) is no change.
    points = abs(cand - base) * (100 if r["unit"] == "share" else 1)
    floor = cs.thresholds["share_points"] if r["kind"] == "share" else 0.0
    n1, n2 = len(bv), len(cv)
    if min_p(n1, n2) >= cs.alpha:
        # The test cannot say p < alpha with so few samples whatever they are: only a
        # large change counts, and the note says why.
        thr = max(thr, cs.thresholds["few_samples_pct"])
        why = ("one sample per side" if n1 == n2 == 1 else f"{n1} vs {n2} samples: the test cannot reach "
               f"p < {cs.alpha:g}") + f"; wide threshold {thr:g}%"
        if not ((delta is None or abs(delta) > thr) and points > floor):
            return fc(Change.unchanged, why, threshold=thr)
        return fc(_direction(name, cand > base), why, threshold=thr)
    p = mann_whitney_p(bv, cv)
    big = (delta is None or abs(delta) > thr) and points > floor
    if p >= cs.alpha:
        return fc(Change.unchanged, f"within noise (p = {p:.3g} >= {cs.alpha:g})", p)
    if not big:
        size = "no change" if delta is None else f"{delta:+.1f}%"
        return fc(Change.unchanged, f"significant (p = {p:.3g}) but {size} is below the {thr:g}%"
                  + (f" / {floor:g}-point" if floor else "") + " threshold", p)
    return fc(_direction(name, cand > base), f"p = {p:.3g} < {cs.alpha:g}, beyond {thr:g}%", p)


def _direction(name: str, higher: bool) -> Change:
    worse_high = _WORSE_WHEN_HIGHER.get(name)
    if worse_high is None:
        return Change.changed
    return Change.regression if higher == worse_high else Change.improvement


# ---------------------------------------------------------------------------------------
# Verdicts: the catalogue on both sides.


def _majority(findings: list[tuple[str, str]]) -> tuple[str, str, int]:
    """(status, a summary of it, launches confirmed) over one side's launches: confirmed
    when most launches say so, else the most common other status."""
    if not findings:
        return "absent", "", 0
    confirmed = sum(1 for s, _ in findings if s == Status.confirmed.value)
    if confirmed * 2 > len(findings):
        status = Status.confirmed.value
    else:
        others = [s for s, _ in findings if s != Status.confirmed.value]
        status = max(dict.fromkeys(others), key=others.count)
    return status, next(summary for s, summary in findings if s == status), confirmed


def _verdicts(con: duckdb.DuckDBPyConnection, pairs: list[_Pair],
              config: AnalysisConfig) -> tuple[list[list[VerdictChange]], tuple[str, ...]]:
    """Each pair's verdict changes, and the candidate's unmet expectations."""
    ids = sorted({lid for b, c, _ in pairs for lid in (*b.launch_ids, *c.launch_ids)})
    found = evaluate(con, ids, expect=config.expect, thresholds=config.thresholds)
    unmet = tuple(line for _, c, _ in pairs for lid in c.launch_ids
                  if (line := unmet_line(lid, c.function, found[lid].findings)))
    out = []
    for b, c, _ in pairs:
        changes = []
        for h in catalogue():
            sides = []
            for g in (b, c):
                fs = [(f.status.value, f.summary) for lid in g.launch_ids for f in found[lid].findings if f.id == h.id]
                sides.append(_majority(fs))
            (bs, bsum, bn), (cs, csum, cn) = sides
            new = cs == Status.confirmed.value and bs != Status.confirmed.value
            gone = bs == Status.confirmed.value and cs != Status.confirmed.value
            changes.append(VerdictChange(h.id, bs, cs, bsum, csum, new, gone, bn, cn))
        out.append(changes)
    return out, unmet


# ---------------------------------------------------------------------------------------


def compare(con: duckdb.DuckDBPyConnection, base_ids: Sequence[int], cand_ids: Sequence[int],
            config: AnalysisConfig | None = None, *, base_label: str = "base", cand_label: str = "candidate",
            kernel: str | None = None) -> CompareResult:
    """Compare the launches `base_ids` against `cand_ids` (both in the store `con`),
    optionally only kernels whose name matches the regular expression `kernel`. Raises
    InputError when no kernel is on both sides."""
    config = config or AnalysisConfig()
    prepare(con)
    base, cand = _groups(con, base_ids, kernel), _groups(con, cand_ids, kernel)
    pairs, only_b, only_c = match(base, cand)
    if not pairs:
        raise InputError(f"no kernel is on both sides: base has {_listing(base, kernel)}; candidate has "
                         f"{_listing(cand, kernel)}. Compare reports of the same kernel (or narrow with --kernel)")
    figures = _figures(con, pairs, config)
    verdicts, unmet = _verdicts(con, pairs, config)
    kernels = tuple(
        KernelComparison(c.function, b.demangled, c.demangled, how, c.config, b.launch_ids, c.launch_ids,
                         tuple(figs), tuple(vs), b.config)
        for (b, c, how), figs, vs in zip(pairs, figures, verdicts))
    return CompareResult(base_label, cand_label, kernels,
                         tuple(f"{g.demangled} ({g.config})" for g in only_b),
                         tuple(f"{g.demangled} ({g.config})" for g in only_c), unmet)


def _listing(groups: list[_Group], kernel: str | None) -> str:
    if not groups:
        return "no launches" + (f" matching --kernel {kernel!r}" if kernel else "")
    return "; ".join(f"{g.demangled} ({g.config})" for g in groups[:3]) + (" ..." if len(groups) > 3 else "")


# ---------------------------------------------------------------------------------------
# The noise model: Mann-Whitney U, two-sided.


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test that `x` and `y` come from the same
    distribution. Exact (the permutation distribution of U) for small samples without
    ties; otherwise the normal approximation with the tie correction of the variance and
    a continuity correction (what SciPy's `mannwhitneyu` does with method='asymptotic')."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        raise ValueError("both samples need at least one value")
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    # Average ranks (1-based) over runs of equal values; `ties` holds the run lengths.
    ranks_x = 0.0
    ties: list[int] = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        ranks_x += rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        ties.append(j - i + 1)
        i = j + 1
    u = ranks_x - n1 * (n1 + 1) / 2  # pairs (a, b) with a > b, ties counting one half
    tied = any(t > 1 for t in ties)
    if not tied and max(n1, n2) <= EXACT_MAX_N:
        counts = _u_counts(n1, n2)
        total = comb(n1 + n2, n1)
        k = int(u)
        lower = sum(counts[: k + 1])           # P(U <= u) * total
        upper = sum(counts[k:])                # P(U >= u) * total
        return min(1.0, 2 * min(lower, upper) / total)
    n = n1 + n2
    mu = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - sum(t ** 3 - t for t in ties) / (n * (n - 1)))
    if var <= 0:  # every value equal: nothing to tell the samples apart
        return 1.0
    z = max(abs(u - mu) - 0.5, 0.0) / sqrt(var)
    return min(1.0, erfc(z / sqrt(2)))


# Beyond this many samples per side the normal approximation is used even without ties
# (it is then accurate to a few 1e-4, and the exact table grows as n1 * n2 * (n1 * n2)).
EXACT_MAX_N = 20


@cache
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the comb(n1 + n2, n1) orderings give U = 0, 1, ..., n1 * n2: the
    recurrence c(m, n, u) = c(m - 1, n, u - n) + c(m, n - 1, u) (the largest value is from
    the first sample, beating all n of the second, or from the second)."""
    if n1 == 0 or n2 == 0:
        return (1,)
    a = _u_counts(n1 - 1, n2)  # shifted by n2
    b = _u_counts(n1, n2 - 1)
    out = [0] * (n1 * n2 + 1)
    for u, c in enumerate(a):
        out[u + n2] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the test can give with these sample sizes (the two
    samples completely separated): 2 / comb(n1 + n2, n1)."""
    return min(1.0, 2 / comb(n1 + n2, n1))
