"""The worksheet on a third set of DSL kernels, all compiled without a GPU: Gluon kernels
(fixtures/src/gluon/gluon_round3.py: a persistent zero-point GEMM whose 4-warp row-sum partition
shares the stage ring with the MMA warp, a K ring unrolled by its stage count beside an
epilogue ring to a TMA-store warp, an sm_90a wgmma ring released one step late), Triton's own
warp specialization with data-dependent trip counts (fixtures/src/gluon/triton_round3.py and
its PTX edits, triton_round3_mutate.py) and CuTe DSL 4.8.1 kernels (fixtures/src/cute/
cute_{multicons,wgpersist,grouped,unroll7,transform}.py: a ring with two kinds of consumer, a
persistent wgmma GEMM with an epilogue ring to a TMA-store warp, an FP8 GEMM with a per-tile K
read from memory, a 7-stage ring in a fully unrolled K loop, an input-transform chain over two
rings). The truth is each design, as the READMEs state it: correct kernels raise no evidence
flag and their warps get the design's roles; each planted bug the sheet decides raises exactly
its own flag, naming the barrier it is about. (The planted bugs the sheet does not decide yet
are fixtures without a test here; the READMEs list them.)"""

from __future__ import annotations

import pytest

from support import ROOT, warp_roles
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet

PTX = ROOT / "fixtures" / "ptx"
D = "__dynamic_shmem__0"
G = "global_smem+"

# --- the designs' roles (warp -> the role names the sheet gives it) -------------------------

_ZP = {**{w: {"epilogue"} for w in range(4)}, **{w: {"consumer"} for w in range(4, 8)},  # row-sum reducer
       8: {"idle"}, 9: {"idle"}, 10: {"producer"}, 11: {"consumer"}}                   # loader, MMA
_UNROLL3 = {**{w: {"epilogue"} for w in range(4)}, 4: {"producer"}, 5: {"consumer"},
            6: {"epilogue"}, 7: {"idle"}}                                              # 6: the TMA-store warp
_LAG6 = {**{w: {"consumer"} for w in range(4)}, 4: {"idle"}, 5: {"idle"}, 6: {"producer"}, 7: {"idle"}}
_TWS3 = {**{w: {"epilogue"} for w in range(4)}, 4: {"producer"}, 5: {"producer"}, 6: {"consumer"},
         7: {"idle"}}
_TMEM_EPI = {0: {"epilogue", "tensor-memory owner"}, 1: {"epilogue"}, 2: {"epilogue"}, 3: {"epilogue"}}
_GROUPED = {**_TMEM_EPI, 4: {"producer"}, 5: {"consumer"}}                             # also cute_unroll7
_MULTICONS = {**_GROUPED, 6: {"consumer"}, 7: {"consumer"}}                            # 6-7: row statistics
_TRANSFORM = {**_GROUPED, **{w: {"consumer"} for w in range(6, 10)}}                   # 6-9: transform warps
_WGPERSIST = {0: {"producer"}, 1: {"epilogue"}, 2: {"idle"}, 3: {"idle"},
              **{w: {"consumer"} for w in range(4, 8)}}                                # 1: the TMA-store warp

# Every kernel that is correct by design, with its roles.
CORRECT = [
    ("gluon_zp5", _ZP), ("gluon_zp3", _ZP), ("gluon_zp7_bk32", _ZP), ("gluon_zp5_tf32", _ZP), ("gluon_zp5_w4", _ZP),
    ("gluon_unroll3", _UNROLL3), ("gluon_h_lag6", _LAG6),
    ("tws3_grouped_s3_sm100", _TWS3), ("tws3_grouped_fp8_s6_sm100", _TWS3), ("tws3_tri_s5_sm100", _TWS3),
    ("cute_multicons", _MULTICONS), ("cute_multicons_scale", _MULTICONS),
    ("cute_wgpersist", _WGPERSIST), ("cute_wgpersist_amax", _WGPERSIST), ("cute_wgpersist_amaxtail", _WGPERSIST),
    ("cute_grouped", _GROUPED), ("cute_grouped_peek", _GROUPED),
    ("cute_unroll7", _GROUPED), ("cute_transform", _TRANSFORM),
]

