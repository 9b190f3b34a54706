"""What a reader sees: missing figures are null/n/a (never NaN), a launch with no evidence
is never shown as good, role labels agree with the warp-specialized line, and a launch
where nothing is confirmed says what was ruled out and where to look next. On the real
fixture reports."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

import wsperf
from support import wsperf as run_cli
from wsperf.analyses.analyze import Outcome, analyze
from wsperf.cli import html, render
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"


def _strict(text: str):
    """json.loads that refuses NaN/Infinity, as JSON.parse and other strict parsers do."""
    def bad(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=bad)


def _text(results) -> str:
    buf = io.StringIO()
    render.analyses_text(results, Console(file=buf, width=200, highlight=False))
    return buf.getvalue()


@pytest.fixture(scope="module")
def no_launch_stats():
    """gemm_wgmma_tma_basic (default section set: no instruction statistics) as a report
    collected without launch statistics reads: ncu's figures NaN, the launch shape absent
    (a public H800 flash_fwd_kernel report looked like this)."""
    con = open_store(None)
    load_reports(con, [REPORTS / "gemm_wgmma_tma_basic.ncu-rep"])
    con.execute("""UPDATE launches SET duration_ns = 'NaN'::DOUBLE, elapsed_cycles = 'NaN'::DOUBLE,
                   registers_per_thread = NULL, static_smem_bytes = NULL, dynamic_smem_bytes = NULL,
                   waves_per_sm = NULL, sm_count = NULL, theoretical_occupancy_pct = NULL,
                   achieved_occupancy_pct = NULL, grid_size = NULL""")
    con.execute("DELETE FROM metrics")
    return analyze(con)


def test_missing_figures_are_null_in_json_and_na_in_text(no_launch_stats):
    (k,) = _strict(render.analyses_json(no_launch_stats))["kernels"]
    assert k["duration_ns"] is None and k["registers_per_thread"] is None
    text, md = _text(no_launch_stats), render.analyses_markdown(no_launch_stats)
    for out in (text, md):
        assert "nan" not in out.lower().replace("nanosleep", "") and "None" not in out
    assert "n/a per thread / n/a static + n/a dynamic" in text
    assert "duration" in text and "n/a" in text


def test_a_launch_with_only_no_data_is_never_shown_as_good(no_launch_stats):
    (a,) = no_launch_stats
    assert {f.status.value for f in a.findings} == {"no_data"}
    assert a.outcome is Outcome.no_data
    k = _strict(render.analyses_json(no_launch_stats))["kernels"][0]
    assert k["outcome"] == "no_data" and k["headline"].startswith("no verdict")
    assert "no verdict" in _text(no_launch_stats) and "no verdict" in render.analyses_markdown(no_launch_stats)
    page = html.analysis_page(no_launch_stats, with_charts=False)
    assert "no hypothesis confirmed" not in page
    assert '<span class="no_data">no verdict' in page and '<span class="rejected">no verdict' not in page


@pytest.fixture(scope="module")
def fixtures_analyzed():
    con = open_store(None)
    load_reports(con, [REPORTS / f"{n}.ncu-rep" for n in ("gemm_ffma", "gemm_wgmma_tma", "ws_stream_healthy")])
    return {a.summary.name: a for a in analyze(con)}


def test_role_labels_agree_with_warp_specialization(fixtures_analyzed):
    ffma, ws = fixtures_analyzed["gemm_ffma"], fixtures_analyzed["gemm_ws"]
    assert ffma.warp_specialized is False and ws.warp_specialized is True
    assert ws.warp_specialized_basis == "executed"
    ffma_text, ws_text = _text([ffma]), _text([ws])
    # A kernel that is not warp-specialized lists code paths, not producer/consumer roles.
    assert "warp-specialized        no" in ffma_text
    table = ffma_text[ffma_text.index("code paths"):ffma_text.index("hypotheses")]
    assert "consumer" not in table and "producer" not in table
    assert "code paths (from SASS, with PC samples)" in ffma_text and "common code" in ffma_text
    assert "roles (from SASS, with PC samples)" in ws_text and "PC sampling)" not in ws_text
    j = _strict(render.analyses_json([ffma]))["kernels"][0]
    assert [r["label"] for r in j["roles"]] == ["common code"] and j["warp_specialized_basis"] == "executed"


def test_nothing_confirmed_says_what_was_ruled_out_and_where_to_look(fixtures_analyzed):
    a = fixtures_analyzed["ws_stream"]
    assert a.outcome is Outcome.clear
    lines = a.look_next()
    assert lines[0].startswith("ruled out: ") and "producer-bound" in lines[0]
    assert any(x.startswith("look next: ") and "% of peak" in x for x in lines)
    text = _text([a])
    assert "no hypothesis confirmed" in text and lines[-1][:40] in text
    assert "look next" in render.analyses_markdown([a])
    # A confirmed finding needs no such line.
    assert fixtures_analyzed["gemm_ffma"].look_next() == []


def test_long_cpp_names_are_folded_for_people_and_whole_in_json():
    con = open_store(None)
    load_reports(con, [REPORTS / "gemm_wgmma_tma.ncu-rep"])
    results = analyze(con)
    full = results[0].summary.demangled
    assert len(full) > 100 and full.startswith("void gemm_ws<(bool)1>(")
    text = _text(results)
    # a short template argument list is kept: it tells gemm_ws<true> from gemm_ws<false>
    assert "void gemm_ws<(bool)1>(...)" in text and full not in text
    assert _strict(render.analyses_json(results))["kernels"][0]["demangled"] == full
    # A CUTLASS-sized name: the template arguments fold first, then the parameters.
    cutlass = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
               "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
               "cute::tuple<cute::C<2>>>, float>, void>>(T1::Params)")
    assert render.fold_name(cutlass) == "void cutlass::device_kernel<...>(T1::Params)"
    assert render.fold_name("saxpy(int, float)") == "saxpy(int, float)"


def test_ncu_rules_are_shown_briefly_as_text(fixtures_analyzed):
    a = fixtures_analyzed["gemm_ffma"]
    assert any("@section:" in (r.message or "") for r in a.summary.ncu_rules)  # the raw markup exists
    lines = render.ncu_rule_lines(a.summary)
    assert 1 <= len(lines) <= 3 and all("@" not in x for x in lines)
    assert "est. speedup" in lines[0]
    assert lines[0][:50] in _text([a]) and "Nsight Compute's rules" in render.analyses_markdown([a])
    page = html.analysis_page([a], with_charts=False)
    assert "@section:" not in page and "Warp Stall Sampling (All Samples)" in page


def test_version_in_every_json_and_doctor_markdown():
    p = run_cli("analyze", REPORTS / "gemm_ffma.ncu-rep", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert _strict(p.stdout)["wsperf_version"] == wsperf.version()
    d = run_cli("doctor", "--format", "json")
    assert _strict(d.stdout)["wsperf_version"] == wsperf.version()
    m = run_cli("doctor", "--format", "markdown")
    assert m.returncode == 0 and m.stdout.startswith("| check | found | where / note |")
    assert f"| wsperf | {wsperf.version()} |" in m.stdout


def test_compare_html_prints_numbers_in_their_units(tmp_path):
    cmp = ROOT / "fixtures" / "compare"
    page = tmp_path / "cmp.html"
    p = run_cli("compare", cmp / "cmp_healthy_a.ncu-rep.gz", cmp / "cmp_serialized.ncu-rep.gz", "--html", page)
    assert p.returncode in (0, 1), p.stderr
    body = page.read_text()
    cells = re.findall(r'<td class="num">([^<]*)</td>', body)
    assert cells and not any(re.fullmatch(r"[-\d.]+e[+-]\d+", c) for c in cells), cells[:20]
    assert any(c.endswith(" us") for c in cells) and any(c.endswith("%") for c in cells)
    assert "<th></th>" not in body


def test_identical_launches_are_grouped_and_several_reports_named():
    con = open_store(None)
    load_reports(con, [REPORTS / "multi_launch.ncu-rep", REPORTS / "gemm_ffma.ncu-rep"])
    results = analyze(con)
    assert len(results) == 10
    text = _text(results)
    # nine launches of three kernels, three times each: three printed, two lines of the rest
    assert text.count("same kernel, launch shape and verdicts as launch") == 3
    assert sum(1 for line in text.splitlines() if line.startswith("kernel ")) == 4
    md_out = render.analyses_markdown(results)
    assert md_out.count("### launch ") == 4 and "| launch | report | kernel |" in md_out
    assert "| multi\\_launch.ncu-rep |" in md_out and "| gemm\\_ffma.ncu-rep |" in md_out
    # JSON keeps every launch
    assert len(_strict(render.analyses_json(results))["kernels"]) == 10


def test_history_chart_time_axis_is_readable(tmp_path):
    db = tmp_path / "h.duckdb"
    for label, report in (("r1", "ws_stream_healthy"), ("r2", "ws_stream_serialized")):
        p = run_cli("analyze", REPORTS / f"{report}.ncu-rep", "--db", db, "--label", label)
        assert p.returncode == 0, p.stderr
    p = run_cli("history", "--db", db, "--charts", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    svg = (tmp_path / "out" / "history.svg").read_text()
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    ticks = [x for x in labels if re.fullmatch(r"[\d:.]+", x) and ":" in x]
    # runs seconds apart: whole HH:MM:SS labels, never Vega's ".800" / ":47" fragments
    assert ticks and all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in ticks), labels


def test_cuda_gdb_13_names_its_version():
    """REPORT.md and `doctor` said "cuda-gdb ?" on the H200: cuda-gdb 13.0 calls itself
    `NVIDIA (R) cuda-gdb 13.0` (its real `--version`, fixtures/tools), which the pattern for
    `CUDA-GDB ...` missed. The `exec:` line naming cuda-gdb-python3.12-tui is no version."""
    from wsperf.collectors.environment import tool_version

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "cuda-gdb-13.0.version.txt").read_text()
    assert text.startswith("exec: ") and tool_version("cuda-gdb", text) == "13.0"
    assert tool_version("cuda-gdb", text.splitlines()[0]) is None


def test_a_newline_in_a_report_name_keeps_the_report_line_whole(tmp_path):
    """A report named `a<newline>b.ncu-rep` split the summary's report line in two; the name
    is now one line, the newline shown as a return sign."""
    import shutil

    name = tmp_path / "a\nb.ncu-rep"
    shutil.copy(REPORTS / "gemm_ffma.ncu-rep", name)
    p = run_cli("analyze", name)
    assert p.returncode == 0, p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("report ")]
    assert line.rstrip().endswith("a\u23ceb.ncu-rep")


def test_counts_have_digit_separators_and_no_cluster_is_none_everywhere():
    """Counts of a thousand or more read with separators in every command's text (nsys' kernel
    records, launches, gaps and table cells; timeline's events), and a launch without a
    cluster is `none` in analyze, Markdown and compare alike (compare said `-`)."""
    from support import PUBLIC

    bare = re.compile(r"(?<![\w.,/+:-])\d{4,}(?![\w.,])")
    export = PUBLIC / "nsys" / "cloverleaf_cuda_a100_nsys2024.5.sqlite.gz"
    if export.exists():
        p = run_cli("nsys", export, env={"COLUMNS": "200"})
        assert p.returncode == 0, p.stderr
        assert "1,312 kernel records" in p.stdout and "1,312 launches" in p.stdout and "1,339 of 1,590 gaps" in p.stdout
        # (a pid and a path are identifiers, not counts)
        counts = [ln for ln in p.stdout.splitlines() if "pid " not in ln and "/" not in ln]
        assert not [ln for ln in counts if bare.search(ln)], [ln for ln in counts if bare.search(ln)]
    p = run_cli("timeline", ROOT / "fixtures" / "timeline" / "ring1.wsperf-trace")
    assert p.returncode == 0, p.stderr
    assert re.search(r": [0-9]{1,3},[0-9]{3} events, 22 CTAs, 110 warps", p.stdout), p.stdout[:400]
    healthy, cluster = REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "ws_stream_cluster.ncu-rep"
    assert "160x1x1 / none" in run_cli("analyze", healthy, env={"COLUMNS": "200"}).stdout
    assert "160x1x1 / none |" in run_cli("analyze", healthy, "--format", "markdown").stdout
    p = run_cli("compare", cluster, healthy, env={"COLUMNS": "200"})
    # (the header shows both sides where they differ)
    assert "block 160x1x1 cluster 2x1x1 -> none" in p.stdout and "cluster -" not in p.stdout, p.stdout
