"""The worksheet and inspect on a fourth set of DSL kernels, all compiled without a GPU: Gluon
kernels (fixtures/src/gluon/gluon_round4.py: attention with two independent producer warps and
a K and a V ring, FA4-like attention with two softmax warpgroups on one K/V ring, attention with a
correction partition and O in tensor memory, ping-pong GEMMs whose two consumers alternate tiles
under an ordering barrier pair, sm_90a and sm_100a), Triton's own warp specialization
(fixtures/src/gluon/triton_round4.py: a blockwise-scaled fp8 GEMM, a GEMM with three TMA copies a
stage, attention; two PTX edits in triton_round4_mutate.py), CuTe DSL 4.8.1 kernels
(fixtures/src/cute/h4_{pp2p,attn,attn90,mc2p}.py: a ping-pong wgmma GEMM and a cluster-multicast
tcgen05 GEMM, each with two producer warps on one depth-2 ring, attention-like kernels with six
pipelines) and a TVM TIRx kernel with two producer warps on a 3-stage ring
(fixtures/src/tirx/tirx_2p.py). The truth is each design, as the READMEs state it: correct
kernels raise no evidence flag and their warps get the design's roles; each planted bug raises
exactly its own flag, naming the barrier it is about; inspect's partitions on the sm_100a cubins
are the design's. Where the sheet or inspect still disagrees with the design, the case is a
strict xfail whose reason says how: it starts to pass (and so fails) once that is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import ROOT, warp_roles
from wsperf.analyses.correctness import Basis
from wsperf.analyses.static import inspect
from wsperf.analyses.worksheet import worksheet
from wsperf.collectors.store import open_store

PTX = ROOT / "fixtures" / "ptx"
CUBINS = ROOT / "fixtures" / "cubins"
D = "__dynamic_shmem__0+"   # CuTe's dynamic shared memory
G = "global_smem+"          # Triton's and Gluon's
S = "s_buf_w_offset_ptr+"   # TIRx's dynamic shared buffer


def _case(*args):
    return pytest.param(*args, id=args[0])


def _xfail(*args, reason: str):
    return pytest.param(*args, marks=pytest.mark.xfail(strict=True, reason=reason), id=args[0])


# --- the designs' roles (warp -> the role names the sheet gives it) -------------------------

def _warps(ws, role: str) -> dict[int, set[str]]:
    return {w: {role} for w in ws}


_ATTN2P = {**_warps(range(4), "softmax"), 4: {"producer"}, 5: {"producer"}, 6: {"consumer"}, 7: {"idle"}}
_FA2SM = {**_warps(range(8), "softmax"), 8: {"idle"}, 9: {"idle"}, 10: {"producer"}, 11: {"consumer"}}
_ATTN_CORR = {**_warps(range(4), "softmax"), **_warps(range(4, 8), "correction"), 8: {"idle"}, 9: {"idle"},
              10: {"producer"}, 11: {"consumer"}}
_PP90 = {**_warps(range(8), "consumer"), 8: {"idle"}, 9: {"idle"}, 10: {"producer"}, 11: {"idle"}}
_PP100 = {**_warps(range(4), "epilogue"), 4: {"producer"}, 5: {"consumer"}, 6: {"consumer"}, 7: {"idle"}}
_TGEMM = {**_warps(range(8), "epilogue"), 8: {"producer"}, 9: {"producer"}, 10: {"consumer"}, 11: {"idle"}}
_TATTN1 = {**_warps(range(4), "softmax"), **_warps(range(4, 8), "correction"), 8: {"producer"}, 9: {"producer"},
           10: {"consumer"}, 11: {"idle"}}
_TATTN3 = {**_warps(range(8), "softmax"), **_warps(range(8, 12), "correction"), 12: {"producer"},
           13: {"producer"}, 14: {"consumer"}, 15: {"idle"}}
_PP2P = {0: {"producer"}, 1: {"producer"}, 2: {"idle"}, 3: {"idle"}, **_warps(range(4, 12), "consumer")}
_ATTN = {0: {"softmax", "tensor-memory owner"}, **_warps(range(1, 4), "softmax"), 4: {"producer"},
         5: {"consumer"}, 6: {"producer"}}
_ATTN90 = {0: {"producer"}, 1: {"producer"}, 2: {"idle"}, 3: {"idle"}, **_warps(range(4, 8), "consumer")}
_MC2P = {0: {"epilogue", "tensor-memory owner"}, **_warps(range(1, 4), "epilogue"), 4: {"producer"},
         5: {"consumer"}, 6: {"producer"}}
_TIRX2P = {0: {"producer"}, 1: {"consumer"}, 2: {"tensor-memory owner"}, 3: {"producer"},
           **_warps(range(4, 8), "epilogue")}

# Every kernel that is correct by design, with its roles.
CORRECT = [
    ("g_attn2p", _ATTN2P), ("g_attn2p_k3v1", _ATTN2P), ("g_fa2sm", _FA2SM), ("g_fa2sm_kvs2", _FA2SM),
    ("g_attn_corr", _ATTN_CORR), ("g_h_pingpong", _PP90), ("g_pp100", _PP100),
    ("t_bscale_fp8_s3_w8", _TGEMM), ("t_cgemm_s2_w8", _TGEMM), ("t_attn_ns1_d128", _TATTN1),
    ("t_attn_ns3_w8", _TATTN3),
    ("h4_pp2p", _PP2P), ("h4_pp2p_cnt", _PP2P), ("h4_pp2p_named", _PP2P), ("h4_pp2p_step", _PP2P),
    ("h4_attn", _ATTN), ("h4_attn90", _ATTN90), ("h4_mc2p", _MC2P), ("h4_mc2p_split", _MC2P),
    ("tirx_2p", _TIRX2P),
]

# Every correct kernel's roles are the design's (the correction of g_attn_corr, which also stores
# O / l at the end, is named by its in-place rescale of tensor memory, traced through registers).
_ROLES_WRONG: dict[str, str] = {}

# Each planted bug: (variant, its flag, pieces of the flag's text: the barrier and the numbers
# or the cause).
PLANTED = [
    # the V loader expects 4096 bytes on v_ready[s] for its 8192-byte copy
    _case("g_attn2p_vtx", 8, (G + "{81952,81960}", "expects 4096", "deliver 8192")),
    # the V loader never flips its phase at the ring's wrap: its waits on v_empty[s] ask parity 1 forever
    _case("g_attn2p_vnoflip", 12, (G + "{81968,81976}", "producer (warp 5)", "parity 1")),
    # the MMA warp commits k_empty[ks] before the QK^T MMA that reads k_ring[ks]
    _case("g_attn2p_kearly", 14, (G + "{81936,81944}", "consumer (warp 6)", "tcgen05.commit", "tcgen05.mma")),
    # p_ready initialized with 2, one softmax arrive a phase
    _case("g_attn2p_pcnt2", 2, (G + "82016", "count 2", "1 arrival(s) per phase")),
    # the K/V stage is released (committed) with S0's MMA, before S1's MMA reads it
    _case("g_fa2sm_krel", 14, (G + "{122912,122920,122928}", "consumer (warp 11)", "tcgen05.commit", "tcgen05.mma")),
    # softmax 1 arrives p_ready[0] instead of p_ready[1]: two arrivals a phase on p_ready[0] (count 1)
    _case("g_fa2sm_pidx", 2, (G + "122960", "count 1", "2 arrival(s) per phase", "softmax (warps 4-7)")),
    # alpha_ready initialized with 4, one softmax arrive a phase
    _case("g_attn_corr_acnt4", 2, (G + "83088", "count 4", "1 arrival(s) per phase")),
    # WG0 first waits order[0] with parity 0: the two consumer warpgroups wait for each other
    _case("g_h_pingpong_order", 7, (G + "163904", G + "163912", "parity 0")),
    # empty[s] count 2, one consumer warpgroup arrives a phase
    _case("g_h_pingpong_cnt2", 2, (G + "{163872,163880,163888}", "count 2", "1 arrival(s) per phase")),
    _case("g_pp100_cnt2", 2, (G + "{131104,131112,131120}", "count 2", "1 arrival(s) per phase")),
    # MMA0 first waits order[0] with parity 0: the two MMA warps wait for each other
    _case("g_pp100_order", 7, (G + "131136", G + "131144", "consumer (warp 5)", "consumer (warp 6)")),
    # PTX edit, line 949: expect_tx 16384 on the ring that Ar (16384) and B (8192) complete on
    _case("t_cgemm_s2_w8_tx16k", 8, (G + "{123184,123192,123200}", "expects 16384", "deliver 24576")),
    # v_empty[s] committed before the PV MMAs that read the V stage
    _case("h4_attn_vearly", 14, (D + "{72,80,88}", "consumer (warp 5)", "tcgen05.commit", "tcgen05.mma")),
    # o_empty (count 128) released by one elected lane of each epilogue warp
    _case("h4_attn_olane", 2, (D + "136", "count 128", "4 arrival(s) per phase")),
    # q_empty is never committed: producer 1 hangs on its second Q load
    _case("h4_attn_qkeep", 2, (D + "8:", "nothing ever arrives", "producer (warp 4)")),
    # v_empty's arrive between wgmma.commit_group and wgmma.wait_group 0: the wgmma may still read V
    _case("h4_attn90_vearly", 14, (D + "{72,80,88}", "consumer (warps 4-7)", "line 2573", "wgmma.wait_group")),
    # full[] init 1, while the A and the B producer each arrive a phase
    _case("h4_mc2p_fullcnt", 2, (D + "{0,8}", "count 1", "2 arrival(s) per phase")),
    # the MMA warp commits to its own empty[s] only (no multicast): count 2 never reached
    _case("h4_mc2p_local", 2, (D + "{16,24}", "count 2", "1 arrival(s) per phase")),
    _case("tirx_2p_fullcnt", 2, (S + "{98304,98312,98320}", "count 1", "2 arrival(s) per phase")),
    # producer B waits empty[s] with parity 1 always
    _case("tirx_2p_bnoflip", 12, (S + "{98328,98336,98344}", "producer (warp 3)", "parity 1")),
    # producer B's state has 2 stages on the 3-stage ring: full[2] gets producer A's arrive only
    _case("tirx_2p_bstages", 2, (S + "98320 get(s) 1", "reach only +{98304,98312}", "producer (warp 3)")),
    # --- still decided wrongly ---
    # the MMA warp waits o_corr (+83056) with parity (i&1)^1: its first wait passes on the fresh
    # barrier and its PV MMA accumulates into O (the tensor-memory address loaded from the
    # shared slot +65536) while the correction rescales O there with tcgen05.st; its wait for
    # the V stage between the two orders nothing against the correction on the first trip
    _case("g_attn_corr_ph", 10, (G + "83056", "consumer (warp 11)", "parity 1", "tcgen05.st", "line 1020")),
    # PTX edit: the MMA warp's stage counter wraps at 4 on a ring of 3, so it waits on ready[3]
    # (+99384) and commits empty[3] (+99352), neither initialized. The fence and first-pass
    # findings its out-of-ring stage causes are assumptions that name flag 13
    _case("t_bscale_fp8_s3_w8_wrap4", 13, (G + "99384", G + "99352", "no mbarrier.init initializes it")),
    # CuTe ping-pong: the ring index after `cs.advance(7)` is C's signed `% 2` of a counter
    # that never goes negative (`_signed_rem`), each warpgroup's ring starts at its own stage,
    # and the warpgroups take turns through named barriers whose ids differ by warpgroup
    *[_case(n, 2, (D + "{0,8}", "count 1", "2 arrival(s) per phase"))
      for n in ("h4_pp2p_fullcnt", "h4_pp2p_cnt_fullcnt", "h4_pp2p_named_fullcnt")],
    # the seven unrolled `cs.advance()` steps compile to `i + 2` with a wrap tested on `i`, then
    # five `+ 1`s each wrapped on the value before: read value by value, the index stays {0, 1}
    _case("h4_pp2p_step_fullcnt", 2, (D + "{0,8}", "count 1", "2 arrival(s) per phase")),
    _case("h4_pp2p_noflip", 12, (D + "{16,24}", "producer (warp 1)", "parity 1")),
    _xfail("h4_pp2p_order", 12, (D + "32", "consumer (warps 4-11)", "parity 1"),
           reason="flag 12 is not raised; flag 2 is, three times, on what the bug causes: order[0] (+32) gets "
                  "no arrival, order[1] (+40) 256 a phase for init 128, empty 8 a phase for init 4 (both "
                  "warpgroups built with group id 0 consume the same stages)"),
    _case("h4_pp2p_ordint", 12, (D + "{32,40}", "consumer (warps 4-11)", "the same value every trip")),
    # the MMA's K state wraps at 3 on the 2-stage ring: its k_empty commit reaches +{32,40,48},
    # and +48 is v_full[0], which the V producer's expect_tx completes too. Each barrier's own
    # arrivals are counted (every site's slots are decided); the stray slot +32 that the MMA's
    # k_full wait reaches on its third trip is one its own commit fed on the first: no deadlock
    _case("h4_attn_kstages", 2, (D + "48:", "count 1", "2 arrival(s) per phase", "consumer (warp 5)")),
    # the multicast commit's constant mask 0b11, which every CTA runs: at least 2 arrive-ons a
    # phase on each CTA's empty[s], whatever the cluster's shape (a launch attribute)
    _case("h4_mc2p_emptycnt", 2, (D + "{16,24}", "count 1", "at least 2 arrival(s) per phase")),
    _xfail("tirx_2p_btx", 8, (S + "{98304,98312,98320}", "expects 8192"),
           reason="not flagged: the copied bytes are in the tensor maps, so expect_tx is listed as not checked"),
]

def test_a_multicast_commit_that_one_rank_runs_is_no_evidence_of_a_count(tmp_path):
    """The other side of h4_mc2p_emptycnt: its commit guarded by a branch on the CTA's rank
    in its cluster (only even ranks commit, to both CTAs: one arrive-on a phase each, which
    count 1 matches). Every CTA no longer runs it, so the mask's CTA count is no lower bound
    and flag 2, if raised, is not evidence."""
    text = (PTX / "h4_mc2p_emptycnt.ptx").read_text()
    commit = "\t@%p45 bra \t$L__BB0_44;\n"
    assert text.count(commit) == 1
    text = text.replace(commit, commit + "\tand.b32 \t%r900, %r7, 1;\n\tsetp.ne.b32 \t%p900, %r900, 0;\n"
                                         "\t@%p900 bra \t$L__BB0_44;\n")
    f = tmp_path / "h4_mc2p_emptycnt_rank0.ptx"
    f.write_text(text)
    (k,) = worksheet([f]).kernels
    assert [f.code for f in k.flags] == [2] and _evidence(k) == [], k.flags


# A missing fence.proxy.async before an async-proxy reader: flag 5 is the only flag. Where the
# sheet does not resolve the reader's operand to the stored bytes it is an assumption that says
# so (as for cute_transform_nofence); the basis is not asserted.
NOFENCE = [
    # the softmax's st.shared of P, arrive p_ready, the MMA warp's tcgen05.mma reads P
    _case("g_attn2p_nofence", ("st.shared", "tcgen05.mma")),
    # the consumer's st.shared of sP, bar.sync 1, its own wgmma reads sP
    _case("h4_attn90_nofence", ("st.shared", "wgmma.mma_async")),
    # warps 0-3 store the swizzled sP, arrive p_full (+112); warp 5's tcgen05.mma reads sP
    _case("h4_attn_pfence", ("st.shared", "tcgen05.mma")),
]


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _evidence(k) -> list:
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]


@pytest.mark.parametrize("name", [n for n, _ in CORRECT])
def test_a_correct_kernel_raises_no_evidence_flag(name):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)


@pytest.mark.parametrize("name, truth", [
    _xfail(n, t, reason=_ROLES_WRONG[n]) if n in _ROLES_WRONG else _case(n, t) for n, t in CORRECT])
def test_the_warps_of_a_correct_kernel_get_the_designs_roles(name, truth):
    k = _sheet(name)
    got = warp_roles(k)
    assert {w: got.get(w) for w in truth} == truth, [r.text for r in k.roles]


@pytest.mark.parametrize("name", ["h4_pp2p", "h4_pp2p_cnt", "h4_pp2p_named", "h4_pp2p_step", "h4_mc2p", "tirx_2p"])
def test_code_roles_run_in_common_is_shared_not_idle(name):
    """The block two producers share (CuTe's `if warp == 4 or warp == 6:`, TIRx's tail) is
    named shared, with the warps of the roles that run it, never idle."""
    k = _sheet(name)
    shared = [r.text for r in k.roles if r.text.startswith("shared (")]
    assert shared and not any(r.text.startswith("idle (") and "statements" in r.text and any(
        w in r.text for w in ("warps 4,6", "warps 0-1", "warps 2,4,5,6,7")) for r in k.roles), [r.text for r in k.roles]


@pytest.mark.parametrize("name, code, pieces", PLANTED)
def test_each_planted_bug_raises_exactly_its_own_flag(name, code, pieces):
    k = _sheet(name)
    flags = _evidence(k)
    assert [f.code for f in flags] == [code], (name, k.flags)
    for piece in pieces:
        assert piece in flags[0].text, (name, piece, flags[0].text)


@pytest.mark.parametrize("name, pieces", NOFENCE)
def test_a_missing_proxy_fence_is_flagged_at_the_reader(name, pieces):
    k = _sheet(name)
    assert [f.code for f in k.flags] == [5], (name, k.flags)
    for piece in pieces:
        assert piece in k.flags[0].text, (name, piece, k.flags[0].text)


# --- inspect: the partitions each design decides, read from the sm_100a cubins ---------------

def _parts(name: str) -> tuple[bool, dict[str, str]]:
    (k,) = inspect(open_store(None), [CUBINS / name]).kernels
    a = k.analysis
    return a.warp_specialized, {p.partition: p.job or "" for p in a.partitions}


_MC2P_PARTS = {"epilogue (warps 0-3)": "tensor-memory load", "producer (warp 4)": "TMA load",
               "consumer (warp 5)": "MMA issue (tcgen05)", "producer (warp 6)": "TMA load"}


@pytest.mark.parametrize("name, truth", [
    _case("g_attn2p.sm_100a.cubin", {"softmax (warps 0-3)": "softmax (exp2)", "producer (warp 4)": "TMA load",
                                "producer (warp 5)": "TMA load", "consumer (warp 6)": "MMA issue (tcgen05)",
                                "idle (warp 7)": "none"}),
    _case("g_fa2sm_kvs2.sm_100a.cubin", {"softmax (warps 0-3)": "softmax (exp2)", "softmax (warps 4-7)": "softmax (exp2)",
                                    "idle (warps 8-9)": "none", "producer (warp 10)": "TMA load",
                                    "consumer (warp 11)": "MMA issue (tcgen05)"}),
    # warps 4-7 rescale O in tensor memory (LDTM, FMUL by alpha, STTM of the products) and store
    # O / l by TMA at the end: the in-place rescale names them, not the store
    _case("g_attn_corr.sm_100a.cubin", {"softmax (warps 0-3)": "softmax (exp2)",
                                        "correction (warps 4-7)": "rescales tensor memory (correction), TMA store",
                                        "idle (warps 8-9)": "none", "producer (warp 10)": "TMA load",
                                        "consumer (warp 11)": "MMA issue (tcgen05)"}),
    # warps 0-3 also store O with st.global; their row maximum is a chain of FSETP + FSEL
    # through one register (GELU's and SwiGLU's selects are per element: they stay epilogues,
    # tests/test_inspect_dsl.py)
    _case("h4_attn.sm_100a.cubin", {"softmax (warps 0-3)": "softmax (exp2)", "producer (warp 4)": "TMA load",
                                    "consumer (warp 5)": "MMA issue (tcgen05)", "producer (warp 6)": "TMA load"}),
    _case("h4_mc2p.sm_100a.cubin", _MC2P_PARTS),
    # producer A's own block is entered by `warp == 4 and tile < n`, the tile test an unknown
    # compare OR-ed with the warp test: the warp test decides
    _case("h4_mc2p_split.sm_100a.cubin", _MC2P_PARTS),
    # warp 2 only allocates and frees tensor memory: no partition name of inspect's says so
    _case("tirx_2p.sm_100a.cubin", {"producer (warp 0)": "TMA load", "consumer (warp 1)": "MMA issue (tcgen05)",
                               "producer (warp 3)": "TMA load", "epilogue (warps 4-7)": "tensor-memory load"}),
])
def test_inspect_finds_the_designs_partitions(name, truth):
    ws, parts = _parts(name)
    assert ws is True
    for partition, job in truth.items():
        assert partition in parts and parts[partition].startswith(job), (partition, parts)
