"""What a role timeline says: when each role works and waits, how full the ring is, and
where the pipeline bubbles are. SQL over the tables `collectors/timeline.py` fills
(queries/timeline_schema.sql), returned as frozen dataclasses; nothing here draws.

- `load_timelines`: load trace files, each attached to the Nsight Compute launch of the
  same kernel when reports are given (`match_launch`), else to a launch of its own;
- `summarize_timeline`: per timeline, per-role time shares (each event's intervals over
  the role's warp lifetimes), the intervals of the first sampled CTAs (the chart lanes),
  the ring's stage occupancy over time, the `pipeline-bubbles` verdict, and the
  `serialized-roles` verdict, which the timeline's copy/compute overlap decides (with
  `--report`, beside what the launch's PC samples say).

Truncated timelines: a warp that filled its slots before its kernel end lost its later
events (the views timeline_cut_warps / timeline_truncation), so nothing after its last
record is known. A role with a cut warp gets no shares (None: no_data), both verdicts are
no_data for the timeline's part, and each lane CTA's occupancy stops at its first cut;
`truncation` carries the reason, the warps and the slots per warp that would have sufficed.
Roles whose warps all ended in their slots keep their shares: those use their own warps'
lifetimes only.

Stage occupancy: a stage is full from the end of the producer's copy of tile `seq` to the
end of the last consumer compute on that tile (its release), per CTA; the occupancy is
the number of full stages over time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import duckdb

from wsperf.analyses.hypotheses import Finding, evaluate
from wsperf.analyses.roles import build_roles
from wsperf.collectors.errors import InputError
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.timeline import TimelineLoad, kernel_instance, load_timeline, match_launch, read_trace

BUBBLES = "pipeline-bubbles"
SERIALIZED = "serialized-roles"
LANE_CTAS = 4  # CTAs drawn as lanes (every warp of each), the first sampled ones
MAX_INTERVALS = 20_000  # intervals handed to a chart at most


@dataclass(frozen=True)
class RoleShare:
    """How one role spends its warps' lifetimes: the share of each event."""

    role: str
    event: str
    warps: int
    intervals: int
    share: float | None  # sum of the event's interval durations over the role's summed warp lifetimes; None: no_data (cut warps)
    median_ns: float  # of the recorded intervals
    cut_warps: int = 0  # the role's warps whose later events were dropped: share is None


@dataclass(frozen=True)
class Interval:
    """One begin-end pair of one warp (chart lanes, Perfetto export)."""

    cta: int
    sm: int | None
    warp: int
    role: str
    event: str
    label: str | None
    stage: int | None
    seq: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Occupancy:
    """Full stages of one CTA's ring from `t_ns` on."""

    cta: int
    t_ns: int
    full_stages: int


@dataclass(frozen=True)
class WarpCut:
    """One warp whose later events were dropped (a timeline_cut_warps row)."""

    cta: int
    warp: int
    role: str
    records: int
    first_ns: int
    last_ns: int  # its last record: nothing of this warp is known after it


@dataclass(frozen=True)
class Truncation:
    """What a timeline's cut warps leave unknown (its timeline_truncation row): `reason` is
    the sentence each no_data figure carries."""

    cut_warps: int
    warps: int
    cut_ctas: int
    ctas: int
    slots_per_warp: int
    slots_needed: int  # an estimate, a power of two (see `lower_bound`)
    lower_bound: bool  # no launch duration to carry the rates to: at least slots_needed
    reason: str
    cuts: tuple[WarpCut, ...]


@dataclass(frozen=True)
class PmSample:
    """One Nsight Compute PM sample of one metric (the pm_samples view)."""

    metric: str
    t_ns: int
    value: float | None


@dataclass(frozen=True)
class TimelineSummary:
    """One loaded timeline and what it shows."""

    timeline_id: int
    path: str
    format: str
    kernel: str | None
    launch_id: int
    from_report: bool  # the launch is an Nsight Compute launch (--report), not the timeline's own
    events: int
    ctas: int
    warps: int
    span_ns: int
    full_warps: int
    roles: tuple[RoleShare, ...]
    intervals: tuple[Interval, ...]
    instants: tuple[Interval, ...]
    occupancy: tuple[Occupancy, ...]
    bubbles: Finding | None
    pm_samples: tuple[PmSample, ...] = ()  # the joined Nsight Compute launch's stall reasons over time
    serialized: Finding | None = None  # serialized-roles on the launch, the timeline's overlap as evidence
    # The joined launch's demangled name, and whether it is the trace's own template instance
    # (False: `--report` held the function only with other template arguments).
    launch_kernel: str | None = None
    same_instance: bool = True
    truncation: Truncation | None = None  # None: every traced warp ended in its slots (or the source names no buffer)


