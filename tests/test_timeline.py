"""Role timelines: the in-kernel trace header and its file format, the importers, the
`wsperf timeline` command, and the bubble measurements on real H200 traces whose kernel
design fixes the answer (fixtures/src/timeline/ring.cu: 132 CTAs, every 6th traced, one
producer and four consumer warps, 32 tiles; ring1 one stage, ring4 four, epilogue ring4 plus
a 40000-FMA serial chain per consumer warp). The GPU fixtures live in fixtures/timeline
(collected on the H200 by fixtures/collect_timeline.sh, committed): a missing file fails."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from support import ROOT, assert_one_error_line, wsperf
from wsperf.analyses.hypotheses import Status, evaluate
from wsperf.analyses.roles import build_roles
from wsperf.analyses.timeline import load_timelines, summarize_timeline
from wsperf.cli.timeline import _head
from wsperf.cli.timeline_charts import timeline_charts
from wsperf.collectors import trace_format as tf
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store
from wsperf.collectors.timeline import kernel_instance, load_timeline, match_launch, timeline_schema_sql

TIMELINES = ROOT / "fixtures" / "timeline"
HEADER = ROOT / "collectors" / "include" / "wsperf_trace.cuh"
# The kernel's design (ring.cu): grid = the H200's 132 SMs, every 6th CTA traced.
CTAS, STRIDE, WARPS, NTILES = 132, 6, 5, 32
SAMPLED = -(-CTAS // STRIDE)
PRODUCER_EVENTS = 2 + 4 * NTILES       # kernel begin/end, wait and copy begin/end per tile
CONSUMER_EVENTS = 2 + 4 * NTILES + 2   # ... wait and compute per tile, epilogue begin/end


# ---- the header and the file format (no GPU needed) -----------------------------------


def test_trace_include_points_at_the_header():
    p = wsperf("trace-include")
    assert p.returncode == 0, p.stderr
    flag = p.stdout.strip()
    assert flag.startswith("-I")
    assert (ROOT / flag[2:] / "wsperf_trace.cuh").resolve() == HEADER.resolve()


def test_documented_record_layout_is_the_parsers():
    """The offset table in the header's comment, the C struct's fields and the Python
    struct agree (a DSL converter writes what the comment says)."""
    rows = re.findall(r"^//\s+(\d+)\s+(\d)\s+(\w+)\s", HEADER.read_text(), re.M)
    fields = [(int(o), int(s), n) for o, s, n in rows]
    assert [n for *_, n in fields] == ["t_ns", "clk", "sm", "cta", "warp", "role", "phase", "event", "stage", "seq"]
    assert sum(s for _, s, _ in fields) == tf.RECORD_BYTES == 32
    sizes = {"Q": 8, "I": 4, "H": 2, "B": 1}
    offset = 0
    for (off, size, _), code in zip(fields, tf.RECORD.format.lstrip("<")):
        assert (off, size) == (offset, sizes[code])
        offset += size


def test_every_timeline_column_is_documented_with_a_comment():
    con = open_store(None)
    sql = timeline_schema_sql()
    con.execute(sql)
    columns = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                          "WHERE table_name IN ('timelines', 'timeline_events')").fetchall()
    assert len(columns) == 15 + 13
    undocumented = [(t, c) for t, c in columns if not re.search(rf"^\s+{c} [A-Z]+[^\n]*--", sql, re.M)]
    assert undocumented == []
    # the views' derived columns say their unit
    assert all(re.search(rf"AS {c},?\s+--", sql) for c in ("start_ns", "end_ns", "dur_ns", "t_ns", "value"))
    # and every column of the truncation and overlap views has its comment
    views = con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE table_name IN "
                        "('timeline_cut_warps', 'timeline_truncation', 'timeline_overlap')").fetchall()
    assert len(views) == 10 + 10 + 7
    assert [(t, c) for t, c in views if not re.search(rf"\b{c},?\s+--", sql)] == []


def test_dump_tensor_refuses_a_buffer_of_another_shape(tmp_path):
    with pytest.raises(ValueError, match="needs"):
        tf.dump_tensor(b"\0" * 64, tmp_path / "x.wsperf-trace", "k", ctas=1, warps_per_cta=1, slots_per_warp=3)


@pytest.mark.parametrize("name, content, needle", [
    ("empty.wsperf-trace", b"", "empty"),
    ("noheader.wsperf-trace", b"\0" * 64, "not a wsperf trace"),
    ("short.wsperf-trace", tf.header_line("k", 2, 1, 1, 4) + b"\1" * 40, "truncated"),
    ("future.wsperf-trace", b'{"format":"wsperf-trace","version":9,"record_bytes":64}\n', "version"),
    ("bad.json", b"{not json", "not JSON"),
    ("list.json", b'{"traceEvents": 3}', "traceEvents"),
    ("empty.json", b'{"traceEvents": []}', "no events"),
])
def test_bad_traces_get_one_error_line(tmp_path, name, content, needle):
    f = tmp_path / name
    f.write_bytes(content)
    assert_one_error_line(wsperf("timeline", f), 2, needle)


# ---- real traces from the H200 ---------------------------------------------------------


@pytest.fixture(scope="module")
def traces():
    """name -> (store, summary) for the three ring traces, each in a store of its own."""
    out = {}
    for name in ("ring1", "ring4", "epilogue"):
        con = open_store(None)
        t = load_timeline(con, TIMELINES / f"{name}.wsperf-trace")
        out[name] = (con, summarize_timeline(con, t.timeline_id))
    return out


def _bubbles(traces, name) -> dict:
    s = traces[name][1]
    assert s.bubbles is not None
    return {"status": s.bubbles.status, **s.bubbles.evidence}


@pytest.mark.parametrize("name, stages", [("ring1", 1), ("ring4", 4), ("epilogue", 4)])
def test_records_follow_the_kernel_design(traces, name, stages):
    con, s = traces[name]
    assert (s.ctas, s.warps, s.full_warps) == (SAMPLED, SAMPLED * WARPS, 0)
    per_warp = con.execute("SELECT role, count(*) AS n FROM timeline_events GROUP BY cta, warp, role").fetchall()
    assert {(r, n) for r, n in per_warp} == {("producer", PRODUCER_EVENTS), ("consumer", CONSUMER_EVENTS)}
    # every traced CTA is a multiple of the stride, on an SM of its own; every begin has its end
    ctas = con.execute("SELECT cta, count(DISTINCT sm) FROM timeline_events GROUP BY cta").fetchall()
    assert all(c % STRIDE == 0 and n == 1 for c, n in ctas)
    begins, = con.execute("SELECT count(*) FROM timeline_events WHERE phase = 'begin'").fetchone()
    intervals, = con.execute("SELECT count(*) FROM timeline_intervals WHERE dur_ns >= 0").fetchone()
    assert intervals == begins
    assert con.execute("SELECT count(DISTINCT stage) FROM timeline_intervals WHERE event = 'compute'").fetchone()[0] \
        == stages


def test_bubbles_measure_the_designs(traces):
    r1, r4, ep = (_bubbles(traces, n) for n in ("ring1", "ring4", "epilogue"))
    assert (r1["status"], r4["status"], ep["status"]) == (Status.confirmed, Status.rejected, Status.confirmed)
    # one stage: the consumers idle while each tile is copied; four: the copies run ahead
    assert r1["steady_idle_share"] > 2 * r4["steady_idle_share"]  # measured 0.131 vs 0.060 (H200)
    assert r1["overlap"] < 0.25 < 0.6 < r4["overlap"]
    # the serial chain is the epilogue bubble; the plain ring's epilogue is one store
    assert ep["bubble"] == "epilogue" and ep["epilogue_share"] > 0.3 > 0.1 > r4["epilogue_share"]
    assert max(r1["prologue_share"], r4["prologue_share"], ep["prologue_share"]) < 0.25


def test_epilogue_interval_is_the_serial_chain(traces):
    med = {n: traces[n][0].execute("SELECT median(dur_ns) FROM timeline_intervals WHERE event = 'epilogue'")
           .fetchone()[0] for n in ("ring4", "epilogue")}
    # 40000 dependent FMAs at >= 4 cycles each (H200 clocks at most 1.98 GHz): about 80 us
    assert med["epilogue"] >= 50_000 and med["epilogue"] > 20 * med["ring4"]


@pytest.mark.parametrize("name, stages", [("ring1", 1), ("ring4", 4)])
def test_charts_show_what_sql_says(traces, name, stages):
    con, s = traces[name]
    charts = timeline_charts(s)
    lanes = sorted(c for (c,) in con.execute("SELECT DISTINCT cta FROM timeline_events ORDER BY cta LIMIT 4").fetchall())
    for role in ("producer", "consumer"):
        spec = charts[f"timeline{s.timeline_id}_{role}"].to_dict()
        rows = next(iter(spec["datasets"].values()))
        n, = con.execute("SELECT count(*) FROM timeline_intervals WHERE role = ? AND event <> 'kernel' "
                         "AND cta IN (SELECT unnest(?::INTEGER[]))", [role, lanes]).fetchone()
        assert len(rows) == n
    occ = next(iter(charts[f"timeline{s.timeline_id}_occupancy"].to_dict()["datasets"].values()))
    peak = max(r["full_stages"] for r in occ)
    assert min(r["full_stages"] for r in occ) >= 0 and peak <= stages
    assert peak == 1 if stages == 1 else peak >= 2
    # the legend lists the CTAs in number order: "CTA 0, 6, 12, 18", not "CTA 0, 12, 18, 6"
    spec = charts[f"timeline{s.timeline_id}_occupancy"].to_dict()
    order = spec["encoding"]["color"]["sort"]
    assert order == sorted(order, key=lambda c: int(c.split()[1])) and len(order) > 1
    assert set(order) == {r["cta"] for r in occ}


def test_counts_in_text_and_markdown_have_thousands_separators():
    # the head said 14,476 events while the table said 2816 intervals
    for fmt in ("text", "markdown"):
        p = wsperf("timeline", TIMELINES / "ring4.wsperf-trace", "-f", fmt, env={"COLUMNS": "200"})
        assert p.returncode == 0, p.stderr
        assert "14,476 events" in p.stdout and "2,816" in p.stdout and "2816" not in p.stdout


def test_perfetto_export_reads_back_the_same(tmp_path):
    out = tmp_path / "ring1.perfetto.json"
    first = wsperf("timeline", TIMELINES / "ring1.wsperf-trace", "--perfetto", out, "-f", "json")
    assert first.returncode == 0, first.stderr
    again = wsperf("timeline", out, "-f", "json")
    assert again.returncode == 0, again.stderr
    a, b = (json.loads(p.stdout)["timelines"][0] for p in (first, again))
    assert b["format"] == "chrome-trace" and (a["ctas"], a["warps"]) == (b["ctas"], b["warps"])
    for k in ("prologue_share", "steady_idle_share", "epilogue_share", "overlap", "stages", "copy_intervals"):
        assert a["pipeline_bubbles"]["evidence"][k] == pytest.approx(b["pipeline_bubbles"]["evidence"][k], abs=1e-3), k
    assert [(r["role"], r["event"], r["intervals"]) for r in a["roles"]] == \
        [(r["role"], r["event"], r["intervals"]) for r in b["roles"]]


def test_overhead_of_one_event_per_stage_per_role():
    """Instrumented against plain (-DWSPERF_TRACE_DISABLE), every CTA recording: the
    median of 200 launches per round, two rounds each (bench.jsonl)."""
    rows = [json.loads(l) for l in (TIMELINES / "bench.jsonl").read_text().splitlines() if l.strip()]
    med = {(r["bench"], r["build"]): statistics.median(x["median_us"] for x in rows
                                                        if (x["bench"], x["build"]) == (r["bench"], r["build"]))
           for r in rows}
    ratio = med[("ring4_instant", "traced")] / med[("ring4_instant", "plain")]
    assert ratio <= 1.03, med
    # the plain builds of the detailed and instant configs are the same code
    assert med[("ring4", "plain")] == pytest.approx(med[("ring4_instant", "plain")], rel=0.03)


def test_tensor_buffer_from_pytorch_is_the_same_trace():
    con = open_store(None)
    t = load_timeline(con, TIMELINES / "ring4_torch.wsperf-trace")
    s = summarize_timeline(con, t.timeline_id)
    assert (s.kernel, s.ctas, s.warps, s.full_warps) == ("ring_kernel<4, true, false>", SAMPLED, SAMPLED * WARPS, 0)
    assert s.bubbles.status is Status.rejected


def test_proton_trace_imports():
    f = TIMELINES / "proton_staged.chrome_trace"
    con = open_store(None)
    t = load_timeline(con, f)
    events = dict(con.execute("SELECT event, count(*) FROM timeline_events GROUP BY event").fetchall())
    assert t.events > 0 and {"copy", "compute"} <= set(events), events
    n, = con.execute("SELECT count(*) FROM timeline_intervals WHERE dur_ns < 0").fetchone()
    assert n == 0


def test_a_trace_that_names_no_roles_decides_neither_bubbles_nor_turns():
    """Proton's trace of the staged kernel: every warp copies, then computes, and no event
    names a role (all 'other'). Its copy/compute overlap (0.285) is no measure of two roles
    taking turns: before, it gave pipeline-bubbles 'rejected' with "consumers idle 5%" and
    serialized-roles 'confirmed'. Both are no_data now, and say why; ring1, whose warps are
    marked producer and consumer, is still decided (test_report_joins_the_launch_...)."""
    p = wsperf("timeline", TIMELINES / "proton_staged.chrome_trace", "-f", "json")
    assert p.returncode == 0, p.stderr
    (t,) = json.loads(p.stdout)["timelines"]
    assert {r["role"] for r in t["roles"]} == {"other"}
    bubbles, turns = t["pipeline_bubbles"], t["serialized_roles"]
    assert bubbles["status"] == "no_data" and "names no roles" in bubbles["summary"]
    assert bubbles["evidence"]["overlap"] is None and bubbles["evidence"]["steady_idle_share"] is None
    assert turns["status"] == "no_data" and "names no producer or consumer" in turns["summary"]
    assert turns["evidence"]["overlap"] is None


def test_report_joins_the_launch_of_the_same_kernel():
    p = wsperf("timeline", TIMELINES / "ring1.wsperf-trace", "--report", TIMELINES / "ring_pm.ncu-rep", "-f", "json")
    assert p.returncode == 0, p.stderr
    (t,) = json.loads(p.stdout)["timelines"]
    assert t["from_report"] and t["pipeline_bubbles"]["status"] == "confirmed"
    # ring_pm.ncu-rep profiles all six launches (1-stage, 4-stage and epilogue rings): the
    # 1-stage trace joins a 1-stage launch, whose name the demangler spells with casts
    assert t["launch_kernel"].startswith("void ring_kernel<(int)1, (bool)1, (bool)0>(") and t["same_instance"]
    assert t["serialized_roles"]["status"] == "confirmed" and t["serialized_roles"]["evidence"]["overlap"] == 0.0
    con = open_store(None)
    load_reports(con, [TIMELINES / "ring_pm.ncu-rep"])
    con.execute(timeline_schema_sql())
    metrics = con.execute("SELECT metric, count(*) FROM pm_samples GROUP BY metric").fetchall()
    stalls = [(m, n) for m, n in metrics if "issue_stalled" in m]
    assert stalls and all(n > 10 for _, n in stalls), metrics
    (lid,) = con.execute("SELECT max(launch_id) FROM launches").fetchone()
    assert evaluate(con, [lid])[lid].findings  # every hypothesis answers with the timeline tables present


# ---- serialized-roles with and without a timeline ---------------------------------------


def test_kernel_instance_spells_trace_and_demangler_alike():
    assert kernel_instance("ring_kernel<4, true, false>") == "ring_kernel<4,1,0>"
    assert kernel_instance("void ring_kernel<(int)4, (bool)1, (bool)0>(const float *, float *, wsperf_trace_t)") \
        .startswith("voidring_kernel<4,1,0>(")
    assert kernel_instance("k<(unsigned int)128, 3u>") == "k<128,3>"


def test_serialized_roles_cites_the_overlap_once_a_timeline_joins():
    """ring_pcsamp.ncu-rep: the 1-stage ring under PC sampling. Its samples alone cannot
    decide: the roles are found (the LDG/STS producer waits for free slots 80% of its
    samples, the consumers for data 17%), but the report has no DRAM throughput, so
    no_data. Before a timeline: exactly those evidence keys, no stand-in left behind. With
    the ring1 trace joined to the same launch, the overlap (0.000, pipeline-bubbles' figure)
    is evidence and decides: confirmed."""
    con = open_store(None)
    (r,) = load_reports(con, [TIMELINES / "ring_pcsamp.ncu-rep"])
    (lid,) = [x for (x,) in con.execute("SELECT launch_id FROM launches").fetchall()]
    build_roles(con, [lid])
    before = {f.id: f for f in evaluate(con, [lid])[lid].findings}
    sr = before["serialized-roles"]
    assert sr.status is Status.no_data and "DRAM throughput unknown" in sr.summary, sr.summary
    assert sr.evidence["warp_specialized"] is True and sr.evidence["producer_wait_share"] > 0.7
    assert list(sr.evidence) == ["warp_specialized", "consumer_wait_share", "producer_wait_share",
                                 "loop_load_wait_share", "dram_pct", "mbarrier_inits"]
    assert before["pipeline-bubbles"].status is Status.no_data
    tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert not {"timeline_overlap", "timeline_events"} & tables  # the stand-in is gone

    assert match_launch(con, "ring_kernel<1, true, false>", [r.report_id]) == lid
    load_timeline(con, TIMELINES / "ring1.wsperf-trace", launch_id=lid)
    after = {f.id: f for f in evaluate(con, [lid])[lid].findings}
    sr, bubbles = after["serialized-roles"], after["pipeline-bubbles"]
    assert sr.status is Status.confirmed, sr.summary
    assert (sr.evidence["overlap"], sr.evidence["copy_intervals"]) == (0.0, 704)
    assert (sr.evidence["overlap"], sr.evidence["copy_intervals"]) == \
        (bubbles.evidence["overlap"], bubbles.evidence["copy_intervals"])
    assert "taking turns" in sr.summary and "PC samples alone: no_data" in sr.summary, sr.summary
    # the PC-sample figures stay beside the overlap
    assert {k: sr.evidence[k] for k in before["serialized-roles"].evidence} == before["serialized-roles"].evidence


def test_high_overlap_rejects_where_pc_samples_cannot_say():
    """ring4 joined to ring_pm.ncu-rep's 4-stage launch (PmSampling only: no PC samples, so
    serialized-roles alone is no_data): 97% of the copies run during compute."""
    con = open_store(None)
    (t,) = load_timelines(con, [TIMELINES / "ring4.wsperf-trace"], [TIMELINES / "ring_pm.ncu-rep"])
    s = summarize_timeline(con, t.timeline_id)
    assert s.from_report and s.same_instance and "ring_kernel<(int)4, (bool)1, (bool)0>" in s.launch_kernel
    assert s.serialized.status is Status.rejected
    assert s.serialized.evidence["overlap"] == s.bubbles.evidence["overlap"] > 0.9  # measured 0.969
    assert "PC samples alone: no_data" in s.serialized.summary and s.serialized.evidence["warp_specialized"] is None


def test_a_join_to_another_template_instance_is_said():
    """ring_pcsamp.ncu-rep runs only ring_kernel<1, ...>: the 4-stage trace falls back to the
    function's launch, and the head line names the launch it joined."""
    con = open_store(None)
    (t,) = load_timelines(con, [TIMELINES / "ring4.wsperf-trace"], [TIMELINES / "ring_pcsamp.ncu-rep"])
    s = summarize_timeline(con, t.timeline_id)
    assert s.from_report and not s.same_instance
    assert f"(another instance: {s.launch_kernel})" in _head(s) and "ring_kernel<(int)1," in s.launch_kernel


