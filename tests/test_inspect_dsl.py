"""`wsperf inspect` on CuTe DSL pipeline kernels (fixtures/src/cute/cute_pipe_*.py, compiled by
CuTe DSL 4.8.1; the design of each in fixtures/src/cute/README.md): SASS shapes the earlier
fixtures did not have. Each test names the class of SASS it covers, not one kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.analyses.analyze import KernelAnalysis
from wsperf.analyses.partitions import _parse, constant_move
from wsperf.analyses.static import inspect
from wsperf.collectors.store import open_store

CUBINS = Path(__file__).resolve().parents[1] / "fixtures" / "cubins"


def _static(name: str) -> KernelAnalysis:
    (k,) = inspect(open_store(None), [CUBINS / name]).kernels
    return k.analysis


def _parts(a: KernelAnalysis) -> dict[str, tuple[str | None, int | None]]:
    return {p.partition: (p.job, p.registers) for p in a.partitions}


@pytest.mark.parametrize("text, move", [
    ("HFMA2 R5, -RZ, RZ, 0, 5.9604644775390625e-08 ;", True),  # ptxas loading the constant 1
    ("HFMA2.MMA R2, -RZ, RZ, 0, -0.0 ;", True),
    ("@P0 FFMA R1, R2, RZ, R3 ;", True),
    ("HFMA2 R1, R2.H0_H0, -RZ.H0_H0, R3 ;", True),
    ("FFMA R1, R2.reuse, R4, RZ ;", False),  # a product: the addend is zero, not a factor
    ("HFMA2 R4, R4, R5, R6 ;", False),
])
def test_an_fma_by_the_zero_register_is_a_constant_move(text, move):
    assert constant_move(_parse(0, text)) is move


@pytest.mark.parametrize("name, partition, job", [
    # the 2-SM TMA warp: 4 `HFMA2 R, -RZ, RZ, ...` constant loads beside its UTMALDG
    ("cute_pipe_2cta.sm_100a.cubin", "producer (warp 4)", "TMA load"),
    # the epilogue warps: tensor-memory loads and stores, constants loaded with HFMA2
    ("cute_pipe_umma_persistent.sm_100a.cubin", "epilogue (warps 0-3)", "tensor-memory load, global stores"),
    ("cute_pipe_umma_acccount.sm_100a.cubin", "epilogue (warps 0-3)", "tensor-memory load, global stores"),
    ("cute_pipe_umma_accphase.sm_100a.cubin", "epilogue (warps 0-3)", "tensor-memory load, global stores"),
    ("cute_pipe_umma_multifree.sm_100a.cubin", "epilogue (warps 0-3)", "tensor-memory load, global stores"),
])
def test_constant_moves_are_no_fma_math(name, partition, job):
    """ptxas loads small constants with `HFMA2 Rx, -RZ, RZ, imm, imm`; counted as FMA math they
    made a TMA producer and an epilogue read `consumer | FMA math, ...`."""
    a = _static(name)
    parts = _parts(a)
    assert parts[partition][0] == job, parts
    assert not any("FMA math" in (j or "") for j, _ in parts.values()), parts
    assert (parts.get("consumer (warp 5)") or ("",))[0].startswith("MMA issue (tcgen05)"), parts
    assert {r.role for r in a.roles} >= {"producer", "consumer"}


@pytest.mark.parametrize("name", ["cute_pipe_clc.sm_100a.cubin", "cute_pipe_clc_count.sm_100a.cubin"])
def test_a_cluster_launch_control_scheduler_is_a_producer_of_work(name):
    """Warp 0 fetches the next tile with `UGETNEXTWORKID.BROADCAST [UR10], [UR11]`
    (clusterlaunchcontrol.try_cancel), which completes its 16 bytes on clc_full; warps 1-4
    wait on clc_full and work on the tile. The kernel was read "not warp-specialized" with
    warp 0 "idle"."""
    a = _static(name)
    assert a.warp_specialized is True
    parts = _parts(a)
    assert parts["scheduler (warp 0)"][0] == "CLC work fetch", parts
    assert parts["consumer (warps 1+)"][0] == "global stores", parts
    roles = {r.role: r.instructions for r in a.roles}
    assert roles.get("producer") and roles.get("consumer"), roles


@pytest.mark.parametrize("name", ["cute_pipe_wgmma2.sm_90a.cubin", "cute_pipe_wgmma2_cluster.sm_90a.cubin",
                                  "cute_pipe_pingpong.sm_90a.cubin", "cute_pipe_pingpong_named.sm_90a.cubin",
                                  "cute_pipe_tmastore.sm_90a.cubin"])
def test_a_setmaxnreg_its_warpgroup_runs_before_the_role_branch_is_the_producers(name):
    """Warpgroup 0 runs `USETMAXREG.DEALLOC.CTAPOOL 0x28` (setmaxnreg.dec 40) in a block warps
    0-3 share before warp 0 branches into the producer: the producer's budget is 40, not the
    kernel's 168."""
    parts = _parts(_static(name))
    assert parts["producer (warp 0)"] == ("TMA load", 40), parts
    assert parts["consumer (warps 4+)"][1] == 232, parts
    if "tmastore" in name:
        assert parts["epilogue (warp 1)"] == ("TMA store", 40), parts


