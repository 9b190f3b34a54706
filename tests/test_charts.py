"""Charts (cli/charts.py) on the real fixture reports: each chart's inline data are the
analysis figures (checked against the analysis and, independently, against the store),
they render to PNG and SVG with vl-convert, and untrusted kernel names stay text in SVG,
in the JSON embedded in pages and in Markdown.

Compare and history charts are drawn from CompareResult / HistoryPoint values built here
from the real durations of the compare fixtures (plain data, the producers' contract)."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import struct
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
import vl_convert

from support import REPORTS, ROOT, wsperf
from wsperf.analyses.analyze import KernelAnalysis, analyze
from wsperf.analyses.compare import Change, CompareResult, FigureChange, KernelComparison, VerdictChange
from wsperf.analyses.history import HistoryPoint
from wsperf.cli import charts as ch
from wsperf.collectors.errors import InputError
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

COMPARE = ROOT / "fixtures" / "compare"
HOSTILE = "</script><script>alert(1)</script>\x1b[31m & <b>x</b>"
HOSTILE_CLEAN = "</script><script>alert(1)</script>[31m & <b>x</b>"  # control characters removed
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def loaded():
    """One store with three reports: ws_stream_producer (roles), gemm_wgmma_tma
    (families, speed of light), gemm_wgmma_tma_basic (default section set)."""
    con = open_store(None)
    load_reports(con, [REPORTS / "ws_stream_producer.ncu-rep", REPORTS / "gemm_wgmma_tma.ncu-rep",
                       REPORTS / "gemm_wgmma_tma_basic.ncu-rep"])
    by_report = {Path(a.summary.report).name: a for a in analyze(con)}
    yield con, by_report
    con.close()


def rows(chart) -> list[dict]:
    """The chart's inline data: every dataset of its spec (Altair keeps them at the top)."""
    spec = chart.to_dict()
    return [r for ds in spec.get("datasets", {}).values() for r in ds]


def datasets(chart) -> list[list[dict]]:
    return list(chart.to_dict().get("datasets", {}).values())


# ---------------------------------------------------------------------------------
# analysis charts: data = analysis figures
# ---------------------------------------------------------------------------------

def test_role_stalls_chart_is_the_role_samples(loaded):
    con, by = loaded
    a = by["ws_stream_producer.ncu-rep"]
    data = rows(ch.role_stalls_chart(a))
    for r in a.roles:
        mine = [d for d in data if d["role"] == r.role]
        assert sum(d["samples"] for d in mine) == r.samples
        for reason, n in r.top_stalls:
            assert {"reason": reason, "samples": n} in [{"reason": d["reason"], "samples": d["samples"]} for d in mine]
        other = [d["samples"] for d in mine if d["reason"].startswith("other")]
        assert other == ([r.samples - sum(n for _, n in r.top_stalls)] if len(mine) > len(r.top_stalls) else [])
    # Independently of the analysis: the role_stalls view sums to the same per-role samples.
    truth = dict(con.execute("SELECT role, sum(samples) FROM role_stalls WHERE launch_id = ? GROUP BY role",
                             [a.summary.launch_id]).fetchall())
    assert {r: sum(d["samples"] for d in data if d["role"] == r) for r in truth} == truth
    # The fixture's story is in the data: consumers starve at full barriers (long_scoreboard).
    consumer = max((d for d in data if d["role"] == "consumer"), key=lambda d: d["samples"])
    assert consumer["reason"] == "long_scoreboard" and "87% at mbarrier waits" in consumer["role_label"]


def test_families_chart_is_the_executed_census(loaded):
    con, by = loaded
    a = by["gemm_wgmma_tma.ncu-rep"]
    data = {d["family"]: d["instructions"] for d in rows(ch.families_chart(a))}
    assert data == {c.family: c.executed for c in a.summary.families.counts}
    truth = dict(con.execute("SELECT family, executed FROM instruction_families WHERE launch_id = ?",
                             [a.summary.launch_id]).fetchall())
    assert data == truth and data["wgmma"] > 0 and data["tma"] > 0


def test_speed_of_light_chart_is_the_reports_figures(loaded):
    con, by = loaded
    a = by["gemm_wgmma_tma.ncu-rep"]
    data = {d["figure"]: d["pct"] for d in rows(ch.speed_of_light_chart(a))}
    assert data == {u.label: u.pct for u in a.utilization}
    lid = a.summary.launch_id
    dram = con.execute("SELECT value_double FROM metrics WHERE launch_id = ? AND instance IS NULL AND name = "
                       "'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed'", [lid]).fetchone()[0]
    occ = con.execute("SELECT theoretical_occupancy_pct, achieved_occupancy_pct FROM launches WHERE launch_id = ?",
                      [lid]).fetchone()
    assert data["DRAM throughput"] == dram
    assert (data["Theoretical occupancy"], data["Achieved occupancy"]) == occ
    assert all(0 <= v <= 100 for v in data.values()) and len(data) == 9


