"""`wsperf compare`: the regression gate on the real repeated measurements in
fixtures/compare (six profiled launches per report, H200; fixtures/README.md) and the
single-launch reports in fixtures/reports. In-process for the figures, as a real process
for exit codes and output formats."""

from __future__ import annotations

import itertools
import json
import random
import statistics
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from bundles import sanitizer_bundle
from support import REPORTS, ROOT, assert_one_error_line, wsperf

from wsperf.analyses.compare import (Change, CompareResult, FigureChange, KernelComparison, VerdictChange, compare,
                                     decide, mann_whitney_p, min_p, resolve_side)
from wsperf.analyses.config import AnalysisConfig, load_config
from wsperf.cli.compare import compare_json, compare_junit, compare_markdown, compare_text
from wsperf.collectors.store import open_store

CMP = ROOT / "fixtures" / "compare"
HEALTHY_A, HEALTHY_B = CMP / "cmp_healthy_a.ncu-rep.gz", CMP / "cmp_healthy_b.ncu-rep.gz"
SERIALIZED, CPASYNC = CMP / "cmp_serialized.ncu-rep.gz", CMP / "cmp_cpasync.ncu-rep.gz"


@pytest.fixture(scope="module")
def store():
    """One in-memory store holding the four compare fixtures and two single-launch
    reports; `ids(path)` gives a report's launches."""
    con = open_store(None)
    paths = [HEALTHY_A, HEALTHY_B, SERIALIZED, CPASYNC, REPORTS / "ws_stream_healthy.ncu-rep",
             REPORTS / "ws_stream_serialized.ncu-rep"]
    sides = {p: resolve_side(con, [str(p)]).launch_ids for p in paths}
    yield con, sides
    con.close()


def _cmp(store, base: Path, cand: Path, config: AnalysisConfig | None = None) -> CompareResult:
    con, ids = store
    return compare(con, ids[base], ids[cand], config)


def _figures(r: CompareResult) -> dict[str, FigureChange]:
    (k,) = r.kernels
    return {f.name: f for f in k.figures}


def _verdicts(r: CompareResult) -> dict[str, VerdictChange]:
    (k,) = r.kernels
    return {v.hypothesis: v for v in k.verdicts}


# ---------------------------------------------------------------------------------------
# The four fixture pairs


def test_the_one_stage_build_is_slower_and_newly_serialized(store):
    r = _cmp(store, HEALTHY_A, SERIALIZED)
    (k,) = r.kernels
    # ws_stream<(int)1, ...> against ws_stream<(int)4, ...>: matched by function name.
    assert k.matched_by == "function+config" and "(int)4" in k.base_name and "(int)1" in k.cand_name
    assert len(k.base_launch_ids) == len(k.cand_launch_ids) == 6
    d = _figures(r)["duration_ns"]
    # fixtures/README.md: 143.9-145.2 us against 160.9-164.4 us, no overlap: the exact
    # p-value of complete separation of 6 and 6, 2 / C(12, 6).
    assert d.change is Change.regression and 11 < d.delta_pct < 13
    assert d.p_value == pytest.approx(2 / 924, abs=1e-6) and d.threshold_pct == 3.0
    v = _verdicts(r)
    assert v["serialized-roles"].regression and (v["serialized-roles"].base_status,
                                                 v["serialized-roles"].cand_status) == ("rejected", "confirmed")
    assert v["serialized-roles"].cand_confirmed == 6
    assert _figures(r)["wait_share:consumer"].change is Change.regression  # consumers starve: 2% -> 15%
    assert r.regression and not r.only_base and not r.only_cand


def test_the_fix_is_an_improvement_not_a_regression(store):
    r = _cmp(store, SERIALIZED, HEALTHY_A)
    assert _figures(r)["duration_ns"].change is Change.improvement
    v = _verdicts(r)["serialized-roles"]
    assert v.resolved and not v.regression and v.base_confirmed == 6
    assert not r.regression