# -- compiler-generated Triton, TIRx and Gluon cubins (fixtures/src/triton_tma, tirx, gluon READMEs)

def test_a_warp_table_word_made_by_hfma2_has_its_first_immediate_as_the_high_half():
    """ptxas builds Triton's table word 0x02000101 (bytes {1, 1, 0, 2}) as `HFMA2 R7, -RZ, RZ,
    3.0517578125e-05, 1.5318393707275390625e-05` (fp16 0x0200, 0x0101): the same bytes as its
    `IMAD.MOV.U32 R7, RZ, RZ, 0x2000101` form."""
    from wsperf.analyses.partitions import _table
    sts = _parse(0x10, "STS [UR13+0x1c1d8], R7 ;")
    hfma = _table([_parse(0, "HFMA2 R7, -RZ, RZ, 3.0517578125e-05, 1.5318393707275390625e-05 ;"), sts])
    imad = _table([_parse(0, "IMAD.MOV.U32 R7, RZ, RZ, 0x2000101 ;"), sts])
    assert hfma[0] == imad[0] == {0x1c1d8: 1, 0x1c1d9: 1, 0x1c1da: 0, 0x1c1db: 2}


@pytest.mark.parametrize("name, default, loader, mma, idle", [
    ("tws_swiglu_sm100.sm_100a.cubin", "warps 0-3", "warps 4-5", "warp 6", "warp 7"),
    ("tws_sigattn_sm100.sm_100a.cubin", "warps 0-3", "warps 4-5", "warp 6", "warp 7"),
    ("tws_bias_gelu_s5_w8.sm_100a.cubin", "warps 0-7", "warps 8-9", "warp 10", "warp 11"),
])
def test_triton_table_built_with_hfma2_gives_loader_mma_and_idle_warps(name, default, loader, mma, idle):
    """Table {1, 1, 0, 2}: entry 1 (the TMA loader) for the first two worker warps, 0 (MMA)
    for the third, 2 (idle) for the last. Read low half first, the loader and the idle warp
    swapped: `consumer (warp 4)`, `idle (warp 5)`, `producer (warps 6-7)`."""
    parts = _parts(_static(name))
    assert parts[f"producer ({loader})"][0] == "TMA load", parts
    assert parts[f"consumer ({mma})"][0].startswith("MMA issue (tcgen05)"), parts
    assert parts[f"idle ({idle})"][0] == "none", parts
    assert any(p.endswith(f"({default})") for p in parts), parts