@dataclass(frozen=True)
class TimelineExport:
    """Every interval and instant of one timeline (for `--perfetto`)."""

    timeline_id: int
    kernel: str | None
    intervals: tuple[Interval, ...]
    instants: tuple[Interval, ...]


def load_timelines(con: duckdb.DuckDBPyConnection, traces: Iterable[Path], reports: Iterable[Path] = (),
                   progress=None) -> list[TimelineLoad]:
    """Load Nsight Compute `reports`, then each trace, attached to the report launch of
    its kernel when there is one (an InputError when reports were given and none runs the
    trace's kernel)."""
    reports = list(reports)
    loaded = load_reports(con, reports, progress=progress) if reports else []
    report_ids = [r.report_id for r in loaded]
    out = []
    for p in traces:
        trace = read_trace(p)
        launch = None
        if report_ids:
            launch = match_launch(con, trace.kernel, report_ids)
            if launch is None:
                raise InputError(f"{p}: its kernel {trace.kernel!r} is not among the launches of "
                                 f"{', '.join(str(r) for r in reports)}; give the report of the same kernel")
        out.append(load_timeline(con, trace, launch_id=launch))
    return out


def summarize_timeline(con: duckdb.DuckDBPyConnection, timeline_id: int) -> TimelineSummary:
    row = con.execute(
        """SELECT t.timeline_id, t.path, t.format, t.kernel, t.launch_id, coalesce(r.kind, 'ncu') <> 'timeline',
                  l.kernel_demangled, t.events, t.full_warps,
                  (SELECT count(DISTINCT cta) FROM timeline_events e WHERE e.timeline_id = t.timeline_id),
                  (SELECT count(DISTINCT (cta, warp)) FROM timeline_events e WHERE e.timeline_id = t.timeline_id),
                  (SELECT max(t_ns) FROM timeline_events e WHERE e.timeline_id = t.timeline_id)
           FROM timelines t JOIN launches l USING (launch_id) LEFT JOIN reports r USING (report_id)
           WHERE t.timeline_id = ?""", [timeline_id]).fetchone()
    if row is None:
        raise InputError(f"no timeline {timeline_id} in the store")
    tid, path, fmt, kernel, lid, from_report, launch_kernel, events, full, ctas, warps, span = row
    # A cut warp's lifetime runs past its last record: its role's shares are unknown.
    roles = tuple(RoleShare(*r) for r in con.execute(
        """WITH cut AS (SELECT cta, warp, true AS cut FROM timeline_cut_warps WHERE timeline_id = $t),
           life AS (
               SELECT cta, warp, any_value(role) AS role, max(t_ns) - min(t_ns) AS life_ns
               FROM timeline_events WHERE timeline_id = $t GROUP BY cta, warp),
           per_role AS (
               SELECT role, count(*) AS warps, sum(life_ns) AS life_ns, count(cut.cut) AS cut_warps
               FROM life LEFT JOIN cut USING (cta, warp) GROUP BY role)
           SELECT i.role, i.event, p.warps, count(*),
                  CASE WHEN p.cut_warps = 0 THEN sum(i.dur_ns) / nullif(p.life_ns, 0) END, median(i.dur_ns),
                  p.cut_warps
           FROM timeline_intervals i JOIN per_role p USING (role)
           WHERE i.timeline_id = $t AND i.event <> 'kernel'
           GROUP BY i.role, i.event, p.warps, p.life_ns, p.cut_warps ORDER BY i.role, i.event""",
        {"t": tid}).fetchall())
    lanes = f"""cta IN (SELECT DISTINCT cta FROM timeline_events WHERE timeline_id = $t ORDER BY cta LIMIT {LANE_CTAS})"""
    intervals = tuple(Interval(*r) for r in con.execute(
        f"""SELECT cta, sm, warp, role, event, label, stage, seq, start_ns, end_ns FROM timeline_intervals
            WHERE timeline_id = $t AND {lanes} ORDER BY cta, warp, start_ns LIMIT {MAX_INTERVALS}""",
        {"t": tid}).fetchall())
    instants = tuple(Interval(*r) for r in con.execute(
        f"""SELECT cta, sm, warp, role, event, label, stage, seq, t_ns, t_ns FROM timeline_events
            WHERE timeline_id = $t AND phase = 'instant' AND {lanes} ORDER BY cta, warp, t_ns LIMIT {MAX_INTERVALS}""",
        {"t": tid}).fetchall())
    # Up to a CTA's first cut every warp of it is recorded, so its occupancy is exact there;
    # past it fills and frees are missing, and no step is shown.
    occupancy = tuple(Occupancy(*r) for r in con.execute(
        f"""WITH cut AS (SELECT cta, min(last_ns) AS cut_ns FROM timeline_cut_warps WHERE timeline_id = $t GROUP BY cta),
            filled AS (
                SELECT cta, seq, max(end_ns) AS t FROM timeline_intervals
                WHERE timeline_id = $t AND event = 'copy' AND role <> 'consumer' AND {lanes} GROUP BY cta, seq),
            freed AS (
                SELECT cta, seq, max(end_ns) AS t FROM timeline_intervals
                WHERE timeline_id = $t AND event = 'compute' AND role <> 'producer' AND {lanes} GROUP BY cta, seq),
            steps AS (SELECT cta, t, 1 AS d FROM filled UNION ALL SELECT cta, t, -1 FROM freed),
            occ AS (SELECT cta, t, CAST(sum(sum(d)) OVER (PARTITION BY cta ORDER BY t) AS INTEGER) AS full_stages
                    FROM steps GROUP BY cta, t)
            SELECT cta, t, full_stages FROM occ LEFT JOIN cut USING (cta)
            WHERE cut.cut_ns IS NULL OR t <= cut.cut_ns ORDER BY cta, t""", {"t": tid}).fetchall())
    truncation = _truncation(con, tid)
    if from_report:
        build_roles(con, [lid])  # serialized-roles reads the launch's PC samples by role
    verdicts = evaluate(con, [lid])
    bubbles = next((f for f in verdicts[lid].findings if f.id == BUBBLES), None)
    serialized = next((f for f in verdicts[lid].findings if f.id == SERIALIZED), None)
    pm = tuple(PmSample(*r) for r in con.execute(
        "SELECT metric, t_ns, value FROM pm_samples WHERE launch_id = ? AND metric LIKE '%issue_stalled%' "
        "ORDER BY metric, t_ns", [lid]).fetchall())
    return TimelineSummary(tid, path, fmt, kernel, lid, bool(from_report), events, ctas, warps, span or 0, full,
                           roles, intervals, instants, occupancy, bubbles, pm, serialized, launch_kernel,
                           kernel_instance(kernel or "") in kernel_instance(launch_kernel or ""), truncation)


