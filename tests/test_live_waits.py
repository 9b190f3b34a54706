"""Each hung warp's wait read from its registers during the hang (collect's hang capture:
hang/mbarriers.txt, `==== wait` sections), on real H200 captures committed as bundles
(fixtures/evidence/README.md): the Gluon phase and count bugs, a CUDA C++ count bug and a
bulk-copy ring with a missing expect_tx. The designs decide what each warp waits for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import ENV, ROOT, wsperf_exe
from wsperf.collectors.mbarrier import decode, parse_reads, parse_waits

EV = ROOT / "fixtures" / "evidence"


def _waits(name: str):
    text = (EV / name / "hang" / "mbarriers.txt").read_text()
    reads = {(r.block, r.address): r for r in parse_reads(text)}
    return [(w, reads.get((w.block, w.address))) for w in parse_waits(text)]


def _causes(name: str) -> list[dict]:
    p = subprocess.run([wsperf_exe(), "analyze", str(EV / name), "--format", "json"], capture_output=True,
                       timeout=300, env=ENV)
    assert p.returncode == 4, p.stderr.decode()[-2000:]
    return json.loads(p.stdout)["causes"]


def test_gluon_phase_bug_the_producer_waits_parity_0_on_a_fresh_empty_barrier():
    """gluon_ws_rowsum --bug phase: the loader (warp 6) waits on empty[0] (global_smem+49248,
    shared 0xc460) with parity 0 as its first wait; the reducers (warps 0-3) wait on ready[0]
    (0xc440) with parity 0. Every word is fresh."""
    ws = {(w.block, w.warp): (w, r) for w, r in _waits("gluon_phase")}
    w6, r6 = ws[((0, 0, 0), 6)]
    assert (w6.address, w6.parity) == (0xC460, 0) and "SYNCS.PHASECHK" in (w6.instruction or "")
    assert r6 is not None and decode(r6.word).phase_parity == 0 and decode(r6.word).pending_arrivals == 1
    for warp in range(4):
        w, r = ws[((0, 0, 0), warp)]
        assert (w.address, w.parity) == (0xC440, 0) and r is not None
    assert ws[((0, 0, 0), 4)][0].address is None  # the idle warps sit at a block barrier, no phase check


def test_the_parity_is_bit_31_of_the_operand():
    """bulk_missing_tx: both roles wait for parity 1 (the operand is 0x80000000) on barriers
    whose words show phase parity 1 in progress: consistent, no contradiction."""
    got = [(w, r) for w, r in _waits("bulk_missing_tx") if w.address is not None]
    assert got and all(w.parity == 1 for w, _ in got), [(w.warp, w.parity) for w, _ in got]
    assert all(decode(r.word).phase_parity == w.parity for w, r in got if r is not None and r.word is not None)


def test_the_report_names_the_wrong_first_parity_from_the_live_state():
    texts = [c["text"] for c in _causes("gluon_phase") if "read from their registers" in c["text"]]
    (producer,) = [t for t in texts if "(producer)" in t]
    assert "the wrong parity is this wait's" in producer and "waiting for parity 0" in producer, producer
    assert all(c["basis"] == "evidence" for c in _causes("gluon_phase") if "registers" in c["text"])


def test_a_count_bug_is_not_blamed_on_the_parity():
    """deadlock_ptx (init 64, 32 arrive): the producer's wait for parity 0 on empty[0] is its
    second visit of the ring (full[0] already holds its 32 arrivals): no parity is blamed."""
    texts = [c["text"] for c in _causes("deadlock_ptx_live") if "read from their registers" in c["text"]]
    assert texts and not any("wrong parity" in t for t in texts), texts
    assert any("(consumer)" in t and "32 of 64 arrival(s) in" in t for t in texts), texts


def test_live_waits_go_into_the_store(tmp_path):
    db = tmp_path / "s.duckdb"
    p = subprocess.run([wsperf_exe(), "analyze", str(EV / "gluon_count2"), "--db", str(db)], capture_output=True,
                       timeout=300, env=ENV)
    assert p.returncode == 4, p.stderr.decode()[-2000:]
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT warp, address, parity, phase_parity, contradiction FROM ws_live_waits "
                       "WHERE block_x = 0 AND address IS NOT NULL ORDER BY warp").fetchall()
    assert rows and all(r[2] == 0 and r[3] == 0 and r[4] is False for r in rows), rows
    assert {r[0] for r in rows} == {0, 1, 2, 3, 6}, rows
