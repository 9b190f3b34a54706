"""The worksheet on a fifth set of DSL kernels, compiled without a GPU for sm_100a: a CuTe DSL
4.8.1 persistent GEMM with a double-buffered accumulator in tensor memory, epilogue subtiling and
a separate TMA-store warp fed by its own 2-stage ring (fixtures/src/cute/round5: h5_dacc.py and its
README, the design's truth), and Gluon / Triton 3.6 persistent GEMMs with a double-buffered
accumulator, a 2-deep TMA-store ring, `mbarrier.arrive(count=4)`, Triton's `flatten=True` and a
split-K (fixtures/src/gluon/round5). Correct kernels raise no evidence flag; each planted bug
raises exactly its own flag; the ones not found yet are strict xfails that say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import assert_planted, evidence_flags, ptx_sheet
from support import case as _case
from support import xfail_case as _xfail

D = "__dynamic_shmem__0+"
G = "global_smem+"

CORRECT = ["h5_dacc", "h5_dacc_c128", "g5_pgemm", "g5_pgemm_arr4", "t5_pgemm_flat_s2_w4", "t5_splitk_s5_w4"]


PLANTED = [
    _case("h5_dacc_accnoflip", [12], D + "{64,72}"),
    _case("h5_dacc_nofence", [5], "st.shared"),
    _case("h5_dacc_freeearly", [11], "tcgen05.dealloc"),
    _case("h5_dacc_c128one", [2], "count 128"),
    # the store warp waits c_empty[s] (+96) for parity 0: its only arrivals are its own
    # releases, after that wait (the last one after its tile loop): deadlock on the first trip
    _case("h5_dacc_cwrong", [7], D + "{96,104}"),
    # the epilogue's sC state counts 3 stages on the 2-stage ring: its third c_full arrive is +96
    # (c_empty[0]) and +112 is no barrier at all
    _case("h5_dacc_cstages", [2, 13], D + "112"),
    _case("g5_pgemm_txa", [8], "expects 16384"),
    _case("g5_pgemm_accnoflip", [12], "parity 1"),
    _case("g5_pgemm_epiidx0", [2], "reach only"),
    _case("g5_pgemm_arrcnt", [2], "count 4"),
    _case("g5_pgemm_epinofence", [5], "cp.async.bulk.tensor"),
    # the store warp releases c_empty[s] right after its TMA store's commit_group, with no
    # cp.async.bulk.wait_group.read before it: the epilogue rewrites the stage under the store
    _case("h5_dacc_storeearly", [14], "no cp.async.bulk.wait_group.read between"),
    _xfail("g5_pgemm_storepend2", [14], G + "98304",
           reason="not flagged: cp.async.bulk.wait_group.read 2 before st.shared rewrites a stage of a 2-deep store "
                  "ring; store groups in flight are not counted against the ring's depth"),
    # acc_empty[buf] released after the first of two tcgen05.ld slices, the second read after it
    _case("g5_pgemm_accrelearly", [14], G + "{131296,131304}"),
]


_sheet = ptx_sheet


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_raises_no_evidence_flag(name):
    assert evidence_flags(_sheet(name)) == []


@pytest.mark.parametrize("name, codes, piece", PLANTED)
def test_each_planted_bug_raises_its_own_flag(name, codes, piece):
    assert_planted(name, codes, piece)


def test_the_box_bytes_cute_keeps_in_its_tensor_map_are_said_unchecked():
    """h5_dacc_tx announces 16384 of the 49152 bytes its copies deliver; the boxes are in
    tensor maps the host builds, so the sheet lists expect_tx as not checked, never all-clear."""
    k = _sheet("h5_dacc_tx")
    assert not k.flags and any("expect_tx not checked" in u for u in k.unchecked), k.unchecked
