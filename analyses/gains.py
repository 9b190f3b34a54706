"""What fixing each confirmed finding could gain: a range of the launch's duration, with
the model it rests on, so that a summary can say which to fix first.

Each estimate is a share of the launch's measured duration, `low` to `high`, from the
figures its finding's verdict already reads:

- the consumers wait for data (producer-bound, partition-bound, a pipeline fed without TMA):
  at most the share of their samples spent waiting (they stop waiting, their own work stays);
  at least that share times the DRAM headroom (the part of the waiting that DRAM traffic,
  which a faster producer still has to move, already fills stays);
- the roles run in turn (serialized-roles): overlapped, the launch takes the longer of the
  two roles' busy times: at most the smaller wait share of the two, at least that times the
  DRAM headroom; in a kernel that is not warp-specialized, the samples that wait on loaded
  data inside loops (a pipelined loop hides them), at least times the DRAM headroom;
- too few CTAs: the SMs idle for the launch (1 - sm__cycles_active) would run the same
  work split over them: at most that idle share, at least that times the DRAM headroom;
- register spills: at least the samples at local loads and stores; at most those plus the
  samples stalled on long scoreboard (a spilled operand read back through L1);
- matrix work on FFMA: the FFMA share of the instructions runs at the tensor cores' rate
  (TF32's peak over FP32's) at least; at most the whole launch runs at BF16's rate; a
  pipeline fed without TMA: the consumers' wait, as for producer-bound;
- pipeline bubbles: at most the bubble shares the timeline measured; at least nothing
  (other CTAs on the SM may already fill them: the fixtures' 1- and 4-stage rings took
  101.8 and 103.0 us).

Every high end is bounded by the roofline: the launch cannot get faster than the DRAM
traffic it moves at peak bandwidth (1 - DRAM throughput % of peak). An estimate is a model,
not a measurement: README's table shows each beside the speed-up the fixtures' before/after
pairs measured on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# Dense peak throughput of the tensor cores over FP32 FFMA, per architecture: (TF32, BF16).
# H100/H200 SXM: 495 and 989 TFLOP/s against 67; B200: 1.1 and 2.25 PFLOP/s against ~80;
# A100: 156 and 312 against 19.5.
_TENSOR_OVER_FFMA = {"sm_80": (8.0, 16.0), "sm_86": (4.0, 8.0), "sm_89": (4.0, 8.0), "sm_90": (7.4, 14.8),
                     "sm_100": (14.0, 28.0), "sm_103": (14.0, 28.0)}


@dataclass(frozen=True)
class Gain:
    """The share of the launch's duration that fixing `finding` could save."""

    finding: str
    low: float  # 0..1 of the launch's duration
    high: float
    basis: str  # the model and the figures it used
    duration_ns: float | None  # the launch's measured duration

    @property
    def ns(self) -> tuple[float, float] | None:
        """The range in nanoseconds, where the launch's duration is known."""
        d = self.duration_ns
        return (self.low * d, self.high * d) if d else None

    def text(self) -> str:
        """'est. 30-39% (101-131 us)' or 'est. up to 14%'."""
        pct = f"{self.low * 100:.0f}-{self.high * 100:.0f}%" if round(self.low * 100) != round(self.high * 100) \
            else f"{self.high * 100:.0f}%"
        if self.low <= 0.005:
            pct = f"up to {self.high * 100:.0f}%"
        ns, d = self.ns, self.duration_ns
        if not ns or not d:
            return f"est. {pct}"
        unit, scale = ("ms", 1e6) if d >= 1e6 else ("us", 1e3)
        digits = 2 if d / scale < 10 else 0
        span = f"{ns[1] / scale:.{digits}f}" if self.low <= 0.005 else \
            f"{ns[0] / scale:.{digits}f}-{ns[1] / scale:.{digits}f}"
        return f"est. {pct} ({span} of {d / scale:.{digits}f} {unit})"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else None


def _dram_pct(a: Any, ev: dict) -> float | None:
    d = _num(ev.get("dram_pct"))
    if d is not None:
        return d
    return next((u.pct for u in a.utilization if u.label == "DRAM throughput"), None)


def _consumer_wait(a: Any) -> float | None:
    return next((r.wait_share for r in a.roles if r.role == "consumer" and r.wait_share is not None), None)


def _bounded(fid: str, lo: float, hi: float, basis: str, a: Any, ev: dict) -> Gain:
    dram = _dram_pct(a, ev)
    cap = 1.0 - dram / 100.0 if dram is not None else 1.0
    roof = f"; the roofline caps it at {cap * 100:.0f}% (DRAM at {dram:.0f}% of peak)" if dram is not None and \
        hi > cap else ""
    hi = max(0.0, min(hi, cap))
    return Gain(fid, max(0.0, min(lo, hi)), hi, basis + roof, a.summary.duration_ns)


def _headroom(a: Any, ev: dict) -> float:
    d = _dram_pct(a, ev)
    return 1.0 - d / 100.0 if d is not None else 1.0


def _scaled(fid: str, w: float, why: str, a: Any, ev: dict) -> Gain:
    """At most `w` of the launch (what `why` says), at least `w` times the DRAM headroom:
    the part of it that DRAM traffic, which the fix still has to move, already fills stays."""
    h = _headroom(a, ev)
    return _bounded(fid, w * h, w, f"{why}: at most that share of the launch, at least that times the DRAM "
                    f"headroom ({h * 100:.0f}%)", a, ev)


