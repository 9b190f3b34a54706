"""CuTe DSL's IKET traces (`run-iket`, nvidia-cutlass-dsl 4.8.1) through the Perfetto reader
(collectors/perfetto_trace.py), on a real one: fixtures/timeline/iket_ring.pftrace, the
warp-specialized TMA ring of fixtures/src/timeline/iket_ring.py traced on the H200 by
fixtures/collect_iket.sh (provenance in fixtures/timeline/provenance.json). Its design is the
truth: grid (2, 2, 1) of 6 warps, warp 0 the producer (`producer_acquire`, `tma_load` per
k-step), warps 1-4 the consumers (`wait_full`, `compute`), warp 5 the epilogue
(`epilogue_wait`, `store`, the mark `stored`), 64 k-steps through 4 stages, compute-bound.
run-iket's decoded JSON of the same capture (iket_ring.trace.json.gz, written by its own
decoder beside the .pftrace) is the second truth: grid size, CTA coordinates, SMs and every
range's ns."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from support import ROOT, assert_one_error_line, wsperf
from wsperf.analyses.hypotheses import Status
from wsperf.analyses.timeline import summarize_timeline
from wsperf.collectors.store import open_store
from wsperf.collectors.timeline import load_timeline

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

TIMELINES = ROOT / "fixtures" / "timeline"
TRACE = TIMELINES / "iket_ring.pftrace"
K_STEPS = 64


@pytest.fixture(scope="module")
def loaded():
    con = open_store(None)
    t = load_timeline(con, TRACE)
    return con, summarize_timeline(con, t.timeline_id)


@pytest.fixture(scope="module")
def decoded():
    """run-iket's JSON: the launch, and each location (CTA coordinates, SM, warp)."""
    doc = json.loads(gzip.decompress((TIMELINES / "iket_ring.trace.json.gz").read_bytes()))
    (launch,) = doc["launches"]
    return doc, launch


def _linear(cta_xyz, launch):
    x, y, z = cta_xyz
    return x + launch["gridDimX"] * (y + launch["gridDimY"] * z)


def test_the_fixture_is_run_iket_s_track_tree():
    """Root / Grid1 (the launch slice) / GPC / `TPC|VSM` / `CTA(x, y, z)` / `WarpNN` (its
    lifetime) / `StackedRanges` and `Marker`: the tree the reader's rules are written for."""
    packets = pb.Trace.FromString(TRACE.read_bytes()).packet
    names = Counter(p.track_descriptor.name for p in packets if p.HasField("track_descriptor"))
    assert names["Grid1"] == names["GPC1"] == 1
    assert names["StackedRanges"] == 24 and names["Marker"] == 4
    ctas = {n for n in names if n.startswith("CTA(")}
    assert ctas == {"CTA(0, 0, 0)", "CTA(1, 0, 0)", "CTA(0, 1, 0)", "CTA(1, 1, 0)"}
    assert {n for n in names if n.startswith("Warp")} == {f"Warp{w:02d}" for w in range(6)}
    assert sum(n.startswith("TPC") and "|VSM" in n for n in names) == 4
    slices = Counter(p.track_event.name for p in packets if p.HasField("track_event") and p.track_event.type == 1)
    assert [n for n in slices if n.startswith("kernel:")] and slices["Warp Life Time"] == 24
    assert slices["tma_load [duration=0]"] == 83  # ranges shorter than the timer's 32 ns tick
    entry = next(e for e in json.loads((TIMELINES / "provenance.json").read_text())["later"]
                 if "iket_ring.pftrace" in e.get("files", []))
    assert entry["gpu"].startswith("NVIDIA H200") and entry["packages"]["nvidia-cutlass-dsl-libs-base"] == "4.8.1"
    assert (ROOT / entry["script"]).is_file() and (ROOT / entry["kernel_source"]).is_file()


