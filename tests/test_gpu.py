"""GPU-only: collect fresh reports of fixture kernels with ncu on this machine's GPU and
check that wsperf reads them and that they agree with the committed fixtures on every
figure the kernel's design fixes (launch shape, registers, executed instruction counts).
Run by scripts/gpu-tests.sh on a GPU machine; skipped elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPORTS, ROOT, kernels, wsperf



def _have_gpu() -> bool:
    if not (shutil.which("ncu") and shutil.which("nvidia-smi") and shutil.which("nvcc")):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HAVE_GPU = _have_gpu()

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU and ncu")]

FRESH = ("ws_stream_healthy", "gemm_wgmma_tma")


@pytest.fixture(scope="module")
def fresh_reports(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect")
    p = subprocess.run(["bash", str(ROOT / "fixtures" / "collect.sh"), *FRESH], capture_output=True, text=True,
                       env={**os.environ, "OUT": str(out)}, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out / "reports"


@pytest.mark.parametrize("name", FRESH)
def test_fresh_report_matches_the_committed_fixture(fresh_reports, name):
    (fresh,) = kernels(fresh_reports / f"{name}.ncu-rep")
    (committed,) = kernels(REPORTS / f"{name}.ncu-rep")
    for key in ("name", "grid", "block", "cluster", "registers_per_thread", "dynamic_smem_bytes", "arch"):
        assert fresh[key] == committed[key], key
    assert fresh["families"]["tensor"] == committed["families"]["tensor"]
    assert fresh["families"]["copies"] == committed["families"]["copies"]
    # Executed instruction counts are fixed by the kernel's loop structure, not by timing.
    q = ("SELECT opcode, executed FROM opcodes WHERE opcode IN ('HGMMA','UTMALDG','UBLKCP','SYNCS','FFMA') "
         "ORDER BY opcode")
    counts = [json.loads(wsperf("sql", q, "--report", r, "--format", "json").stdout)
              for r in (fresh_reports / f"{name}.ncu-rep", REPORTS / f"{name}.ncu-rep")]
    deterministic = {"HGMMA", "UTMALDG", "UBLKCP", "FFMA"}  # SYNCS counts include spin-wait retries
    assert [c for c in counts[0] if c["opcode"] in deterministic] == [
        c for c in counts[1] if c["opcode"] in deterministic]