# ---- truncated timelines: warps that filled their slots ---------------------------------
# A warp that fills its slots_per_warp records before its kernel end loses every later event
# (wsperf_trace.cuh writes nothing past its slice), so nothing after its last record is
# known. The same ring kernel traced with too few slots (`ring trace DIR SLOTS`,
# fixtures/collect_timeline.sh step trace_cut): at 130 the producer's 130 records fit
# exactly (its last is its kernel end) and each consumer, which writes 132, loses its
# epilogue end and kernel end; at 64 every warp stops about halfway through its 32 tiles.
CUT = {"epilogue_slots130": 130, "ring4_slots64": 64}


def _cut_trace(name: str):
    f = TIMELINES / f"{name}.wsperf-trace"
    if not f.is_file():
        pytest.skip(f"{f.name} is not collected yet: on the H200, OUT=dir ONLY='build provenance trace_cut' "
                    "bash fixtures/collect_timeline.sh, then unpack it into fixtures/timeline/")
    return f


def _load(*files, reports=()):
    con = open_store(None)
    (t,) = load_timelines(con, files, reports)
    return con, summarize_timeline(con, t.timeline_id)


@pytest.mark.parametrize("name", ["ring1", "ring4", "epilogue", "ring4_torch"])
def test_complete_traces_have_no_cut_warps(traces, name):
    """Every warp of the 136-slot traces ended inside its slots (130 and 132 records): no
    warp is cut, every share is a figure, and both verdicts are judged."""
    con, s = traces[name] if name in traces else _load(TIMELINES / f"{name}.wsperf-trace")
    assert con.execute("SELECT count(*) FROM timeline_cut_warps").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM timeline_truncation").fetchone() == (0,)
    assert s.full_warps == 0 and s.truncation is None
    assert all(r.share is not None and r.cut_warps == 0 for r in s.roles)
    assert s.bubbles.status is not Status.no_data and s.bubbles.evidence["cut_warps"] == 0
    assert s.serialized.evidence["cut_warps"] == 0 and s.serialized.evidence["overlap"] is not None


