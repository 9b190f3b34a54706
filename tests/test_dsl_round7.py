"""The worksheet on a seventh set of Gluon / Triton 3.6 kernels, compiled without a GPU
(fixtures/src/gluon/round7: the generators, the TTGIR and the README that holds each design's
partition and barrier tables): a sm_100a attention-like kernel whose softmax partition hands P to
the MMA warp in tensor memory (P as the MMA's A operand), a sm_100a persistent GEMM with five
partitions (A and B on separate ready barriers, a column-statistics partition beside the epilogue,
both releasing one accumulator barrier of count 2, and a TMA-store warp fed through a 2-deep
ring), a sm_90a ping-pong whose two consumer warpgroups share one ring and take turns through a
token ring of two mbarriers, a sm_100a split-K over two MMA warps with an accumulator each, and
Triton `warp_specialize=True` loops (a GELU epilogue, fp8, and persistent `flatten=True` loops
whose epilogue loads a residual tile by TMA). Correct kernels raise no evidence flag; each
planted bug raises exactly its own flag."""

from __future__ import annotations

import pytest

from support import assert_planted, evidence_flags, ptx_sheet
from support import case as _case

G = "global_smem+"

CORRECT = ["e7_attn", "e7_five", "e7_pp", "e7_ks", "t7_gelu_s4_w4", "t7_gelu_fp8_s5_w8", "t7_pgelu_flat_s3_w4",
           "t7_pgelu_flat_s4_w8"]


PLANTED = [
    _case("e7_attn_tx", [8], "expects 16384"),
    _case("e7_attn_sph", [10], "parity 1 on its first trip"),
    # the softmax arrives p_full (line 895) before its tcgen05.st of P (line 901): the MMA warp
    # reads P as its tensor-memory A operand before it is written
    _case("e7_attn_pearly", [14], "only then writes tensor memory"),
    _case("e7_attn_pnoflip", [12], "parity 0 on every trip"),
    _case("e7_five_txb", [8], "expects 32768"),
    # the MMA warp wraps its stage at 4 on the rings of 5: it never commits empty[4] (+197760),
    # on which the loader waits on its second turn of stage 4
    _case("e7_five_wrap4", [2], G + "197760 get(s) 0"),
    _case("e7_five_ae1", [2], "init with 2"),
    # no fence between the epilogue's st.shared into c_ring and its arrive on c_full; the store
    # warp's TMA store reads it
    _case("e7_five_nofence", [5], "through mbarrier.arrive (line 577)"),
    _case("e7_pp_empty2", [2], "init count 2"),
    _case("e7_pp_nofence", [5], "stmatrix.sync.aligned.m8n8.x4.shared.b16 (line 932"),
    _case("e7_pp_relearly", [14], "no wgmma.wait_group retires"),
    # MMA1 commits done0 instead of done1 (the barriers sit 16 bytes lower in this build): done0
    # gets two arrivals on count 1, done1 none while the epilogue waits on it
    _case("e7_ks_wrongdone", [2, 2], "nothing ever arrives"),
    _case("e7_ks_d1ph", [10], G + "147672 for parity 1"),
    # consumer 1's first wait on its turn barrier asks for parity 1 too: both start at once
    _case("e7_pp_turnph", [10], "both first waits ask for parity 1"),
    # the epilogue waits only done0, then reads acc[1] (columns 128-255) that MMA warp 6 writes
    # and commits to done1, which nobody waits on
    _case("e7_ks_nowait1", [15], G + "147672"),
]


_sheet = ptx_sheet


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_raises_no_evidence_flag(name):
    assert evidence_flags(_sheet(name)) == []


@pytest.mark.parametrize("name, codes, piece", PLANTED)
def test_each_planted_bug_raises_its_own_flag(name, codes, piece):
    assert_planted(name, codes, piece)


