"""The standalone HTML pages (cli/html.py): what they say is the analysis (every verdict,
its evidence and remedy, every Nsight Compute rule), hostile text stays text, and in a real
headless Chromium every chart renders, offline, with no console message.

The browser tests need a `chromium` (or Chrome) binary and are skipped with the reason
when there is none; CI installs Debian's chromium (.ci/run)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from support import REPORTS, ROOT, wsperf
from test_charts import HOSTILE_CLEAN, PNG_MAGIC, compare_result, hostile
from test_charts import compare_runs  # noqa: F401  (a fixture: pytest finds it by name here)
from wsperf.analyses.analyze import analyze
from wsperf.analyses.timeline import load_timelines, summarize_timeline
from wsperf.cli import charts as ch
from wsperf.cli.html import analysis_page, compare_page
from wsperf.cli.render import ncu_text
from wsperf.cli.timeline_charts import timeline_charts
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

PAGE_REPORTS = [REPORTS / "ws_stream_producer.ncu-rep", REPORTS / "gemm_wgmma_tma.ncu-rep",
                REPORTS / "gemm_wgmma_tma_basic.ncu-rep"]


@pytest.fixture(scope="module")
def analyses():
    con = open_store(None)
    load_reports(con, PAGE_REPORTS)
    yield analyze(con)
    con.close()


class Page(HTMLParser):
    """What a browser's parser sees: every start tag, and the text outside scripts."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if not self._in_script:
            self.text.append(data)

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def _words(s: str) -> str:
    return " ".join(s.split())


def test_the_page_says_what_the_analysis_says(analyses):
    page = Page(analysis_page(analyses))
    text = page.all_text()
    for a in analyses:
        assert _words(a.summary.demangled) in text
        for f in a.findings:
            assert _words(f"{f.id} {f.status.value} {f.summary}") in text
            assert _words(f.remedy) in text
            for k in f.evidence:
                assert k in text
        for r in a.summary.ncu_rules:
            assert _words(ncu_text(r.message)) in text  # ncu's @section:...@ markup shown as text
    charts = [t for t, attrs in page.tags if t == "div" and attrs.get("class") == "chart"]
    assert len(charts) == len(ch.analysis_charts(analyses)) == 7  # 3 + 3 + the basic report's speed of light


def test_hostile_kernel_name_is_text_in_the_page(analyses):
    bad = [hostile(a) for a in analyses[:2]]
    out = analysis_page(bad)
    assert "</script><script>alert" not in out and "\x1b" not in out and "<b>x</b>" not in out
    page = Page(out)
    scripts = [a for t, a in page.tags if t == "script"]
    charts = ch.analysis_charts(bad)
    # The bundle, one JSON spec per chart, the embed script: nothing else became a script.
    assert len(scripts) == 1 + len(charts) + 1
    # The only <b> elements are the page's own (rule titles), none from the name's <b>x</b>.
    assert sum(t == "b" for t, _ in page.tags) == sum(bool(r.title) for a in bad for r in a.summary.ncu_rules)
    assert HOSTILE_CLEAN in page.all_text()  # shown to the reader as the text it is


def test_compare_page_lists_every_figure_and_verdict(compare_runs):
    result = compare_result(compare_runs)
    page = Page(compare_page(result))
    text = page.all_text()
    k = result.kernels[0]
    assert "regression" in text and k.base_name in text and k.cand_name in text
    for f in k.figures:
        assert f.name in text
    assert "serialized-roles rejected confirmed newly confirmed" in text
    assert len([1 for t, a in page.tags if t == "div" and a.get("class") == "chart"]) == 2


def test_html_option_writes_the_page_and_refuses_a_directory(tmp_path):
    p = wsperf("analyze", *PAGE_REPORTS[:1], "--html", tmp_path / "r.html", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "r.html").stat().st_size > 500_000  # the inlined Vega bundle
    p = wsperf("analyze", *PAGE_REPORTS[:1], "--html", tmp_path)
    assert p.returncode == 2 and p.stderr.count("Error:") == 1 and "is a directory" in p.stderr