def test_complete_trace_keeps_its_figures(traces):
    """ring4's figures as they were before truncation was judged (`wsperf timeline
    ring4.wsperf-trace -f json`): the cut rules change nothing where nothing was cut."""
    con, s = traces["ring4"]
    assert [(r.role, r.event, r.intervals, round(r.share, 4), r.median_ns) for r in s.roles] == [
        ("consumer", "compute", 2816, 0.9319, 2976.0), ("consumer", "epilogue", 88, 0.0007, 64.0),
        ("consumer", "wait", 2816, 0.0322, 96.0), ("producer", "copy", 704, 0.1434, 416.0),
        ("producer", "wait", 704, 0.7653, 2560.0)]
    assert s.bubbles.evidence == {"bubble": "steady-state", "prologue_share": 0.0071, "steady_idle_share": 0.0595,
                                  "epilogue_share": 0.0019, "overlap": 0.9688, "copy_intervals": 704, "ctas": 22,
                                  "stages": 4, "cut_warps": 0, "slots_per_warp": None, "slots_needed": None}
    assert s.bubbles.status is Status.rejected and s.serialized.status is Status.rejected
    occupancy = con.execute("SELECT count(*) FROM timeline_intervals WHERE event = 'copy' "
                            "AND cta IN (SELECT DISTINCT cta FROM timeline_events ORDER BY cta LIMIT 4)").fetchone()[0]
    assert len(s.occupancy) == 2 * occupancy  # a fill and a free per tile of each lane CTA: none left out


