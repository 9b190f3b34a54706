"""Charts of analysis results, built with Altair and written with vl-convert.

Every chart is drawn from a typed result (`KernelAnalysis`, `CompareResult`,
`HistoryPoint`), never from the store: its inline data are the result's own figures, so a
test can compare the two. Nothing here analyzes.

Kernel names, report paths and run labels are untrusted text. Vega-Lite draws them as
text nodes (vl-convert's SVG escapes `<`, `>`, `&`), but a control character in chart text
aborts the whole process inside vl-convert (its SVG parser panics on a non-XML
character), so every label goes through `_text` first. Pages that embed a spec escape it
for the `<script>` element holding it (`script_json`).
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import quote

import altair as alt
import pandas as pd
import vl_convert

from wsperf.analyses.analyze import KernelAnalysis
from wsperf.analyses.compare import Change, CompareResult
from wsperf.analyses.history import HistoryPoint
from wsperf.cli.render import counted, md, plain
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import write_output

# Chart file names are built here from launch ids and fixed words, never from kernel names.
_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_OTHER = "other (not in the top 3)"
_WIDTH = 520
# Fixed colors per change, so a regression is red in every chart.
_CHANGE_COLORS = {Change.regression.value: "#d62728", Change.improvement.value: "#2ca02c",
                  Change.changed.value: "#7f7f7f"}


def _text(s: object, limit: int = 120) -> str:
    """Untrusted text for a chart label: control characters removed (see the module
    docstring), long template names shortened."""
    t = plain(s).plain
    return t if len(t) <= limit else t[: limit - 1] + "\u2026"


def _title(kernel: str, what: str, launch_id: int | None = None) -> alt.TitleParams:
    sub = f"launch {launch_id}" if launch_id is not None else None
    return alt.TitleParams(text=f"{_text(kernel, 80)}: {what}", subtitle=sub or [], anchor="start")


def chart_title(chart: alt.TopLevelMixin) -> str:
    """The chart's title text (for Markdown alt text and page headings)."""
    t = chart.to_dict().get("title", "")
    return t.get("text", "") if isinstance(t, dict) else str(t)


# ---------------------------------------------------------------------------------
# One launch
# ---------------------------------------------------------------------------------

def role_stalls_chart(a: KernelAnalysis) -> alt.Chart | None:
    """PC samples per role, stacked by stall reason: the top three reasons of each role
    and the rest as one 'other' bar (the role's samples minus its top three). None when
    the launch has no PC samples per role."""
    rows, order = [], []
    for r in a.roles:
        if not r.samples:
            continue
        label = r.role if r.wait_share is None else f"{r.role} ({r.wait_share:.0%} at mbarrier waits)"
        order.append(label)
        for reason, n in r.top_stalls:
            rows.append({"role": r.role, "role_label": label, "reason": reason, "samples": n})
        rest = r.samples - sum(n for _, n in r.top_stalls)
        if rest > 0:
            rows.append({"role": r.role, "role_label": label, "reason": _OTHER, "samples": rest})
    if not rows:
        return None
    data = pd.DataFrame(rows)
    data["share"] = data["samples"] / data.groupby("role")["samples"].transform("sum")
    s = a.summary
    return alt.Chart(data, title=_title(s.name, "PC samples by role and stall reason", s.launch_id),
                     width=_WIDTH).mark_bar().encode(
        y=alt.Y("role_label:N", sort=order, title=None),
        x=alt.X("sum(samples):Q", title="PC samples (warp samples)"),
        color=alt.Color("reason:N", title="stall reason", sort=alt.SortField("samples", order="descending")),
        order=alt.Order("samples:Q", sort="descending"),
        tooltip=["role:N", "reason:N", alt.Tooltip("samples:Q", format=","),
                 alt.Tooltip("share:Q", format=".1%", title="share of the role")],
    )