def test_ctas_and_warps_are_the_launch_s(loaded, decoded):
    """4 CTAs of 6 warps, as launched; each `CTA(x, y, z)` is the linear block index
    x + 2 y (the kernel's row block), and sits on the SM run-iket's JSON gives it."""
    con, s = loaded
    doc, launch = decoded
    assert (launch["gridDimX"], launch["gridDimY"], launch["gridDimZ"], launch["blockDimX"]) == (2, 2, 1, 192)
    assert s.ctas == 2 * 2 * 1 and s.warps == 4 * 192 // 32 == 24
    assert s.kernel == launch["kernelName"] and s.format == "perfetto-trace"
    want = {(_linear(loc["ctaId"], launch), loc["warpId"], loc["smId"]) for loc in doc["locationTable"]}
    got = set(con.execute("SELECT DISTINCT cta, warp, sm FROM timeline_events").fetchall())
    assert got == want and len(got) == 24
    assert len({sm for _, _, sm in got}) == 4  # a CTA an SM


def test_each_role_s_events_are_where_the_kernel_put_them(loaded):
    """Warp 0 the producer: a wait (`producer_acquire`) then a copy (`tma_load`) per k-step;
    warps 1-4 the consumers: a wait (`wait_full`) then a compute per k-step, roles read from
    the event words since no name of theirs says 'consumer'; warp 5 the epilogue. Every warp
    has its lifetime as its `kernel` interval, with its role."""
    con, _ = loaded
    per_warp = con.execute(
        """SELECT warp, role, event, coalesce(label, event), count(*) FROM timeline_intervals
           GROUP BY ALL ORDER BY ALL""").fetchall()
    ctas = 4
    assert per_warp == [
        (0, "producer", "copy", "tma_load", ctas * K_STEPS),
        (0, "producer", "kernel", "Warp Life Time", ctas),
        (0, "producer", "wait", "producer_acquire", ctas * K_STEPS),
        *[r for w in range(1, 5) for r in (
            (w, "consumer", "compute", "compute", ctas * K_STEPS),
            (w, "consumer", "kernel", "Warp Life Time", ctas),
            (w, "consumer", "wait", "wait_full", ctas * K_STEPS))],
        (5, "epilogue", "epilogue", "store", ctas),
        (5, "epilogue", "kernel", "Warp Life Time", ctas),
        (5, "epilogue", "wait", "epilogue_wait", ctas)]
    assert con.execute("SELECT warp, role, event, label, count(*) FROM timeline_events WHERE phase = 'instant' "
                       "GROUP BY ALL").fetchall() == [(5, "epilogue", "epilogue", "stored", ctas)]
    # the producer takes turns: acquire a stage, load it, 64 times, in every CTA
    for cta in range(ctas):
        order = [e for (e,) in con.execute(
            "SELECT event FROM timeline_intervals WHERE cta = ? AND warp = 0 AND event <> 'kernel' "
            "ORDER BY start_ns, event DESC", [cta]).fetchall()]
        assert order == ["wait", "copy"] * K_STEPS


def test_every_interval_is_the_decoded_json_s(loaded, decoded):
    """The same capture through run-iket's two outputs: every range, warp lifetime and mark
    at the same ns, on the same CTA, warp and SM (the JSON's coordinates linearized with its
    grid size, the .pftrace's numbered without one)."""
    con, _ = loaded
    doc, launch = decoded
    names, locs = doc["stringTable"], doc["locationTable"]
    (t0,) = con.execute("SELECT t0_ns FROM timelines").fetchone()

    def where(i):
        loc = locs[i]
        return _linear(loc["ctaId"], launch), loc["warpId"], loc["smId"]

    want = Counter((*where(r["warpLocIdxs"][0]), names[r["rangeNameIdx"]], r["startTs"], r["endTs"])
                   for r in launch["ranges"])
    want.update((*where(w["locIdx"]), "Warp Life Time", w["startTs"], w["endTs"]) for w in launch["warpLifetimes"])
    got = Counter((cta, warp, sm, name, t0 + a, t0 + b) for cta, warp, sm, name, a, b in con.execute(
        "SELECT cta, warp, sm, coalesce(label, event), start_ns, end_ns FROM timeline_intervals").fetchall())
    assert sum(want.values()) == 2568 + 24 and got == want
    marks = Counter((*where(m["locIdx"]), names[m["markerNameIdx"]], m["timestamp"]) for m in launch["markers"])
    assert Counter((c, w, sm, label, t0 + t) for c, w, sm, label, t in con.execute(
        "SELECT cta, warp, sm, label, t_ns FROM timeline_events WHERE phase = 'instant'").fetchall()) == marks


