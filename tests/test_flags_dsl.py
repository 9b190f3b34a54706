"""Worksheet flags on compiler-generated (DSL) code: Gluon, TIRx, CuTe DSL and Triton
kernels written here (fixtures/ptx/, their design truth beside their generators in
fixtures/src/). Each defect class is tested on both sides: the flag fires on the planted
kernel and stays silent on its correct twin. The planted Triton bugs are edits of the real
PTX made in tests/test_dsl_variety.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet
from wsperf.analyses.worksheet_model import FLAG_NAMES

PTX = Path(__file__).resolve().parents[1] / "fixtures" / "ptx"


def sheet(path: Path):
    (k,) = worksheet([path]).kernels
    return k


def flags(path: Path, code: int):
    return [f for f in sheet(path).flags if f.code == code]


def test_flag_names_10_11():
    assert FLAG_NAMES[10] == "premature-pass" and FLAG_NAMES[11] == "tmem-freed-early"


# ---- flag 5: the stored bytes against what the async proxy reads ----

def test_proxy_fence_slot_beside_rings_is_not_flagged():
    # st.shared [global_smem+98304] is Triton's TMEM-base slot; tcgen05.mma reads the rings at
    # global_smem+0..98303 (A at [0, 49152), B at [49152, 98304), wrapped by (i / 3) * 49152)
    k = sheet(PTX / "gluon_mmadef.ptx")
    assert not [f for f in k.flags if f.code == 5], k.flags


def test_proxy_fence_through_handoff_fires_on_cute_nofence():
    # warps 4-11 store sC and arrive on epi_full; warp 1 waits on it and TMA-stores sC
    (f,) = flags(PTX / "cute_pipe_tmastore_nofence.ptx", 5)
    assert f.line == 539 and "line 273" in f.text and "line 574" in f.text and "line 256" in f.text
    # the store's offsets are derived through CuTe's 16-bit tid arithmetic (mul.wide.s16): thread
    # 128 stores at +132096, where the TMA store's source starts
    assert f.basis == Basis.EVIDENCE


def test_proxy_fence_handoff_with_fence_is_clean():
    assert not flags(PTX / "cute_pipe_tmastore.ptx", 5)


def test_proxy_fence_direct_path_still_evidence():
    (f,) = flags(PTX / "tirx_pgemm_no_fence.ptx", 5)
    assert f.basis == Basis.EVIDENCE
    assert not flags(PTX / "tirx_pgemm.ptx", 5)


def test_proxy_fence_variable_slot_is_neither_flagged_nor_unchecked():
    # the TMEM-base slot is published through an mbarrier to the MMA warp's tcgen05.mma, whose
    # operand range the PTX does not place; an ld.shared reads that word back, so it is a
    # variable handed over, not a tile for the async proxy: nothing to fence, nothing unchecked
    k = sheet(PTX / "tws_batched_sm100.ptx")
    assert not [f for f in k.flags if f.code == 5]
    assert not any(n.aspect == "handoff.fence" for n in k.notes)
    assert not any("proxy fence" in u for u in k.unchecked)


def test_proxy_fence_not_placed_is_said_on_the_first_line():
    # Triton's attention writes P with stmatrix for the PV tcgen05.mma of another partition;
    # the MMA's shared operand is not placed: the fence is not checked, and the sheet says so
    k = sheet(PTX / "t_attn_ns1_d128.ptx")
    assert not [f for f in k.flags if f.code == 5]
    (u,) = [u for u in k.unchecked if "proxy fence is not checked" in u]
    assert "shared-memory store(s) (first line 326)" in u


# ---- flag 3: barrier ids held in registers ----

def test_bar0_in_registers_inside_role_fires():
    (f,) = flags(PTX / "tirx_pgemm_bar0.ptx", 3)
    assert f.basis == Basis.EVIDENCE and f.line == 2939 and "(= 0, 128)" in f.text and "line 183" in f.text


@pytest.mark.parametrize("name", ["tirx_pgemm.ptx", "tirx_pgemm_wbowner.ptx", "gluon_mmadef.ptx",
                                  "cutlass_builder_gemm.ptx"])
def test_named_barriers_in_registers_are_clean(name):
    assert not flags(PTX / name, 3)


# ---- flag 8: tile::gather4 moves 4 rows a copy ----

def test_gather4_counts_four_rows():
    assert not flags(PTX / "gluon_gather_gemm.ptx", 8)
    (f,) = flags(PTX / "gluon_gather_gemm_tx.ptx", 8)
    assert "expects 16384" in f.text and "deliver 32768" in f.text


# ---- flag 10: a consumer's first wait that passes on a fresh barrier ----

@pytest.mark.parametrize("name,line", [("gluon_pgemm_ready_phase.ptx", 216), ("gluon_mmadef_accphase.ptx", 336)])
def test_premature_pass_fires(name, line):
    (f,) = flags(PTX / name, 10)
    assert f.basis == Basis.EVIDENCE and f.line == line and "tcgen05.ld" in f.text


@pytest.mark.parametrize("name", ["gluon_pgemm.ptx", "gluon_mmadef.ptx", "gluon_pgemm_empty_phase.ptx",
                                  "tirx_pgemm.ptx", "cute_pipe_umma_persistent.ptx", "cute_pipe_wgmma2.ptx",
                                  "tws_batched_sm100.ptx", "triton_ws_sm100.ptx", "cutlass_ws_gemm.ptx"])
def test_premature_pass_silent_on_correct(name):
    # producers' first waits on `empty` and the MMA warp's on `acc_empty` pass legitimately
    assert not flags(PTX / name, 10)


# ---- flag 11: tensor memory freed before other roles are done with it ----

def test_tmem_freed_early_fires():
    (f,) = flags(PTX / "tirx_pgemm_early_dealloc.ptx", 11)
    assert f.basis == Basis.EVIDENCE and f.line == 2797 and "1936" in f.text and "2859" in f.text


@pytest.mark.parametrize("name", ["tirx_pgemm.ptx", "tirx_pgemm_wbowner.ptx", "gluon_pgemm.ptx", "gluon_mmadef.ptx",
                                  "cute_pipe_umma_persistent.ptx", "cute_pipe_2cta.ptx", "tws_batched_sm100.ptx",
                                  "triton_ws_sm100.ptx", "cute_tcgen05_gemm.ptx"])
def test_tmem_freed_early_silent_on_correct(name):
    assert not flags(PTX / name, 11)


# ---- every committed PTX: flags 10 to 15 fire, as evidence, on the planted kernels only ----

PLANTED = {10: {"gluon_pgemm_ready_phase.ptx", "gluon_mmadef_accphase.ptx", "gluon_rings23_bphase.ptx",
                "tirx_dualacc_mma_parity.ptx", "cute_tworegions_phase.ptx", "cutlass_pingpong_async_epiphase.ptx",
                "gluon_unroll3_ph1.ptx", "tirx_p5_mma_parity.ptx",
                # the MMA warp accumulates into O while the correction rescales it there
                "g_attn_corr_ph.ptx",
                # a split-K reduction read before its partial is stored; a normalize pass's TMEM
                # rewrite read before it happens (the base reaches the reader through a copied slot)
                "h6_ksplit_redph.ptx", "b6_norm_ndph.ptx", "e7_pp_turnph.ptx",
                # attention's softmax reads S, and a split-K epilogue the second MMA warp's
                # accumulator, before the commit that publishes it
                "e7_attn_sph.ptx", "e7_ks_d1ph.ptx",
                # a bias ring's first wait, and a cooperative consumer's ring state made as a producer's
                "e8_bias_parity.ptx", "e8_coop_cphase.ptx"},
           11: {"tirx_pgemm_early_dealloc.ptx", "h5_dacc_freeearly.ptx", "e8_nsplit_freeearly.ptx"},
           12: {"gluon_zp5_noflip.ptx", "tws3_tri_s5_sm100_noflip.ptx", "cute_wgpersist_nophase.ptx",
               "tirx_p5_noflip.ptx", "g_attn2p_vnoflip.ptx", "tirx_2p_bnoflip.ptx", "h4_pp2p_noflip.ptx",
               # (h4_pp2p_order: its barriers decided, flag 2 names what the bug causes instead)
               "h4_pp2p_ordint.ptx", "h5_dacc_accnoflip.ptx", "g5_pgemm_accnoflip.ptx", "b6_twoepi_noflip.ptx",
               "b6_sring_cnoflip.ptx", "e7_attn_pnoflip.ptx",
               # the reduction barrier of an in-CTA split-K, waited with parity 0 every tile
               "e8_kint_noflip.ptx", "e8_ring3_noflip.ptx",
               # a slice ring's waits of one parity on every trip; unrolled k-loops whose waits never flip
               "g9_ring_enoflip.ptx", "g9_ring_snoflip.ptx", "g9_unroll_rph0.ptx", "g9_unroll_eph1.ptx",
               "c9_unroll_noflip.ptx"},
           # (t_bscale_fp8_s3_w8_wrap4's counter wraps at 4 on 3 stages: starting at 2 with phase 1,
           # its first trip waits for parity 1 on ready[3], never initialized: flag 10 there is an
           # assumption that names flag 13)
           13: {"gluon_unroll3_wrap4.ptx", "t_bscale_fp8_s3_w8_wrap4.ptx", "h5_dacc_cstages.ptx", "b6_sring_wrap4.ptx"},
           14: {"g5_pgemm_accrelearly.ptx", "h5_dacc_storeearly.ptx", "gluon_zp5_early.ptx", "cute_grouped_relfirst.ptx",
                "gluon_h_lag6_relcur.ptx", "g_attn2p_kearly.ptx", "g_fa2sm_krel.ptx", "h4_attn_vearly.ptx",
                "h4_attn90_vearly.ptx", "h6_dual_relearly.ptx", "b6_norm_relfirst.ptx", "e7_pp_relearly.ptx",
                # P arrived on before its tcgen05.st: the MMA reads it from tensor memory unwritten
                "e7_attn_pearly.ptx",
                # a bias slot, an N-split accumulator half and a cp.async ring stage released before their
                # reads; an output slot released before the bulk store that reads it has retired
                "e8_bias_early.ptx", "e8_nsplit_relearly.ptx", "e8_cpx_relearly.ptx", "e8_cpx_storeearly.ptx",
                "e8_ring3_acc_early.ptx", "e8_ring3_store_early.ptx", "e8_coop_noreadwait.ptx",
                # an accumulator released before its last slice is read; a staging buffer rewritten
                # while the previous bulk store may still read it
                "c9_tcring_relearly.ptx", "g9_ring_relearly.ptx", "c9_pp_noread.ptx", "c9_db_noread.ptx",
                "c9_db1_noread.ptx", "c9_tcself_noread.ptx", "g9_sub_nowait.ptx"},
           15: {"tws3_grouped_s3_sm100_wrongarr.ptx", "e7_ks_nowait1.ptx", "e8_cl2_nowait.ptx"}}


def test_new_flags_fire_only_on_planted_fixtures():
    fired: dict[int, set[str]] = {code: set() for code in PLANTED}
    for p in sorted(PTX.glob("*.ptx")):
        for k in worksheet([p]).kernels:
            for f in k.flags:
                if f.code in fired and f.basis is Basis.EVIDENCE:
                    fired[f.code].add(p.name)
    for code, names in PLANTED.items():
        present = {n for n in names if (PTX / n).exists()}
        assert fired[code] == present, (code, fired[code])