def families_chart(a: KernelAnalysis) -> alt.Chart | None:
    """Instructions per family (tensor, copy, sync, ...): executed warp-level
    instructions in a profile, SASS instructions for static code. None when the report
    holds no instruction-level data."""
    f = a.summary.families
    if not f.known or not f.counts:
        return None
    executed = any(c.executed is not None for c in f.counts)
    rows = [{"family": c.family, "kind": c.kind,
             "instructions": c.executed if executed else c.static_count,
             "static_count": c.static_count}
            for c in f.counts]
    rows = [r for r in rows if r["instructions"] is not None]
    if not rows:
        return None
    what = "executed instructions per family" if executed else "SASS instructions per family (static)"
    s = a.summary
    return alt.Chart(pd.DataFrame(rows), title=_title(s.name, what, s.launch_id), width=_WIDTH).mark_bar().encode(
        y=alt.Y("family:N", sort="-x", title=None),
        x=alt.X("instructions:Q", title="warp-level instructions executed" if executed else "SASS instructions"),
        color=alt.Color("kind:N", title="kind"),
        tooltip=["family:N", "kind:N", alt.Tooltip("instructions:Q", format=","),
                 alt.Tooltip("static_count:Q", format=",", title="in the SASS")],
    )


def speed_of_light_chart(a: KernelAnalysis) -> alt.Chart | None:
    """Throughputs and occupancy in percent of peak, as far as the report holds them.
    None when it holds none."""
    if not a.utilization:
        return None
    rows = [{"figure": u.label, "pct": u.pct, "source": u.source,
             "group": "occupancy" if "occupancy" in u.label else "throughput"} for u in a.utilization]
    s = a.summary
    base = alt.Chart(pd.DataFrame(rows), width=_WIDTH)
    order = [u.label for u in a.utilization]
    bars = base.mark_bar().encode(
        y=alt.Y("figure:N", sort=order, title=None),
        x=alt.X("pct:Q", title="% of peak", scale=alt.Scale(domain=[0, 100])),
        color=alt.Color("group:N", title=None),
        tooltip=["figure:N", alt.Tooltip("pct:Q", format=".1f"), "source:N"],
    )
    labels = base.mark_text(align="left", dx=3).encode(
        y=alt.Y("figure:N", sort=order), x="pct:Q", text=alt.Text("pct:Q", format=".1f"))
    return alt.layer(bars, labels).properties(title=_title(s.name, "speed of light (% of peak)", s.launch_id))


def analysis_charts(analyses: Iterable[KernelAnalysis]) -> dict[str, alt.TopLevelMixin]:
    """Every chart the analyses have data for, named `launch-<id>-<chart>`."""
    out: dict[str, alt.TopLevelMixin] = {}
    for a in analyses:
        for what, build in (("role-stalls", role_stalls_chart), ("families", families_chart),
                            ("speed-of-light", speed_of_light_chart)):
            c = build(a)
            if c is not None:
                out[f"launch-{a.summary.launch_id}-{what}"] = c
    return out


# ---------------------------------------------------------------------------------
# Compare and history
# ---------------------------------------------------------------------------------

