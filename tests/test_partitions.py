"""Warp partitions read from SASS (analyses/partitions.py): on real compiler output, each
partition named with its warps, job and register budget, and no partition called "common";
a kernel that is not specialized stays so. The truth is each fixture's design
(fixtures/src/gluon/README.md, fixtures/src/cute/README.md) and the PTX worksheet's roles."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.analyses.analyze import KernelAnalysis, analyze, prepare
from wsperf.analyses.static import inspect
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

ROOT = Path(__file__).resolve().parents[1]
CUBINS = ROOT / "fixtures" / "cubins"
REPORTS = ROOT / "fixtures" / "reports"


def _static(name: str) -> KernelAnalysis:
    (k,) = inspect(open_store(None), [CUBINS / name]).kernels
    return k.analysis


def _parts(a: KernelAnalysis) -> dict[str, tuple[str | None, int | None, str]]:
    return {p.partition: (p.job, p.registers, p.basis) for p in a.partitions}


def test_gluon_names_its_four_partitions_and_keeps_its_roles():
    """Epilogue warps 0-3, idle 4-5, loader 6, MMA 7: the TMA store warpgroup was "common".
    The warps come through Triton's warp table and BRX jump table: an assumption, said."""
    a = _static("gluon_ws_gemm.sm_100a.cubin")
    parts = _parts(a)
    assert parts["epilogue (warps 0-3)"][:2] == ("tensor-memory load, TMA store", 256)
    assert parts["idle (warps 4-5)"][:2] == ("none", 40)
    assert parts["producer (warp 6)"][:2] == ("TMA load", 40)
    assert parts["consumer (warp 7)"][:2] == ("MMA issue (tcgen05)", 40)
    assert {b for _, _, b in parts.values()} == {"assumption"}
    assert [p.partition for p in a.partitions][0] == "setup (all warps)"
    assert not any(p.partition == "common" for p in a.partitions)
    # The hypotheses' role keys are what they were.
    assert [(r.role, r.instructions) for r in a.roles] == [("producer", 56), ("consumer", 90), ("common", 358)]


@pytest.mark.parametrize("name, consumer, job", [
    ("cute_ws_gemm.sm_90a.cubin", "consumer (warps 4+)", "MMA issue (wgmma), global stores"),
    ("cute_ws_gemm_cluster.sm_90a.cubin", "consumer (warps 4+)", "MMA issue (wgmma), global stores"),
    ("cute_ws_ring.sm_90a.cubin", "consumer (warps 1-4)", "FMA math"),
    ("cute_ws_ring_cluster.sm_90a.cubin", "consumer (warps 1-4)", "FMA math"),
])
def test_cute_dsl_producer_falling_into_the_consumer_test_is_warp_specialized(name, consumer, job):
    """CuTe DSL's producer path ends in the consumers' warp test, so by code alone it reached
    the math and the kernel read as "not warp-specialized". The CTA size is not in the SASS:
    the last partition's warps are open-ended."""
    a = _static(name)
    assert a.warp_specialized is True
    parts = _parts(a)
    assert parts["producer (warp 0)"][0] == "TMA load"
    assert parts[consumer][0] == job
    if "ring" in name:
        assert parts["epilogue (warp 5)"][0] == "global stores"
    assert {r.role for r in a.roles} >= {"producer", "consumer"}


def test_triton_two_consumer_warpgroups():
    a = _static("triton_ws_matmul.sm_90a.cubin")
    parts = _parts(a)
    assert parts["producer (warps 0-3)"][:2] == ("TMA load", 256)
    assert parts["consumer (warps 4-7)"][:2] == ("MMA issue (wgmma), TMA store", 232)
    assert parts["consumer (warps 8-11)"][:2] == ("MMA issue (wgmma), TMA store", 232)


@pytest.mark.parametrize("name", ["triton_ws_sm100.sm_100a.cubin", "triton_ws_sm100_epilogue_subtile.sm_100a.cubin"])
def test_a_jump_table_is_read_from_the_cubins_constant_bank(name):
    """Triton's BRX table (`.nv.constant2.<kernel>`: 0x190, 0x910, 0x890, ...) is not in
    address order. Read as its targets in address order, warps 4-5 (the TMA loader,
    fixtures/src/triton_tma/README.md) were called idle and warp 7 (Triton's padding) the
    producer; the table itself, read from the cubin, names them right."""
    parts = _parts(_static(name))
    assert parts["producer (warps 4-5)"][0] == "TMA load"
    assert parts["consumer (warp 6)"][0] == "MMA issue (tcgen05)"
    assert parts["idle (warp 7)"][0] == "none"
    assert "idle (warps 4-5)" not in parts and "producer (warp 7)" not in parts