def test_exact_fit_warps_are_not_cut_and_cut_consumers_give_no_shares():
    """epilogue_slots130: the 22 producers filled their 130 slots exactly, the last one their
    kernel end: nothing lost, their shares stand. The 88 consumers lost their epilogue end
    and kernel end: the consumer shares, both verdicts' timeline figures and the occupancy
    past each CTA's cut are no_data, with the reason and the slots that would have sufficed."""
    con, s = _load(_cut_trace("epilogue_slots130"))
    rows = con.execute("SELECT role, count(*), min(records), max(records) FROM timeline_cut_warps GROUP BY role").fetchall()
    assert rows == [("consumer", SAMPLED * 4, 130, 130)]
    last = con.execute("""SELECT DISTINCT arg_max(event || ' ' || phase, t_ns) FROM timeline_events
                          WHERE role = 'consumer' GROUP BY cta, warp""").fetchall()
    assert last == [("epilogue begin",)]  # the cut is where the design puts it
    assert s.full_warps == SAMPLED * 4
    by_role = {r.role: r for r in s.roles if r.event == "wait"}
    assert by_role["consumer"].share is None and by_role["consumer"].cut_warps == SAMPLED * 4
    assert by_role["producer"].share is not None and by_role["producer"].cut_warps == 0
    t = s.truncation
    assert (t.cut_warps, t.warps, t.cut_ctas, t.ctas, t.slots_per_warp) == (SAMPLED * 4, SAMPLED * WARPS, SAMPLED,
                                                                              SAMPLED, 130)
    # a consumer writes 132 records: the smallest power of two above 130 suffices
    assert (t.slots_needed, t.lower_bound) == (256, True) and len(t.cuts) == SAMPLED * 4
    assert f"{SAMPLED * 4} of {SAMPLED * WARPS} traced warps (consumer warps 1, 2, 3, 4, in {SAMPLED} of {SAMPLED} CTAs) " \
           "filled their 130 slots" in t.reason and "at least 256 slots per warp" in t.reason
    b = s.bubbles
    assert b.status is Status.no_data and t.reason in b.summary, b.summary
    assert {k: b.evidence[k] for k in ("prologue_share", "steady_idle_share", "epilogue_share", "bubble", "overlap")} \
        == dict.fromkeys(("prologue_share", "steady_idle_share", "epilogue_share", "bubble", "overlap"))
    assert (b.evidence["cut_warps"], b.evidence["slots_per_warp"], b.evidence["slots_needed"]) == (SAMPLED * 4, 130, 256)
    assert s.serialized.status is Status.no_data and t.reason in s.serialized.summary
    assert s.serialized.evidence["overlap"] is None
    # Judged on the recorded events, the drain looked absent: the last record of each CTA is
    # its consumers' epilogue begin, while the complete trace's epilogue is 45% of the CTA.
    naive, = con.execute("""WITH c AS (SELECT cta, min(t_ns) AS t0, max(t_ns) AS t1 FROM timeline_events GROUP BY cta),
                               k AS (SELECT cta, max(end_ns) AS last FROM timeline_intervals WHERE event = 'compute'
                                     GROUP BY cta)
                           SELECT avg((t1 - last) / (t1 - t0)) FROM c JOIN k USING (cta)""").fetchone()
    assert naive < 0.1 < 0.3 < _bubbles(_epilogue_store(), "epilogue")["epilogue_share"]
    cut_at = dict(con.execute("SELECT cta, min(last_ns) FROM timeline_cut_warps GROUP BY cta").fetchall())
    assert s.occupancy and all(o.t_ns <= cut_at[o.cta] for o in s.occupancy)


