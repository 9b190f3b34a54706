"""`wsperf analyze` as a library call: summaries, roles and verdicts for every launch.

Loading is the caller's business (the CLI loads with progress); this module derives the
role tables for launches that lack them, runs the hypothesis catalogue and bundles the
results per launch. Nothing here draws or prints.

On a store with history (`--db` with many runs), the caller names the launches it asks
about (`launch_ids`, e.g. `launch_ids_of_reports` of the reports it just loaded): the
summaries and the hypothesis queries then read only those launches' rows, not the year
of runs beside them (benchmarks/bench_history.py measures the difference).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Iterable

import duckdb

from wsperf.analyses.gains import Gain, ranked
from wsperf.analyses.hypotheses import Finding, Status, Verdicts, aggregate_reason, evaluate
from wsperf.analyses.roles import build_roles
from wsperf.analyses.sql import check_kernel_regex
from wsperf.analyses.summary import LaunchSummary, summarize
from wsperf.collectors.store import each, run_spread


@dataclass(frozen=True)
class RoleStats:
    """One role of one launch, from the `roles` and `role_stalls` views."""

    role: str  # producer | consumer | common
    instructions: int
    executed: int | None
    samples: int | None
    wait_samples: int | None
    wait_share: float | None
    top_stalls: tuple[tuple[str, int], ...]  # (reason, samples), most first


@dataclass(frozen=True)
class PartitionStats:
    """One warp partition of one launch, from the `partitions` view: who runs the code
    (analyses/partitions.py), what it issues, and the same figures as a role."""

    partition: str  # e.g. 'producer (warp 6)', 'setup (all warps)', 'shared: ...'
    job: str | None  # e.g. 'TMA load'; None for setup and shared code
    registers: int | None  # its first setmaxnreg; None without one
    basis: str  # 'evidence' | 'assumption': how its warps were read
    instructions: int
    executed: int | None
    samples: int | None
    wait_share: float | None
    top_stalls: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Utilization:
    """One speed-of-light figure of a launch, in percent of the hardware's peak."""

    label: str  # e.g. 'DRAM throughput'
    source: str  # the ncu metric or `launches` column it comes from
    pct: float


# Role names as the table shows them when the kernel is *not* warp-specialized: the
# producer/consumer split then names code (a block that copies, a block that computes),
# not warps, and calling it a role would contradict "warp-specialized: no".
_UNSPECIALIZED_ROLE = {"producer": "copy code", "consumer": "math code", "common": "common code"}

# A speed-of-light figure at or above this share of peak makes the launch bound by that
# unit (Nsight Compute's own SOL rule uses 60% for "high throughput").
_BOUND_PCT = 60.0


class Outcome(str, enum.Enum):
    """What a launch's verdicts add up to, for one headline line."""

    confirmed = "confirmed"  # at least one hypothesis confirmed
    clear = "clear"  # none confirmed, at least one rejected on evidence
    no_data = "no_data"  # every hypothesis lacked its data: nothing can be said