def test_a_recollection_of_the_same_binary_flags_nothing(store):
    r = _cmp(store, HEALTHY_A, HEALTHY_B)
    assert r.kernels[0].matched_by == "name+config"
    assert {f.name: f.change for f in r.kernels[0].figures if f.change is not Change.unchanged} == {}
    assert not any(v.changed for v in r.kernels[0].verdicts)
    assert _figures(r)["duration_ns"].p_value > 0.5
    assert not r.regression


def test_the_cpasync_build_lost_its_bulk_copies_at_flat_time(store):
    r = _cmp(store, HEALTHY_A, CPASYNC)
    f = _figures(r)
    assert f["family:tma"].change is Change.regression and (f["family:tma"].base, f["family:tma"].cand) == (1, 0)
    assert f["family:cp.async"].change is Change.changed and f["family:cp.async"].cand == 1
    assert f["executed:cp.async"].cand == 262144 and f["executed:tma"].cand == 0
    assert _verdicts(r)["missing-specialized-instructions"].regression
    # ~2% faster, significant, but below the 3% effect floor: not a regression.
    d = f["duration_ns"]
    assert d.change is Change.unchanged and -3 < d.delta_pct < -1.5 and d.p_value < 0.01
    assert "below the 3%" in d.note
    assert f["registers_per_thread"].change is Change.changed  # 20 -> 32: changed, not worse
    assert r.regression


def test_a_report_against_itself_is_unchanged(store):
    r = _cmp(store, HEALTHY_A, HEALTHY_A)
    k = r.kernels[0]
    assert k.base_launch_ids == k.cand_launch_ids
    assert all(f.change is Change.unchanged for f in k.figures)
    assert _figures(r)["duration_ns"].p_value == 1.0
    assert not r.regression


def test_one_launch_per_side_uses_the_wide_threshold(store):
    r = _cmp(store, REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "ws_stream_serialized.ncu-rep")
    d = _figures(r)["duration_ns"]
    assert d.base_values == (144192.0,) and d.cand_values == (162048.0,)
    assert d.p_value is None and d.threshold_pct == 10.0 and "one sample per side" in d.note
    assert d.change is Change.regression  # +12.4% > 10%
    assert _verdicts(r)["serialized-roles"].regression
    # A change below the wide threshold is not one: DRAM throughput -9%.
    assert _figures(r)["dram_throughput_pct"].change is Change.unchanged


def test_the_launch_configuration_changing_matches_by_function_name(store):
    con, _ = store
    fewctas = resolve_side(con, [str(REPORTS / "ws_stream_fewctas.ncu-rep")]).launch_ids
    r = compare(con, store[1][REPORTS / "ws_stream_healthy.ncu-rep"], fewctas)
    (k,) = r.kernels
    assert k.matched_by == "function"
    g = {f.name: f for f in k.figures}["grid"]
    assert g.change is Change.changed and g.base == 396 and g.note.startswith("396x1x1 -> ")
    assert _verdicts(r)["too-few-active-ctas"].regression


# ---------------------------------------------------------------------------------------
# The noise model


def test_the_false_alarm_rate_of_the_duration_rule_over_every_split(store):
    """Split the twelve launches of one healthy binary (two processes) into halves, every
    one of the C(12, 6) ways: the duration rule must flag none of them (alpha 0.01 and the
    3% floor; measured: 0 of 924, the p-value alone is below 0.01 in 4 of 924)."""
    con, ids = store
    launches = ids[HEALTHY_A] + ids[HEALTHY_B]
    dur = dict(con.execute("SELECT launch_id, duration_ns FROM launches WHERE list_contains(?, launch_id)",
                           [list(launches)]).fetchall())
    flagged = significant = 0
    cfg = AnalysisConfig()
    for half in itertools.combinations(launches, 6):
        b = [dur[i] for i in half]
        c = [dur[i] for i in launches if i not in half]
        mb, mc = statistics.median(b), statistics.median(c)
        f = decide({"name": "duration_ns", "kind": "timing", "unit": "ns", "base_values": b, "cand_values": c,
                    "base": mb, "cand": mc, "delta_pct": (mc - mb) / mb * 100, "base_detail": None,
                    "cand_detail": None}, cfg)
        flagged += f.change is not Change.unchanged
        significant += f.p_value < 0.01
    assert flagged == 0
    assert significant / 924 <= 0.02  # the test alone keeps its level (about alpha)


