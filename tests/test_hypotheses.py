"""The hypothesis catalogue: every SQL file is documented and every hypothesis is proven
on both sides by real fixture reports whose kernel design decides the verdict
(tests/cases/<id>.yml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from wsperf.analyses import hypotheses
from wsperf.analyses.analyze import analyze, launch_ids_of_reports, prepare
from wsperf.analyses.hypotheses import REQUIRED_KEYS, Status, catalogue, evaluate, parse_header
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import in_transaction, open_store, transaction
from wsperf.collectors.timeline import load_timeline
from wsperf.queries import query_names, read_query

from support import REPORTS, ROOT, kernels
from support import wsperf as run_cli

CASES = Path(__file__).parent / "cases"
# Role timelines (fixtures/collect_timeline.sh); a case with `timeline:` runs on its own store.
TIMELINES = Path(__file__).resolve().parents[1] / "fixtures" / "timeline"
CUBINS = Path(__file__).resolve().parents[1] / "fixtures" / "cubins"
HYPOTHESES = {h.id: h for h in catalogue()}


def _cases():
    for f in sorted(CASES.glob("*.yml")):
        for i, c in enumerate(yaml.safe_load(f.read_text())["cases"]):
            yield pytest.param(f.stem, c, id=f"{f.stem}-{c['report']}-{c.get('kernel', '')}-{i}")


def test_catalogue_has_the_contract_ids():
    assert set(HYPOTHESES) == {"missing-specialized-instructions", "serialized-roles", "producer-bound", "partition-bound",
                               "too-few-active-ctas", "register-spills", "pipeline-bubbles"}


@pytest.mark.parametrize("hid", sorted(HYPOTHESES))
def test_header_documents_the_query(hid):
    h = HYPOTHESES[hid]
    doc = parse_header(hid, read_query(hid))
    assert all(doc[k] not in (None, "") for k in REQUIRED_KEYS if k != "threshold")
    assert hid in query_names()  # id matches the file name
    assert h.measured, "thresholds must cite the fixture values they were chosen from"
    # Every threshold is a $param of the query and every $param is a threshold: no
    # literal thresholds hiding in the SQL.
    assert set(h.thresholds) == h.params, (set(h.thresholds), h.params)
    assert len(h.remedy) > 40


@pytest.mark.parametrize("hid", sorted(HYPOTHESES))
def test_case_file_proves_both_sides(hid):
    f = CASES / f"{hid}.yml"
    assert f.exists(), f"{f} is missing"
    statuses = {c["status"] for c in yaml.safe_load(f.read_text())["cases"]}
    assert {"confirmed", "rejected"} <= statuses


@pytest.fixture(scope="module")
def analyzed(store):
    con, _ = store
    prepare(con)
    return con


@pytest.fixture(scope="module")
def timelines():
    """A store holding every fixture timeline (each with a launch of its own)."""
    con = open_store(None)
    traces = sorted(TIMELINES.glob("*.wsperf-trace"))
    assert traces, f"no timeline fixtures in {TIMELINES} (fixtures/collect_timeline.sh, committed)"
    for p in traces:
        load_timeline(con, p)
    return con


@pytest.mark.parametrize("hid, case", list(_cases()))
def test_case(request, hid, case):
    con = request.getfixturevalue("timelines" if "timeline" in case else "analyzed")
    q = """SELECT l.launch_id FROM launches l JOIN reports r USING (report_id)
           WHERE regexp_extract(r.path, '([^/]+)\\.(ncu-rep|wsperf-trace)$', 1) = ?
             AND regexp_matches(l.kernel_function, ?)"""
    ids = [r[0] for r in con.execute(q, [case["report"], case.get("kernel", ".")]).fetchall()]
    assert ids, f"no launch for {case}"
    verdicts = evaluate(con, ids, expect=case.get("expect", []))
    for lid in ids:
        (f,) = [f for f in verdicts[lid].findings if f.id == hid]
        assert f.status is Status(case["status"]), (case["why"], f.summary, f.evidence)
        assert f.summary
        for k, v in case.get("evidence", {}).items():  # the figures the verdict rests on
            assert f.evidence[k] == v, (k, f.evidence)
        if f.status is Status.no_data:
            assert "collect" in f.summary  # says which section to collect


def test_healthy_kernels_have_no_confirmed_finding(analyzed):
    con = analyzed
    for report in ("ws_stream_healthy", "gemm_wgmma_tma", "torch_mm"):
        (lid,) = [r[0] for r in con.execute(
            "SELECT launch_id FROM launches JOIN reports USING (report_id) WHERE path LIKE ?",
            [f"%/{report}.ncu-rep"]).fetchall()]
        confirmed = evaluate(con, [lid], expect=["tma"])[lid].confirmed()
        assert confirmed == [], (report, confirmed)


def test_cublas_kernel_is_warp_specialized(analyzed):
    (ws,) = analyzed.execute(
        """SELECT w.warp_specialized FROM warp_specialization w JOIN launches USING (launch_id)
           JOIN reports r USING (report_id) WHERE r.path LIKE '%/torch_mm.ncu-rep'""").fetchone()
    assert ws is True


def test_a_hand_copy_producer_is_found_past_the_compilers_constant_moves():
    """ring_pcsamp (fixtures/timeline, the 1-stage ring under PC sampling): one producer warp
    copies tiles with LDG.128 + STS.128 and arrives on the full barrier; its copy block also
    holds `HFMA2.MMA Rd, -RZ, RZ, ...`, the compiler's constant move, which once counted as
    math and hid the producer ('not warp-specialized'). By its design the producer waits
    for free slots (one stage) and the consumers compute: producer-bound is rejected."""
    con = open_store(None)
    load_reports(con, [TIMELINES / "ring_pcsamp.ncu-rep"])
    prepare(con)
    roles = dict(con.execute("SELECT role, count(*) FROM role_pcs GROUP BY role").fetchall())
    copies = con.execute("SELECT DISTINCT r.role FROM role_pcs r JOIN sass s USING (launch_id, pc) "
                         "WHERE s.opcode IN ('LDG', 'STS')").fetchall()
    assert copies == [("producer",)] and roles.get("producer", 0) > 100, (copies, roles)
    ((ws,),) = con.execute("SELECT warp_specialized FROM warp_specialization").fetchall()
    assert ws is True
    (lid,) = [x for (x,) in con.execute("SELECT launch_id FROM launches").fetchall()]
    pb = next(f for f in evaluate(con, [lid]).get(lid).findings if f.id == "producer-bound")
    assert pb.status is Status.rejected and pb.evidence["producer_wait_share"] > 0.7, (pb.summary, pb.evidence)


def _raw_findings(con, ids: list[int]) -> dict[str, list]:
    """Every hypothesis's own SQL over `ids`, before evaluate's rules: {id: [(launch, Finding)]}."""
    # the tables evaluate makes first (not left behind by an earlier test: the order varies
    # with how xdist spreads the tests)
    hypotheses.inputs(con, ids, hypotheses.matrix_ffma(con, ids))
    present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    return {h.id: hypotheses._findings(con, h, {k: v for k, v in {**h.thresholds, "expect": []}.items()
                                                 if k in h.params}, present)
            for h in catalogue() if set(h.requires) <= present}


def test_every_finding_says_what_it_rests_on(analyzed):
    # Every verdict of every hypothesis's own SQL, on every fixture launch, has a summary:
    # too-few-active-ctas once printed NULL (shown as "None") where a report had no
    # Occupancy section (graph_workload: ncu has no occupancy figures for a graph).
    ids = [r[0] for r in analyzed.execute("SELECT launch_id FROM launches").fetchall()]
    empty = [(hid, lid, f.status.value) for hid, rows in _raw_findings(analyzed, ids).items()
             for lid, f in rows if not f.summary]
    assert not empty


def test_a_range_or_graph_result_gets_no_verdict_about_one_kernel(analyzed):
    """range_workload and graph_workload (fixtures/collect_workloads.sh): four launches of
    two kernels profiled as one result (ncu --replay-mode range; --graph-profiling graph).
    Read as one kernel, the hypotheses' SQL confirms serialized-roles and too-few-active-
    ctas on them; evaluate gives every hypothesis no_data, saying how to profile the
    kernels one at a time."""
    rows = analyzed.execute(
        r"""SELECT launch_id, workload_type FROM launches JOIN reports USING (report_id)
           WHERE regexp_matches(path, '/(range|graph)_workload\.ncu-rep$') ORDER BY launch_id""").fetchall()
    assert sorted(w for _, w in rows) == ["graph", "graph", "range"]
    ids = [lid for lid, _ in rows]
    raw = _raw_findings(analyzed, ids)
    assert {lid for lid, f in raw["serialized-roles"] if f.status is Status.confirmed} == set(ids)
    verdicts = evaluate(analyzed, ids)
    for lid, workload in rows:
        findings = verdicts[lid].findings
        assert {f.id for f in findings} == set(raw) | {"pipeline-bubbles"}
        for f in findings:
            assert f.status is Status.no_data and f.evidence == {"workload": workload}, (f.id, f.summary)
            assert f"a {workload} result" in f.summary and "one at a time" in f.summary
    # A kernel beside them in the same call keeps its verdicts.
    (ws,) = [r[0] for r in analyzed.execute(
        "SELECT launch_id FROM launches JOIN reports USING (report_id) WHERE path LIKE '%/gemm_ffma.ncu-rep'").fetchall()]
    assert [f.id for f in evaluate(analyzed, [ws, *ids])[ws].confirmed()] == ["missing-specialized-instructions"]


def test_the_cli_says_what_a_graph_result_is():
    (first, second) = kernels(REPORTS / "graph_workload.ncu-rep")
    for k in (first, second):
        assert k["workload"] == "graph" and k["outcome"] == "no_data" and k["roles"] == []
        assert k["warp_specialized"] is None and "--graph-profiling node" in k["headline"]
    text = run_cli("analyze", REPORTS / "graph_workload.ncu-rep").stdout
    assert "graph result: the work of several kernels" in text and "grid / block" not in text
    assert "warp-specialized  n/a (several kernels)" in text
    # the reason once per result, not once per hypothesis; no roles to look at next
    assert text.count("adds up the work of several kernels") == 1 and "look next" not in text


def _table(verdicts) -> dict:
    return {lid: [(f.id, f.status, f.summary, f.evidence) for f in v.findings] for lid, v in verdicts.items()}


def test_the_hypotheses_on_two_connections_equal_them_on_one(analyzed, monkeypatch):
    # evaluate spreads the queries over `con` and a cursor of it (hypotheses.WORKERS);
    # every launch of every fixture report gets the same findings, in catalogue order.
    ids = [r[0] for r in analyzed.execute("SELECT launch_id FROM launches ORDER BY launch_id").fetchall()]
    spread = _table(evaluate(analyzed, ids, expect=["tma"]))
    monkeypatch.setattr(hypotheses, "WORKERS", 1)
    assert spread == _table(evaluate(analyzed, ids, expect=["tma"]))
    assert all([f[0] for f in fs] == [h.id for h in catalogue()] for fs in spread.values())


def test_inside_an_open_transaction_the_hypotheses_see_its_rows():
    # A cursor is another connection: it cannot see rows a transaction open on `con` has
    # not committed, so there every hypothesis runs on `con` itself.
    report = TIMELINES / "ring_pcsamp.ncu-rep"
    con = open_store(None)
    with transaction(con, "a report and its verdicts"):
        (res,) = load_reports(con, [report])
        prepare(con)
        ids = launch_ids_of_reports(con, [res.report_id])
        inside = _table(evaluate(con, ids))
    assert _table(evaluate(con, ids)) == inside
    assert {f[1] for fs in inside.values() for f in fs} & {Status.confirmed, Status.rejected}


def test_analyze_spread_over_two_connections_equals_analyze_on_one(analyzed):
    # analyze runs the role tables beside the summaries, then the verdicts beside the roles,
    # on `con` and a cursor of it; inside an open transaction all of it runs on `con`, in
    # order (collectors/store.run_spread). Every launch of every fixture report: the same.
    assert not in_transaction(analyzed)
    spread = [repr(a) for a in analyze(analyzed, expect=["tma"])]
    with transaction(analyzed, "an analysis on one connection"):
        assert in_transaction(analyzed)
        serial = [repr(a) for a in analyze(analyzed, expect=["tma"])]
    assert len(spread) == analyzed.execute("SELECT count(*) FROM launches").fetchone()[0] > 20
    assert spread == serial


def test_a_compilers_warp_specialization_is_recovered_and_so_is_its_absence(analyzed):
    # fixtures/src/triton_ws_matmul.py: one Triton loop, compiled with and without
    # warp_specialize=True (Triton 3.6). Roles come from the SASS Triton generated, with no
    # knowledge of Triton: a producer partition (TMA) and consumer warpgroups (wgmma), or
    # one software-pipelined code path.
    rows = dict(analyzed.execute(
        """SELECT regexp_extract(r.path, '([^/]+)\\.ncu-rep$', 1), w.warp_specialized FROM warp_specialization w
           JOIN launches USING (launch_id) JOIN reports r USING (report_id)
           WHERE r.path SIMILAR TO '.*/triton_(ws|plain)_matmul.*'""").fetchall())
    assert rows == {"triton_ws_matmul": True, "triton_ws_matmul_s2": True, "triton_ws_matmul_s4": True,
                    "triton_plain_matmul": False}
    roles = {r for (r,) in analyzed.execute(
        """SELECT DISTINCT role FROM roles JOIN launches USING (launch_id) JOIN reports r USING (report_id)
           WHERE r.path LIKE '%/triton_ws_matmul.ncu-rep'""").fetchall()}
    assert {"producer", "consumer"} <= roles
    for name, want in (("triton_ws_matmul", "true"), ("triton_plain_matmul", "false")):
        p = run_cli("inspect", CUBINS / f"{name}.sm_90a.cubin", "--format", "json")
        (k,) = json.loads(p.stdout)["kernels"]
        assert (k["warp_specialized"], k["warp_specialized_basis"]) == (want == "true", "static"), name


def test_the_consumers_wait_less_for_data_as_the_ring_deepens(analyzed):
    # The same Triton kernel with 2, 3 (Triton's default) and 4 stages: 332, 262, 227 us
    # (fixtures/reports/triton_ws_matmul.sweep.txt). serialized-roles' evidence follows the
    # design variable: the consumers' mbarrier-wait share falls with every stage added.
    shares = []
    for report in ("triton_ws_matmul_s2", "triton_ws_matmul", "triton_ws_matmul_s4"):
        (lid,) = [r[0] for r in analyzed.execute(
            "SELECT launch_id FROM launches JOIN reports USING (report_id) WHERE path LIKE ?",
            [f"%/{report}.ncu-rep"]).fetchall()]
        (f,) = [f for f in evaluate(analyzed, [lid])[lid].findings if f.id == "serialized-roles"]
        shares.append(f.evidence["consumer_wait_share"])
    assert shares[0] > shares[1] > shares[2] > 0.10, shares


def test_a_deeper_ring_is_not_called_serialized_where_depth_no_longer_helps(analyzed):
    # fixtures/src/gemm.cu's TMA GEMM at GEMM_STAGES 2, 4 and 6 (fixtures/collect_gemm_stages.sh):
    # 331, 222 and 218 us (fixtures/reports/gemm_stages.times.txt, 5 launches each). The
    # consumers' wait share falls with depth; only the 2-stage ring is serialized: two more
    # stages past four gain 2%.
    times = {int(line.split()[0].split("=")[1]): sorted(map(int, line.split()[1:]))
             for line in (REPORTS / "gemm_stages.times.txt").read_text().splitlines()}
    assert times[2][0] > 1.4 * times[4][-1] and times[4][2] > times[6][2] > 0.95 * times[4][2]
    found = {}
    for report in ("gemm_wgmma_tma_s2", "gemm_wgmma_tma", "gemm_wgmma_tma_s6"):
        (lid,) = [r[0] for r in analyzed.execute(
            "SELECT launch_id FROM launches JOIN reports USING (report_id) WHERE path LIKE ?",
            [f"%/{report}.ncu-rep"]).fetchall()]
        (f,) = [f for f in evaluate(analyzed, [lid])[lid].findings if f.id == "serialized-roles"]
        found[report] = (f.status.value, f.evidence["consumer_wait_share"])
    (s2, w2), (s4, w4), (s6, w6) = found.values()
    assert w2 > 0.4 > w4 > w6 > 0.10, found
    assert (s2, s4, s6) == ("confirmed", "rejected", "rejected"), found


def _msi(con, report: str, **thresholds):
    (lid,) = [r[0] for r in con.execute(
        "SELECT launch_id FROM launches JOIN reports USING (report_id) WHERE path LIKE ?", [f"%/{report}"]).fetchall()]
    (f,) = [f for f in evaluate(con, [lid], thresholds={"missing-specialized-instructions": thresholds})[lid].findings
            if f.id == "missing-specialized-instructions"]
    return f


def test_matrix_work_on_ffma_is_read_from_what_the_ffma_multiply(analyzed):
    """fixtures/src/ffma_shapes.cu on the H200. An outer-product GEMM reading A and B
    straight from global memory has no shared-memory reads at all (the instruction-mix rule
    rejected it); every FFMA there multiplies two loaded values, each reused across four
    accumulators: confirmed, as an assumption. A sum of squares of rows staged by bulk
    copies reads shared memory 128 times per store, and with min_ffma_share 0.2 (its FFMA
    is 24%) the instruction mix alone confirmed it as matrix work; no FFMA of it multiplies
    values reused across accumulators: rejected. gemm_ffma (register-tiled from shared
    memory) stays confirmed."""
    outer = _msi(analyzed, "ffma_outer.ncu-rep")
    assert outer.status is Status.confirmed and outer.evidence["basis"] == "assumption"
    assert outer.evidence["smem_reads_per_store"] == 0 and outer.evidence["matrix_ffma_share"] == 1.0
    assert "100% of it multiplies two loaded values reused across accumulators" in outer.summary
    rowsq = _msi(analyzed, "ffma_rowsq.ncu-rep", min_ffma_share=0.2)
    assert rowsq.evidence["ffma_share"] >= 0.2 and rowsq.evidence["smem_reads_per_store"] >= 16  # the old rule's shape
    assert rowsq.status is Status.rejected and rowsq.evidence["matrix_ffma_share"] == 0.0, rowsq.summary
    gemm = _msi(analyzed, "gemm_ffma.ncu-rep")
    assert gemm.status is Status.confirmed and gemm.evidence["matrix_ffma_share"] == 1.0


def test_the_ffma_shape_of_generated_code():
    """The CuTe DSL ring the H200 ran (fixtures/evidence/cute_ring): its row sums are
    `x * (x * 0 + 1) + acc`, FFMA with RZ or a value computed from the load; none of it is
    matrix work. The same walk over gemm_ffma's listing finds every FFMA matrix work."""
    from wsperf.analyses.ffma import ffma_shape
    from wsperf.collectors import cubin
    from wsperf.collectors.disasm import find_binary

    (module,) = cubin.find_cubins(next((ROOT / "fixtures" / "evidence" / "cute_ring" / "generated" / "cute")
                                       .glob("*.cubin")).read_bytes())
    listing = cubin.Disassembly(module, module.code, find_binary("nvdisasm")).listing()
    (insns,) = [v for k, v in listing.items() if "ring_kernel" in k]
    rows = [(text.split()[1 if text.startswith("@") else 0].split(".")[0], text, 1) for _, text in sorted(insns.items())]
    total, matrix = ffma_shape(rows)
    assert total == 64 and matrix == 0