def test_the_shares_fit_the_design(loaded):
    """Compute-bound by design (16 passes of FMAs over each stage, ~1.3 us a k-step): the
    consumers compute ~90% of their lifetime and wait ~5%; the producer waits for a free stage
    ~94% of its own, each wait about one compute long, and its copies take a timer tick; the
    epilogue waits for the consumers all kernel long. With 4 stages ~95% of the copies run
    while a consumer computes: pipeline-bubbles and serialized-roles are rejected. IKET's
    ranges carry no ring stage (pipeline-bubbles' `stages` 0)."""
    _, s = loaded
    share = {(r.role, r.event): r for r in s.roles}
    assert set(share) == {("consumer", "compute"), ("consumer", "wait"), ("producer", "copy"),
                          ("producer", "wait"), ("epilogue", "epilogue"), ("epilogue", "wait")}
    assert share["consumer", "compute"].share > 0.85 and share["consumer", "wait"].share < 0.1
    assert share["producer", "wait"].share > 0.9 and share["producer", "copy"].share < 0.05
    assert share["epilogue", "wait"].share > 0.95
    compute = share["consumer", "compute"].median_ns
    assert 1000 <= compute <= 1600
    assert abs(share["producer", "wait"].median_ns - compute) <= 128  # a free stage comes with a compute's end
    assert share["producer", "copy"].median_ns == 32
    assert s.bubbles.status is Status.rejected and s.serialized.status is Status.rejected
    ev = s.bubbles.evidence
    assert ev["overlap"] > 0.9 and ev["copy_intervals"] == 4 * K_STEPS and ev["ctas"] == 4 and ev["stages"] == 0
    assert ev["prologue_share"] < 0.05 and ev["epilogue_share"] < 0.05


def test_the_command_line_reads_it():
    p = wsperf("timeline", TRACE, "-f", "json")
    assert p.returncode == 0, p.stderr
    (t,) = json.loads(p.stdout)["timelines"]
    assert (t["format"], t["ctas"], t["warps"]) == ("perfetto-trace", 4, 24)
    assert t["kernel"].startswith("kernel_cutlass_iket_ring_kernel")
    assert {r["role"] for r in t["roles"]} == {"producer", "consumer", "epilogue"}


# ---- the rules on small traces built here --------------------------------------------------


def _trace(*tracks):
    """Tracks (uuid, name, parent) and, on tracks given a name list, one slice per name."""
    t = pb.Trace()
    for uuid, name, parent, *slices in tracks:
        p = t.packet.add()
        p.track_descriptor.uuid = uuid
        p.track_descriptor.name = name
        if parent is not None:
            p.track_descriptor.parent_uuid = parent
        for i, s in enumerate(slices[0] if slices else ()):
            for kind, ts in ((1, 100 * i + 10), (2, 100 * i + 60)):
                e = t.packet.add()
                e.trusted_packet_sequence_id = 1
                e.timestamp = ts
                e.track_event.type = kind
                e.track_event.track_uuid = uuid
                e.track_event.name = s
    return t


def _rows(tmp_path, trace, sql="SELECT DISTINCT cta, warp, role FROM timeline_events ORDER BY ALL"):
    path = tmp_path / "t.pftrace"
    path.write_bytes(trace.SerializeToString())
    con = open_store(None)
    load_timeline(con, path)
    return con.execute(sql).fetchall()


