"""The analysis config file (TOML) a nightly job keeps beside its kernels:

    expect = ["tma", "tensor-core"]          # same as --expect, repeatable there

    [thresholds.producer-bound]              # override a hypothesis' header defaults
    min_consumer_wait_share = 0.25

    [compare.thresholds]                     # `wsperf compare`: what counts as a change
    alpha = 0.01                             # Mann-Whitney p-value below which a difference is real
    duration_ns = 5.0                        # minimum median change, % of the base

Every key is checked against the catalogue (and compare's figures), so a typo fails
loudly instead of silently keeping the default.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wsperf.analyses.hypotheses import catalogue, check_expectations
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import read_input


# `[compare.thresholds]` keys and their defaults. Figure thresholds are the minimum
# change of the median, in % of the base median, that counts (after the Mann-Whitney test
# says p < alpha); a figure name with a ':' (e.g. 'wait_share:consumer') falls back to its
# prefix ('wait_share'). Defaults were checked against the compare fixtures
# (fixtures/README.md): the twelve launches of cmp_healthy_a and _b (one binary, two
# processes) spread 1.29% in duration, 1.29% in DRAM throughput, 0.9% in SM activity and
# 0.12% in achieved occupancy (max / min - 1).
COMPARE_DEFAULTS: dict[str, float] = {
    "alpha": 0.01,                  # two-sided Mann-Whitney p-value below which a difference is real
    "few_samples_pct": 10.0,        # the wide threshold when the test cannot reach alpha (one launch per side)
    "duration_ns": 3.0,             # launches.duration_ns
    "sm_active": 5.0,               # sm__cycles_active.avg / sm__cycles_elapsed.avg
    "achieved_occupancy_pct": 5.0,  # sm__warps_active.avg.pct_of_peak_sustained_active
    "dram_throughput_pct": 5.0,     # gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed
    "tensor_pipe_pct": 5.0,         # sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed (--set full)
    "wait_share": 20.0,             # share of a role's PC samples at mbarrier waits (relative change)
    "share_points": 2.0,            # ... and a share must also move this many percentage points
    "executed": 1.0,                # tolerance on executed instructions per family (deterministic kernels)
}
# Thresholds that are percentages of a whole (not relative changes, which may exceed 100%).
_AT_MOST_100 = ("share_points",)
# A config file is a few hundred bytes; a bigger one is not one (or is /dev/zero-like).
MAX_CONFIG_BYTES = 1 << 20
# Figures that come in several names, settable one by one: 'wait_share:consumer',
# 'executed:tma'.
_PER_NAME = ("wait_share", "executed")


@dataclass(frozen=True)
class CompareSettings:
    """`[compare.thresholds]`: the noise model of `wsperf compare`."""

    thresholds: dict[str, float] = field(default_factory=lambda: dict(COMPARE_DEFAULTS))

    @property
    def alpha(self) -> float:
        return self.thresholds["alpha"]

    def threshold(self, figure: str) -> float | None:
        """Minimum effect size (% of base) for `figure`, or None when any change counts."""
        if figure in self.thresholds:
            return self.thresholds[figure]
        return self.thresholds.get(figure.split(":", 1)[0]) if ":" in figure else None


@dataclass(frozen=True)
class AnalysisConfig:
    expect: tuple[str, ...] = ()
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    compare: CompareSettings = field(default_factory=CompareSettings)


def load_config(path: Path | None, extra_expect: tuple[str, ...] = ()) -> AnalysisConfig:
    """The config at `path` (None: defaults), with `extra_expect` from the command line."""
    doc: dict[str, Any] = {}
    if path is not None:
        data = read_input(path, kind="a wsperf config file (TOML)", limit=MAX_CONFIG_BYTES)
        try:
            doc = tomllib.loads(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: cannot read config file ({e})") from None
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{path}: not valid TOML ({e})") from None
        except RecursionError:  # tomllib recurses once per nesting level
            raise InputError(f"{path}: nested too deeply to be a wsperf config") from None
        except ValueError as e:  # an integer past Python's digit limit (4300 digits)
            raise InputError(f"{path}: holds a number of more than 4300 digits, which no setting takes "
                             f"({str(e).split(':')[0]})") from None
    unknown = set(doc) - {"expect", "thresholds", "compare"}
    if unknown:
        raise InputError(f"{path}: unknown config keys {', '.join(sorted(unknown))}; known: expect, thresholds, "
                         "compare")
    expect = doc.get("expect", [])
    if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
        raise InputError(f"{path}: expect must be a list of strings")
    known = {h.id: h for h in catalogue()}
    thresholds: dict[str, dict[str, Any]] = {}
    table = doc.get("thresholds") or {}
    if not isinstance(table, dict):
        raise InputError(f"{path}: thresholds must be tables, [thresholds.<hypothesis>] with name = number")
    for hid, values in table.items():
        if hid not in known:
            raise InputError(f"{path}: no hypothesis {hid!r}; known: {', '.join(sorted(known))}")
        if not isinstance(values, dict):
            raise InputError(f"{path}: thresholds.{hid} must be a table of name = value")
        bad = set(values) - set(known[hid].thresholds)
        if bad:
            raise InputError(f"{path}: thresholds.{hid} has no {', '.join(sorted(bad))}; "
                             f"known: {', '.join(sorted(known[hid].thresholds))}")
        for name, v in values.items():
            default = known[hid].thresholds[name]
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise InputError(f"{path}: thresholds.{hid}.{name} must be a number like its default "
                                     f"{default!r} (finite), not {v!r}")
                # Every numeric hypothesis threshold is a share (a fraction of samples,
                # instructions or cycles): its default says so by lying in 0..1.
                lo, hi = (0.0, 1.0) if 0 <= default <= 1 else (0.0, math.inf)
                if not lo <= v <= hi:
                    raise InputError(f"{path}: thresholds.{hid}.{name} must be between {lo:g} and {hi:g} (a share), "
                                     f"not {v!r}")
        thresholds[hid] = dict(values)
    return AnalysisConfig(tuple(check_expectations([*expect, *extra_expect])), thresholds,
                          _compare_settings(path, doc.get("compare")))


def _compare_settings(path: Path | None, section: Any) -> CompareSettings:
    if section is None:
        return CompareSettings()
    if not isinstance(section, dict) or set(section) - {"thresholds"}:
        raise InputError(f"{path}: [compare] holds only a [compare.thresholds] table")
    values = section.get("thresholds") or {}
    if not isinstance(values, dict):
        raise InputError(f"{path}: compare.thresholds must be a table of name = number")
    out = dict(COMPARE_DEFAULTS)
    for key, v in values.items():
        if key not in COMPARE_DEFAULTS and key.split(":", 1)[0] not in _PER_NAME:
            raise InputError(f"{path}: compare.thresholds has no {key!r}; known: {', '.join(COMPARE_DEFAULTS)} "
                             "(or a figure such as 'wait_share:consumer')")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError(f"{path}: compare.thresholds.{key} must be a finite number >= 0, not {v!r}")
        if key.split(":", 1)[0] in _AT_MOST_100 and v > 100:
            raise InputError(f"{path}: compare.thresholds.{key} is a percentage: at most 100, not {v!r}")
        out[key] = float(v)
    if not 0 < out["alpha"] < 1:
        raise InputError(f"{path}: compare.thresholds.alpha must be between 0 and 1, not {out['alpha']}")
    return CompareSettings(out)