def test_random_halves_through_the_whole_comparison_flag_nothing(store):
    con, ids = store
    launches = list(ids[HEALTHY_A] + ids[HEALTHY_B])
    rng = random.Random(20261130)
    for _ in range(8):
        half = rng.sample(launches, 6)
        r = compare(con, half, [i for i in launches if i not in half])
        assert not r.regression
        assert [f.name for f in r.kernels[0].figures if f.change is not Change.unchanged] == []


# Reference p-values from SciPy 1.17.1 `mannwhitneyu(x, y, alternative='two-sided',
# method=...)`; a 3000-case random cross-check agreed to 4e-16 (both methods).
@pytest.mark.parametrize("x, y, p", [
    ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12], 0.0021645021645021645),                 # exact
    ([1.0, 2.5, 3.1], [2.0, 4.2, 5.5, 6.1], 0.22857142857142856),                       # exact
    ([1, 2, 2, 3, 3, 3, 4], [3, 4, 4, 5, 5, 6, 7, 7], 0.004793348746185457),            # ties: asymptotic
    ([144.4, 144.2, 145.2, 144.9, 144.5, 143.9], [144.1, 145.8, 144.0, 145.3, 144.8, 144.2], 0.8725590308923818),
])
def test_mann_whitney_matches_scipy(x, y, p):
    assert mann_whitney_p(x, y) == pytest.approx(p, rel=1e-12)
    assert mann_whitney_p(y, x) == pytest.approx(p, rel=1e-12)


def test_the_exact_p_value_is_the_permutation_distribution():
    """Without ties the exact p-value must equal counting every relabelling of the pooled
    values (an independent computation)."""
    rng = random.Random(7)
    for n1, n2 in ((1, 1), (2, 5), (4, 4), (5, 7)):
        x = [rng.random() for _ in range(n1)]
        y = [rng.random() + 0.3 for _ in range(n2)]
        pooled = x + y

        def u(a, b):
            return sum(1 for i in a for j in b if i > j)

        observed = u(x, y)
        us = []
        for pick in itertools.combinations(range(n1 + n2), n1):
            a = [pooled[i] for i in pick]
            us.append(u(a, [pooled[i] for i in range(n1 + n2) if i not in pick]))
        lower = sum(v <= observed for v in us) / len(us)
        upper = sum(v >= observed for v in us) / len(us)
        assert mann_whitney_p(x, y) == pytest.approx(min(1.0, 2 * min(lower, upper)), abs=1e-12)
    assert min_p(6, 6) == pytest.approx(2 / 924) and min_p(1, 1) == 1.0
    assert mann_whitney_p([3.0, 3.0], [3.0, 3.0, 3.0]) == 1.0  # all tied: nothing to tell apart


# ---------------------------------------------------------------------------------------
# Config


def test_thresholds_come_from_the_config(store, tmp_path):
    cfg_file = tmp_path / "wsperf.toml"
    cfg_file.write_text("[compare.thresholds]\nduration_ns = 15.0\n\"wait_share:consumer\" = 1000.0\n")
    cfg = load_config(cfg_file)
    r = _cmp(store, HEALTHY_A, SERIALIZED, cfg)
    d = _figures(r)["duration_ns"]
    assert d.threshold_pct == 15.0 and d.change is Change.unchanged  # +12% < 15%
    assert _figures(r)["wait_share:consumer"].change is Change.unchanged
    assert r.regression  # serialized-roles is newly confirmed whatever the time did

    # An alpha that 6 against 6 launches cannot reach: the wide threshold decides.
    cfg_file.write_text("[compare.thresholds]\nalpha = 0.001\n")
    d = _figures(_cmp(store, HEALTHY_A, SERIALIZED, load_config(cfg_file)))["duration_ns"]
    assert d.p_value is None and d.threshold_pct == 10.0 and "cannot reach p < 0.001" in d.note
    assert d.change is Change.regression


