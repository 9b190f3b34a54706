"""The hypothesis catalogue: every SQL file is documented and every hypothesis is proven
on both sides by real fixture reports whose kernel design decides the verdict
(tests/cases/<id>.yml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wsperf.analyses import hypotheses
from wsperf.analyses.analyze import launch_ids_of_reports, prepare
from wsperf.analyses.hypotheses import REQUIRED_KEYS, Status, catalogue, evaluate, parse_header
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store, transaction
from wsperf.collectors.timeline import load_timeline
from wsperf.queries import query_names, read_query

CASES = Path(__file__).parent / "cases"
# Role timelines (fixtures/collect_timeline.sh); a case with `timeline:` runs on its own store.
TIMELINES = Path(__file__).resolve().parents[1] / "fixtures" / "timeline"
HYPOTHESES = {h.id: h for h in catalogue()}


def _cases():
    for f in sorted(CASES.glob("*.yml")):
        for i, c in enumerate(yaml.safe_load(f.read_text())["cases"]):
            yield pytest.param(f.stem, c, id=f"{f.stem}-{c['report']}-{c.get('kernel', '')}-{i}")


def test_catalogue_has_the_contract_ids():
    assert set(HYPOTHESES) == {"missing-specialized-instructions", "serialized-roles", "producer-bound",
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
