"""The worksheet on three more kernels built on CUTLASS 4.2's C++ pipeline classes
(fixtures/src/cutlass/cutlass_pingpong_async.cu, cutlass_cluster_mc.cu,
cutlass_persistent_async.cu, built by fixtures/src/cutlass/build.sh) and a TIRx tcgen05 GEMM
with two tensor-memory accumulators (fixtures/src/tirx/tirx_dualacc.py). The READMEs beside
the sources hold the design's truth these tests assert: a correct kernel raises no evidence
flag and its warps get the roles the design gives them; each planted bug raises its own flag
on the barrier the bug is in, or, where the sheet cannot decide it from the PTX, no evidence
flag and a `not checked` line that says what it left open."""

from __future__ import annotations

import re

import pytest

from support import ROOT, warp_roles as _warp_roles
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet

PTX = ROOT / "fixtures" / "ptx"

# --- truth tables -------------------------------------------------------------------------

# cutlass_pingpong_async: warp 0 fills the ring (all lanes), warp 3 idle, warpgroups 1-2 (warps
# 4-11) consume the ring and produce into pipeline 2. (Warp 1, the epilogue consuming pipeline 2,
# and warp 2, which only initializes pipeline 2's barriers, are not asserted here.)
_PINGPONG = {0: "producer", 3: "idle", **{w: "producer+consumer" for w in range(4, 12)}}
# cutlass_cluster_mc: warp 0 issues the multicast copies, warps 1-3 idle, warpgroup 1 consumes
_CLUSTER_MC = {0: "producer", 1: "idle", 2: "idle", 3: "idle", **{w: "consumer" for w in range(4, 8)}}
# cutlass_persistent_async: warp 0 fills the ring (the rest of the design's roles are not asserted)
_PERSISTENT = {0: "producer"}
# tirx_dualacc: warp 0 owns tensor memory, warp 1 idle, warp 2 issues the MMA, warp 3 loads with
# TMA, warps 4-11 are the two writeback warpgroups
_DUALACC = {0: "tensor-memory owner", 1: "idle", 2: "consumer", 3: "producer",
            **{w: "epilogue" for w in range(4, 12)}}

CORRECT = [("cutlass_pingpong_async", _PINGPONG), ("cutlass_persistent_async", _PERSISTENT),
           ("cutlass_cluster_mc", _CLUSTER_MC), ("tirx_dualacc", _DUALACC)]

# byte offsets of the barriers from the kernel's shared-memory symbol
PP_FULL2, PP_EMPTY2, PP_ORDER = {3136, 3144}, {3152, 3160}, {3168, 3176, 3184, 3192}
PS_ACC_EMPTY = {992, 1000}
MC_FULL = {24576, 24584, 24592}

# --- reading the sheet ---------------------------------------------------------------------


def _sheet(name):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _evidence(k):
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]




def _assert_roles(k, truth: dict[int, str]):
    got = _warp_roles(k)
    assert {w: got.get(w) for w in truth} == {w: {r} for w, r in truth.items()}, [r.text for r in k.roles]


def _slots(text: str, sym: str) -> list[set[int]]:
    """The barrier groups of `sym` a flag names, in order ('sym+{a,b}' or 'sym+a')."""
    return [{int(x) for x in m.strip("{}").split(",")} for m in re.findall(re.escape(sym) + r"\+(\{[\d,]+\}|\d+)", text)]


# --- correct kernels ----------------------------------------------------------------------


@pytest.mark.parametrize("name, truth", CORRECT, ids=[n for n, _ in CORRECT])
def test_correct_kernel_is_silent_and_its_roles_are_the_design(name, truth):
    k = _sheet(name)
    assert _evidence(k) == [], k.flags
    _assert_roles(k, truth)


# --- planted bugs the sheet reads from the PTX ---------------------------------------------


def test_cutlass_persistent_acc_empty_count_32_for_64_arrivals():
    """acc_empty initialized with 32 while the 64 epilogue threads (warps 2-3) release it."""
    k = _sheet("cutlass_persistent_async_acccount")
    (f,) = _evidence(k)
    assert f.code == 2, k.flags
    assert "count 32" in f.text and "64 arrival(s)" in f.text, f.text
    assert _slots(f.text, "_ZN2ps8smem_rawE")[0] == PS_ACC_EMPTY, f.text
    _assert_roles(k, _PERSISTENT)