@pytest.mark.parametrize("toml, needle", [
    ("[compare.thresholds]\nduration = 5.0\n", "compare.thresholds has no 'duration'"),
    ("[compare.thresholds]\nduration_ns = \"5\"\n", "must be a finite number"),
    ("[compare.thresholds]\nalpha = 1.5\n", "alpha must be between 0 and 1"),
    ("[compare]\nalpha = 0.01\n", "[compare] holds only a [compare.thresholds] table"),
])
def test_a_bad_compare_config_is_one_error_line(tmp_path, toml, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    p = wsperf("compare", HEALTHY_A, HEALTHY_B, "--config", cfg)
    assert_one_error_line(p, 2, needle)


# ---------------------------------------------------------------------------------------
# The command


def test_the_cli_exit_codes_and_json():
    p = wsperf("compare", HEALTHY_A, SERIALIZED, "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["regression"] is True and doc["exit_code"] == 1 and doc["regressions"] == 3
    (k,) = doc["kernels"]
    assert set(k) == {"kernel", "base_name", "cand_name", "matched_by", "launch_config", "base_launch_config",
                      "base_launch_ids", "cand_launch_ids", "figures", "verdicts", "regression"}
    d = next(f for f in k["figures"] if f["name"] == "duration_ns")
    assert set(d) == {"name", "kind", "unit", "base_values", "cand_values", "base", "cand", "delta_pct", "p_value",
                      "threshold_pct", "change", "note", "base_detail", "cand_detail"}
    assert d["change"] == "regression" and len(d["base_values"]) == 6

    # The same report on both sides loads once and compares to itself.
    p = wsperf("compare", HEALTHY_A, HEALTHY_A)
    assert p.returncode == 0, p.stderr
    assert "0 regressions in 0 kernels (1 kernel compared)" in p.stdout and "Traceback" not in p.stderr


def test_several_reports_per_side():
    p = wsperf("compare", HEALTHY_A, HEALTHY_B, "--vs", SERIALIZED, "--format", "json")
    assert p.returncode == 1, p.stderr
    (k,) = json.loads(p.stdout)["kernels"]
    assert len(k["base_launch_ids"]) == 12 and len(k["cand_launch_ids"]) == 6
    d = next(f for f in k["figures"] if f["name"] == "duration_ns")
    assert d["change"] == "regression" and d["p_value"] < 0.001


def test_markdown_is_a_pull_request_comment(store):
    lines = compare_markdown(_cmp(store, HEALTHY_A, CPASYNC)).splitlines()
    assert lines[0] == "**2 regressions in 1 kernel (1 kernel compared)**"
    table = [l for l in lines if l.startswith("| ws\\_stream |")]
    assert any("family:tma" in l and "**regression**" in l for l in table)
    assert any("hypothesis missing-specialized-instructions" in l and "**regression**" in l for l in table)
    assert any("duration\\_ns" in l and "| unchanged |" in l for l in table)


def test_junit_has_a_failure_per_regression_and_writes_to_out(tmp_path):
    out = tmp_path / "compare.xml"
    p = wsperf("compare", HEALTHY_A, SERIALIZED, "--format", "junit", "--out", out)
    assert p.returncode == 1 and p.stdout == "", p.stderr
    suite = ET.parse(out).getroot()
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {"duration_ns", "wait_share:consumer", "hypothesis:serialized-roles"}
    assert suite.get("failures") == "3" and int(suite.get("tests")) == len(list(suite.iter("testcase")))


def test_a_bundle_is_a_side(tmp_path):
    bundle = sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy")
    p = wsperf("compare", bundle, REPORTS / "ws_stream_serialized.ncu-rep", "--format", "json")
    assert p.returncode == 1, p.stderr
    d = next(f for f in json.loads(p.stdout)["kernels"][0]["figures"] if f["name"] == "duration_ns")
    assert "one sample per side" in d["note"]
    broken = sanitizer_bundle(tmp_path / "b", "oob_write")
    assert_one_error_line(wsperf("compare", broken, HEALTHY_A), 2, "the sanitizer found correctness errors")


def test_a_cluster_change_reads_in_one_notation_and_the_header_shows_both_sides():
    # the cluster row said base 1, candidate 2 beside the note "none -> 2x1x1", and the
    # header gave only the candidate's cluster
    p = wsperf("compare", REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "ws_stream_cluster.ncu-rep",
               env={"COLUMNS": "200"})
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stdout.splitlines()
    assert any(ln.startswith("kernel ws_stream  grid 396x1x1 block 160x1x1 cluster none -> 2x1x1, ") for ln in lines)
    (row,) = [ln.strip("│ ").split("│") for ln in lines if ln.startswith("│ cluster ")]
    assert [c.strip() for c in row[:3]] == ["cluster", "none", "2x1x1"] and "none -> 2x1x1" in row[-1]
    md = wsperf("compare", REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "ws_stream_cluster.ncu-rep", "-f",
                "markdown").stdout
    assert "| ws\\_stream | cluster | none | 2x1x1 |" in md


def test_errors_are_one_line_and_exit_2(tmp_path):
    assert_one_error_line(wsperf("compare", tmp_path / "missing.ncu-rep", HEALTHY_A), 2,
                          "no such report file or bundle directory")
    assert_one_error_line(wsperf("compare", REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "gemm_ffma.ncu-rep"),
                          2, "no kernel is on both sides")
    assert_one_error_line(wsperf("compare", HEALTHY_A), 2, "give BASE CANDIDATE", "(got 1 argument and no --vs)")
    assert_one_error_line(wsperf("compare", HEALTHY_A, HEALTHY_B, "--db", tmp_path / "none.duckdb"), 2,
                          "no such store")
    assert_one_error_line(wsperf("compare", HEALTHY_A, HEALTHY_B, "--kernel", "("), 2, "--kernel")
    not_a_report = tmp_path / "notes.ncu-rep"
    not_a_report.write_text("not a report")
    assert wsperf("compare", not_a_report, HEALTHY_A).returncode == 2


# ---------------------------------------------------------------------------------------
# Untrusted names stay inert in every output


NASTY = 'ws<script>alert(1)</script>&"x\x1b[31mred\x1b[0m'


def _nasty_result() -> CompareResult:
    fig = FigureChange("duration_ns", "timing", "ns", (1.0, 2.0), (3.0, 4.0), 1.5, 3.5, 133.3, 0.001, 3.0,
                       Change.regression, f"note {NASTY}")
    ver = VerdictChange("serialized-roles", "rejected", "confirmed", NASTY, NASTY, True)
    k = KernelComparison(NASTY, NASTY, NASTY, "name+config", "grid 1x1x1 block 32x1x1 cluster none", (1, 2), (3, 4),
                         (fig,), (ver,))
    return CompareResult(NASTY, NASTY, (k,), only_base=(NASTY,))


def test_a_hostile_kernel_name_round_trips_inert_through_junit():
    xml = compare_junit(_nasty_result())
    assert "<script>" not in xml and "\x1b" not in xml
    suite = ET.fromstring(xml)  # well-formed despite the name
    cases = list(suite.iter("testcase"))
    clean = NASTY.replace("\x1b", "")
    assert cases[0].get("classname") == clean
    assert cases[0].find("failure").text == f"note {clean}"
    assert suite.find("properties/property[@name='base']").get("value") == clean


def test_a_hostile_kernel_name_is_escaped_in_markdown_text_and_json():
    r = _nasty_result()
    md = compare_markdown(r)
    assert "<script>" not in md and "\x1b" not in md and "\\<script\\>" in md
    buf = StringIO()
    compare_text(r, Console(file=buf, width=200, force_terminal=False))
    assert "\x1b" not in buf.getvalue() and "[31m" in buf.getvalue()  # the escape is gone, shown as text
    assert json.loads(compare_json(r))["kernels"][0]["kernel"] == NASTY  # JSON keeps the bytes, escaped


def test_run_labels_in_a_store(tmp_path):
    db = tmp_path / "runs.duckdb"
    for label, report in (("before", "ws_stream_healthy"), ("after", "ws_stream_serialized")):
        p = wsperf("analyze", REPORTS / f"{report}.ncu-rep", "--db", db, "--label", label, "--format", "json")
        assert p.returncode == 0, p.stderr
    p = wsperf("compare", "before", "after", "--db", db, "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["base"], doc["candidate"]) == ("before", "after")
    assert {v["hypothesis"] for v in doc["kernels"][0]["verdicts"] if v["regression"]} == {"serialized-roles"}
    # A label and a report file mix; an unknown label is one error line.
    assert wsperf("compare", "before", REPORTS / "ws_stream_healthy.ncu-rep", "--db", db).returncode == 0
    assert_one_error_line(wsperf("compare", "before", "nightly-1", "--db", db), 2, "no run labelled 'nightly-1'")


def test_charts_and_html_page_beside_the_markdown(tmp_path):
    """--charts and --html on compare: the before/after charts as files, linked from
    the Markdown comment, and one page holding the verdict."""
    md_file, charts, page = tmp_path / "comment.md", tmp_path / "charts", tmp_path / "compare.html"
    p = wsperf("compare", CMP / "cmp_healthy_a.ncu-rep.gz", CMP / "cmp_serialized.ncu-rep.gz", "--format", "markdown",
               "--out", md_file, "--charts", charts, "--html", page)
    assert p.returncode == 1, p.stderr
    names = sorted(f.name for f in charts.iterdir())
    assert names == sorted(f"compare-{c}.{ext}" for c in ("duration", "flagged")
                           for ext in ("html", "png", "svg", "vl.json"))
    assert (charts / "compare-duration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md_file.read_text()
    assert text.index("regression") < text.index("### Charts")
    assert f"]({(charts / 'compare-duration.png').as_posix()})" in text
    html = page.read_text()
    assert 'class="regression"' in html and "serialized-roles" in html and html.count('class="vl-spec"') == 2
    spec = json.loads((charts / "compare-duration.vl.json").read_text())
    values = spec["datasets"] if "datasets" in spec else {}
    points = [v for ds in values.values() for v in ds]
    assert len(points) >= 12  # every launch of both sides is a point


def test_charts_into_a_file_path_is_refused_before_loading(tmp_path):
    f = tmp_path / "taken"
    f.write_text("")
    p = wsperf("compare", CMP / "cmp_healthy_a.ncu-rep.gz", CMP / "cmp_healthy_b.ncu-rep.gz", "--charts", f)
    assert p.returncode == 2 and p.stderr.startswith("Error:") and "not a directory" in p.stderr


def test_tensor_pipe_utilization_is_compared_when_both_sides_hold_it(store):
    """--set full reports carry the tensor pipe's utilization (SpeedOfLight): the wgmma
    GEMM fed by cp.async keeps the pipe busy less than the TMA-fed one. Collect's smaller
    set does not hold it, and the figure is then left out rather than guessed."""
    con = open_store()
    ids = {p: resolve_side(con, [str(REPORTS / f"gemm_{p}.ncu-rep")]).launch_ids for p in ("wgmma_tma", "wgmma_cpasync")}
    rows = dict(con.execute(
        "SELECT launch_id, value_double FROM metrics WHERE instance IS NULL AND "
        "name = 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed'").fetchall())
    result = compare(con, ids["wgmma_tma"], ids["wgmma_cpasync"], AnalysisConfig())
    (k,) = result.kernels
    (f,) = [f for f in k.figures if f.name == "tensor_pipe_pct"]
    assert (f.base, f.cand) == (rows[ids["wgmma_tma"][0]], rows[ids["wgmma_cpasync"][0]])
    assert f.cand < f.base * 0.7 and f.change is Change.changed and "one sample" in f.note
    con.close()

    same = _cmp(store, CMP / "cmp_healthy_a.ncu-rep.gz", CMP / "cmp_healthy_b.ncu-rep.gz")
    assert not [f for k in same.kernels for f in k.figures if f.name == "tensor_pipe_pct"]