def _waiting(fid: str, w: float | None, who: str, a: Any, ev: dict) -> Gain | None:
    return None if w is None else _scaled(fid, w, f"{who} wait {w * 100:.0f}% of their samples for data", a, ev)


def _producer_bound(a: Any, ev: dict) -> Gain | None:
    return _waiting("producer-bound", _num(ev.get("consumer_wait_share")), "the consumers", a, ev)


def _partition_bound(a: Any, ev: dict) -> Gain | None:
    return _waiting("partition-bound", _num(ev.get("math_wait_share")), "the math partitions", a, ev)


def _serialized(a: Any, ev: dict) -> Gain | None:
    c, p = _num(ev.get("consumer_wait_share")), _num(ev.get("producer_wait_share"))
    if ev.get("warp_specialized") is False and (w := _num(ev.get("loop_load_wait_share"))) is not None:
        # one code path that loads, then computes on what it loaded: pipelined (loads issued
        # a stage ahead), the loop stops waiting for them
        return _scaled("serialized-roles", w, f"{w * 100:.0f}% of the samples wait on loaded data inside loops, "
                       "which a pipelined loop hides", a, ev)
    if c is None or p is None:
        return None
    return _scaled("serialized-roles", min(c, p), f"overlapped, the launch takes the longer role's busy time: the "
                   f"consumers wait {c * 100:.0f}%, the producer {p * 100:.0f}% of their samples", a, ev)


def _few_ctas(a: Any, ev: dict) -> Gain | None:
    active = _num(ev.get("sm_active"))
    if active is None:
        return None
    return _scaled("too-few-active-ctas", 1.0 - active, f"the SMs are idle {(1 - active) * 100:.0f}% of the launch "
                   f"(sm__cycles_active {active * 100:.0f}%), which the same work split over all of them fills",
                   a, ev)


def _spills(a: Any, ev: dict) -> Gain | None:
    at = _num(ev.get("local_sample_share"))
    if at is None:
        return None
    total = sum(r.samples or 0 for r in a.roles)
    long_sb = sum(n for r in a.roles for reason, n in r.top_stalls if reason == "long_scoreboard")
    lsb = long_sb / total if total else 0.0
    return _bounded("register-spills", at, at + lsb, f"{at * 100:.0f}% of the samples sit at local loads and "
                    f"stores (at least), {lsb * 100:.0f}% more wait on long scoreboard, where a spilled operand comes "
                    "back through L1 (at most)", a, ev)


def _missing(a: Any, ev: dict) -> Gain | None:
    ffma, arch = _num(ev.get("ffma_share")), ev.get("arch")
    if ev.get("tensor_path") == "none" and ffma and (ev.get("matrix_ffma_share") or 0) >= 0.5:
        tf32, bf16 = _TENSOR_OVER_FFMA.get(str(arch), (7.4, 14.8))
        return _bounded("missing-specialized-instructions", ffma * (1 - 1 / tf32), 1 - 1 / bf16,
                        f"FFMA is {ffma * 100:.0f}% of the instructions; on {arch}'s tensor cores TF32 runs "
                        f"{tf32:g}x and BF16 {bf16:g}x FP32's peak: at least the FFMA share at TF32's rate, at most "
                        "the whole launch at BF16's", a, ev)
    if "tma" not in (ev.get("copy_paths") or []) and (ev.get("tensor_path") not in (None, "none")
                                                     or (ev.get("mbarrier_waits") or 0) > 0):
        # a pipeline (tensor cores, or an mbarrier ring) fed by hand copies: what TMA gives
        # back is the consumers' wait
        return _waiting("missing-specialized-instructions", _consumer_wait(a), "the consumers", a, ev)
    return None


def _bubbles(a: Any, ev: dict) -> Gain | None:
    shares = [_num(ev.get(k)) for k in ("prologue_share", "steady_idle_share", "epilogue_share")]
    known = [s for s in shares if s is not None]
    if not known:
        return None
    b = min(1.0, sum(known))
    return _bounded("pipeline-bubbles", 0.0, b, f"the consumers sit idle {b * 100:.0f}% of the CTA's time "
                    "(prologue, between stages and drain, from the timeline): at most that; at least nothing, "
                    "where other CTAs on the SM already fill the bubbles", a, ev)


_MODELS: dict[str, Callable[[Any, dict], Gain | None]] = {
    "producer-bound": _producer_bound, "partition-bound": _partition_bound, "serialized-roles": _serialized,
    "too-few-active-ctas": _few_ctas, "register-spills": _spills, "missing-specialized-instructions": _missing,
    "pipeline-bubbles": _bubbles,
}


def estimate(a: Any, finding: Any) -> Gain | None:
    """The gain of fixing one confirmed finding of launch analysis `a`; None where the
    finding is not confirmed or its figures are missing."""
    if getattr(finding.status, "value", finding.status) != "confirmed":
        return None
    model = _MODELS.get(finding.id)
    return model(a, finding.evidence or {}) if model else None


def ranked(a: Any) -> list[Gain]:
    """The estimates of every confirmed finding of `a`, the biggest first (by the high end,
    then the low end)."""
    gains = [g for f in a.findings if (g := estimate(a, f)) is not None]
    return sorted(gains, key=lambda g: (-g.high, -g.low, g.finding))