# Each planted bug the sheet decides: (variant, its flag, pieces of the flag's text: the barrier
# and the numbers or the cause).
PLANTED = [
    # empty[s] (count 2 by design: the MMA warp's commit + one reducer thread) initialized with 1
    ("gluon_zp5_cnt1", 2, (G + "{197168,197176,197184,197192,197200}", "count 1", "2 arrival(s) per phase")),
    # the loader announces only A's 16384 bytes on ready[s]; A and B deliver 32768
    ("gluon_zp5_txa", 8, (G + "{197120,197128,197136,197144,197152}", "expects 16384", "deliver 32768")),
    # the reducer never flips its phase: from the ring's second pass its wait on ready[s] passes at once
    ("gluon_zp5_noflip", 12, (G + "{197120,197128,197136,197144,197152}", "consumer (warps 4-7)", "parity 0")),
    # each reducer warp arrives (4) + the MMA commit = 5 arrivals on empty[s] initialized with 2
    ("gluon_zp5_w4_cnt2", 2, (G + "{197168,197176,197184,197192,197200}", "count 2", "5 arrival(s) per phase",
                              "completes early")),
    # the MMA warp waits on empty[s] (its own commit's barrier) instead of ready[s]: first-trip deadlock
    ("gluon_zp5_wrongbar", 7, (G + "{197168,197176,197184,197192,197200}", "consumer (warp 11)", "parity 0")),
    # no fence.proxy.async between the st.shared into c_ring and the arrive on c_full: the storer's TMA store
    ("gluon_unroll3_nofence", 5, ("st.shared", "cp.async.bulk.tensor", "fence.proxy.async")),
    # the MMA warp's phase starts at 1: its first wait on ready[s] passes on the fresh barrier
    ("gluon_unroll3_ph1", 10, (G + "{196800,196808,196816}", "parity 1")),
    # PTX edit: the loader's expect_tx on ready[s] is 16384 for A's and B's 32768 bytes
    ("tws3_grouped_s3_sm100_tx16k", 8, (G + "{98464,98472,98480}", "expects 16384", "deliver 32768")),
    # PTX edit: the MMA warp never flips its ready phase at the ring's wrap
    ("tws3_tri_s5_sm100_noflip", 12, (G + "{98464,98472,98480}", "consumer (warp 6)", "parity 0")),
    # async group of 1 on ab_empty: init 2 while the commit and lane 0 of warps 6, 7 arrive
    ("cute_multicons_cnt", 2, (f"{D}+{{40,48,56,64,72}}", "count 2", "3 arrival(s) per phase")),
    # epi_empty (count 32) released by the store warp's elected lane only
    ("cute_wgpersist_lane", 2, (f"{D}+{{64,72}}", "count 32", "1 arrival(s) per phase")),
    # the store warp's phase on epi_full is the constant 0
    ("cute_wgpersist_nophase", 12, (f"{D}+{{48,56}}", "epilogue (warp 1)", "parity 0")),
    # acc_empty initialized with 128 while lane 0 of each of the 4 epilogue warps arrives
    ("cute_grouped_count", 2, (f"{D}+{{112,120}}", "count 128", "4 arrival(s) per phase")),
    # the producer's state made as a consumer's: its first wait on the fresh ab_empty asks parity 0
    ("cute_unroll7_phase", 7, (f"{D}+{{56,64,72,80,88,96,104}}", "producer (warp 4)", "parity 0")),
    # acc_empty initialized with 4 while the 128 epilogue threads arrive
    ("cute_unroll7_count", 2, (f"{D}+{{128,136}}", "count 4", "128 arrival(s) per phase")),
    # X.empty declared for a group of 128: init 129 while the commit + lane 0 of warps 6-9 arrive
    ("cute_transform_cnt", 2, (f"{D}+{{32,40,48,56}}", "count 129", "5 arrival(s) per phase")),
    # the smem readers' stage counter wraps at 4 on a ring of 5: ab_empty[4] gets only the commit
    ("cute_multicons_stages", 2, (f"{D}+72 get(s) 1", "reach only +{40,48,56,64}", "consumer (warps 6-7)")),
    # the reducer releases empty[s] before its ld.shared of the stage: the loader may refill it meanwhile
    ("gluon_zp5_early", 14, (G + "{197168,197176,197184,197192,197200}", "consumer (warps 4-7)", "ld.shared")),
    # the MMA warp commits onto ab_empty[s] before the stage's MMAs, which the commit does not track
    ("cute_grouped_relfirst", 14, ("consumer (warp 5)", "tcgen05.commit", "tcgen05.mma")),
    # the epilogue's c-ring counter wraps at 4 on 3 slots: c_full[3] / c_empty[3] were never initialized
    ("gluon_unroll3_wrap4", 13, (G + "196888", G + "196920", "no mbarrier.init initializes it")),
    # the consumer releases empty[i%6] after wgmma.wait_group 1, the stage whose wgmma is still in flight
    ("gluon_h_lag6_relcur", 14, (G + "{163888,163896,163904,163912,163920,163928}", "line 298",
                                 "wgmma.wait_group", "consumer (warps 0-3)")),
    # the loader waits on ready[s] (its own expect_tx) instead of empty[s], which the MMA warp commits to
    ("tws3_grouped_s3_sm100_wrongarr", 15, (G + "{98432,98440,98448}", "producer (warps 4-5)",
                                            G + "{98464,98472,98480}", "line 898")),
]


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _evidence(k) -> list:
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]


@pytest.mark.parametrize("name, truth", CORRECT, ids=[n for n, _ in CORRECT])
def test_a_correct_kernel_raises_no_evidence_flag_and_its_roles_are_the_design(name, truth):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)
    got = warp_roles(k)
    assert {w: got.get(w) for w in truth} == truth, [r.text for r in k.roles]


@pytest.mark.parametrize("name, code, pieces", PLANTED, ids=[n for n, _, _ in PLANTED])
def test_each_planted_bug_raises_exactly_its_own_flag(name, code, pieces):
    k = _sheet(name)
    flags = _evidence(k)
    assert [f.code for f in flags] == [code], (name, k.flags)
    for piece in pieces:
        assert piece in flags[0].text, (name, piece, flags[0].text)


def test_transform_without_fence_is_said_unchecked_at_the_mma_that_reads_the_stores():
    """cute_transform_nofence: the transform warps' st.shared of A' into ring Y, then their
    arrive on Y.full with no fence.proxy.async; the MMA warp's tcgen05.mma reads sY. Neither
    the stored address nor the MMA's descriptor is resolved, so the sheet cannot prove the
    flag: it names the stores and the reader as not checked. The correct cute_transform
    fences its stores: no flag and no such note. (The MMA is another warp's code: reaching it
    through the dispatch loop's back edge is no path of the storing threads.)"""
    k = _sheet("cute_transform_nofence")
    assert k.flags == (), k.flags
    assert any("(first line 1570)" in u and "(line 2235)" in u and "fence.proxy.async" in u
               for u in k.unchecked), k.unchecked
    good = _sheet("cute_transform")
    assert good.flags == () and not any("fence" in u for u in good.unchecked), good.unchecked
