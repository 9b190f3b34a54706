"""One standalone HTML page per analysis (`wsperf analyze --html FILE`) or comparison:
summaries, verdicts with evidence and remedy, what Nsight Compute's rules said, and the
charts, drawn in the page by the inlined Vega bundle (no network: it opens offline).

Every piece of report text (kernel names, paths, rule messages, evidence) goes through
`html.escape`; chart specs are embedded as JSON with `<`, `>`, `&` escaped
(`charts.script_json`).
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import altair as alt

from wsperf.analyses.analyze import KernelAnalysis
from wsperf.analyses.compare import CompareResult, KernelComparison
from wsperf.cli import charts as ch
from wsperf.cli.compare import launch_configs, values as figure_values
from wsperf.cli.render import dims, duration, ncu_text, plain, regs_smem, workload_text, ws_text
from wsperf.collectors.files import check_output, write_output

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ddd; padding: 3px 8px;
        text-align: left; vertical-align: top; } th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 13em; } code, .mono { font-family: ui-monospace, Menlo, monospace; font-size: .92em; }
.confirmed, .regression { color: #b00020; font-weight: 600; } .rejected, .improvement { color: #1b7a1b; }
.no_data, .insufficient { color: #9a6700; } .changed { color: #555; font-weight: 600; }
.chart { margin: 1em 0; } .chart-error { color: #b00020; } .muted { color: #666; }
ul.evidence { margin: 0; padding-left: 1.1em; }
"""


def _e(v: object) -> str:
    """Escaped text; control characters (ANSI escapes) removed."""
    return html.escape(plain("" if v is None else v).plain)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v) or "none"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "n/a" if v is None else str(v)


