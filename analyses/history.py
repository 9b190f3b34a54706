"""`wsperf history`: a kernel's figures over the runs recorded in a `--db` store.

Result types (the contract shared by the renderers and the trend chart).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class HistoryPoint:
    """One kernel's figure in one recorded run."""

    run_id: int
    label: str                  # runs.label
    git_commit: str | None
    git_branch: str | None
    started_at: datetime        # runs.started_at (UTC)
    tags: tuple[str, ...]
    kernel: str                 # function name, e.g. 'ws_stream'
    demangled: str              # full demangled name
    metric: str                 # 'duration_ns' (launches.duration_ns) or an ncu metric name
    n: int                      # launches of the kernel in the run
    median: float | None
    low: float | None           # min over the run's launches
    high: float | None          # max over the run's launches