TIRX_PGEMM = sorted(p.name for p in CUBINS.glob("tirx_pgemm*.sm_100a.cubin"))


def test_tirx_pgemm_fixtures_are_all_here():
    assert len(TIRX_PGEMM) == 17


@pytest.mark.parametrize("name", TIRX_PGEMM)
def test_a_brx_index_clamped_by_vimnmx_reads_the_jump_table(name):
    """TIRx dispatches `VIMNMX.U32 R0, PT, PT, R132, 0x3, PT` (min(warp, 3)), `LDC R2,
    c[0x2][R0 * 4]`, `BRX R2`: entry 0 the MMA warp, 1 and 3 one block that tells the TMA warp
    (`warp == 1`) from the writeback warpgroup (`warp & ~3 == 4`), 2 the tensor-memory owner.
    Unclamped, every warp took every entry: `epilogue (warps 0, 2+)`, and the MMA warp's code read as run by all warps."""
    parts = _parts(_static(name))
    if "dynacc" not in name:  # dynacc: the MMA warp's code is read as shared (not yet understood)
        assert parts["consumer (warp 0)"][0].startswith("MMA issue (tcgen05)"), parts
    assert parts["producer (warp 1)"][0] == "TMA load", parts
    (epi,) = [p for p in parts if p.startswith("epilogue")]
    # warps 4-7, or warp 4 alone where only it issues the TMA store (`if warp == 4`)
    assert epi.startswith(("epilogue (warps 4-7", "epilogue (warp 4)")), parts
    assert not any(p.startswith("epilogue (warps 0") for p in parts), parts


def test_a_second_warp_specialize_region_sends_its_warps_to_their_worker():
    """gluon_tworeg: region 1's table {2, 2, 0, 1} leaves warps 4-5 idle, region 2's second
    store {3, 3, 4, 4} sends them to its 2-warp worker (TMA load of the bias, TMA store of C,
    48 registers). Read as its first values only, that worker was "unreached (padding)"."""
    parts = _parts(_static("gluon_tworeg.sm_100a.cubin"))
    assert parts["producer (warps 4-5)"] == ("TMA load", 48), parts
    assert parts["producer (warp 6)"][0] == "TMA load", parts
    assert parts["consumer (warp 7)"][0].startswith("MMA issue (tcgen05)"), parts


@pytest.mark.parametrize("name, warps", [
    ("tws_bias_relu_s2_w8.sm_100a.cubin", "0-7"),
    ("tws_bias_relu_dev_s2_w8.sm_100a.cubin", "0-7"),
    ("tws_kloop_bm64_sm100.sm_100a.cubin", "0-3"),
    ("tws_two_loops_bn64_sm100.sm_100a.cubin", "0-3"),
])
def test_a_partition_that_stores_results_to_global_memory_is_an_epilogue_not_a_correction(name, warps):
    """Triton's default warps zero the accumulator (tcgen05.st -> STTM), load it (LDTM), add the
    bias and store by TMA: their tensor-memory load and store and their math read as attention's
    correction, which keeps its result in tensor memory."""
    parts = _parts(_static(name))
    job = parts[f"epilogue (warps {warps})"][0]
    assert "tensor-memory load" in job and "TMA store" in job, parts
    assert not any(p.startswith("correction") for p in parts), parts


def test_attention_keeps_its_correction_partition():
    parts = _parts(_static("triton_ws_attn_sm100.sm_100a.cubin"))
    assert parts["correction (warps 4-7)"][0] == "rescales tensor memory (correction)", parts


