"""The worksheet on a second set of DSL kernels: CuTe DSL 4.8.1 kernels on the pipeline
abstractions (fixtures/src/cute/cute_{chain,umma_tmastore,cluster_rowsum,tworegions,tmem2cta,
prerelease,bulkloop,multiarrive}.py: a three-role chain over two rings, a subtiled tcgen05
epilogue with a TMA store, a cluster row sum with multicast release, two specialized regions
with the roles swapped, a 2-CTA tensor-memory allocation owned by the producer warp, consumers
that pre-release every stage, non-tensor bulk copies in a counted loop, consumers that arrive
several times a phase in a counted loop), Gluon kernels (fixtures/src/gluon/gluon_variety2.py:
two rings of different depth, one warp that loads and issues the MMAs, an 8-warp subtiled
epilogue over a shared-memory ring, a 4-warp producer beside two wgmma consumers) and Triton's
own warp specialization with `num_stages=1` (fixtures/src/triton_tma/ws_variety2.py), all
compiled without a GPU. The truth is each design, as the READMEs state it: correct kernels
raise no evidence flag; each planted bug raises exactly its own flag, with its cause; a planted
bug the sheet cannot decide must not read as all-clear: no evidence flag, and the sheet lists
what it left unchecked."""

from __future__ import annotations

import pytest

from support import ROOT
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet
from wsperf.analyses.worksheet_model import phase_arrivals

PTX = ROOT / "fixtures" / "ptx"
D = "__dynamic_shmem__0"
G = "global_smem+"

# Every kernel that is correct by design.
CORRECT = ["cute_chain", "cute_umma_tmastore", "cute_cluster_rowsum", "cute_tworegions", "cute_tmem2cta",
           "cute_prerelease", "cute_bulkloop", "cute_multiarrive", "cute_multiarrive3",
           "gluon_rings23", "gluon_rings23_nopeel", "gluon_loadmma", "gluon_epi8", "gluon_h_prod4",
           "tws2_ns1_sm100"]

# Each planted bug the sheet decides: (variant, its flag, pieces of the flag's text: the barrier
# and the numbers or the cause).
PLANTED = [
    ("cute_chain_count32", 2, (f"{D}+{{24,32,40}}", "count 32", "64 arrival(s) per phase")),  # r1_empty
    ("cute_umma_tmastore_nofence", 5, ("st.shared", "fence.proxy.async")),  # sC stored, then the TMA store
    ("cute_umma_tmastore_norelease", 2, (f"{D}+56", "nothing ever arrives on it")),  # acc_empty never released
    ("cute_cluster_rowsum_count", 2, (f"{D}+{{40,48,56,64,72}}", "count 2", "4 arrival(s) per phase")),
    ("cute_cluster_rowsum_noclsync", 9, (f"{D}+{{40,48,56,64,72}}", "only a CTA barrier")),
    ("cute_tmem2cta_nopermit", 4, ("relinquish_alloc_permit",)),
    ("cute_tmem2cta_noclsync", 9, (f"{D}+32", "only a CTA barrier")),  # the dealloc barrier the peer arrives on
    ("cute_multiarrive_one", 2, (f"{D}+{{32,40,48,56}}", "count 128", "64 arrival(s) per phase")),
    ("cute_bulkloop_short", 8, (f"{D}+{{0,8,16}}", "expects 8192 bytes a phase", "deliver 6144")),
    ("gluon_rings23_bphase", 10, (G + "{114752,114760}", "parity 1")),  # the MMA's first ready_b wait
    ("gluon_epi8_nofence", 5, ("st.shared", "fence.proxy.async")),  # c_ring stored, then the storer's TMA store
]

# Planted bugs the sheet does not decide from the PTX: it must say so.
UNDECIDED = [
    "gluon_h_prod4_predarrive",  # consumer 1 arrives on empty only on even k-steps: 1 of 2 arrivals on odd ones
]