def compare_charts(result: CompareResult) -> dict[str, alt.TopLevelMixin]:
    """`compare-duration`: every launch's duration per kernel, base against candidate,
    with each side's median as a tick; `compare-flagged`: the change in percent of every
    figure that moved (regression, improvement, changed). Charts without data are left
    out."""
    out: dict[str, alt.TopLevelMixin] = {}
    points, medians, flagged = [], [], []
    for k in result.kernels:
        kernel = _text(k.kernel, 60)
        for f in k.figures:
            if f.name == "duration_ns":
                for side, values, med in (("base", f.base_values, f.base), ("candidate", f.cand_values, f.cand)):
                    points += [{"kernel": kernel, "side": side, "duration_ns": v} for v in values]
                    if med is not None:
                        medians.append({"kernel": kernel, "side": side, "median_ns": med, "change": f.change.value})
            if f.change.value in _CHANGE_COLORS:
                label = f"{_num(f.base)} \u2192 {_num(f.cand)} {f.unit}"
                flagged.append({"figure": f"{kernel} {_text(f.name, 60)}: {label}", "kernel": kernel,
                                "name": _text(f.name), "change": f.change.value, "delta_pct": f.delta_pct,
                                "base": f.base, "cand": f.cand, "unit": f.unit, "note": _text(f.note, 200),
                                "label": label})
    sub = [f"base: {_text(result.base)}", f"candidate: {_text(result.candidate)}"]
    if points:
        y = alt.Y("kernel:N", title=None)
        color = alt.Color("side:N", title=None, scale=alt.Scale(domain=["base", "candidate"]))
        dots = alt.Chart(pd.DataFrame(points)).transform_calculate(us="datum.duration_ns / 1000").mark_point(
            filled=True, opacity=0.6, size=40).encode(
            y=y, yOffset=alt.YOffset("side:N", scale=alt.Scale(domain=["base", "candidate"])),
            x=alt.X("us:Q", title="duration (us), one point per launch", scale=alt.Scale(zero=False)),
            color=color, tooltip=["kernel:N", "side:N", alt.Tooltip("us:Q", format=".2f", title="duration (us)")])
        ticks = alt.Chart(pd.DataFrame(medians)).transform_calculate(us="datum.median_ns / 1000").mark_tick(
            thickness=3, size=18).encode(
            y=y, yOffset=alt.YOffset("side:N", scale=alt.Scale(domain=["base", "candidate"])), x="us:Q",
            color=color, tooltip=["kernel:N", "side:N", alt.Tooltip("us:Q", format=".2f", title="median (us)"),
                                  "change:N"])
        out["compare-duration"] = alt.layer(dots, ticks).properties(
            width=_WIDTH, title=alt.TitleParams("Duration per kernel: base vs candidate", subtitle=sub,
                                                anchor="start"))
    if flagged:
        # A figure whose base is 0 (a family new on the candidate) has no percentage: it is
        # a diamond at 0, its values in the label.
        base = alt.Chart(pd.DataFrame(flagged))
        y = alt.Y("figure:N", title=None, sort=None, axis=alt.Axis(labelLimit=420))
        color = alt.Color("change:N", title=None, legend=alt.Legend(orient="bottom"),
                          scale=alt.Scale(domain=list(_CHANGE_COLORS), range=list(_CHANGE_COLORS.values())))
        tooltip = ["kernel:N", "name:N", "change:N", alt.Tooltip("delta_pct:Q", format="+.1f"), "label:N", "note:N"]
        bars = base.mark_bar().encode(y=y, x=alt.X("delta_pct:Q", title="change (%), candidate vs base"),
                                      color=color, tooltip=tooltip)
        no_pct = base.transform_filter("datum.delta_pct == null").transform_calculate(zero="0").mark_point(
            shape="diamond", size=120, filled=True).encode(y=y, x="zero:Q", color=color, tooltip=tooltip)
        out["compare-flagged"] = alt.layer(bars, no_pct).properties(
            width=_WIDTH - 120, title=alt.TitleParams("Figures that changed", subtitle=sub, anchor="start"))
    return out