def _kv(rows: Iterable[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>\n'


def _table(head: list[str], rows: Iterable[list[str]], numeric: Iterable[int] = ()) -> str:
    """`rows` are already-escaped cell HTML."""
    num = set(numeric)
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>\n"


def _page(title: str, body: str, with_charts: bool) -> str:
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style>")
    if with_charts:
        head += f"<script>{ch.javascript_bundle()}</script>"
    tail = f"<script>{ch.EMBED_SCRIPT}</script>\n" if with_charts else ""
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{head}</head>\n<body>\n<h1>{_e(title)}</h1>\n"
            f'<p class="muted">wsperf, {made}</p>\n{body}{tail}</body></html>\n')


def _charts(charts: dict[str, alt.TopLevelMixin]) -> str:
    return "".join(ch.embed(name, c) for name, c in charts.items())


# ---------------------------------------------------------------------------------
# analyze
# ---------------------------------------------------------------------------------

def _yes(b: bool | None) -> str:
    return "unknown" if b is None else ("yes" if b else "no")


def _summary(a: KernelAnalysis) -> str:
    s, f = a.summary, a.summary.families
    cluster = dims(s.cluster) if any(v > 1 for v in s.cluster) else "none"
    rows: list[tuple[str, object]] = [
        ("kernel", s.demangled) if s.is_kernel else ("workload", workload_text(s)), ("report", s.report),
        ("device", f"{s.device or 'unknown'} ({s.arch or '?'})"),
        *([("grid / block / cluster", f"{dims(s.grid)} / {dims(s.block)} / {cluster}"),
           ("registers / smem", regs_smem(s))] if s.is_kernel else []),
        ("duration", duration(s.duration_ns)),
    ]
    if f.known:
        rows += [("tensor", f.tensor), ("copies", ", ".join(f.copies or ()) or "none"),
                 ("mbarrier", _yes(f.mbarrier)), ("setmaxnreg", _yes(f.setmaxnreg)),
                 ("cluster barrier", _yes(f.cluster_barrier)), ("local memory", _yes(f.local_memory))]
    else:
        rows.append(("instructions", "unknown: the report has no source counters or instruction statistics"))
    rows.append(("warp-specialized", ws_text(a)))
    return _kv(rows)


def _roles(a: KernelAnalysis) -> str:
    if not a.roles:
        return ""
    rows = [[_e(a.role_label(r.role)), _fmt(r.instructions), _fmt(r.executed), _fmt(r.samples),
             "n/a" if r.wait_share is None else f"{100 * r.wait_share:.1f}%",
             _e(", ".join(f"{reason} {n:,}" for reason, n in r.top_stalls))] for r in a.roles]
    return f"<h3>{_e(a.roles_title().capitalize())}</h3>\n" + _table(
        ["role" if a.warp_specialized else "code", "instructions", "executed", "samples", "waiting on mbarrier", "top stalls"], rows, (1, 2, 3, 4))


def _findings(a: KernelAnalysis) -> str:
    rows = []
    for f in a.findings:
        ev = "".join(f"<li><code>{_e(k)}</code>: {_e(_fmt(v))}</li>" for k, v in f.evidence.items())
        rows.append([f"<code>{_e(f.id)}</code>", f'<span class="{_e(f.status.value)}">{_e(f.status.value)}</span>',
                     _e(f.summary), f'<ul class="evidence">{ev}</ul>' if ev else "",
                     _e(f.remedy) if f.status.value == "confirmed" else f'<span class="muted">{_e(f.remedy)}</span>'])
    return "<h3>Hypotheses</h3>\n" + _table(["hypothesis", "verdict", "summary", "evidence", "remedy"], rows)


def _ncu_rules(a: KernelAnalysis) -> str:
    rules = a.summary.ncu_rules
    if not rules:
        return '<h3>Nsight Compute rules</h3>\n<p class="muted">none in the report</p>\n'
    rows = [[_e(r.rule_id), _e(r.section_id or ""), _e(r.msg_type or ""),
             (f"<b>{_e(r.title)}</b> " if r.title else "") + _e(ncu_text(r.message)),
             "" if r.estimated_speedup is None else f"{r.estimated_speedup:.1f}%"] for r in rules]
    return "<h3>Nsight Compute rules</h3>\n" + _table(["rule", "section", "type", "message", "est. speedup"],
                                                      rows, (4,))


# The headline's class: red for a finding, green only when hypotheses were ruled out on
# evidence, amber when every verdict lacked data (never green: no evidence is not good news).
_OUTCOME_CLASS = {"confirmed": "confirmed", "clear": "rejected", "no_data": "no_data"}


def headline(a: KernelAnalysis) -> str:
    """The launch's one-line outcome as an HTML span (the same words as text and Markdown)."""
    return f'<span class="{_OUTCOME_CLASS[a.outcome.value]}">{_e(a.headline())}</span>'


def _look_next(a: KernelAnalysis) -> str:
    lines = a.look_next()
    return f'<ul class="look-next">{"".join(f"<li>{_e(x)}</li>" for x in lines)}</ul>\n' if lines else ""


def analysis_page(analyses: list[KernelAnalysis], with_charts: bool = True) -> str:
    """The `wsperf analyze --html` page: per launch, its summary, roles, verdicts, charts
    and Nsight Compute's rules."""
    toc = []
    sections = []
    any_chart = False
    for a in analyses:
        s = a.summary
        anchor = f"launch-{s.launch_id}"
        toc.append(f'<li><a href="#{anchor}">launch {s.launch_id}: {_e(s.name)}</a> '
                   f'<span class="muted">{_e(duration(s.duration_ns))}</span> '
                   + headline(a) + "</li>")
        charts = ch.analysis_charts([a]) if with_charts else {}
        any_chart |= bool(charts)
        sections.append(f'<section id="{anchor}">\n<h2>launch {s.launch_id}: {_e(s.name)}</h2>\n'
                        + _summary(a) + f"<p>{headline(a)}</p>\n" + _look_next(a) + _findings(a) + _roles(a)
                        + ("<h3>Charts</h3>\n" + _charts(charts) if charts else "") + _ncu_rules(a) + "</section>\n")
    title = f"wsperf analyze: {len(analyses)} launch{'es' if len(analyses) != 1 else ''}"
    return _page(title, f"<ul>{''.join(toc)}</ul>\n" + "".join(sections), any_chart)


# The fragment's styles, scoped to its container so a notebook's own look is untouched.
_FRAGMENT_CSS = """
.wsperf table { border-collapse: collapse; margin: .4em 0; }
.wsperf td, .wsperf th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
.wsperf td.num { text-align: right; font-variant-numeric: tabular-nums; }
.wsperf .confirmed { color: #b00020; font-weight: 600; } .wsperf .rejected { color: #1b7a1b; }
.wsperf .no_data { color: #9a6700; } .wsperf .muted { color: #666; }
.wsperf ul.evidence { margin: 0; padding-left: 1.1em; }
"""


def analysis_fragment(analyses: list[KernelAnalysis]) -> str:
    """The analysis page's summary as an HTML fragment (no page, no charts): what a
    notebook cell shows for a `wsperf.load(...)` session (`_repr_html_`). The same
    headline, summary table, verdicts and roles as `wsperf analyze --html`."""
    parts = []
    for a in analyses:
        s = a.summary
        parts.append(f"<details open><summary><b>launch {s.launch_id}: {_e(s.name)}</b> "
                     f'<span class="muted">{_e(duration(s.duration_ns))}</span> {headline(a)}</summary>\n'
                     + _summary(a) + _look_next(a) + _findings(a) + _roles(a) + "</details>\n")
    return f'<div class="wsperf"><style>{_FRAGMENT_CSS}</style>\n{"".join(parts)}</div>'


# ---------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------

def _kernel_comparison(k: KernelComparison) -> str:
    # Values in their unit, as text and Markdown print them (144.4 us, 96.2%).
    fig = [[f"<code>{_e(f.name)}</code>", _e(f.kind), *map(_e, figure_values(f)),
            "n/a" if f.delta_pct is None else f"{f.delta_pct:+.1f}%",
            "n/a" if f.p_value is None else f"{f.p_value:.3g}",
            "n/a" if f.threshold_pct is None else f"{f.threshold_pct:g}%",
            f'<span class="{_e(f.change.value)}">{_e(f.change.value)}</span>', _e(f.unit), _e(f.note)]
           for f in k.figures]
    ver = [[f"<code>{_e(v.hypothesis)}</code>", f'<span class="{_e(v.base_status)}">{_e(v.base_status)}</span>',
            f'<span class="{_e(v.cand_status)}">{_e(v.cand_status)}</span>',
            '<span class="regression">newly confirmed</span>' if v.regression
            else ('<span class="improvement">resolved</span>' if getattr(v, "resolved", False) else ""),
            _e(v.cand_summary)]
           for v in k.verdicts]
    head = (f"<h2>{_e(k.kernel)}"
            + (' <span class="regression">regression</span>' if k.regression else "") + "</h2>\n"
            + _kv([("base", k.base_name), ("candidate", k.cand_name), ("matched by", k.matched_by),
                   ("launch config", launch_configs(k)),
                   ("launches", f"{len(k.base_launch_ids)} base, {len(k.cand_launch_ids)} candidate")]))
    return (head + "<h3>Figures</h3>\n"
            + _table(["figure", "kind", "base", "candidate", "change", "p", "threshold", "verdict", "unit", "note"],
                     fig, (2, 3, 4, 5, 6))
            + ("<h3>Hypotheses</h3>\n" + _table(["hypothesis", "base", "candidate", "change", "candidate says"], ver)
               if ver else ""))


def compare_page(result: CompareResult, charts: dict[str, alt.TopLevelMixin] | None = None) -> str:
    """The `wsperf compare --html` page: the verdict, the charts (`charts.compare_charts`
    when not given), then per matched kernel its figures and hypotheses."""
    charts = ch.compare_charts(result) if charts is None else charts
    verdict = ('<p class="regression">regression</p>' if result.regression
               else '<p class="rejected">no regression</p>')
    body = verdict + _kv([("base", result.base), ("candidate", result.candidate),
                          ("kernels matched", len(result.kernels)),
                          ("only in base", ", ".join(result.only_base) or "none"),
                          ("only in candidate", ", ".join(result.only_cand) or "none")])
    body += _charts(charts) + "".join(_kernel_comparison(k) for k in result.kernels)
    return _page("wsperf compare", body, bool(charts))


def check_page_path(path: Path) -> Path:
    """Refuse a page path that is a directory, before any work is done."""
    path = Path(path)
    check_output(path, what="the HTML page (--html report.html)")
    return path


def write_page(page: str, path: Path) -> Path:
    """Write a page; a path that cannot be written is an InputError naming it."""
    # A temporary file renamed into place: never through a link, never left truncated.
    return write_output(check_page_path(path), page, what="the HTML page")