def test_a_default_section_report_gets_only_what_it_holds(loaded):
    _, by = loaded
    a = by["gemm_wgmma_tma_basic.ncu-rep"]
    names = list(ch.analysis_charts([a]))
    assert names == [f"launch-{a.summary.launch_id}-speed-of-light"]  # no PC samples, no instruction data


# ---------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------

def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_write_charts_renders_png_svg_json_and_offline_html(loaded, tmp_path):
    _, by = loaded
    charts = ch.analysis_charts([by["ws_stream_producer.ncu-rep"]])
    t0 = time.perf_counter()
    written = ch.write_charts(charts, tmp_path / "out")
    seconds = time.perf_counter() - t0
    assert [p.name for p in written] == [f"{n}{ext}" for n in charts for ext in (".vl.json", ".html", ".png", ".svg")]
    for name, chart in charts.items():
        png = (tmp_path / "out" / f"{name}.png").read_bytes()
        w, h = _png_size(png)
        assert len(png) > 20_000 and w > 800 and h > 200  # scale 2 of a 520-px-wide chart
        svg = ET.parse(tmp_path / "out" / f"{name}.svg").getroot()
        assert svg.tag.endswith("svg")
        texts = [t.text or "" for t in svg.iter() if t.tag.endswith("text")]
        assert any(ch.chart_title(chart) == t for t in texts)
        assert json.loads((tmp_path / "out" / f"{name}.vl.json").read_text()) == chart.to_dict()
        page = (tmp_path / "out" / f"{name}.html").read_text()
        assert "vegaEmbed" in page and not re.search(r"<script[^>]+src=|https?://cdn", page)
    print(f"rendered {len(charts)} charts of one report ({len(written)} files) in {seconds:.2f} s")