# Planted bugs that must be flagged (the design's truth). (variant, the flags that are right,
# a piece of the flag's text.)
# Bugs the sheet does not find yet (each a strict xfail: it fails the suite the day it is found,
# so the test is then turned into a plain one). The sheet says "flags: none" for them.
_MISSED = "not found by the worksheet yet"
TRUTH = [
    # the producer skips its arrive on r1_full on the last k-step of odd CTAs: 0 of 64 arrivals
    # that phase, the reducers' wait on it never passes. An arrive a branch on data (the CTA
    # index, a loop counter) may skip is taken as always run
    pytest.param("cute_chain_early", (2, 7), f"{D}+{{0,8,16}}", marks=pytest.mark.xfail(
        strict=True, reason=f"{_MISSED}: a branch not derived from %tid.x is taken as not skipping the arrive")),
    # the consumers pre-release 3 of the 4 stages; the producer's first wait on empty[3] is for
    # parity 0, which nothing completes: deadlock on the first trip
    # (the play-out counts phase 0 barrier by barrier where every address is decided, and the
    # prologue's 3 trips of its counted loop reach stages 0-2 only)
    pytest.param("cute_prerelease_short", (7,), f"{D}+{{32,40,48,56}}"),
    # warp 0's ring-B state starts as a producer's: its first wait on fullB[0] is for parity 1,
    # passes on the fresh barrier, and it reads the stage before warps 1-2 stored it
    # flag 10 compares the addresses warp 0 reads with those warps 1-2 stored, thread by thread
    pytest.param("cute_tworegions_phase", (10,), "store before they arrive (the addresses meet)"),
]


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _evidence(k) -> list:
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_raises_no_evidence_flag(name):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)


@pytest.mark.parametrize("name, code, pieces", PLANTED, ids=[n for n, _, _ in PLANTED])
def test_each_planted_bug_raises_exactly_its_own_flag(name, code, pieces):
    k = _sheet(name)
    flags = _evidence(k)
    assert [f.code for f in flags] == [code], (name, k.flags)
    for piece in pieces:
        assert piece in flags[0].text, (name, piece, flags[0].text)


@pytest.mark.parametrize("name", UNDECIDED)
def test_an_undecided_planted_bug_is_said_unchecked(name):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)
    assert k.unchecked, name


def test_predicated_arrive_is_the_barrier_left_unchecked():
    """gluon_h_prod4_predarrive: consumer 1's arrive on empty[s] is predicated on `i % 2 == 0`;
    the sheet cannot count it and names that ring (global_smem+163872..) as not checked."""
    k = _sheet("gluon_h_prod4_predarrive")
    assert any(G + "{163872,163880,163888,163896}" in u and "not checked" in u for u in k.unchecked), k.unchecked


@pytest.mark.parametrize("name, codes, piece", TRUTH, ids=[p.values[0] for p in TRUTH])
def test_a_planted_bug_is_flagged(name, codes, piece):
    k = _sheet(name)
    flags = _evidence(k)
    assert len(flags) == 1 and flags[0].code in codes, (name, k.flags, k.unchecked)
    assert piece in flags[0].text, flags[0].text


@pytest.mark.parametrize("name, count", [("cute_multiarrive", 128), ("cute_multiarrive3", 192)])
def test_arrivals_in_a_counted_loop_count_each_trip(name, count):
    """Each of the 64 consumer threads arrives on empty[s] once per trip of a loop of 2 (3) trips
    the PTX counts: 128 (192) arrivals a phase, the barrier's init count."""
    k = _sheet(name)
    assert _evidence(k) == [], k.flags
    (empty,) = [b for b in k.barriers if b.name == f"{D}+{{32,40,48,56}}"]
    assert {c for _, c in empty.inits} == {count}
    assert sum(phase_arrivals(empty).values()) == count, phase_arrivals(empty)


def test_arrivals_in_a_one_trip_loop_are_short():
    (empty,) = [b for b in _sheet("cute_multiarrive_one").barriers if b.name == f"{D}+{{32,40,48,56}}"]
    assert {c for _, c in empty.inits} == {128}
    assert sum(phase_arrivals(empty).values()) == 64


def test_bulk_copies_in_a_counted_loop_deliver_the_whole_stage():
    """cute_bulkloop: one lane issues 4 non-tensor bulk copies of 2048 bytes in a loop the PTX
    counts, 8192 bytes a phase against the elected `expect_tx 8192`: no flag, and the bytes are
    checked (a non-tensor copy's size is in the PTX)."""
    k = _sheet("cute_bulkloop")
    assert k.flags == (), k.flags
    assert not [u for u in k.unchecked if "expect_tx not checked" in u], k.unchecked
