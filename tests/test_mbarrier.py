"""The mbarrier word's layout, held to what the H200 measured (fixtures/mbarrier: the probe's
199 cases, four words cuda-gdb read from a hung probe), and the live state collect's hang
capture read from real Gluon deadlocks (fixtures/evidence/gluon_count2, gluon_phase)."""

from __future__ import annotations

import json

import pytest

from support import ROOT, wsperf
from wsperf.collectors.mbarrier import decode, parse_reads

MB = ROOT / "fixtures" / "mbarrier"
EVIDENCE = ROOT / "fixtures" / "evidence"


def _predicted(c: dict) -> tuple[int, int, int]:
    """(pending arrivals, pending tx bytes, phase parity) after the case's operations, by the
    PTX ISA's rules: a phase completes when its arrivals and its tx count both reach zero."""
    n, pending, tx, phase = c["count"], c["count"], 0, 0

    def settle() -> None:
        nonlocal pending, phase
        if pending == 0 and tx == 0:
            phase ^= 1
            pending = n

    if c["arrive_expect_tx"]:
        pending -= 1
        tx += c["arrive_expect_tx"]
        settle()
    if c["expect_tx"]:
        tx += c["expect_tx"]
        settle()
    if c["complete_tx"]:
        tx -= c["complete_tx"]
        settle()
    for _ in range(c["arrivals"]):
        pending -= 1
        settle()
    return pending, tx, phase


def _cases() -> list[dict]:
    return [json.loads(line) for line in (MB / "cases.jsonl").read_text().splitlines() if line.strip()]


def test_every_measured_state_decodes_to_what_its_operations_predict():
    cases = _cases()
    assert len(cases) == 199 and all(c["stable"] == 1 for c in cases)
    kinds = {(c["arrivals"] > c["count"], bool(c["expect_tx"] or c["arrive_expect_tx"]), c["complete_tx"] > c["expect_tx"])
             for c in cases}
    assert len(kinds) >= 4  # wrapped phases, tx bytes, bytes completed before they were expected
    # the loads lag by one case (collectors/mbarrier.py): case i's word is the one case i+1 printed
    for c, nxt in zip(cases, cases[1:]):
        pending, tx, phase = _predicted(c)
        d = decode(int(nxt["word"], 16))
        assert (d.expected, d.pending_arrivals, d.pending_tx, d.phase_parity) == (c["count"], pending, tx, phase), c
        # the parity bit against the barrier's own answer, measured in the same case
        assert (c["parity0_done"], c["parity1_done"]) == (int(phase == 1), int(phase == 0)), c
    assert {decode(int(c["word"], 16)).expected for c in cases[1:]} >= {1, 3, 1000, (1 << 20) - 1}
    assert min(_predicted(c)[1] for c in cases) < 0  # a negative tx count was measured and decoded


def test_the_unshifted_reads_would_not_fit():
    # the lag is real: read as printed, most cases contradict their own operations
    misfits = sum(1 for c in _cases()
                  if (decode(int(c["word"], 16)).pending_arrivals, decode(int(c["word"], 16)).phase_parity)
                  != _predicted(c)[::2])
    assert misfits > 150


def test_cuda_gdb_reads_the_same_layout_from_a_hung_kernel():
    states = [json.loads(line) for line in (MB / "hang.jsonl").read_text().splitlines()]
    text = (MB / "hang_cudagdb.txt").read_text()
    words = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("==== 0x"):
            cur = int(line.split()[1], 16)
        elif line.startswith("$") and cur is not None:
            words[cur] = int(line.split("=")[1], 16)
            cur = None
    assert len(words) == 4
    for s in states:
        c = {"count": s["count"], "arrivals": s["arrivals"], "expect_tx": s["expect_tx"], "complete_tx": 0,
             "arrive_expect_tx": s["arrive_expect_tx"]}
        d = decode(words[int(s["addr"], 16)])
        assert (d.expected, d.pending_arrivals, d.pending_tx, d.phase_parity) == (s["count"], *_predicted(c)), s
    assert int(states[0]["addr"], 16) == 0x400  # the first static shared byte: the 1 KB reserved before it


@pytest.mark.parametrize("bad", [-1, 1 << 64])
def test_a_word_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        decode(bad)


