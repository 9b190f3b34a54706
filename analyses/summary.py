"""Per-launch summary: what ran, how it was launched, which instruction paths it used.

This is the first block `wsperf analyze` prints for every launch; the hypotheses add
their verdicts beside it. Arithmetic and grouping happen in SQL (`launches.sql`, the
`instruction_families` view of schema.sql); this module only shapes rows into typed values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import duckdb

from wsperf.queries import read_query

# Best tensor path first: a kernel that has tcgen05 *and* mma.sync code is on tcgen05.
TENSOR_ORDER = ("tcgen05", "wgmma", "mma.sync")
COPY_ORDER = ("tma", "cp.async", "ld/st")


@dataclass(frozen=True)
class FamilyCount:
    """How much of one instruction family a launch holds and executed."""

    family: str
    kind: str
    static_count: int | None  # SASS instructions of the family (None: no per-PC data)
    executed: int | None  # warp-level instructions executed


@dataclass(frozen=True)
class Families:
    """The instruction paths of one launch, from its SASS."""

    known: bool  # False: the report holds no instruction-level data for this launch
    tensor: str  # best tensor path present: tcgen05 | wgmma | mma.sync | none | unknown
    copies: tuple[str, ...] | None  # subset of COPY_ORDER, in that order (None: unknown)
    mbarrier: bool | None  # None: unknown
    setmaxnreg: bool | None
    cluster_barrier: bool | None
    local_memory: bool | None
    counts: tuple[FamilyCount, ...]

    @classmethod
    def from_counts(cls, counts: list[FamilyCount], known: bool = True) -> "Families":
        """`known=False` when the report has neither source counters nor instruction
        statistics for the launch: then nothing can be said to be absent."""
        # In a profile, what ran decides (dead code such as an unused epilogue path is
        # not the kernel's path); without execution counts, what the SASS holds.
        present = {c.family for c in counts
                   if (c.executed > 0 if c.executed is not None else (c.static_count or 0) > 0)}
        return cls(
            known=known,
            tensor=next((t for t in TENSOR_ORDER if t in present), "none" if known else "unknown"),
            copies=tuple(c for c in COPY_ORDER if c in present) if known else None,
            mbarrier="mbarrier" in present if known else None,
            setmaxnreg="setmaxnreg" in present if known else None,
            cluster_barrier="cluster-barrier" in present if known else None,
            local_memory="local-memory" in present if known else None,
            counts=tuple(counts),
        )


@dataclass(frozen=True)
class NcuRule:
    """One message of Nsight Compute's own rules for a launch."""

    rule_id: str
    section_id: str | None
    title: str | None
    msg_type: str | None
    message: str
    estimated_speedup: float | None


@dataclass(frozen=True)
class LaunchSummary:
    """One profiled kernel launch: identity, launch shape, cost, instruction paths."""

    launch_id: int
    report: str
    name: str  # function name, e.g. gemm_ws
    demangled: str
    mangled: str
    arch: str | None  # sm_90
    device: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]  # (0, 0, 0) when the launch had no cluster
    registers_per_thread: int | None
    static_smem_bytes: int | None
    dynamic_smem_bytes: int | None
    duration_ns: float | None
    families: Families
    ncu_rules: tuple[NcuRule, ...] = field(default=())
    # What the result is (launches.workload_type): 'kernel', or a result that adds up the
    # work of several kernels: 'range' (ncu --replay-mode range / app-range), 'graph'
    # (--graph-profiling graph), 'cmdlist'. None: the reader could not say (a kernel).
    workload: str | None = None

    @property
    def is_kernel(self) -> bool:
        """One kernel launch (not a range, graph or command list of several)."""
        return self.workload in (None, "kernel")


def finite(v: Any) -> Any:
    """A figure Nsight Compute could not compute (NaN, inf: e.g. a launch collected
    without launch statistics) is a missing value, None, never a number."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def summarize(con: duckdb.DuckDBPyConnection, kernel: str | None = None,
              launch_ids: Iterable[int] | None = None) -> list[LaunchSummary]:
    """Summaries of the launches `launch_ids` (default: every launch in the store),
    optionally those whose demangled or mangled name matches the regular expression
    `kernel` (a bound parameter, never spliced into SQL)."""
    ids = None if launch_ids is None else sorted(set(launch_ids))
    rows = con.execute(read_query("launches.sql"), {"kernel": kernel, "ids": ids}).fetchall()
    cols = [d[0] for d in con.description]
    launches = [{c: finite(v) for c, v in zip(cols, r)} for r in rows]
    if not launches:
        return []
    ids = [l["launch_id"] for l in launches]

    fam: dict[int, list[FamilyCount]] = {}
    for launch_id, kind, family, static_count, executed in con.execute(
        """SELECT launch_id, kind, family, static_count, executed FROM instruction_families
           WHERE list_contains($ids, launch_id) ORDER BY launch_id, kind, family""",
        {"ids": ids},
    ).fetchall():
        fam.setdefault(launch_id, []).append(FamilyCount(family, kind, static_count, executed))

    rules: dict[int, list[NcuRule]] = {}
    for launch_id, rule_id, section_id, title, msg_type, message, speedup in con.execute(
        """SELECT launch_id, rule_id, section_id, title, msg_type, message, estimated_speedup
           FROM ncu_rules WHERE list_contains($ids, launch_id)
           ORDER BY launch_id, estimated_speedup DESC NULLS LAST, rule_id, rule_idx""",
        {"ids": ids},
    ).fetchall():
        rules.setdefault(launch_id, []).append(NcuRule(rule_id, section_id, title, msg_type, message, speedup))

    return [
        LaunchSummary(
            launch_id=l["launch_id"],
            report=l["report_path"],
            name=l["kernel_function"] or l["kernel_demangled"] or l["kernel_mangled"],
            demangled=l["kernel_demangled"],
            mangled=l["kernel_mangled"],
            arch=l["arch"],
            device=l["device_name"],
            grid=(l["grid_x"], l["grid_y"], l["grid_z"]),
            block=(l["block_x"], l["block_y"], l["block_z"]),
            cluster=(l["cluster_x"] or 0, l["cluster_y"] or 0, l["cluster_z"] or 0),
            registers_per_thread=l["registers_per_thread"],
            static_smem_bytes=l["static_smem_bytes"],
            dynamic_smem_bytes=l["dynamic_smem_bytes"],
            duration_ns=l["duration_ns"],
            families=Families.from_counts(fam.get(l["launch_id"], []), known=bool(l["has_instruction_data"])),
            ncu_rules=tuple(rules.get(l["launch_id"], [])),
            workload=l["workload_type"],
        )
        for l in launches
    ]