def _truncation(con: duckdb.DuckDBPyConnection, timeline_id: int) -> Truncation | None:
    row = con.execute(
        "SELECT cut_warps, warps, cut_ctas, ctas, slots_per_warp, slots_needed, lower_bound, reason "
        "FROM timeline_truncation WHERE timeline_id = ?", [timeline_id]).fetchone()
    if row is None:
        return None
    cuts = tuple(WarpCut(*r) for r in con.execute(
        "SELECT cta, warp, role, records, first_ns, last_ns FROM timeline_cut_warps WHERE timeline_id = ? "
        "ORDER BY cta, warp", [timeline_id]).fetchall())
    return Truncation(*row, cuts)


def export_timeline(con: duckdb.DuckDBPyConnection, timeline_id: int, limit: int = 2_000_000) -> TimelineExport:
    """All intervals and instants of a timeline, every CTA, in time order (at most `limit` each)."""
    (kernel,) = con.execute("SELECT kernel FROM timelines WHERE timeline_id = ?", [timeline_id]).fetchone() or (None,)
    intervals = tuple(Interval(*r) for r in con.execute(
        f"""SELECT cta, sm, warp, role, event, label, stage, seq, start_ns, end_ns FROM timeline_intervals
            WHERE timeline_id = ? ORDER BY cta, warp, start_ns LIMIT {int(limit)}""", [timeline_id]).fetchall())
    instants = tuple(Interval(*r) for r in con.execute(
        f"""SELECT cta, sm, warp, role, event, label, stage, seq, t_ns, t_ns FROM timeline_events
            WHERE timeline_id = ? AND phase = 'instant' ORDER BY cta, warp, t_ns LIMIT {int(limit)}""",
        [timeline_id]).fetchall())
    return TimelineExport(timeline_id, kernel, intervals, instants)