def test_the_hang_capture_reads_every_barrier_of_the_hung_kernel():
    reads = parse_reads((EVIDENCE / "gluon_count2" / "hang" / "mbarriers.txt").read_text())
    assert len(reads) == 24 and all(r.word is not None for r in reads)  # 6 barriers x 4 blocks
    ready = [decode(r.word) for r in reads if "49216" in r.label]
    empty = [decode(r.word) for r in reads if "49248" in r.label]
    # ready[] is initialized with count 2 and gets one arrive.expect_tx a phase (the planted bug):
    # 1 of 2 arrivals in, the TMA bytes all landed; empty[] waits for the consumers, who wait
    assert {(d.expected, d.pending_arrivals, d.pending_tx, d.phase_parity) for d in ready} == {(2, 1, 0, 0)}
    assert {(d.expected, d.pending_arrivals, d.pending_tx, d.phase_parity) for d in empty} == {(1, 1, 0, 0)}
    assert {r.address for r in reads if r.label.endswith("49232}[0]")} == {0x400 + 49216}


@pytest.mark.parametrize("name, says", [
    ("gluon_count2", "1 of 2 arrival(s) in, 1 pending, no tx bytes outstanding"),
    ("gluon_phase", "no phase of it has completed yet, so a wait for parity 1 passes on it at once"),
])
def test_the_deadlock_report_leads_with_the_live_state(name, says):
    p = wsperf("analyze", EVIDENCE / name, "--format", "json")
    assert p.returncode == 4
    causes = json.loads(p.stdout)["causes"]
    assert causes[0]["basis"] == "evidence" and causes[0]["text"].startswith("live state of global_smem+")
    assert any(says in c["text"] for c in causes if c["text"].startswith("live state"))


def test_a_bundle_without_barrier_reads_keeps_its_causes():
    # deadlock_nolines: collected before static shared barriers had addresses (no
    # hang/mbarriers.txt); its causes stand on the worksheet
    assert not (EVIDENCE / "deadlock_nolines" / "hang" / "mbarriers.txt").exists()
    p = wsperf("analyze", EVIDENCE / "deadlock_nolines", "--format", "json")
    causes = json.loads(p.stdout)["causes"]
    assert p.returncode == 4 and not any(c["text"].startswith("live state") for c in causes)
    assert "init with 32" in causes[0]["text"]


def test_static_shared_barriers_are_read_at_a_cpp_hang():
    # deadlock_ptx_live, deadlock_ptx re-collected: full[] (init 64) at 0x2408/0x2410 with the
    # 32 producer lanes in
    p = wsperf("analyze", EVIDENCE / "deadlock_ptx_live", "--format", "json")
    causes = json.loads(p.stdout)["causes"]
    assert p.returncode == 4 and causes[0]["basis"] == "evidence"
    assert causes[0]["text"].startswith("live state of full") and "32 of 64 arrival(s) in" in causes[0]["text"]


def test_the_live_words_are_in_the_store_for_sql(tmp_path):
    db = tmp_path / "s.duckdb"
    assert wsperf("analyze", EVIDENCE / "gluon_count2", "--db", db, "--format", "json").returncode == 4
    p = wsperf("sql", "--db", db, "--format", "json",
               "SELECT expected, pending_arrivals, pending_tx, phase_parity, confirmed, count(*) AS n "
               "FROM ws_mbarrier_words WHERE barrier LIKE '%49216%' GROUP BY ALL")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 1 and rows[0]["n"] == 12 and rows[0]["expected"] == 2 and rows[0]["confirmed"] is True


def test_a_healthy_ring_read_mid_flight_shows_consistent_states():
    # fixtures/mbarrier/midflight*.cudagdb.txt: ws_bulk.cu's correct ring, 4 CTAs, read twice
    # while running (fixtures/src/mbarrier/midflight.sh): full[s] count 1, empty[s] count 64
    from wsperf.collectors.mbarrier import decode, parse_reads

    design = {"full": 1, "empty": 64}
    seen = []
    for k in (1, 2):
        reads = parse_reads((ROOT / "fixtures" / "mbarrier" / f"midflight{k}.cudagdb.txt").read_text())
        assert len(reads) == 16 and all(r.word is not None for r in reads)
        for r in reads:
            d = decode(r.word)
            name = r.label.split(":", 1)[1].split("[")[0]
            assert d.expected == design[name], r
            assert 0 <= d.pending_arrivals <= d.expected and d.pending_tx in (0, 4096), r
            seen.append((k, r.label, r.block, d.phase_parity))
    # the ring moved: both parities occur, and a barrier's parity changed between the reads
    assert {p for *_, p in seen} == {0, 1}
    first = {(lab, blk): p for k, lab, blk, p in seen if k == 1}
    assert any(first[(lab, blk)] != p for k, lab, blk, p in seen if k == 2)