def test_the_statistics_scratch_needs_no_proxy_fence():
    """e7_five's statistics partition (warps 4-7) reduces its column maxima through shared
    memory (st.shared at global_smem+196608.., read back with ld.shared by the same warps); the
    TMA-store warp (warp 10) reads c_ring (163840..196607), another partition's code, reached
    only through the dispatch loop. No fence is due: no flag 5 of any basis (it was one, as an
    assumption, on the correct kernel and each planted variant but the unfenced one)."""
    assert _sheet("e7_five").flags == ()
    for name in ("e7_five_txb", "e7_five_wrap4", "e7_five_ae1"):
        assert not [f for f in _sheet(name).flags if f.code == 5], name


@pytest.mark.parametrize("name", ["t7_pgelu_flat_s3_w4", "t7_pgelu_flat_s4_w8"])
def test_the_residual_ring_of_a_flattened_loop_is_decided(name):
    """Triton's persistent `flatten=True` epilogue loads a residual tile by TMA through a ring
    whose index starts at -1 and is advanced (and wrapped) before each use: every barrier is
    told apart (the slot before the ring is no barrier), so nothing is left unchecked."""
    k = _sheet(name)
    assert k.unchecked == () and all(b.decided for b in k.barriers), (k.unchecked, [b.name for b in k.barriers])
    assert k.flags == ()


ROLES = {
    "e7_attn": ["softmax (warps 0-3): FMA math, tensor-memory load, TMA store", "idle (warps 4-5)",
                "producer (warp 6): TMA load", "consumer (warp 7): MMA issue (tcgen05)"],
    "e7_pp": ["consumer (warps 0-3): MMA issue (wgmma), TMA store",
              "consumer (warps 4-7): MMA issue (wgmma), TMA store", "idle (warps 8-9)", "producer (warp 10): TMA load",
              "idle (warp 11)"],
    "e7_ks": ["epilogue (warps 0-3): tensor-memory load, TMA store", "producer (warp 4): TMA load",
              "consumer (warp 5): MMA issue (tcgen05)", "consumer (warp 6): MMA issue (tcgen05)", "idle (warp 7)"],
    "t7_gelu_s4_w4": ["epilogue (warps 0-3): global loads, FMA math, tensor-memory load, TMA store",
                      "producer (warps 4-5): TMA load", "consumer (warp 6): MMA issue (tcgen05)", "idle (warp 7)"],
    "t7_gelu_fp8_s5_w8": ["epilogue (warps 0-7): global loads, FMA math, tensor-memory load, TMA store",
                          "producer (warps 8-9): TMA load", "consumer (warp 10): MMA issue (tcgen05)",
                          "idle (warp 11)"],
    # the epilogue's own TMA loads fetch the residual tile
    "t7_pgelu_flat_s3_w4": ["epilogue (warps 0-3): TMA load, FMA math, tensor-memory load, TMA store",
                            "producer (warps 4-5): TMA load", "consumer (warp 6): MMA issue (tcgen05)",
                            "idle (warp 7)"],
    "t7_pgelu_flat_s4_w8": ["epilogue (warps 0-7): TMA load, FMA math, tensor-memory load, TMA store",
                            "producer (warps 8-9): TMA load", "consumer (warp 10): MMA issue (tcgen05)",
                            "idle (warp 11)"],
    # the column-statistics partition (warps 4-7) reads the accumulator and writes its maxima out
    # with atomics: an epilogue beside the one that stores C, not a "consumer" (the MMA issuer's word)
    "e7_five": ["epilogue (warps 0-3): tensor-memory load", "epilogue (warps 4-7): tensor-memory load, global atomics",
                "producer (warp 8): TMA load", "consumer (warp 9): MMA issue (tcgen05)",
                "epilogue (warp 10): TMA store", "idle (warp 11)"],
}


@pytest.mark.parametrize("name", sorted(ROLES))
def test_each_partition_is_named_with_its_warps_and_job(name):
    """The README's partition tables: every partition, the padding warps included, by its warps
    and by what it issues; none is "common"."""
    texts = [r.text for r in _sheet(name).roles]
    for want in ROLES[name]:
        assert any(t.startswith(want) for t in texts), (want, texts)
    assert len(texts) == len(ROLES[name]), texts
