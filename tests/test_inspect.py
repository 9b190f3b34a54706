"""`wsperf inspect`: static analysis of compiled kernels, no GPU. On the committed cubins
(fixtures/cubins, see fixtures/BLACKWELL.md): which paths each kernel's SASS holds, the
verdicts static code can give, and the errors a user meets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import wsperf, wsperf_exe
from test_cli import assert_one_error_line
from wsperf.analyses.static import inspect
from wsperf.collectors.store import open_store

ROOT = Path(__file__).resolve().parents[1]
CUBINS = ROOT / "fixtures" / "cubins"
SM100 = CUBINS / "tcgen05.sm_100a.cubin"
SM90 = CUBINS / "gemm.sm_90a.cubin"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _inspect_json(*args) -> list[dict]:
    p = wsperf("inspect", *args, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["kernels"]


@pytest.fixture(scope="module")
def static_kernels() -> dict[str, dict]:
    ks = _inspect_json(SM100, SM90, "--expect", "tensor-core", "--expect-advisory")  # (unmet: exit 6 otherwise)
    return {k["demangled"]: k for k in ks}


def _kernel(ks: dict[str, dict], prefix: str) -> dict:
    (k,) = [v for name, v in ks.items() if name.startswith(prefix)]
    return k


def _status(k: dict, hid: str) -> str:
    (f,) = [f for f in k["findings"] if f["id"] == hid]
    return f["status"]


# kernel (demangled prefix), arch, tensor path, copies, spills, missing-specialized
# (with --expect tensor-core), register-spills
CASES = [
    ("tcgen05_gemm", "sm_100", "tcgen05", ["tma", "ld/st"], False, "rejected", "rejected"),
    ("tcgen05_fallback", "sm_100", "mma.sync", ["tma", "ld/st"], False, "confirmed", "rejected"),
    ("tcgen05_spill", "sm_100", "tcgen05", ["tma", "ld/st"], True, "rejected", "confirmed"),
    ("void gemm_ws<true>", "sm_90", "wgmma", ["tma", "ld/st"], False, "rejected", "rejected"),
    ("void gemm_ws<false>", "sm_90", "wgmma", ["cp.async", "ld/st"], False, "confirmed", "rejected"),
    ("gemm_ffma", "sm_90", "none", ["ld/st"], False, "confirmed", "rejected"),
]


@pytest.mark.parametrize("name, arch, tensor, copies, local, missing, spills", CASES, ids=[c[0] for c in CASES])
def test_families_and_verdicts(static_kernels, name, arch, tensor, copies, local, missing, spills):
    k = _kernel(static_kernels, name)
    f = k["families"]
    assert (k["arch"], f["tensor"], f["copies"], f["local_memory"]) == (arch, tensor, copies, local)
    assert f["mbarrier"] is (name != "gemm_ffma")
    assert _status(k, "missing-specialized-instructions") == missing
    assert _status(k, "register-spills") == spills
    # What needs a profile says so.
    for hid in ("serialized-roles", "producer-bound", "too-few-active-ctas"):
        # ...except that code with one path (static evidence) cannot be producer-bound.
        want = "rejected" if (hid, name) == ("producer-bound", "gemm_ffma") else "no_data"
        assert _status(k, hid) == want, hid
    assert k["duration_ns"] is None and k["grid"] == [None, None, None]
    # Static evidence: producer and consumer paths recovered from the warp-index branches.
    assert (k["warp_specialized"], k["warp_specialized_basis"]) == (name != "gemm_ffma", "static")
    assert k["registers_per_thread"] > 0 and k["cubin_arch"] == arch + "a"


def test_tcgen05_without_expectations_is_not_flagged():
    (k,) = _inspect_json(SM100, "--kernel", "^tcgen05_gemm$")
    assert _status(k, "missing-specialized-instructions") == "rejected"
    fams = {c["family"] for c in k["families"]["counts"]}
    assert {"tcgen05", "tma", "mbarrier", "elect"} <= fams


def test_ffma_in_static_sass_is_no_data_without_expect():
    """An FP32 FFMA GEMM's cubin: whether FFMA is matrix work needs executed counts (the
    matrix-product shape a profile shows: gemm_ffma, 76% FFMA, 256 LDS per STG). Static SASS
    has none, so the verdict is no_data, never a "rejected" on missing evidence; --expect
    tensor-core still decides it (test_families_and_verdicts)."""
    (k,) = _inspect_json(SM90, "--kernel", "^gemm_ffma")
    (f,) = [f for f in k["findings"] if f["id"] == "missing-specialized-instructions"]
    assert f["status"] == "no_data" and "static SASS lacks" in f["summary"], f
    (k,) = _inspect_json(SM90, "--kernel", "gemm_ws<true>")
    assert _status(k, "missing-specialized-instructions") == "rejected"  # wgmma + TMA: evidence in the code


def test_one_thread_after_a_cta_barrier_is_not_warp_specialization(tmp_path):
    """TVM TIRx's block sum (fixtures/src/tvm/README.md; nvrtc's cubin from the H200 run):
    every thread loads and stores into shared memory, `__syncthreads()`, then `@P0 EXIT`
    for all but thread 0, which adds. A guarded EXIT ends only its lanes: thread 0's sum
    follows the copy on one path, so there is no producer and no consumer path. Before,
    the guarded EXIT cut the graph and the sheet said "warp-specialized: yes" with a
    producer (the copy) and a consumer (the sum). The warp-specialized GEMM's prologue,
    run by every warp before its dispatch, is common code likewise (it read consumer)."""
    cubin = ROOT / "fixtures" / "evidence" / "tvm_block_sum" / "generated" / "tvm" / "tvm_1de17ff738b2bc82.cubin"
    (k,) = _inspect_json(cubin)
    assert k["name"] == "tvm_block_sum_kernel"
    for hid in ("producer-bound", "partition-bound"):
        (f,) = [f for f in k["findings"] if f["id"] == hid]
        assert f["status"] == "rejected" and "not warp-specialized" in f["summary"], f
    con = open_store(tmp_path / "s.duckdb")
    inspect(con, [SM90])
    first = con.execute("""SELECT p.role FROM role_pcs AS p JOIN launches AS l USING (launch_id)
                           WHERE l.kernel_demangled LIKE 'void gemm_ws<true>%' ORDER BY p.pc LIMIT 1""").fetchone()
    assert first == ("common",)
    ws = con.execute("""SELECT w.warp_specialized FROM warp_specialization AS w JOIN launches AS l USING (launch_id)
                        WHERE l.kernel_demangled LIKE 'void gemm_ws<true>%'""").fetchone()
    assert ws == (True,)


def test_every_kernel_of_a_binary_is_reported():
    ks = _inspect_json(SM100)
    assert sorted(k["name"] for k in ks) == ["tcgen05_fallback", "tcgen05_gemm", "tcgen05_spill"]
    assert len({k["launch_id"] for k in ks}) == 3


def test_static_rows_share_the_profile_tables(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    first = inspect(con, [SM100])
    again = inspect(con, [SM100])  # same content: nothing added
    assert first.files[0].already_present is False and again.files[0].already_present is True
    assert con.execute("SELECT count(*), any_value(kind), any_value(arch), any_value(compute_capability), "
                       "any_value(device_name) FROM reports").fetchone() == (1, "static", "sm_100", "10.0", None)
    assert con.execute("SELECT count(*), count(grid_x), count(duration_ns), min(num_metrics) "
                       "FROM launches").fetchone() == (3, 0, 0, 0)
    assert con.execute("SELECT count(*) FROM opcodes").fetchone() == (0,)  # nothing pretends to have run
    assert con.execute("SELECT count(inst_executed), count(pcsamp_samples), count(*) > 100, "
                       "bool_or(opcode = 'UTCHMMA'), bool_or(guard IS NOT NULL) FROM sass").fetchone() \
        == (0, 0, True, True, True)


@needs_nvcc
def test_cu_file_is_compiled_and_ptxas_notes_are_kept(tmp_path):
    src = tmp_path / "ws.cu"
    # setmaxnreg without __launch_bounds__: ptxas ignores it (C7508).
    src.write_text('extern "C" __global__ void k(int* o) {\n'
                   '  if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");\n'
                   '  o[threadIdx.x] = 1;\n}\n')
    p = wsperf("inspect", src, "--arch", "sm_90a", "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert any("C7508" in m for m in out["files"][0]["compiler_messages"])
    (k,) = out["kernels"]
    assert k["compiler"]["registers"] > 0 and k["compiler"]["spill_store_bytes"] == 0


@needs_nvcc
def test_cu_spills_reported_by_ptxas():
    (k,) = _inspect_json(ROOT / "fixtures" / "src" / "blackwell" / "tcgen05.cu", "--arch", "sm_100a",
                         "--kernel", "spill")
    assert k["compiler"]["spill_store_bytes"] > 0 and _status(k, "register-spills") == "confirmed"


def test_cu_without_nvcc_is_one_error(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('__global__ void k() {}\n')
    exe = wsperf_exe()
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(tmp_path)  # nothing there: no nvcc
    p = subprocess.run([exe, "inspect", str(src)], capture_output=True, text=True, env=env, timeout=120)
    assert_one_error_line(p, 2, "nvcc", "install the CUDA toolkit")


def test_non_cuda_file_is_one_error():
    assert_one_error_line(wsperf("inspect", ROOT / "README.md"), 2, "README.md", "no CUDA device code")


def test_arch_not_in_file_is_one_error():
    assert_one_error_line(wsperf("inspect", SM100, "--arch", "sm_90a"), 2, "sm_90a", "sm_100a")


def test_a_profile_report_points_to_analyze():
    report = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "gemm_wgmma_tma_basic.ncu-rep"
    p = wsperf("inspect", report)
    assert_one_error_line(p, 2, "an Nsight Compute report", f"wsperf analyze {report}")


def test_cutlass_names_are_demangled_and_folded():
    # CUTLASS nests templates past c++filt's default recursion limit (the name came back
    # mangled); JSON keeps the whole demangled name, text shows it folded.
    cubin = CUBINS / "cutlass_builder_gemm.sm_90a.cubin"
    (k,) = _inspect_json(cubin)
    assert k["demangled"].startswith("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<")
    assert k["name"] == "cutlass::device_kernel"
    p = wsperf("inspect", cubin, env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert "void cutlass::device_kernel<...>(cutlass::gemm::kernel::GemmUniversal<...>::Params)" in p.stdout
    assert "_ZN7cutlass" not in p.stdout