def test_a_warp_table_built_from_an_fp16_constant_is_read():
    """ptxas builds the attention kernel's table word with `HFMA2 R, -RZ, RZ, a, b` (two
    fp16 immediates): read, the four partitions Triton made have their warps."""
    parts = _parts(_static("triton_ws_attn_sm100.sm_100a.cubin"))
    # fixtures/src/triton_tma/README.md: the default warps run the softmax (and the Q load and the
    # epilogue), partition2 the correction (O read from tensor memory, rescaled, written back)
    assert parts["softmax (warps 0-3)"][0].startswith("softmax (exp2), TMA load")
    assert parts["correction (warps 4-7)"][0] == "rescales tensor memory (correction)"
    assert parts["producer (warps 8-9)"][0] == "TMA load"
    assert parts["consumer (warp 10)"][0] == "MMA issue (tcgen05)"
    assert parts["idle (warp 11)"][0] == "none"


def test_a_kernel_that_is_not_specialized_has_no_partitions():
    a = _static("triton_plain_matmul.sm_90a.cubin")
    assert a.warp_specialized is False and a.partitions == ()


def test_a_profile_gives_the_warp_count_and_the_partitions_their_samples():
    """ws_stream: warp 0 copies (bulk copies), warps 1-4 compute; 160 threads from the launch,
    so the warps are evidence, not open-ended. A profile without specialization has none."""
    con = open_store(None)
    load_reports(con, [REPORTS / "ws_stream_healthy.ncu-rep", REPORTS / "triton_plain_matmul.ncu-rep"])
    prepare(con)
    healthy, plain = sorted(analyze(con), key=lambda a: a.summary.launch_id)
    parts = {p.partition: p for p in healthy.partitions}
    assert parts["producer (warp 0)"].job == "bulk copy load"
    assert parts["consumer (warps 1-4)"].job == "FMA math, global stores"
    assert {p.basis for p in healthy.partitions} == {"evidence"}
    assert parts["consumer (warps 1-4)"].samples > parts["producer (warp 0)"].samples > 0
    assert plain.warp_specialized is False and plain.partitions == ()


@pytest.mark.parametrize("name", ["gluon_3part.ncu-rep", "gluon_3part_slow.ncu-rep"])
def test_a_profiled_kernel_of_three_partitions_names_each_with_its_job(name):
    """fixtures/src/gluon_ws_3part.py profiled on the H200 (fixtures/evidence/gluon_3part*):
    the TMA load warp, the compute warps and the TMA store warp are three partitions with
    their jobs and their own PC samples; none is "common". With every store issued 8 times
    the store warp's samples grow (1,157 against 259), and it waits the least of the three."""
    con = open_store(None)
    load_reports(con, [REPORTS / name])
    prepare(con)
    (a,) = analyze(con)
    parts = {p.partition: p for p in a.partitions}
    assert (parts["consumer (warps 0-3)"].job, parts["producer (warp 6)"].job, parts["epilogue (warp 7)"].job) \
        == ("FMA math", "TMA load", "TMA store")
    assert parts["idle (warps 4-5)"].job == "none"
    assert not any(p.partition == "common" for p in a.partitions)
    store, load = parts["epilogue (warp 7)"], parts["producer (warp 6)"]
    assert store.samples > 0 and load.samples > 0
    if name == "gluon_3part_slow.ncu-rep":
        assert store.samples > 1000 and store.wait_share < 0.05 < load.wait_share


def test_a_jump_table_note_that_is_not_hex_is_not_read():
    """The note the loader appends to a BRX (`(*"c[0x2] 0x190,..."*)`) is read only when every
    entry is a hex number: SASS text from a report is input, and a damaged one stays text."""
    from wsperf.analyses.partitions import _parse

    assert _parse(0x180, 'BRX R2 -0x190 (*"c[0x2] 0x190,0x910"*)').targets == (0x190, 0x910)
    for bad in ('BRX R2 -0x190 (*"c[0x2] x,zz"*)', 'BRX R2 -0x190 (*"c[0x2] ,"*)', 'BRX R2 -0x190 (*"c[0x2] 0x"*)'):
        assert _parse(0x180, bad).targets is None, bad
