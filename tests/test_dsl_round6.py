"""The worksheet on a sixth set of Gluon / Triton 3.6 kernels, compiled without a GPU
(fixtures/src/gluon/round6: the generators, the TTGIR and the README that holds each design's
partition and barrier tables): a sm_90a SwiGLU dual GEMM whose stores reach a TMA-store warp
through a 2-deep shared-memory ring, a sm_90a split-K where two consumer warpgroups share one
4-deep ring by k-step parity and reduce through shared memory, sm_100a persistent GEMMs with four
partitions (a normalize pass that round-trips the accumulator through tensor memory), two
epilogue partitions that both release one accumulator barrier (init count 2), a store ring walked
across tiles with compare-wrapped indices, and Triton `warp_specialize=True` loops (bias + row
max, a 3D batched GEMM) with their sm_90a non-specialized controls. Correct kernels raise no
evidence flag; each planted bug raises exactly its own flag."""

from __future__ import annotations

import pytest

from support import assert_planted, evidence_flags, ptx_sheet
from support import case as _case

G = "global_smem+"

CORRECT = ["h6_dual", "h6_ksplit", "b6_norm", "b6_twoepi", "b6_sring", "t6_biasmax_s3_w8",
           "t6_bmm3d_s2_w4_sm100", "t6_biasmax_s4_w8_sm90", "t6_bmm3d_s4_w8_sm90"]


PLANTED = [
    _case("h6_dual_tx", [8], "expects 16384"),
    # the consumer's first c_empty wait needs the store warp's release, which needs c_full
    _case("h6_dual_cph", [7], G + "{90384,90392}"),
    _case("h6_dual_relearly", [14], "no cp.async.bulk.wait_group.read between"),
    _case("h6_ksplit_nored", [2], "nothing ever arrives"),
    _case("h6_ksplit_redph", [10], "parity 1"),
    # consumer 1 indexes j%5 on a ring of 4: its stage 4 is the word past ready[], empty[0]
    _case("h6_ksplit_wrap5", [2], "2 arrival(s) per phase"),
    _case("b6_norm_cnt2", [2], "init count 2"),
    _case("b6_twoepi_cnt1", [2], "2 arrival(s) per phase"),
    _case("b6_twoepi_noflip", [12], "parity 0 on every trip"),
    # the store warp wraps at 4 on a ring of 3: c_full[3] and c_empty[3] are gap words
    _case("b6_sring_wrap4", [13], G + "123176"),
    _case("b6_sring_nofence", [5], "st.shared"),
    # no fence between the stmatrix stores and the arrive on c_full; the store warp's source
    # is a pointer stepped by 8192 and wrapped by `- (tc / 2) << 14`: the two stages of c_ring
    _case("h6_dual_nofence", [5], "stmatrix.sync.aligned.m8n8.x4.shared.b16 (line 454"),
    # the store warp arrives c_full[cs] instead of c_empty[cs]: two arrivals on one, none on the other
    _case("b6_sring_wrongbar", [2, 2], "nothing ever arrives"),
    _case("b6_sring_cnoflip", [12], "parity 1 on every trip"),
    # the store partition's first norm_done wait passes at once: it reads the accumulator before the
    # normalize partition's tcgen05.st (the TMEM base reaches the workers through a copied slot)
    _case("b6_norm_ndph", [10], "tcgen05.st"),
    # acc_empty released right after its wait, before the first tcgen05.ld of the accumulator
    _case("b6_norm_relfirst", [14], "only after it"),
]


_sheet = ptx_sheet


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_raises_no_evidence_flag(name):
    assert evidence_flags(_sheet(name)) == []


@pytest.mark.parametrize("name, codes, piece", PLANTED)
def test_each_planted_bug_raises_its_own_flag(name, codes, piece):
    assert_planted(name, codes, piece)


ROLES = {
    "h6_dual": ["consumer (warps 0-3): MMA issue (wgmma)", "idle (warps 4-5)", "producer (warp 6): TMA load",
                "epilogue (warp 7): TMA store"],
    "h6_ksplit": ["consumer (warps 0-3): MMA issue (wgmma), TMA store", "consumer (warps 4-7): MMA issue (wgmma)",
                  "idle (warps 8-9)", "producer (warp 10): TMA load", "idle (warp 11)"],
    "b6_norm": ["correction (warps 0-3)", "epilogue (warps 4-7): tensor-memory load, TMA store",
                "idle (warps 8-9)", "producer (warp 10): TMA load", "consumer (warp 11): MMA issue (tcgen05)"],
    "b6_sring": ["epilogue (warps 0-3): tensor-memory load", "producer (warp 4): TMA load",
                 "consumer (warp 5): MMA issue (tcgen05)", "epilogue (warp 6): TMA store", "idle (warp 7)"],
}


@pytest.mark.parametrize("name", sorted(ROLES))
def test_each_partition_is_named_with_its_warps_and_job(name):
    """The README's partition tables: every partition, the padding warps included, by its warps
    and by what it issues; none is "common"."""
    texts = [r.text for r in _sheet(name).roles]
    for want in ROLES[name]:
        assert any(t.startswith(want) for t in texts), (want, texts)
    assert len(texts) == len(ROLES[name]), texts


def test_a_note_said_of_many_lines_is_said_once():
    """Triton's dispatch reads its partition table at each entry of its loop: the note that
    says each thread's branch rests on that table is one line that names every place, not
    one line per place."""
    k = ptx_sheet("t6_biasmax_s3_w8")
    table = [n.text for n in k.notes if "each thread's branch is decided by a table" in n.text]
    assert len(table) == 1, table
    assert table[0].startswith(("line ", "lines ")), table