def test_block_coordinates_are_numbered_in_z_y_x_order(tmp_path):
    """No grid size in the file: the distinct coordinates are numbered z, then y, then x,
    the linear block index x + 2 y + 4 z wherever the whole grid is traced (here each CTA's SM
    is 10 + that index); a part of a grid (run-iket's --enabled-cluster) is numbered densely.
    The launch slice on the grid track is no warp's event, and names the kernel."""
    grid = [(x, y, z) for z in range(2) for y in range(2) for x in range(2)]
    shuffled = grid[5:] + grid[:5]
    tracks = [(1, "Grid1", None, ["kernel:k_2x2x2, gridId: 1"])]
    for i, (x, y, z) in enumerate(shuffled):
        tracks += [(10 + i, f"TPC0|VSM{10 + x + 2 * y + 4 * z}", 1), (20 + i, f"CTA({x}, {y}, {z})", 10 + i),
                   (30 + i, "Warp00", 20 + i, ["compute"])]
    rows = _rows(tmp_path, _trace(*tracks), "SELECT DISTINCT cta, sm FROM timeline_events ORDER BY ALL")
    assert rows == [(c, 10 + c) for c in range(8)]
    path = tmp_path / "t.pftrace"
    con = open_store(None)
    assert load_timeline(con, path).kernel == "k_2x2x2"
    assert con.execute("SELECT count(*), count(DISTINCT event) FROM timeline_events").fetchone() == (16, 1)
    cut = _trace((10, "CTA(1, 0, 0)", None), (11, "CTA(1, 1, 0)", None), (20, "Warp03", 10, ["compute"]),
                 (21, "Warp03", 11, ["compute"]))
    assert _rows(tmp_path, cut) == [(0, 3, "consumer"), (1, 3, "consumer")]


def test_a_warp_s_role_comes_from_any_of_its_events(tmp_path):
    """One event naming a role gives it to the warp's others; a warp naming none takes it
    from what it does: copies alone, the producer; computes alone, a consumer; epilogue work
    alone, the epilogue; copies and computes, 'other' (Proton's staged warps)."""
    t = _trace((1, "CTA(0, 0, 0)", None),
               (2, "Warp00", 1, ["Warp Life Time"]), (3, "StackedRanges", 2, ["producer_acquire", "tma_load"]),
               (4, "Warp01", 1), (5, "StackedRanges", 4, ["wait_full", "mma"]),
               (6, "Warp02", 1), (7, "StackedRanges", 6, ["load_x", "wait"]),
               (8, "Warp03", 1), (9, "StackedRanges", 8, ["store"]),
               (10, "Warp04", 1), (11, "StackedRanges", 10, ["load", "compute"]))
    assert _rows(tmp_path, t) == [(0, 0, "producer"), (0, 1, "consumer"), (0, 2, "producer"), (0, 3, "epilogue"),
                                  (0, 4, "other")]
    assert _rows(tmp_path, t, "SELECT DISTINCT event FROM timeline_events WHERE warp = 0 ORDER BY ALL") == \
        [("copy",), ("kernel",), ("wait",)]


def test_several_launches_are_refused(tmp_path):
    """run-iket traces every launch of the program; two launches' CTAs would be taken for
    one's. The real trace with a second launch slice on its grid track is one Error: line."""
    t = pb.Trace.FromString(TRACE.read_bytes())
    for kind, ts in ((1, 1), (2, 2)):
        e = t.packet.add()
        e.trusted_packet_sequence_id = 1
        e.timestamp = ts
        e.track_event.type = kind
        e.track_event.track_uuid = 2  # Grid1
        e.track_event.name = "kernel:other_kernel, gridId: 4"
    path = tmp_path / "two.pftrace"
    path.write_bytes(t.SerializeToString())
    assert_one_error_line(wsperf("timeline", path), 2, "holds 2 kernel launches")
