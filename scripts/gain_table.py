"""Each confirmed finding's estimated gain beside the speed-up its fix measured.

    python scripts/gain_table.py

The fixtures hold before/after pairs of one kernel collected on the H200, where the "after"
report is the "before" kernel with one finding fixed (1 CTA per 8 SMs -> 3 per SM, FP32 FFMA ->
wgmma and TMA, cp.async -> TMA, 2 -> 6 stages, a spilling consumer -> one that does not ...;
fixtures/src/ and each report's provenance.json say how each was built). For each pair this
prints the range `wsperf analyze` estimates for the finding the fix addresses (its JSON
`gain`) and the share of the launch's duration the fix saved: 1 - after / before. README
quotes the table.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"

# (before, after, the finding the change from before to after fixes, what changed)
PAIRS = [
    ("ws_stream_fewctas", "ws_stream_healthy", "too-few-active-ctas", "16 CTAs -> 396 (3 per SM)"),
    ("gemm_ffma", "gemm_wgmma_tma", "missing-specialized-instructions", "FP32 FFMA -> wgmma + TMA"),
    ("gemm_wgmma_cpasync", "gemm_wgmma_tma", "missing-specialized-instructions", "cp.async -> TMA"),
    ("gemm_wgmma_cpasync", "gemm_wgmma_tma", "producer-bound", "cp.async -> TMA"),
    ("gemm_wgmma_tma_s2", "gemm_wgmma_tma_s6", "serialized-roles", "2 -> 6 stages"),
    ("triton_ws_matmul_s2", "triton_ws_matmul_s4", "serialized-roles", "Triton, 2 -> 4 stages"),
    ("ws_stream_producer", "ws_stream_healthy", "producer-bound", "a hand-copying producer -> bulk copy"),
    ("ws_stream_spill", "ws_stream_healthy", "register-spills", "a spilling consumer -> none"),
    ("ws_stream_serialized", "ws_stream_healthy", "serialized-roles", "1 -> 4 stages"),
    ("ws_stream_serialized1", "ws_stream_healthy1", "serialized-roles", "1 -> 4 stages, 1 CTA per SM"),
    ("gluon_3part_slow", "gluon_3part", "partition-bound", "Gluon, a store warp that waits each store"),
]


def rows() -> list[dict]:
    """One row per pair: the estimate and the measured share of the duration saved."""
    import wsperf
    from wsperf.analyses.gains import estimate

    out = []
    cache: dict[str, object] = {}

    def first(name: str):  # noqa: ANN202
        if name not in cache:
            cache[name] = wsperf.load([str(REPORTS / f"{name}.ncu-rep")], db=None, expect=[], config=None).results[0]
        return cache[name]

    for before, after, fid, what in PAIRS:
        b, a = first(before), first(after)
        f = next(x for x in b.findings if x.id == fid)
        g = estimate(b, f)
        saved = 1 - a.summary.duration_ns / b.summary.duration_ns
        out.append({"before": before, "after": after, "finding": fid, "change": what, "status": f.status.value,
                    "low": g.low if g else None, "high": g.high if g else None, "measured": saved,
                    "before_us": b.summary.duration_ns / 1e3, "after_us": a.summary.duration_ns / 1e3})
    return out


def main() -> int:
    print("| before -> after | change | finding | estimate | measured | in range |")
    print("| --- | --- | --- | ---: | ---: | --- |")
    for r in rows():
        est = f"{r['low'] * 100:.0f}-{r['high'] * 100:.0f}%" if r["low"] is not None else "none"
        inside = r["low"] is not None and r["low"] - 0.005 <= r["measured"] <= r["high"] + 0.005
        print(f"| {r['before']} -> {r['after']} ({r['before_us']:.0f} -> {r['after_us']:.0f} us) | {r['change']} | "
              f"{r['finding']} | {est} | {r['measured'] * 100:.0f}% | {'yes' if inside else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
