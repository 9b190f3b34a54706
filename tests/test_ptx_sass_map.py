"""Which SASS each PTX instruction becomes, on sm_90a and sm_100a: the opcodes the
`instruction_families` view (queries/schema.sql) and the role seeds (analyses/roles.py)
rely on. tests/ptx_sass/samples.cu holds one kernel per instruction; its disassembly by
cuobjdump is committed beside it (samples.<arch>.sass, nvcc 13.0). With nvcc on PATH the
samples are compiled again and must give the same opcodes; without it the committed
disassembly is checked.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from wsperf.collectors.disasm import find_tool, parse_sass
from wsperf.collectors.store import open_store

HERE = Path(__file__).parent / "ptx_sass"
ARCHS = ("sm_90a", "sm_100a")

# kernel -> (PTX instruction, {arch: opcodes it must hold (opcode_full)}, family)
# An arch missing from the dict: the instruction does not exist there (the kernel is empty).
MAP = {
    "k_tcgen05_alloc": ("tcgen05.alloc / .dealloc / .relinquish_alloc_permit",
                        {"sm_100a": {"UTCATOMSWS.FIND_AND_SET.ALIGN", "UTCATOMSWS.AND", "UVIRTCOUNT.DEALLOC.SMPOOL"}},
                        "tcgen05"),
    "k_tcgen05_mma_commit": ("tcgen05.mma.kind::f16 + tcgen05.commit.mbarrier::arrive::one",
                             {"sm_100a": {"UTCHMMA", "UTCBAR"}}, "tcgen05"),
    "k_tcgen05_mma_f8": ("tcgen05.mma.kind::f8f6f4", {"sm_100a": {"UTCQMMA"}}, "tcgen05"),
    "k_tcgen05_ld_st": ("tcgen05.ld / tcgen05.st", {"sm_100a": {"LDTM", "STTM"}}, "tcgen05"),
    "k_tcgen05_cp": ("tcgen05.cp", {"sm_100a": {"UTCCP.T.S"}}, "tcgen05"),
    "k_tma_load": ("cp.async.bulk.tensor.2d", {"sm_90a": {"UTMALDG.2D"}, "sm_100a": {"UTMALDG.2D"}}, "tma"),
    "k_bulk_copy": ("cp.async.bulk", {"sm_90a": {"UBLKCP.S.G"}, "sm_100a": {"UBLKCP.S.G"}}, "tma"),
    "k_cp_async": ("cp.async.cg", {"sm_90a": {"LDGSTS.E.BYPASS.128"}, "sm_100a": {"LDGSTS.E.BYPASS.128"}}, "cp.async"),
    "k_mbarrier_try_wait": ("mbarrier.try_wait.parity", {a: {"SYNCS.PHASECHK.TRANS64.TRYWAIT"} for a in ARCHS},
                            "mbarrier"),
    "k_setmaxnreg": ("setmaxnreg.dec / .inc",
                     {a: {"USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG.TRY_ALLOC.CTAPOOL"} for a in ARCHS}, "setmaxnreg"),
    "k_elect": ("elect.sync", {a: {"ELECT"} for a in ARCHS}, "elect"),
    "k_cluster_barrier": ("barrier.cluster.arrive / .wait", {a: {"UCGABAR_ARV", "UCGABAR_WAIT"} for a in ARCHS},
                          "cluster-barrier"),
    "k_wgmma": ("wgmma.mma_async.m64n64k16.f32.bf16", {"sm_90a": {"HGMMA.64x64x16.F32.BF16"}}, "wgmma"),
    "k_mma_sync": ("mma.sync.m16n8k16.f32.bf16", {a: {"HMMA.16816.F32.BF16"} for a in ARCHS}, "mma.sync"),
}
# Opcodes that never mark a family (address math, moves, control): what an empty kernel holds.
_FAMILIES = {f for _, _, f in MAP.values()}


def _committed(arch: str) -> dict:
    return parse_sass((HERE / f"samples.{arch}.sass").read_text())[arch]


def _opcodes(kernels: dict, name: str) -> set[str]:
    k = kernels.get(name)
    return {i.opcode_full for i in k.instructions} if k else set()


def _families(opcodes: set[str]) -> set[str]:
    """The families the schema's view gives these opcodes (one static launch in a fresh store)."""
    con = open_store(None)
    con.execute("INSERT INTO reports (report_id, path, sha256, size_bytes, num_launches, loaded_at, kind) "
                "VALUES (1, 'x', 'x', 1, 1, now(), 'static')")
    con.execute("INSERT INTO launches (launch_id, report_id, range_idx, action_idx, num_metrics) VALUES (1, 1, 0, 0, 0)")
    for pc, op in enumerate(sorted(opcodes)):
        con.execute("INSERT INTO sass (launch_id, pc, opcode, opcode_full) VALUES (1, ?, ?, ?)",
                    [pc * 16, op.split(".", 1)[0], op])
    return {r[0] for r in con.execute("SELECT family FROM instruction_families").fetchall()}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", sorted(MAP))
def test_committed_disassembly_holds_the_mapped_opcodes(kernel, arch):
    ptx, by_arch, family = MAP[kernel]
    ops = _opcodes(_committed(arch), kernel)
    want = by_arch.get(arch, set())
    assert want <= ops, (ptx, arch, want - ops)
    fams = _families(ops)
    if want:
        assert family in fams, (ptx, arch, fams)
    else:
        # The instruction does not exist on this arch: the kernel is empty of it.
        assert family not in fams, (ptx, arch, fams)
    assert fams <= _FAMILIES | {"ld/st", "ffma"}, fams


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile the PTX samples")
@pytest.mark.parametrize("arch", ARCHS)
def test_nvcc_gives_the_committed_opcodes(tmp_path, arch):
    cubin = tmp_path / f"samples.{arch}.cubin"
    subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(HERE / "samples.cu")],
                   check=True, capture_output=True, timeout=300)
    out = subprocess.run([find_tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    fresh = parse_sass(out)[arch]
    committed = _committed(arch)
    assert set(fresh) == set(committed)
    for kernel, (ptx, by_arch, _) in MAP.items():
        assert by_arch.get(arch, set()) <= _opcodes(fresh, kernel), (ptx, arch)