def _epilogue_store():
    con = open_store(None)
    t = load_timeline(con, TIMELINES / "epilogue.wsperf-trace")
    return {"epilogue": (con, summarize_timeline(con, t.timeline_id))}


def test_every_warp_cut_leaves_every_share_no_data():
    """ring4_slots64: all 110 warps stopped recording about halfway. No role has a share;
    without a launch duration the estimate is a lower bound ("at least"); joined to the
    Nsight Compute launch of ring4, its duration carries the rates to the kernel's end, and
    the count suffices (a ring4 warp writes 130-132 records)."""
    f = _cut_trace("ring4_slots64")
    con, s = _load(f)
    assert s.full_warps == SAMPLED * WARPS and all(r.share is None for r in s.roles)
    t = s.truncation
    assert (t.cut_warps, t.slots_per_warp, t.lower_bound) == (SAMPLED * WARPS, 64, True)
    assert t.slots_needed >= 128 and t.slots_needed & (t.slots_needed - 1) == 0
    assert "consumer warps 1, 2, 3, 4; producer warp 0" in t.reason and f"at least {t.slots_needed} " in t.reason
    assert s.bubbles.status is Status.no_data and s.serialized.status is Status.no_data
    con, joined = _load(f, reports=[TIMELINES / "ring_pm.ncu-rep"])
    tj = joined.truncation
    assert joined.from_report and not tj.lower_bound and tj.slots_needed >= 256, tj.reason
    assert f"about {tj.slots_needed} slots per warp" in tj.reason and "launch's duration" in tj.reason


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_outputs_carry_the_cut(fmt):
    f = _cut_trace("epilogue_slots130")
    p = wsperf("timeline", f, "-f", fmt)
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    if fmt == "json":
        (t,) = json.loads(p.stdout)["timelines"]
        assert t["truncation"]["slots_needed"] == 256 and len(t["truncation"]["cuts"]) == SAMPLED * 4
        assert {r["role"]: r["share"] is None for r in t["roles"]} == {"consumer": True, "producer": False}
        assert t["pipeline_bubbles"]["status"] == "no_data"
        assert t["truncation"]["reason"] in t["pipeline_bubbles"]["summary"]
    else:
        assert "no_data" in out and "filled their 130 slots" in out and "at least 256 slots per warp" in out
        assert "pipeline-bubbles: no_data" in out.replace("**", "")