def test_write_charts_to_a_file_is_an_input_error(tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        ch.write_charts({}, f)


# ---------------------------------------------------------------------------------
# compare and history, from the compare fixtures' real durations
# ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compare_runs():
    """Per compare fixture: its six launch durations (ns) and its collection time."""
    con = open_store(None)
    names = ["cmp_healthy_a", "cmp_healthy_b", "cmp_serialized", "cmp_cpasync"]
    load_reports(con, [COMPARE / f"{n}.ncu-rep.gz" for n in names])
    out = {}
    for n in names:
        ks = [a for a in analyze(con) if Path(a.summary.report).name == f"{n}.ncu-rep.gz"]
        prov = json.loads((COMPARE / f"{n}.provenance.json").read_text())
        out[n] = ([a.summary.duration_ns for a in ks], datetime.fromisoformat(prov["collected_at"]), ks)
    con.close()
    return out


def compare_result(runs, base: str = "cmp_healthy_a", cand: str = "cmp_serialized",
                   kernel: str = "ws_stream") -> CompareResult:
    """A CompareResult as `wsperf compare` states it, from the fixtures' real figures."""
    b, c = runs[base][0], runs[cand][0]
    mb, mc = statistics.median(b), statistics.median(c)
    dur = FigureChange("duration_ns", "timing", "ns", tuple(b), tuple(c), mb, mc, (mc - mb) / mb * 100, 0.0022, 3.0,
                       Change.regression if mc > mb * 1.03 else Change.unchanged, "six launches per side")
    # Families as presence (1/0): executed mbarrier counts vary run to run (try-wait loops).
    fam = {side: {f.family for f in runs[n][2][0].summary.families.counts if f.executed}
           for side, n in (("b", base), ("c", cand))}
    figures = [dur]
    for family in sorted(fam["b"] | fam["c"]):
        fb, fc = float(family in fam["b"]), float(family in fam["c"])
        figures.append(FigureChange(
            f"family:{family}", "exact", "present", (fb,), (fc,), fb, fc,
            None if fb == 0 else (fc - fb) / fb * 100, None, None,
            Change.unchanged if fb == fc else Change.changed))
    verdicts = (VerdictChange("serialized-roles", "rejected", "confirmed", "rejected summary", "confirmed summary",
                              True),)
    k = KernelComparison(kernel, kernel + "<4>", kernel + "<1>", "function+config", "grid 396x1x1 block 160x1x1",
                         (1, 2, 3, 4, 5, 6), (7, 8, 9, 10, 11, 12), tuple(figures), verdicts)
    return CompareResult(str(COMPARE / f"{base}.ncu-rep.gz"), str(COMPARE / f"{cand}.ncu-rep.gz"), (k,))


def test_compare_charts_are_the_figures(compare_runs, tmp_path):
    result = compare_result(compare_runs, cand="cmp_cpasync")
    charts = ch.compare_charts(result)
    assert list(charts) == ["compare-duration", "compare-flagged"]
    dur = next(f for f in result.kernels[0].figures if f.name == "duration_ns")
    points, medians = datasets(charts["compare-duration"])
    assert sorted(d["duration_ns"] for d in points if d["side"] == "base") == sorted(dur.base_values)
    assert sorted(d["duration_ns"] for d in points if d["side"] == "candidate") == sorted(dur.cand_values)
    assert {(d["side"], d["median_ns"]) for d in medians} == {("base", dur.base), ("candidate", dur.cand)}
    flagged = {d["name"]: d for d in rows(charts["compare-flagged"])}
    expected = {f.name: f for f in result.kernels[0].figures if f.change in (Change.regression, Change.changed)}
    # cp.async appears and bulk copies (tma, with their elect) disappear in the cpasync build.
    assert set(flagged) == set(expected) == {"family:cp.async", "family:tma", "family:elect"}
    for name, f in expected.items():
        assert (flagged[name]["delta_pct"], flagged[name]["change"]) == (f.delta_pct, f.change.value)
    assert flagged["family:cp.async"]["delta_pct"] is None  # base 0: no percentage, still drawn with its label
    written = ch.write_charts(charts, tmp_path)
    assert all(_png_size(p.read_bytes())[0] > 800 for p in written if p.suffix == ".png")


def test_compare_duration_regression_is_flagged(compare_runs):
    result = compare_result(compare_runs)  # healthy -> serialized: +12%
    flagged = rows(ch.compare_charts(result)["compare-flagged"])
    dur = [d for d in flagged if d["name"] == "duration_ns"]
    assert len(dur) == 1 and dur[0]["change"] == "regression" and 10 < dur[0]["delta_pct"] < 14


def test_compare_without_changes_has_no_flagged_chart(compare_runs):
    result = compare_result(compare_runs, cand="cmp_healthy_b")  # the same binary again
    assert list(ch.compare_charts(result)) == ["compare-duration"]


def history_points(runs) -> list[HistoryPoint]:
    """The four compare fixtures as four recorded runs of ws_stream, in collection order."""
    pts = []
    for i, (name, (durs, when, ks)) in enumerate(sorted(runs.items(), key=lambda kv: kv[1][1]), start=1):
        pts.append(HistoryPoint(i, name, f"{i:07x}", "main", when, (), "ws_stream", ks[0].summary.demangled,
                                "duration_ns", len(durs), statistics.median(durs), min(durs), max(durs)))
    return pts


def test_history_chart_is_the_points_and_the_threshold(compare_runs, tmp_path):
    pts = history_points(compare_runs)
    chart = ch.history_chart(pts, threshold_pct=5.0)
    series, rule = datasets(chart)
    assert [(d["run_id"], d["median"], d["low"], d["high"], d["n"]) for d in series] == \
        [(p.run_id, p.median, p.low, p.high, p.n) for p in pts]
    base = pts[0]
    assert rule == [{"kernel": "ws_stream", "base_median": base.median, "threshold": base.median * 1.05,
                     "base_label": base.label}]
    # serialized (+12%) is above the line, the healthy rerun is not
    above = {d["label"] for d in series if d["median"] > rule[0]["threshold"]}
    assert above == {"cmp_serialized"}
    explicit = ch.history_chart(pts, 5.0, base_run_id=pts[1].run_id)
    assert datasets(explicit)[1][0]["base_median"] == pts[1].median
    png = vl_convert.vegalite_to_png(chart.to_dict(), scale=2)
    assert _png_size(png)[0] > 800
    ET.fromstring(vl_convert.vegalite_to_svg(chart.to_dict()))


def test_history_chart_refuses_what_it_cannot_draw(compare_runs):
    with pytest.raises(InputError, match="no history"):
        ch.history_chart([], 5.0)
    pts = history_points(compare_runs)
    with pytest.raises(InputError, match="one figure"):
        ch.history_chart([pts[0], dataclasses.replace(pts[1], metric="sm__cycles_active.avg")], 5.0)


# ---------------------------------------------------------------------------------
# untrusted text
# ---------------------------------------------------------------------------------

def hostile(a: KernelAnalysis) -> KernelAnalysis:
    s = dataclasses.replace(a.summary, name=HOSTILE, demangled=HOSTILE + "(int)", report="/tmp/" + HOSTILE)
    return dataclasses.replace(a, summary=s)


def test_hostile_kernel_name_stays_text_in_svg_and_png(loaded):
    _, by = loaded
    charts = ch.analysis_charts([hostile(by["ws_stream_producer.ncu-rep"])])
    for chart in charts.values():
        spec = chart.to_dict()
        # A control character would abort the process inside vl-convert: it must be gone.
        assert "\x1b" not in json.dumps(spec, ensure_ascii=False)
        svg = vl_convert.vegalite_to_svg(spec)
        root = ET.fromstring(svg)  # well-formed: nothing broke out of a text node
        assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "b", "foreignObject")]
        assert "<script>" not in svg and "&lt;/script&gt;&lt;script&gt;alert(1)" in svg
        assert any((t.text or "").startswith(HOSTILE_CLEAN) for t in root.iter() if t.tag.endswith("text"))
        assert _png_size(vl_convert.vegalite_to_png(spec))[0] > 0