def test_cutlass_pingpong_phase2_first_wait_on_empty2_with_parity_0():
    """The math warpgroups' first wait on pipeline 2's empty barriers is for parity 0: they
    wait for warp 1's release, warp 1 waits on full2 for their commit: deadlock."""
    k = _sheet("cutlass_pingpong_async_phase2")
    (f,) = _evidence(k)
    assert f.code == 7, k.flags
    slots = _slots(f.text, "_ZN2pp8smem_rawE")
    assert PP_FULL2 in slots and PP_EMPTY2 in slots, f.text
    _assert_roles(k, _PINGPONG)


def test_cutlass_pingpong_ordered_barrier_count_256_rests_on_taking_turns():
    """OrderedSequenceBarrier with group size 256 while one warpgroup (128 threads) arrives a
    phase. The 128 rests on the two warpgroups taking turns, which the sheet says it assumed:
    flag 2 with basis assumption, no evidence flag."""
    k = _sheet("cutlass_pingpong_async_ordercount")
    assert _evidence(k) == [], k.flags
    (f,) = k.flags
    assert (f.code, f.basis) == (2, Basis.ASSUMPTION), k.flags
    assert "count 256" in f.text and "128 arrival(s)" in f.text, f.text
    assert _slots(f.text, "_ZN2pp8smem_rawE")[0] == PP_ORDER, f.text
    turns = [n for n in k.notes if n.aspect == "handoff.turns"]
    assert turns and all(n.basis is Basis.ASSUMPTION and "taking turns" in n.text for n in turns)
    _assert_roles(k, _PINGPONG)


def test_cutlass_cluster_mc_without_cluster_sync():
    """Only __syncthreads() after the inits: the peer's multicast copies can complete bytes on
    full[s] here before this CTA has initialized it."""
    k = _sheet("cutlass_cluster_mc_nosync")
    (f,) = _evidence(k)
    assert f.code == 9, k.flags
    assert _slots(f.text, "_ZN2mc8smem_rawE")[0] == MC_FULL, f.text
    _assert_roles(k, _CLUSTER_MC)


def test_tirx_dualacc_mma_waits_full_with_parity_1():
    """The MMA lane (warp 2) waits on full[s] with parity ph ^ 1: its first wait passes on a
    fresh barrier and the MMA reads stages the TMA has not filled."""
    k = _sheet("tirx_dualacc_mma_parity")
    (f,) = _evidence(k)
    assert f.code == 10, k.flags
    assert "warp 2" in f.text, f.text
    _assert_roles(k, _DUALACC)


def test_cutlass_pingpong_epilogue_wait_with_parity_1_reads_unstored_output():
    """Warp 1's first consumer_wait on full2[i] asks for parity 1: it passes on the fresh
    barrier and reads out[] (ld.shared) where the math warpgroups st.shared it before their
    arrive. The addresses read and stored are decided per thread and meet: flag 10."""
    k = _sheet("cutlass_pingpong_async_epiphase")
    (f,) = _evidence(k)
    assert f.code == 10, k.flags
    assert "warp 1" in f.text and "parity 1" in f.text and "ld.shared" in f.text, f.text
    assert "store before they arrive" in f.text, f.text
    _assert_roles(k, _PINGPONG)


# --- planted bugs the sheet leaves open (no evidence flag; what it left is `not checked`) ---

# The multicast's arrivals go through mapa to a CTA the PTX does not decide, and TIRx addresses
# done[0..1] through the warp index: each leaves the planted mistake outside what the sheet can
# decide.
OPEN = [("cutlass_cluster_mc_tx", _CLUSTER_MC, "mapa"),
        ("tirx_dualacc_done_count", _DUALACC, "not tell apart")]


@pytest.mark.parametrize("name, truth, open_", OPEN, ids=[n for n, _, _ in OPEN])
def test_planted_bug_left_open_is_said_not_checked(name, truth, open_):
    k = _sheet(name)
    assert _evidence(k) == [], k.flags
    assert k.unchecked, name
    assert any(open_ in str(u) for u in k.unchecked), k.unchecked
    _assert_roles(k, truth)


def test_cutlass_persistent_ring_state_reset_each_tile():
    """The math warp resets its ring state at every tile of the persistent loop: on its second
    tile it waits with parity 0 on stages whose phases have moved on, and producer and math
    warp stop in step (a hang). Flag 7 plays out the first trip over fresh barriers only
    (docs/worksheet.md), where this kernel is right: the sheet is the correct kernel's, no
    evidence flag. This is the limit a hang capture's live barrier words answer instead
    (docs/collect.md): the first trip cannot tell it."""
    k = _sheet("cutlass_persistent_async_reset")
    assert not _evidence(k), k.flags
    assert [f.code for f in k.flags] == [f.code for f in _sheet("cutlass_persistent_async").flags]
    _assert_roles(k, _PERSISTENT)
