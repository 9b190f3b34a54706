"""`wsperf compare BASE CANDIDATE`: what changed between two sets of launches, and
whether it is a regression.

Result types (the contract shared by the renderers, the charts and the JSON output).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class VerdictChange:
    """One hypothesis on one matched kernel: base status -> candidate status."""

    hypothesis: str
    base_status: str                # 'confirmed' | 'rejected' | 'no_data' | 'absent'
    cand_status: str
    base_summary: str
    cand_summary: str
    regression: bool                # newly confirmed on the candidate


@dataclass(frozen=True)
class KernelComparison:
    """One kernel matched across the two sides."""

    kernel: str                     # function name shown to the user (e.g. 'ws_stream')
    base_name: str                  # demangled name on the base side
    cand_name: str                  # demangled name on the candidate side
    matched_by: str                 # 'name+config' | 'function+config' (template arguments differ) | ...
    launch_config: str              # 'grid 396x1x1 block 160x1x1 cluster -' of the candidate
    base_launch_ids: tuple[int, ...]
    cand_launch_ids: tuple[int, ...]
    figures: tuple[FigureChange, ...]
    verdicts: tuple[VerdictChange, ...]

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

    @property
    def regression(self) -> bool:
        return any(k.regression for k in self.kernels)