@dataclass(frozen=True)
class KernelAnalysis:
    """Everything `wsperf analyze` says about one launch."""

    summary: LaunchSummary
    warp_specialized: bool | None  # None: the report has no SASS-level data
    roles: tuple[RoleStats, ...]
    findings: tuple[Finding, ...]
    utilization: tuple[Utilization, ...] = ()  # what the report holds of _UTILIZATION, in that order
    # What decided warp_specialized: 'executed' (both paths ran), 'static' (the code
    # holds both paths, `wsperf inspect`), None (unknown).
    warp_specialized_basis: str | None = None
    # The warp partitions the dispatch names (empty when it names none), in code order.
    partitions: tuple[PartitionStats, ...] = ()

    @property
    def outcome(self) -> Outcome:
        statuses = {f.status for f in self.findings}
        if Status.confirmed in statuses:
            return Outcome.confirmed
        return Outcome.clear if Status.rejected in statuses else Outcome.no_data

    def role_label(self, role: str) -> str:
        """The name a role row is shown under: producer/consumer only for a
        warp-specialized kernel, the kind of code otherwise."""
        return role if self.warp_specialized else _UNSPECIALIZED_ROLE.get(role, role)

    def roles_title(self) -> str:
        """A title that says what the role rows hold: code paths from SASS, with PC
        samples only when the report has them."""
        sampled = any(r.samples for r in self.roles)
        what = "roles" if self.warp_specialized else "code paths"
        return f"{what} (from SASS{', with PC samples' if sampled else '; no PC samples'})"

    def look_next(self) -> list[str]:
        """When nothing is confirmed: what was ruled out, what had no data, and where to
        look next from the speed-of-light figures. Empty when something is confirmed."""
        if self.outcome is Outcome.confirmed or not self.summary.is_kernel:
            return []  # a range or graph result: the headline says what to do instead
        out = []
        ruled = [f.id for f in self.findings if f.status is Status.rejected]
        missing = [f.id for f in self.findings if f.status is Status.no_data]
        if ruled:
            out.append("ruled out: " + ", ".join(ruled))
        if missing:
            out.append("no data for: " + ", ".join(missing))
        pct = {u.label: u.pct for u in self.utilization}
        sm, mem = pct.get("Compute (SM) throughput"), pct.get("Memory throughput")
        if sm is not None and sm >= _BOUND_PCT and (mem is None or sm >= mem):
            out.append(f"look next: compute-bound (SM throughput {sm:.0f}% of peak): the instruction mix and "
                       f"tensor path (tensor {self.summary.families.tensor}); is the math on the fastest unit?")
        elif mem is not None and mem >= _BOUND_PCT:
            out.append(f"look next: memory-bound (memory throughput {mem:.0f}% of peak): bytes moved per "
                       "result, reuse in shared memory, coalescing")
        elif sm is not None and mem is not None:
            out.append(f"look next: latency-bound (SM {sm:.0f}%, memory {mem:.0f}% of peak): the stall reasons "
                       "per role and the occupancy")
        return out

    def gains(self) -> list[Gain]:
        """What fixing each confirmed finding could gain (analyses/gains.py), the biggest first."""
        return ranked(self)

    def by_gain(self) -> list[Finding]:
        """The confirmed findings, the biggest estimated gain first; those without an
        estimate follow in the catalogue's order."""
        order = {g.finding: n for n, g in enumerate(self.gains())}
        confirmed = [f for f in self.findings if f.status is Status.confirmed]
        return sorted(confirmed, key=lambda f: order.get(f.id, len(order)))

    def headline(self) -> str:
        """One line: the confirmed hypotheses (the biggest estimated gain first), or that
        none was (and what that rests on). A launch whose every verdict is no_data is
        never reported as good."""
        if self.outcome is Outcome.confirmed:
            return "confirmed: " + ", ".join(f.id for f in self.by_gain())
        if self.outcome is Outcome.no_data and not self.summary.is_kernel:
            return "no verdict: " + aggregate_reason(self.summary.workload or "")
        if self.outcome is Outcome.no_data:
            return "no verdict: the report lacks the data every hypothesis needs (collect with --set full)"
        return "no hypothesis confirmed"


def group_identical(analyses: Iterable[KernelAnalysis]) -> list[tuple[KernelAnalysis, tuple[KernelAnalysis, ...]]]:
    """Launches of one kernel from one report with the same launch shape and the same
    verdicts, grouped: (the first, the others), in order of first appearance. A report of
    many identical launches then reads as one launch and a line, not N copies."""
    groups: dict[tuple, list[KernelAnalysis]] = {}
    for a in analyses:
        s = a.summary
        key = (s.report, s.mangled, s.grid, s.block, s.cluster, s.registers_per_thread,
               tuple((f.id, f.status) for f in a.findings))
        groups.setdefault(key, []).append(a)
    return [(g[0], tuple(g[1:])) for g in groups.values()]


def unmet_line(launch_id: int, name: str, findings: Iterable[Finding]) -> str | None:
    """'launch 3 (gemm_ffma): tma' when a launch does not meet the user's --expect
    (missing-specialized-instructions' `unmet_expect`), else None. An expectation the
    report cannot check (no instruction data) is not unmet."""
    unmet = [u for f in findings if f.id == "missing-specialized-instructions" for u in f.evidence.get("unmet_expect")
             or ()]
    return f"launch {launch_id} ({name}): {', '.join(map(str, unmet))}" if unmet else None


