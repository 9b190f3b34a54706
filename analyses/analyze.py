"""`wsperf analyze` as a library call: summaries, roles and verdicts for every launch.

Loading is the caller's business (the CLI loads with progress); this module derives the
role tables for launches that lack them, runs the hypothesis catalogue and bundles the
results per launch. Nothing here draws or prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import duckdb

from wsperf.analyses.hypotheses import Finding, evaluate
from wsperf.analyses.roles import build_roles
from wsperf.analyses.summary import LaunchSummary, summarize


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
class KernelAnalysis:
    """Everything `wsperf analyze` says about one launch."""

    summary: LaunchSummary
    warp_specialized: bool | None  # None: the report has no SASS-level data
    roles: tuple[RoleStats, ...]
    findings: tuple[Finding, ...]


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Derive the role tables for every loaded launch that lacks them."""
    build_roles(con)


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


def analyze(
    con: duckdb.DuckDBPyConnection,
    kernel: str | None = None,
    expect: Iterable[str] = (),
    thresholds: dict[str, dict[str, Any]] | None = None,
) -> list[KernelAnalysis]:
    """Summaries, roles and verdicts of every loaded launch matching `kernel`."""
    prepare(con)
    summaries = summarize(con, kernel)
    ids = [s.launch_id for s in summaries]
    if not ids:
        return []
    verdicts = evaluate(con, ids, expect=expect, thresholds=thresholds)
    roles = _roles(con, ids)
    ws = dict(con.execute("SELECT launch_id, warp_specialized FROM warp_specialization WHERE list_contains($ids, launch_id)",
                          {"ids": ids}).fetchall())
    return [
        KernelAnalysis(s, ws.get(s.launch_id), tuple(roles.get(s.launch_id, [])), verdicts[s.launch_id].findings)
        for s in summaries
    ]
