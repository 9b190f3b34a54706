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