def _num(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def history_chart(points: list[HistoryPoint], threshold_pct: float,
                  base_run_id: int | None = None) -> alt.LayerChart:
    """One figure over recorded runs: the median per run as a line, the min-max band over
    the run's launches, and the regression threshold as a rule, base median x (1 +
    threshold_pct / 100). The base is `base_run_id`'s point, else each kernel's earliest
    run. Durations are drawn in microseconds (the data stay in ns)."""
    if not points:
        raise InputError("no history to chart: the store holds no run of this kernel; record runs with "
                         "`wsperf analyze --db FILE` first")
    metrics = {p.metric for p in points}
    if len(metrics) != 1:
        raise InputError(f"a history chart shows one figure; got {', '.join(sorted(metrics))}")
    metric = metrics.pop()
    scale, unit, what = (1e-3, "us", "duration") if metric == "duration_ns" else (1.0, "", _text(metric))
    rows, rules = [], []
    for kernel in sorted({p.kernel for p in points}):
        mine = sorted((p for p in points if p.kernel == kernel), key=lambda p: (p.started_at, p.run_id))
        base = next((p for p in mine if p.run_id == base_run_id), None) if base_run_id is not None else \
            next((p for p in mine if p.median is not None), None)
        for p in mine:
            rows.append({"kernel": _text(kernel, 60), "run_id": p.run_id, "label": _text(p.label, 80),
                         "commit": _text(p.git_commit or "", 12), "started_at": p.started_at.isoformat(),
                         "n": p.n, "median": p.median, "low": p.low, "high": p.high})
        if base is not None and base.median is not None:
            rules.append({"kernel": _text(kernel, 60), "base_median": base.median,
                          "threshold": base.median * (1 + threshold_pct / 100), "base_label": _text(base.label, 80)})
    data = pd.DataFrame(rows)
    scaled = {f"{c}_s": f"datum.{c} == null ? null : datum.{c} * {scale}" for c in ("median", "low", "high")}
    ytitle = f"{what} ({unit})" if unit else what
    # Times are UTC; a utc scale keeps the viewer's time zone out of the axis. Runs
    # recorded seconds apart made Vega pick millisecond ticks (".800 .800 :47"): labels
    # get one explicit format for the span the runs cover, and no tick finer than 1 s.
    times = [p.started_at for p in points]
    span = (max(times) - min(times)).total_seconds()
    fmt = "%H:%M:%S" if span < 6 * 3600 else ("%b %d %H:%M" if span < 7 * 86400 else "%Y-%m-%d")
    x = alt.X("started_at:T", title="run started (UTC)", scale=alt.Scale(type="utc"),
              axis=alt.Axis(format=fmt, tickMinStep=1000, labelAngle=-30,
                            tickCount=min(8, len(set(times)))))
    color = alt.Color("kernel:N", title=None)
    base_chart = alt.Chart(data).transform_calculate(**scaled)
    band = base_chart.mark_area(opacity=0.25).encode(x=x, y=alt.Y("low_s:Q", title=ytitle, scale=alt.Scale(zero=False)),
                                                     y2="high_s:Q", color=color)
    tooltip = ["kernel:N", "label:N", "commit:N", alt.Tooltip("started_at:N", title="started (UTC)"), "n:Q",
               alt.Tooltip("median_s:Q", format=".2f", title=f"median {unit}".strip()),
               alt.Tooltip("low_s:Q", format=".2f", title="min"), alt.Tooltip("high_s:Q", format=".2f", title="max")]
    line = base_chart.mark_line(point=True).encode(x=x, y="median_s:Q", color=color, tooltip=tooltip)
    layers = [band, line]
    if rules:
        layers.append(alt.Chart(pd.DataFrame(rules)).transform_calculate(t=f"datum.threshold * {scale}")
                      .mark_rule(strokeDash=[6, 4], color="#d62728").encode(
            y="t:Q", tooltip=["kernel:N", alt.Tooltip("t:Q", format=".2f", title=f"threshold {unit}".strip()),
                              "base_label:N"]))
    kernels = ", ".join(sorted({r["kernel"] for r in rows}))
    return alt.layer(*layers).properties(width=_WIDTH, title=alt.TitleParams(
        f"{kernels}: {what} per run", anchor="start",
        subtitle=f"median with min-max band; dashed: regression threshold, base median x (1 + {threshold_pct:g}%)"))


# ---------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------

@cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (from vl-convert, ~0.9 MB), so pages
    work offline. It defines `vegaEmbed` on `window`."""
    js = vl_convert.javascript_bundle()
    # Inside an inline <script>, only `</script` (any case) or `<!--` could end it early.
    if re.search(r"</script|<!--", js, re.I):
        raise RuntimeError("vl-convert's JavaScript bundle cannot be inlined: it contains </script or <!--")
    return js


def script_json(spec: dict[str, Any]) -> str:
    """JSON for an inline `<script type="application/json">`: `<`, `>`, `&` and the JS
    line separators escaped as \\uXXXX, so no text inside (a kernel named
    `</script>...`) can close the element or start markup."""
    s = json.dumps(spec, ensure_ascii=False, allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s


# Renders every `<script type="application/json" class="vl-spec">` into the element
# before it; a chart that fails says so in its place (and the page records it, so a
# test or a reader sees it), instead of leaving a silent blank.
EMBED_SCRIPT = """
document.querySelectorAll('script.vl-spec').forEach(function (el) {
  var target = document.getElementById(el.dataset.target);
  var fail = function (e) {
    var p = document.createElement('p');
    p.className = 'chart-error';
    p.textContent = 'chart failed: ' + e;
    target.appendChild(p);
    document.body.dataset.chartErrors = (+(document.body.dataset.chartErrors || 0) + 1).toString();
  };
  try {
    vegaEmbed(target, JSON.parse(el.textContent), {renderer: 'svg', actions: false})
      .then(function () { target.dataset.rendered = 'true'; }, fail);
  } catch (e) { fail(e); }
});
"""


def chart_html(charts: dict[str, alt.TopLevelMixin], title: str) -> str:
    """A standalone page drawing the charts with the inlined Vega bundle."""
    body = "".join(embed(n, c) for n, c in charts.items())
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(_text(title, 200))}</title>"
            f"<script>{javascript_bundle()}</script></head>\n<body>\n{body}"
            f"<script>{EMBED_SCRIPT}</script>\n</body></html>\n")


def embed(name: str, chart: alt.TopLevelMixin) -> str:
    """A chart's container and its spec, for a page that ends with EMBED_SCRIPT."""
    _check_name(name)
    return (f'<div class="chart" id="chart-{name}"></div>\n'
            f'<script type="application/json" class="vl-spec" data-target="chart-{name}">'
            f"{script_json(chart.to_dict())}</script>\n")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"chart name {name!r}: use letters, digits, '.', '_' and '-'")