def test_hostile_kernel_name_cannot_close_the_embedding_script(loaded):
    _, by = loaded
    charts = ch.analysis_charts([hostile(by["ws_stream_producer.ncu-rep"])])
    page = ch.chart_html(charts, HOSTILE)
    body = page.split("</head>", 1)[1]
    assert "</script><script>alert" not in page and "\x1b" not in page
    # Exactly the page's own scripts: one spec per chart plus the embed script.
    assert len(re.findall(r"<script\b", body)) == len(charts) + 1
    specs = re.findall(r'<script type="application/json" class="vl-spec" data-target="chart-[\w.-]+">(.*?)</script>',
                       body, re.S)
    assert len(specs) == len(charts)
    for text, chart in zip(specs, charts.values()):
        assert "<" not in text and ">" not in text and "&" not in text
        assert json.loads(text) == json.loads(json.dumps(chart.to_dict()))
        assert json.loads(text)["title"]["text"].startswith(HOSTILE_CLEAN)


def test_script_json_escapes_markup_and_separators():
    s = ch.script_json({"t": "</script><!-- & \u2028"})
    assert s == '{"t": "\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028"}' and json.loads(s)["t"] == "</script><!-- & \u2028"


def test_hostile_kernel_name_in_markdown_links(loaded, tmp_path):
    _, by = loaded
    charts = ch.analysis_charts([hostile(by["ws_stream_producer.ncu-rep"])])
    out = ch.charts_markdown(charts, tmp_path / "my charts (v2)")
    assert "</script>" not in out and "<b>" not in out and "\x1b" not in out
    assert "\\<b\\>" in out and "my%20charts%20%28v2%29/launch-" in out
    assert out.count("![") == len(charts)


# ---------------------------------------------------------------------------------
# the commands
# ---------------------------------------------------------------------------------

def test_chart_command_writes_every_chart(tmp_path):
    p = wsperf("chart", REPORTS / "gemm_wgmma_tma.ncu-rep", "--out", tmp_path / "c")
    assert p.returncode == 0, p.stderr
    listed = [Path(x) for x in p.stdout.split()]
    assert len(listed) == 12 and all(x.is_file() and x.stat().st_size > 0 for x in listed)
    assert {x.suffix for x in listed} == {".json", ".html", ".png", ".svg"}


def test_analyze_charts_and_markdown_links(tmp_path):
    p = wsperf("analyze", REPORTS / "ws_stream_producer.ncu-rep", "--charts", tmp_path / "c", "--format", "markdown")
    assert p.returncode == 0, p.stderr
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", p.stdout)
    assert len(links) == 3 and all(Path(x).is_file() for x in links)
    assert "wrote 3 charts (12 files)" in p.stderr


def test_timeline_charts_say_what_they_wrote(tmp_path):
    # as analyze and nsys do: one line on stderr, nothing on stdout but the report
    p = wsperf("timeline", ROOT / "fixtures" / "timeline" / "ring1.wsperf-trace", "--charts", tmp_path / "c",
               "--format", "json")
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == f"wsperf: wrote 3 charts (12 files) to {tmp_path / 'c'}"
    assert len(list((tmp_path / "c").iterdir())) == 12 and json.loads(p.stdout)


@pytest.mark.parametrize("args, message", [
    (["chart", REPORTS / "gemm_wgmma_tma.ncu-rep", "--out", "FILE"], "not a directory"),
    (["chart", REPORTS / "gemm_wgmma_tma.ncu-rep", "--out", "D", "--kernel", "no_such_kernel"], "no kernel launch"),
    (["analyze", REPORTS / "gemm_wgmma_tma.ncu-rep", "--charts", "FILE"], "not a directory"),
])
def test_chart_errors_are_one_line(tmp_path, args, message):
    (tmp_path / "FILE").write_text("x")
    args = [tmp_path / a if a in ("FILE", "D") else a for a in args]
    p = wsperf(*args)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("Error:") == 1 and message in p.stderr and "Traceback" not in p.stderr