@pytest.mark.parametrize("name, text, code", [
    ("deep", '{"traceEvents":' + "[" * 5000 + "]" * 5000 + "}", 2),
    ("inf_ts", '{"traceEvents":[{"name":"copy","ph":"X","ts":1e400,"dur":2,"pid":0,"tid":0}]}', 2),
    ("huge_ts", '{"traceEvents":[{"name":"copy","ph":"X","ts":1e300,"dur":1e300,"pid":0,"tid":0}]}', 2),
    ("span_past_int64", '{"traceEvents":[{"name":"copy","ph":"X","ts":-9.3e18,"dur":1.8e19,"pid":0,"tid":0}]}', 2),
    ("nested_ts", '{"traceEvents":[{"name":"copy","ph":"X","ts":{"a":1},"dur":2,"pid":0,"tid":0}]}', 2),
    ("name_not_text", '{"traceEvents":[{"name":5,"ph":"X","ts":1,"dur":2,"pid":0,"tid":0}],"otherData":{"kernel":5}}', 0),
    ("lone_surrogate", '{"traceEvents":[{"name":"\\ud800","ph":"X","ts":1,"dur":2,"pid":0,"tid":0}]}', 0),
    ("cta_1e30", '{"traceEvents":[{"name":"copy","ph":"X","ts":1,"dur":2,"pid":"CTA 99999999999999999999",'
                 '"tid":0,"args":{"cta":1e30,"warp":[0],"sm":true}}]}', 0),
])
def test_a_hostile_chrome_trace_is_one_error_line_or_read(tmp_path, name, text, code):
    """Chrome-trace JSON made hostile (deep nesting, times past int64 or infinite, names that
    are numbers, lone surrogates, CTAs of 1e30): one `Error:` line and exit 2, or read with
    what cannot be stored left out; never a traceback."""
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    p = wsperf("timeline", path)
    assert "Traceback" not in p.stderr and p.returncode == code, (p.returncode, p.stderr[-400:])
    if code:
        assert_one_error_line(p, code)