def check_out_dir(out_dir: Path) -> Path:
    """Refuse a chart directory that cannot be one, before any work is done."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory; give a directory for the charts")
    return out_dir


def wrote_charts(who: str, charts: dict, files: list[Path], out_dir: Path) -> str:
    """What a command that wrote charts says on stderr: `wsperf: wrote 3 charts (12 files) to DIR`."""
    return f"{who}: wrote {counted(len(charts), 'chart')} ({counted(len(files), 'file')}) to {out_dir}"


def write_charts(charts: dict[str, alt.TopLevelMixin], out_dir: Path,
                 progress: Callable[[int, int, str], None] | None = None) -> list[Path]:
    """Write each chart as `<name>.vl.json` (the Vega-Lite spec, data inline),
    `<name>.html` (standalone, works offline), `<name>.png` (2x) and `<name>.svg` into
    `out_dir` (created). Returns the paths written, in that order per chart.
    `progress(done, total, name)` is called after each chart (PNG and SVG take ~0.1 s
    each: a report of many launches takes a while)."""
    out_dir = check_out_dir(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out_dir}: cannot create the chart directory ({e.strerror}); give a writable path") from None
    written: list[Path] = []
    for done, (name, chart) in enumerate(charts.items(), 1):
        _check_name(name)
        spec = chart.to_dict()
        files = {
            f"{name}.vl.json": json.dumps(spec, indent=1, ensure_ascii=False),
            f"{name}.html": chart_html({name: chart}, chart_title(chart) or name),
            f"{name}.png": vl_convert.vegalite_to_png(spec, scale=2),
            f"{name}.svg": vl_convert.vegalite_to_svg(spec),
        }
        for fname, content in files.items():
            # A temporary file renamed into place: a link planted at the name is replaced, not followed.
            written.append(write_output(out_dir / fname, content, what="the chart (give a writable --charts/--out "
                                        "directory)"))
        if progress is not None:
            progress(done, len(charts), name)
    return written


def charts_markdown(charts: dict[str, alt.TopLevelMixin], out_dir: Path) -> str:
    """Markdown image links to the charts' PNGs written into `out_dir`."""
    lines = ["", "### Charts", ""]
    for name, chart in charts.items():
        target = quote((Path(out_dir) / f"{name}.png").as_posix(), safe="/._-~")
        lines.append(f"![{md(chart_title(chart) or name)}]({target})")
        lines.append("")
    return "\n".join(lines)