def unmet_expectations(analyses: Iterable[KernelAnalysis]) -> list[str]:
    """`unmet_line` of every launch that has one."""
    return [line for a in analyses if (line := unmet_line(a.summary.launch_id, a.summary.name, a.findings))]


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Derive the role tables for every loaded launch that lacks them."""
    build_roles(con)


def launch_ids_of_reports(con: duckdb.DuckDBPyConnection, report_ids: Iterable[int]) -> list[int]:
    """The launches of the given reports, in id order."""
    return [r[0] for r in con.execute(
        "SELECT launch_id FROM launches WHERE list_contains($r, report_id) ORDER BY launch_id",
        {"r": sorted(set(report_ids))}).fetchall()]


def _roles(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, list[RoleStats]]:
    stalls: dict[tuple[int, str], list[tuple[str, int]]] = {}
    for lid, role, reason, samples in con.execute(
        """SELECT launch_id, role, reason, sum(samples)::BIGINT AS samples FROM role_stalls
           WHERE list_contains($ids, launch_id) GROUP BY ALL ORDER BY launch_id, role, samples DESC, reason""",
        {"ids": ids},
    ).fetchall():
        stalls.setdefault((lid, role), []).append((reason, samples))
    out: dict[int, list[RoleStats]] = {}
    for lid, role, instr, executed, samples, wait_samples, wait_share in con.execute(
        """SELECT launch_id, role, instructions, executed::BIGINT, samples::BIGINT, wait_samples::BIGINT, wait_share
           FROM roles WHERE list_contains($ids, launch_id)
           ORDER BY launch_id, CASE role WHEN 'producer' THEN 0 WHEN 'consumer' THEN 1 ELSE 2 END""",
        {"ids": ids},
    ).fetchall():
        out.setdefault(lid, []).append(RoleStats(role, instr, executed, samples, wait_samples,
                                                 None if wait_share is None else round(wait_share, 4),
                                                 tuple(stalls.get((lid, role), [])[:3])))
    return out


def _partitions(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, list[PartitionStats]]:
    stalls: dict[tuple[int, str], list[tuple[str, int]]] = {}
    for lid, part, reason, samples in con.execute(
        """SELECT p.launch_id, p.warp_partition, st.reason, sum(st.samples)::BIGINT AS samples
           FROM role_pcs AS p JOIN stalls AS st USING (launch_id, pc)
           WHERE list_contains($ids, p.launch_id) AND p.warp_partition IS NOT NULL
           GROUP BY ALL ORDER BY 1, 2, samples DESC, reason""", {"ids": ids}).fetchall():
        stalls.setdefault((lid, part), []).append((reason, samples))
    out: dict[int, list[PartitionStats]] = {}
    for lid, part, job, regs, basis, instr, executed, samples, share in con.execute(
        """SELECT launch_id, warp_partition, job, registers, basis, instructions, executed::BIGINT, samples::BIGINT,
                  wait_share FROM partitions WHERE list_contains($ids, launch_id) ORDER BY launch_id, first_pc""",
        {"ids": ids}).fetchall():
        out.setdefault(lid, []).append(PartitionStats(part, job, regs, basis, instr, executed, samples,
                                                      None if share is None else round(share, 4),
                                                      tuple(stalls.get((lid, part), [])[:3])))
    return {lid: sorted(ps, key=_partition_order) for lid, ps in out.items()}


def _partition_order(p: PartitionStats) -> tuple[int, int]:
    """Setup first, then the partitions by their first warp, then shared code, then the
    code every warp or none runs."""
    label = p.partition
    m = re.search(r"warps? (\d+)", label)
    rank = (0 if label.startswith("setup") else 2 if label.startswith("shared") else
            3 if label == "all warps" else 4 if label.startswith("unreached") else 1)
    return rank, int(m.group(1)) if m else 0


# The speed-of-light figures charts show, as Nsight Compute's GPU Speed Of Light and
# Occupancy sections name them; a report lacking a metric (fewer sections) lacks the row.
_UTILIZATION = """
WITH want(ord, label, source) AS (VALUES
    (0, 'Compute (SM) throughput', 'sm__throughput.avg.pct_of_peak_sustained_elapsed'),
    (1, 'Memory throughput', 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'),
    (2, 'DRAM throughput', 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed'),
    (3, 'L1/TEX throughput', 'l1tex__throughput.avg.pct_of_peak_sustained_active'),
    (4, 'L2 throughput', 'lts__throughput.avg.pct_of_peak_sustained_elapsed'),
    (5, 'Tensor pipe active', 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed')),
figures AS (
    SELECT m.launch_id, w.ord, w.label, w.source, m.value_double AS pct
    FROM metrics AS m JOIN want AS w ON m.name = w.source AND m.instance IS NULL
    UNION ALL
    -- SM active: cycles with at least one warp resident over elapsed cycles, per SM on average
    SELECT a.launch_id, 6, 'SM active cycles', 'sm__cycles_active.avg / sm__cycles_elapsed.avg',
           100 * a.value_double / nullif(e.value_double, 0)
    FROM metrics AS a JOIN metrics AS e ON e.launch_id = a.launch_id AND e.name = 'sm__cycles_elapsed.avg'
                                           AND e.instance IS NULL
    WHERE a.name = 'sm__cycles_active.avg' AND a.instance IS NULL
    UNION ALL
    SELECT launch_id, 7, 'Theoretical occupancy', 'theoretical_occupancy_pct', theoretical_occupancy_pct FROM launches
    UNION ALL
    SELECT launch_id, 8, 'Achieved occupancy', 'achieved_occupancy_pct', achieved_occupancy_pct FROM launches)
SELECT launch_id, label, source, pct FROM figures
WHERE list_contains($ids, launch_id) AND pct IS NOT NULL AND NOT isnan(pct)
ORDER BY launch_id, ord
"""


def _utilization(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, list[Utilization]]:
    out: dict[int, list[Utilization]] = {}
    for lid, label, source, pct in con.execute(_UTILIZATION, {"ids": ids}).fetchall():
        out.setdefault(lid, []).append(Utilization(label, source, pct))
    return out


def analyze(
    con: duckdb.DuckDBPyConnection,
    kernel: str | None = None,
    expect: Iterable[str] = (),
    thresholds: dict[str, dict[str, Any]] | None = None,
    launch_ids: Iterable[int] | None = None,
) -> list[KernelAnalysis]:
    """Summaries, roles and verdicts of the launches matching `kernel`: among
    `launch_ids` when given, else every launch in the store. Two things run at once, on
    `con` and a cursor of it (collectors/store.py, run_spread; one after the other inside
    a transaction open on `con`): the role tables are derived beside the summaries and
    speed-of-light figures, then the hypotheses run beside the reading of the roles
    (~15 ms of a one-launch analyze's ~115 ms on two cores)."""
    check_kernel_regex(kernel)  # a bad expression is an InputError, not a DuckDB failure mid-query
    summaries: list[LaunchSummary] = []
    util: dict[int, list[Utilization]] = {}

    def figures(c: duckdb.DuckDBPyConnection) -> None:  # reads no role table
        summaries.extend(summarize(c, kernel, launch_ids))
        util.update(_utilization(c, [s.launch_id for s in summaries]))

    # Two at once (DuckDB plans and runs a query without Python's lock): the role tables
    # are derived beside the summaries, then the roles are read beside the verdicts.
    run_spread(con, [prepare, figures], each)
    ids = [s.launch_id for s in summaries]
    if not ids:
        return []
    # Roles and warp specialization are a kernel's: a range or graph result mixes the code
    # of several (its verdicts say so: hypotheses.aggregate_reason).
    kernels = [s.launch_id for s in summaries if s.is_kernel]
    verdicts: dict[int, Verdicts] = {}
    roles: dict[int, list[RoleStats]] = {}
    parts: dict[int, list[PartitionStats]] = {}
    ws: dict[int, tuple[bool | None, str | None]] = {}

    def judge(c: duckdb.DuckDBPyConnection) -> None:
        verdicts.update(evaluate(c, ids, expect=expect, thresholds=thresholds))

    def role_stats(c: duckdb.DuckDBPyConnection) -> None:
        roles.update(_roles(c, kernels))
        parts.update(_partitions(c, kernels))
        ws.update({lid: (w, basis) for lid, w, basis in c.execute(
            "SELECT launch_id, warp_specialized, basis FROM warp_specialization WHERE list_contains($ids, launch_id)",
            {"ids": kernels}).fetchall()})

    run_spread(con, [judge, role_stats], each)
    return [
        KernelAnalysis(s, ws.get(s.launch_id, (None, None))[0], tuple(roles.get(s.launch_id, [])),
                       verdicts[s.launch_id].findings, tuple(util.get(s.launch_id, [])),
                       ws.get(s.launch_id, (None, None))[1], tuple(parts.get(s.launch_id, [])))
        for s in summaries
    ]
