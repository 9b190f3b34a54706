"""Charts of a role timeline, built with Altair from its typed result (`TimelineSummary`),
never from the store; written by `cli.charts.write_charts`.

- `role_chart`: one chart per role; one lane per warp of the first sampled CTAs
  ('CTA c (SM s) w'), one bar per interval from its begin to its end, colored by event
  (wait, copy, compute, epilogue ...); instants as ticks;
- `occupancy_chart`: the ring's full stages over time, one line per CTA (a step chart);
- `pm_stalls_chart`: with `--report`, Nsight Compute's PM samples of the joined launch:
  warp stall reasons over the launch's time, one line per reason (not stacked: ncu samples
  each pass group in a replay of its own, at its own times, so a stack would add reasons
  of different replays and fill the gaps between one pass's samples with zeros);
- `timeline_charts`: all of them, keyed by chart name.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from wsperf.analyses.timeline import TimelineSummary
from wsperf.cli.render import plain

_WIDTH = 720
# Event colors fixed across charts and roles: waiting is grey, moving data blue, math green.
_EVENTS = ["wait", "copy", "compute", "epilogue", "release", "kernel"]
_COLORS = ["#9e9e9e", "#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#e0e0e0"]


def _text(s: object, limit: int = 80) -> str:
    t = plain(s).plain
    return t if len(t) <= limit else t[: limit - 1] + "\u2026"


def _lane(cta: int, sm: int | None, warp: int) -> str:
    return f"CTA {cta}" + (f" (SM {sm})" if sm is not None else "") + f" w{warp}"


def role_chart(s: TimelineSummary, role: str) -> alt.TopLevelMixin | None:
    """The lanes of one role; None when it has no intervals."""
    rows = [{"lane": _lane(i.cta, i.sm, i.warp), "event": i.event, "label": _text(i.label or i.event, 60),
             "start_us": i.start_ns / 1e3, "end_us": i.end_ns / 1e3, "dur_us": (i.end_ns - i.start_ns) / 1e3,
             "stage": i.stage, "seq": i.seq, "order": i.cta * 10_000 + i.warp}
            for i in s.intervals if i.role == role and i.event != "kernel"]
    if not rows:
        return None
    data = pd.DataFrame(rows)
    lanes = list(dict.fromkeys(data.sort_values("order")["lane"]))
    events = sorted(set(data["event"]), key=lambda e: (_EVENTS.index(e) if e in _EVENTS else len(_EVENTS), e))
    colors = [_COLORS[_EVENTS.index(e)] if e in _EVENTS else "#8c564b" for e in events]
    title = alt.TitleParams(f"{role} warps over time", anchor="start",
                            subtitle=f"{_text(s.kernel or s.path, 100)} - timeline {s.timeline_id}, first "
                                     f"{len({r['lane'].split(' w')[0] for r in rows})} sampled CTAs")
    bars = alt.Chart(data).mark_bar(height={"band": 0.8}).encode(
        x=alt.X("start_us:Q", title="time since the first event (us)"), x2="end_us:Q",
        y=alt.Y("lane:N", sort=lanes, title=None),
        color=alt.Color("event:N", scale=alt.Scale(domain=events, range=colors), title="event"),
        tooltip=["lane", "label", "stage", "seq", alt.Tooltip("start_us:Q", format=".3f"),
                 alt.Tooltip("dur_us:Q", format=".3f")])
    return bars.properties(width=_WIDTH, height=max(60, 14 * len(lanes)), title=title)


def occupancy_chart(s: TimelineSummary) -> alt.TopLevelMixin | None:
    """Full stages over time per CTA; None without copy and compute intervals."""
    if not s.occupancy:
        return None
    data = pd.DataFrame([{"cta": f"CTA {o.cta}", "t_us": o.t_ns / 1e3, "full_stages": o.full_stages}
                         for o in s.occupancy])
    title = alt.TitleParams("Ring stage occupancy", anchor="start",
                            subtitle="stages holding data: producer copy done, consumers not yet finished with it")
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("t_us:Q", title="time since the first event (us)"),
        y=alt.Y("full_stages:Q", title="full stages", axis=alt.Axis(tickMinStep=1)),
        # CTAs in number order (a text sort put "CTA 12" before "CTA 6")
        color=alt.Color("cta:N", title="CTA", sort=[f"CTA {c}" for c in sorted({o.cta for o in s.occupancy})]),
        tooltip=["cta", alt.Tooltip("t_us:Q", format=".3f"), "full_stages"],
    ).properties(width=_WIDTH, height=160, title=title)


def pm_stalls_chart(s: TimelineSummary) -> alt.TopLevelMixin | None:
    """Stall reasons over time from the PM samples; None without them."""
    if not s.pm_samples:
        return None
    data = pd.DataFrame([{"reason": _text(p.metric.split("issue_stalled_")[-1].split(".")[0], 40),
                          "t_us": p.t_ns / 1e3, "warps": p.value} for p in s.pm_samples])
    title = alt.TitleParams("Warp stall reasons over time (Nsight Compute PM sampling)", anchor="start",
                            subtitle=f"launch {s.launch_id}, section PmSampling_WarpStates")
    return alt.Chart(data).mark_line(strokeWidth=1.2).encode(
        x=alt.X("t_us:Q", title="time since the first sample of its pass (us)"),
        y=alt.Y("warps:Q", stack=None, title="stalled warps (per sample)"),
        color=alt.Color("reason:N", title="stall reason"),
        tooltip=["reason", alt.Tooltip("t_us:Q", format=".3f"), "warps"],
    ).properties(width=_WIDTH, height=200, title=title)


def timeline_charts(s: TimelineSummary) -> dict[str, alt.TopLevelMixin]:
    """Chart name -> chart for one timeline: `timeline<id>_<role>` per role present, and
    `timeline<id>_occupancy`."""
    out: dict[str, alt.TopLevelMixin] = {}
    for role in dict.fromkeys(i.role for i in s.intervals):
        c = role_chart(s, role)
        if c is not None:
            out[f"timeline{s.timeline_id}_{''.join(ch if ch.isalnum() else '-' for ch in role)}"] = c
    occ = occupancy_chart(s)
    if occ is not None:
        out[f"timeline{s.timeline_id}_occupancy"] = occ
    pm = pm_stalls_chart(s)
    if pm is not None:
        out[f"timeline{s.timeline_id}_pm_stalls"] = pm
    return out
