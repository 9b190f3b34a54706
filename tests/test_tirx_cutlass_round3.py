"""The worksheet on a third set of TIRx and CUTLASS C++ kernels, all compiled without a GPU:
a persistent TVM TIRx 0.25 tcgen05 GEMM with a 5-stage ring filled by three TMA copies a stage
and an epilogue ring to a TMA-store warp (fixtures/src/tirx/tirx_p5.py; tirx_p5r allocates the
accumulator and epilogue barriers before the stage rings), and CUTLASS 4.2's own sm_100a
kernels as its C++ CollectiveBuilder assembles them: 1-SM, 2-SM (2x1x1 cluster), stream-K,
block-scaled MX FP8 and grouped (fixtures/src/cutlass/cutlass_sm100_builder.cu,
cutlass_sm100_grouped.cu, build_sm100.sh). The truth is each design, as the READMEs state it:
correct kernels raise no evidence flag (and the TIRx kernels' warps get the design's roles);
each planted bug the sheet decides raises exactly its own flag, naming the barrier it is about.
The CUTLASS kernels' roles are not asserted here: the sheet does not name them as the kernel's
WarpCategory does yet. (The planted bugs the sheet does not decide yet are fixtures without a
test here; the READMEs list them.)"""

from __future__ import annotations

import pytest

from support import ROOT, warp_roles
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet

PTX = ROOT / "fixtures" / "ptx"
S = "s_buf_w_offset_ptr+"   # TIRx's dynamic shared buffer
C = "_ZN7cutlass4smemE+"    # CUTLASS's

# tirx_p5: warp 0 loads (TMA), warp 1 issues the MMA, warp 2 owns tensor memory, warp 3 is the
# TMA-store warp, warps 4-7 the epilogue. Warps 0, 1 and 3 are asserted exactly; warp 2 and
# warps 4-7 also get an 'idle' line (the kernel's shared tail), so only their design role is
# asserted to be among theirs.
_P5_EXACT = {0: {"producer"}, 1: {"consumer"}, 3: {"epilogue"}}
_P5_AMONG = {2: "tensor-memory owner", **{w: "epilogue" for w in range(4, 8)}}

TIRX_CORRECT = ["tirx_p5", "tirx_p5r", "tirx_p5_cfull_warp"]
CUTLASS_CORRECT = ["cutlass_sm100_1sm", "cutlass_sm100_2sm", "cutlass_sm100_streamk", "cutlass_sm100_mxf8",
                   "cutlass_sm100_grouped"]

# Each planted bug the sheet decides: (variant, its flag, pieces of the flag's text: the barrier
# and the numbers or the cause).
PLANTED = [
    # c_full init 128 while only the elected lane of each epilogue warp arrives (4 a phase)
    ("tirx_p5_cfull_lane", 2, (S + "{196704,196712}", "count 128", "4 arrival(s) per phase")),
    ("tirx_p5r_cfull_lane", 2, (S + "{196624,196632}", "count 128", "4 arrival(s) per phase")),
    # no fence.proxy.async between the epilogue's st.shared of Cs[b] and its arrive on c_full[b]
    # (+196704, the arrive at line 1339); warp 3 waits on c_full[b] and TMA-stores Cs[b]
    ("tirx_p5_nofence", 5, ("st.shared.v4.u32 (line 1320", "cp.async.bulk.tensor", "mbarrier.arrive (line 1339)",
                            "fence.proxy.async")),
    # the MMA warp waits on full[s] with parity phase ^ 1: its first wait passes on the fresh barrier
    ("tirx_p5_mma_parity", 10, (S + "{196608,196616,196624,196632,196640}", "consumer (warp 1)", "parity 1")),
    # the MMA warp's stage wraps at 5 but its phase never flips: from the second lap on it passes
    ("tirx_p5_noflip", 12, (S + "{196608,196616,196624,196632,196640}", "consumer (warp 1)", "parity 0")),
    # the accumulator pipeline's consumer count per epilogue warp (4) while all 128 threads release
    ("cutlass_sm100_1sm_acccount", 2, (C + "{240,248,256,264}", "count 4", "128 arrival(s) per phase")),
]


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _evidence(k) -> list:
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]


@pytest.mark.parametrize("name", TIRX_CORRECT)
def test_a_correct_tirx_kernel_raises_no_evidence_flag_and_its_roles_are_the_design(name):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)
    got = warp_roles(k)
    assert {w: got.get(w) for w in _P5_EXACT} == _P5_EXACT, [r.text for r in k.roles]
    for w, role in _P5_AMONG.items():
        assert role in got.get(w, set()), (w, [r.text for r in k.roles])


@pytest.mark.parametrize("name", CUTLASS_CORRECT)
def test_a_correct_cutlass_kernel_raises_no_evidence_flag(name):
    k = _sheet(name)
    assert _evidence(k) == [], (name, k.flags)


@pytest.mark.parametrize("name, code, pieces", PLANTED, ids=[n for n, _, _ in PLANTED])
def test_each_planted_bug_raises_exactly_its_own_flag(name, code, pieces):
    k = _sheet(name)
    flags = _evidence(k)
    assert [f.code for f in flags] == [code], (name, k.flags)
    for piece in pieces:
        assert piece in flags[0].text, (name, piece, flags[0].text)


def test_cutlass_2sm_dealloc_ordered_through_the_peer_is_an_assumption():
    """The non-leader CTA's MMA warp frees tensor memory after a wait on a barrier the peer's
    MMA warp arrives on (mapa): the epilogue's reads are ordered through the peer, which one
    CTA's code does not show. Flag 11 is kept, as an assumption that says so."""
    k = _sheet("cutlass_sm100_2sm")
    (f,) = [f for f in k.flags if f.code == 11]
    assert f.basis is Basis.ASSUMPTION and "peer CTA" in f.text, f