@pytest.mark.parametrize("key, value, needle", [
    ("ctas", "1e400", "ctas is inf"), ("ctas", str(2 ** 64 - 1), "not a count"), ("ctas", "-5", "ctas is -5"),
    ("slots_per_warp", "-1", "slots_per_warp is -1"), ("roles", '["producer"]', "roles is not a map"),
    ("events", "[1, 2]", "events is not a map"),
])
def test_a_hostile_wsperf_trace_header_is_one_error_line(tmp_path, key, value, needle):
    """The real ring1 trace with one header field made hostile (a count of 1e400, 2^64-1 or
    below zero, roles as a list): one `Error:` line naming the field, exit 2."""
    data = (ROOT / "fixtures" / "timeline" / "ring1.wsperf-trace").read_bytes()
    nl = data.index(b"\n")
    head = json.loads(data[:nl])
    text = json.dumps({**head, key: "@@"}).replace('"@@"', value)
    path = tmp_path / "hostile.wsperf-trace"
    path.write_bytes(text.encode() + data[nl:])
    assert_one_error_line(wsperf("timeline", path), 2, needle)


def test_a_gzip_trace_that_expands_past_the_cap_is_refused(tmp_path, monkeypatch):
    """A small .json.gz can expand to any size: it is read out no further than the trace cap
    (1 GiB; 1 MiB here), then refused with one message, not decompressed whole into memory."""
    import gzip

    from wsperf.collectors import timeline as tl
    from wsperf.collectors.errors import InputError

    monkeypatch.setattr(tl, "MAX_TRACE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb") as f:
        f.write(b'{"traceEvents":[' + b" " * (4 << 20) + b"]}")
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(InputError, match="expands past 1,048,576 bytes"):
        tl._read(bomb)
    ok = tmp_path / "ok.json.gz"
    with gzip.open(ok, "wb") as f:
        f.write(b'{"traceEvents":[]}')
    assert tl._read(ok) == b'{"traceEvents":[]}'