# ---------------------------------------------------------------------------------
# a real browser
# ---------------------------------------------------------------------------------

def chromium() -> str | None:
    for name in (os.environ.get("WSPERF_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


needs_browser = pytest.mark.skipif(chromium() is None, reason="no chromium binary on PATH (apt-get install "
                                   "chromium, or set WSPERF_CHROMIUM); .ci/run installs it")


def headless(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """Chromium, headless and offline-minded, with console messages on stderr."""
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000",
         *extra, url],
        capture_output=True, text=True, timeout=180)


def open_in_browser(page: Path, tmp: Path, shot: Path) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, its console messages; and a screenshot."""
    dom = headless(page.as_uri(), tmp / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    pic = headless(page.as_uri(), tmp / "profile-shot", "--hide-scrollbars", "--window-size=1280,2400",
                   f"--screenshot={shot}")
    assert pic.returncode == 0 and shot.read_bytes()[:8] == PNG_MAGIC and shot.stat().st_size > 10_000
    return dom.stdout, console


def assert_every_chart_rendered(dom: str, expected: int) -> None:
    page = Page(dom)
    charts = [a for t, a in page.tags if t == "div" and "chart" in a.get("class", "").split()]
    assert len(charts) == expected
    assert all(a.get("data-rendered") == "true" for a in charts), [a.get("id") for a in charts]
    # vega-embed drew an <svg> inside every container (up to the next container or the end)
    parts = re.split(r'<div class="chart\b', dom)[1:]
    assert len(parts) == expected and all("<svg" in part for part in parts)
    assert not [a for t, a in page.tags if "chart-error" in a.get("class", "").split()]
    assert not [a for t, a in page.tags if t == "body" and "data-chart-errors" in a]


@needs_browser
def test_analyze_page_renders_in_chromium(analyses, tmp_path):
    page = tmp_path / "analyze.html"
    page.write_text(analysis_page(analyses), encoding="utf-8")  # what --html writes (tested above)
    t0 = time.perf_counter()
    dom, console = open_in_browser(page, tmp_path, tmp_path / "analyze.png")
    print(f"chromium: analyze page ({page.stat().st_size / 1e6:.2f} MB) loaded, dumped and shot in "
          f"{time.perf_counter() - t0:.1f} s")
    assert console == []
    assert_every_chart_rendered(dom, 7)
    for name in ("ws_stream", "gemm_ws", "producer-bound", "missing-specialized-instructions"):
        assert name in dom


@needs_browser
def test_compare_page_and_a_chart_file_render_in_chromium(compare_runs, tmp_path):
    result = compare_result(compare_runs, cand="cmp_cpasync")
    page = tmp_path / "compare.html"
    page.write_text(compare_page(result), encoding="utf-8")
    dom, console = open_in_browser(page, tmp_path, tmp_path / "compare.png")
    assert console == []
    assert_every_chart_rendered(dom, 2)
    written = ch.write_charts({"compare-duration": ch.compare_charts(result)["compare-duration"]}, tmp_path / "c")
    dom, console = open_in_browser(next(p for p in written if p.suffix == ".html"), tmp_path / "c",
                                   tmp_path / "chart.png")
    assert console == []
    assert_every_chart_rendered(dom, 1)


@needs_browser
def test_hostile_page_runs_no_injected_script_in_chromium(analyses, tmp_path):
    page = tmp_path / "hostile.html"
    bad = [hostile(a) for a in analyses[:1]]
    # Were the name to break out, alert(1) would run; make any injected script visible instead.
    text = analysis_page(bad).replace("<head>", "<head><script>window.alert = function (m) "
                                      "{ console.error('injected ' + m); };</script>", 1)
    page.write_text(text, encoding="utf-8")
    dom, console = open_in_browser(page, tmp_path, tmp_path / "hostile.png")
    assert console == []
    assert_every_chart_rendered(dom, len(ch.analysis_charts(bad)))
    assert html.escape(HOSTILE_CLEAN, quote=False) in dom


@needs_browser
def test_a_chart_that_fails_to_draw_is_caught(tmp_path):
    """The checks above can fail: a spec Vega-Lite rejects leaves an error in its place."""
    import altair as alt
    import pandas as pd

    good = alt.Chart(pd.DataFrame({"a": [1, 2]})).mark_bar().encode(x="a:Q")
    text = ch.chart_html({"good": good, "bad": good}, "t")
    first = text.index('data-target="chart-bad">')
    text = text[:first] + text[first:].replace('"type": "bar"', '"type": "no-such-mark"', 1)
    page = tmp_path / "bad.html"
    page.write_text(text, encoding="utf-8")
    dom, _ = open_in_browser(page, tmp_path, tmp_path / "bad.png")
    rendered = {a.get("id"): a.get("data-rendered") for t, a in Page(dom).tags if t == "div"}
    assert rendered == {"chart-good": "true", "chart-bad": None}
    with pytest.raises(AssertionError):
        assert_every_chart_rendered(dom, 2)
    assert "chart failed: " in dom


# ---------------------------------------------------------------------------------
# the role timeline's charts (`wsperf timeline --charts`) in a real browser
# ---------------------------------------------------------------------------------

TIMELINES = ROOT / "fixtures" / "timeline"


@pytest.fixture(scope="module")
def timeline_drawn(tmp_path_factory):
    """The H200 ring4 trace joined to ring_pm.ncu-rep's 4-stage launch: every chart `wsperf
    timeline --charts` draws for it (role lanes, stage occupancy, PM stall reasons), on one
    page built by the same chart_html as each chart's .html, loaded once in Chromium. Returns
    the store, the summary, the DOM, the console messages and, per chart, the attributes of
    every mark Vega drew (an SVG path with aria-roledescription; its aria-label lists the
    mark's data fields)."""
    con = open_store(None)
    (t,) = load_timelines(con, [TIMELINES / "ring4.wsperf-trace"], [TIMELINES / "ring_pm.ncu-rep"])
    s = summarize_timeline(con, t.timeline_id)
    charts = timeline_charts(s)
    tmp = tmp_path_factory.mktemp("timeline_page")
    page = tmp / "timeline.html"
    page.write_text(ch.chart_html(charts, "timeline"), encoding="utf-8")
    dom, console = open_in_browser(page, tmp, tmp / "timeline.png")
    marks: dict[str, list[dict]] = {}
    chart = None
    for tag, attrs in Page(dom).tags:
        if tag == "div" and "chart" in (attrs.get("class") or "").split():
            chart = attrs["id"].removeprefix("chart-")
            marks[chart] = []
        elif tag == "path" and chart and attrs.get("aria-roledescription") in ("bar", "line mark"):
            fields = dict(kv.split(": ", 1) for kv in attrs.get("aria-label", "").split("; ") if ": " in kv)
            marks[chart].append({**attrs, "fields": fields})
    yield con, s, dom, console, marks
    con.close()


def _path_ys(d: str) -> list[float]:
    """The y of every point of an SVG path of M/L commands ('M1,2L3,4')."""
    return [float(y) for _, y in re.findall(r"[ML]([-\d.e]+),([-\d.e]+)", d)]


def _steps(xs: list[float]) -> list[float]:
    """The values a step line goes through: repeats of the one before dropped."""
    return [x for i, x in enumerate(xs) if i == 0 or x != xs[i - 1]]


@needs_browser
def test_timeline_charts_render_in_chromium(timeline_drawn):
    con, s, dom, console, marks = timeline_drawn
    assert console == []
    names = [f"timeline{s.timeline_id}_{n}" for n in ("producer", "consumer", "occupancy", "pm_stalls")]
    assert list(marks) == names
    assert_every_chart_rendered(dom, len(names))


@needs_browser
@pytest.mark.parametrize("role", ["producer", "consumer"])
def test_role_lanes_draw_every_interval_of_the_sampled_ctas(timeline_drawn, role):
    """One bar per begin event of the role (but the warp's lifetime) on the first four
    traced CTAs, in its lane, at its time: as SQL over timeline_events counts them."""
    con, s, _, _, marks = timeline_drawn
    drawn = sorted((m["fields"]["lane"], m["fields"]["event"], m["fields"]["start_us"])
                   for m in marks[f"timeline{s.timeline_id}_{role}"])
    want = sorted(con.execute(
        """WITH lanes AS (SELECT DISTINCT cta FROM timeline_events WHERE timeline_id = $t ORDER BY cta LIMIT 4)
           SELECT printf('CTA %d (SM %d) w%d', cta, sm, warp), event, printf('%.3f', t_ns / 1000.0)
           FROM timeline_events
           WHERE timeline_id = $t AND role = $r AND phase = 'begin' AND event <> 'kernel'
             AND cta IN (SELECT cta FROM lanes)""", {"t": s.timeline_id, "r": role}).fetchall())
    assert drawn == want
    # ring.cu: the producer copies and waits once per tile, each consumer also computes
    assert {e for _, e, _ in drawn} == ({"wait", "copy"} if role == "producer" else {"wait", "compute", "epilogue"})


@needs_browser
def test_occupancy_lines_step_through_the_full_stages_sql_counts(timeline_drawn):
    """One line per lane CTA; its steps go through the full-stage counts computed here from
    timeline_events (a stage fills at its copy's end, frees at the last compute's end on it),
    the y pixels a linear image of them; four stages at the peak (ring4)."""
    con, s, _, _, marks = timeline_drawn
    rows = con.execute(
        """WITH lanes AS (SELECT DISTINCT cta FROM timeline_events WHERE timeline_id = $t ORDER BY cta LIMIT 4),
           e AS (SELECT * FROM timeline_events WHERE timeline_id = $t AND phase = 'end' AND cta IN (SELECT cta FROM lanes)),
           steps AS (
               SELECT cta, max(t_ns) AS t, 1 AS d FROM e WHERE event = 'copy' AND role <> 'consumer' GROUP BY cta, seq
               UNION ALL
               SELECT cta, max(t_ns), -1 FROM e WHERE event = 'compute' AND role <> 'producer' GROUP BY cta, seq)
           SELECT cta, t, sum(sum(d)) OVER (PARTITION BY cta ORDER BY t) FROM steps GROUP BY cta, t ORDER BY cta, t""",
        {"t": s.timeline_id}).fetchall()
    lines = marks[f"timeline{s.timeline_id}_occupancy"]
    assert sorted(m["fields"]["cta"] for m in lines) == sorted({f"CTA {c}" for c, _, _ in rows})
    assert max(v for *_, v in rows) == 4
    for m in lines:
        cta = int(m["fields"]["cta"].split()[1])
        values = [float(v) for c, _, v in rows if c == cta]
        assert m["fields"]["t_us"] == f"{next(t for c, t, _ in rows if c == cta) / 1e3:.3f}"
        ys, vs = _steps(_path_ys(m["d"])), _steps(values)
        assert len(ys) == len(vs) > 60, (cta, len(ys), len(vs))  # 32 tiles: a fill and a release each
        px = (ys[0] - ys[vs.index(max(vs))]) / (max(vs) - vs[0])  # pixels per stage
        assert px > 0 and all(abs(y - (ys[0] - (v - vs[0]) * px)) < 0.01 for y, v in zip(ys, vs))


@needs_browser
def test_pm_stall_lines_hold_every_sample(timeline_drawn):
    """One line per stall reason of the joined launch's PM samples, one point per sample."""
    con, s, _, _, marks = timeline_drawn
    want = dict(con.execute(
        """SELECT regexp_extract(metric, 'issue_stalled_([a-z_]+)', 1), count(*) FROM pm_samples
           WHERE launch_id = ? AND metric LIKE '%issue_stalled%' GROUP BY ALL""", [s.launch_id]).fetchall())
    drawn = {m["fields"]["reason"]: len(_path_ys(m["d"])) for m in marks[f"timeline{s.timeline_id}_pm_stalls"]}
    assert len(want) == 15 and drawn == want  # PmSampling_WarpStates: 15 reasons, 273-396 samples each (H200)