def test_a_warp_table_address_spilled_to_local_memory_is_followed_through_the_reload():
    """gluon_gather_gemm spills `table base + warp` (`STL [R1+0xac], R4`) across its
    setmaxnreg retry loop and reloads it (`LDL R4, [R1+0xac]`) for `LDS.U8 R4, [R4+0x18024]`:
    warp 6 the loader, warp 7 the MMA, warps 4-5 idle (was `consumer (warps 4+)` holding
    both)."""
    parts = _parts(_static("gluon_gather_gemm.sm_100a.cubin"))
    assert parts["producer (warp 6)"][0] == "TMA load", parts
    assert parts["consumer (warp 7)"][0].startswith("MMA issue (tcgen05)"), parts
    assert parts["idle (warps 4-5)"][0] == "none", parts


@pytest.mark.parametrize("name, default, kind", [
    ("tws_swiglu_sm100.sm_100a.cubin", "warps 0-3", "epilogue"),
    ("tws_bias_gelu_s5_w8.sm_100a.cubin", "warps 0-7", "epilogue"),
    ("tws_sigattn_sm100.sm_100a.cubin", "warps 0-3", "softmax"),
    ("triton_ws_attn_sm100.sm_100a.cubin", "warps 0-3", "softmax"),
])
def test_an_activations_exp2_is_no_softmax_when_the_partition_stores_results(name, default, kind):
    """SwiGLU's SiLU and a GELU's sigmoid take an exp2 per element, as a softmax does per
    score; but their partition loads the accumulator and stores the results (TMA store): the
    epilogue. Attention's softmax keeps P on chip for the next MMA (sigmoid attention too)."""
    parts = _parts(_static(name))
    assert f"{kind} ({default})" in parts, parts


def test_triton_metadata_beside_a_cubin_gives_its_dynamic_shared_memory(tmp_path):
    """A static cubin does not say the shared memory its launch asks for; Triton's cache
    keeps `name.json` beside `name.cubin`, whose `shared` does (131,148 B for this GEMM)."""
    import shutil
    from support import wsperf

    ptx = CUBINS.parent / "ptx"
    shutil.copy(CUBINS / "gluon_ws_gemm.sm_100a.cubin", tmp_path / "gluon_ws_gemm.cubin")
    bare = wsperf("inspect", tmp_path / "gluon_ws_gemm.cubin")
    assert "1,024 B static + n/a dynamic" in bare.stdout, bare.stdout
    shutil.copy(ptx / "gluon_ws_gemm.json", tmp_path / "gluon_ws_gemm.json")
    p = wsperf("inspect", tmp_path / "gluon_ws_gemm.cubin")
    assert "1,024 B static + 131,148 B dynamic" in p.stdout, p.stdout


@pytest.mark.parametrize("name, partition, job", [
    # `UISETP.NE.U32.OR UP0, UPT, UR24, 0x1, UP0`: warp != 1 or'd with the tile loop's bound, then
    # `@P0 EXIT`: the TMA-store warp of CuTe's persistent wgmma GEMM
    ("cute_wgpersist.sm_90a.cubin", "epilogue (warp 1)", "TMA store"),
    # `UISETP.GT.U32.AND ...; UISETP.LT.OR UP0, UPT, UR13, 0x6, UP0`: the transform warps 6-9,
    # whose math is HMUL2 on half pairs
    ("cute_transform.sm_100a.cubin", "consumer (warps 6+)", "FMA math"),
    # CUTLASS's sm_100 scheduler warp (CLC) and epilogue-load warp, branched to by warp tests
    # combined with flags of the kernel's parameters
    ("cutlass_sm100_1sm.sm_100a.cubin", "scheduler (warp 1)", "CLC work fetch"),
    ("cutlass_sm100_1sm.sm_100a.cubin", "producer (warp 3)", "TMA load"),
])
def test_a_warp_test_combined_with_a_uniform_flag_still_splits_the_warps(name, partition, job):
    """A warp-index compare combined by .OR / .AND with a predicate that is no warp test (a
    loop bound, a kernel argument) is read as the warp test alone, as the worksheet takes
    such branches: before, those warps were missing from the partitions (called idle)."""
    parts = _parts(_static(name))
    assert partition in parts and (parts[partition][0] or "").startswith(job), parts
