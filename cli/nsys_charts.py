"""Charts of an Nsight Systems summary, built with Altair from its typed results
(`NsysSummary`, `TimelineSpan`), never from the store; written by `cli.charts.write_charts`.

- `nsys_kernel_time`: the kernel-time breakdown, one bar per kernel (the top ones and
  the rest as one 'other' bar), its share of all kernel time;
- `nsys_timeline`: one row per stream, one bar per kernel from its start to its end, the
  top kernels colored by name and the rest as 'other' (a Gantt chart of the GPU side).
"""

from __future__ import annotations

from typing import Iterable

import altair as alt
import pandas as pd

from wsperf.analyses.nsys import NsysSummary, TimelineSpan
from wsperf.cli.render import plain

_WIDTH = 640
_TOP = 10


def _text(s: object, limit: int) -> str:
    """A chart label: control characters removed (they abort vl-convert), long names cut."""
    t = plain(s).plain
    return t if len(t) <= limit else t[: limit - 1] + "\u2026"


def kernel_time_chart(s: NsysSummary, top: int = _TOP) -> alt.Chart | None:
    """Share of all kernel time per kernel, most first; None without kernel time."""
    if not s.kernel_time_ns:
        return None
    rows = [{"kernel": _text(k.short_name or k.kernel, 60),
             "full_name": _text(k.kernel, 200), "share": k.share, "total_ms": k.total_ns / 1e6,
             "launches": k.launches, "median_us": k.median_ns / 1e3} for k in s.kernels[:top]]
    rest = s.kernels[top:]
    if rest:
        rows.append({"kernel": f"other ({len(rest)} kernels)", "full_name": "", "share": sum(k.share for k in rest),
                     "total_ms": sum(k.total_ns for k in rest) / 1e6, "launches": sum(k.launches for k in rest),
                     "median_us": None})
    # Distinct labels: template instances share a short name.
    seen: dict[str, int] = {}
    for r in rows:
        n = seen[r["kernel"]] = seen.get(r["kernel"], 0) + 1
        if n > 1:
            r["kernel"] = f"{r['kernel']} #{n}"
    data = pd.DataFrame(rows)
    return alt.Chart(data, width=_WIDTH, title=alt.TitleParams(
        "Kernel time breakdown", subtitle=f"{s.kernel_time_ns / 1e6:.3f} ms of kernel time", anchor="start")
    ).mark_bar().encode(
        y=alt.Y("kernel:N", sort=[r["kernel"] for r in rows], title=None),
        x=alt.X("share:Q", title="share of kernel time", axis=alt.Axis(format="%")),
        tooltip=["full_name:N", alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("total_ms:Q", format=",.3f"),
                 alt.Tooltip("launches:Q", format=","), alt.Tooltip("median_us:Q", format=",.1f")],
    )


def timeline_chart(spans: Iterable[TimelineSpan]) -> alt.Chart | None:
    """Kernels per stream over time (ms from the first kernel); None without spans."""
    rows = [{"stream": _text(sp.stream, 60), "kernel": _text(sp.kernel, 60), "start_ms": sp.start_ns / 1e6,
             "end_ms": sp.end_ns / 1e6, "duration_us": (sp.end_ns - sp.start_ns) / 1e3} for sp in spans]
    if not rows:
        return None
    data = pd.DataFrame(rows)
    return alt.Chart(data, width=_WIDTH, title=alt.TitleParams(
        "Kernels per stream", subtitle="top kernels by GPU time; the rest as 'other'", anchor="start")
    ).mark_bar().encode(
        y=alt.Y("stream:N", title=None),
        x=alt.X("start_ms:Q", title="time since the first kernel (ms)"),
        x2="end_ms:Q",
        color=alt.Color("kernel:N", title="kernel"),
        tooltip=["kernel:N", "stream:N", alt.Tooltip("start_ms:Q", format=",.3f"),
                 alt.Tooltip("duration_us:Q", format=",.1f")],
    )


def nsys_charts(s: NsysSummary, spans: Iterable[TimelineSpan]) -> dict[str, alt.TopLevelMixin]:
    """The charts that have data, by file name."""
    charts = {"nsys_kernel_time": kernel_time_chart(s), "nsys_timeline": timeline_chart(spans)}
    return {k: v for k, v in charts.items() if v is not None}
