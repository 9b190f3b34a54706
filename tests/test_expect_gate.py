"""`--expect` as a gate (docs/exit-codes.md, code 6): a kernel that lacks what the user
expects fails the command, in analyze, inspect and compare, unless --expect-advisory; on
the real fixtures, each side decided by the kernel's own code (gemm_ffma has FFMA and
plain loads only; gemm_wgmma_tma, the CUTLASS-like ring, has wgmma and TMA)."""

from __future__ import annotations

import json

from support import REPORTS, ROOT, wsperf

CUBINS = ROOT / "fixtures" / "cubins"
COMPARE = ROOT / "fixtures" / "compare"


def _unmet_lines(stderr: str, command: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith(f"wsperf {command}: expectation not met: ")]


def test_analyze_exits_6_when_a_kernel_lacks_what_is_expected():
    p = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--expect", "tma", "--format", "json")
    assert p.returncode == 6, p.stderr
    assert _unmet_lines(p.stderr, "analyze") == ["wsperf analyze: expectation not met: launch 1 (gemm_ffma): tma"]
    assert "Traceback" not in p.stderr
    (k,) = json.loads(p.stdout)["kernels"]  # the whole answer is still printed
    (f,) = [f for f in k["findings"] if f["id"] == "missing-specialized-instructions"]
    assert f["evidence"]["unmet_expect"] == ["tma"]
    # met: the TMA ring; advisory: said, exit 0; from the config file: the same gate
    assert wsperf("analyze", REPORTS / "gemm_wgmma_tma.ncu-rep", "--expect", "tma", "--expect", "wgmma").returncode == 0
    advisory = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--expect", "tma", "--expect-advisory")
    assert advisory.returncode == 0 and len(_unmet_lines(advisory.stderr, "analyze")) == 1


def test_the_config_file_expectations_gate_too(tmp_path):
    cfg = tmp_path / "wsperf.toml"
    cfg.write_text('expect = ["tensor-core"]\n')
    p = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--config", cfg)
    assert p.returncode == 6 and _unmet_lines(p.stderr, "analyze")[0].endswith("(gemm_ffma): tensor-core")


def test_an_expectation_the_report_cannot_check_is_not_unmet():
    # the basic report has no instruction data: missing-specialized-instructions is no_data
    p = wsperf("analyze", REPORTS / "gemm_wgmma_tma_basic.ncu-rep", "--expect", "tma")
    assert p.returncode == 0 and not _unmet_lines(p.stderr, "analyze")


def test_inspect_gates_on_the_code():
    # gemm.sm_90a.cubin holds gemm_ffma (no wgmma) beside the wgmma kernels
    p = wsperf("inspect", CUBINS / "gemm.sm_90a.cubin", "--expect", "wgmma")
    assert p.returncode == 6 and [ln.split(": ", 2)[-1] for ln in _unmet_lines(p.stderr, "inspect")] == [
        "launch 3 (gemm_ffma): wgmma"], p.stderr
    assert wsperf("inspect", CUBINS / "gemm.sm_90a.cubin", "-k", "gemm_ws", "--expect", "wgmma").returncode == 0
    # gemm_ws<false> feeds its ring with cp.async (fixtures/src/gemm.cu), gemm_ws<true> with TMA
    tma = wsperf("inspect", CUBINS / "gemm.sm_90a.cubin", "-k", "gemm_ws", "--expect", "tma")
    assert tma.returncode == 6 and [ln.endswith("(gemm_ws): tma") for ln in _unmet_lines(tma.stderr, "inspect")] == [True]
    assert wsperf("inspect", CUBINS / "tcgen05.sm_100a.cubin", "-k", "tcgen05_gemm", "--expect", "tcgen05").returncode == 0


def test_compare_gates_on_the_candidate_after_regressions(tmp_path):
    cfg = tmp_path / "wsperf.toml"
    cfg.write_text('expect = ["tma"]\n')
    same = wsperf("compare", REPORTS / "gemm_ffma.ncu-rep", REPORTS / "gemm_ffma.ncu-rep", "--config", cfg,
                  "--format", "json")
    assert same.returncode == 6 and json.loads(same.stdout)["exit_code"] == 6, same.stderr
    assert json.loads(same.stdout)["unmet_expectations"] == ["launch 1 (gemm_ffma): tma"]
    assert wsperf("compare", REPORTS / "gemm_ffma.ncu-rep", REPORTS / "gemm_ffma.ncu-rep", "--config", cfg,
                  "--expect-advisory").returncode == 0
    # the cp.async ring regressed against the TMA ring: the regression's exit 1 comes first,
    # the unmet expectation is still in the JSON
    worse = wsperf("compare", COMPARE / "cmp_healthy_a.ncu-rep.gz", COMPARE / "cmp_cpasync.ncu-rep.gz", "--config", cfg,
                   "--format", "json")
    doc = json.loads(worse.stdout)
    assert worse.returncode == 1 and doc["exit_code"] == 1 and doc["regression"]
    assert doc["unmet_expectations"] and all(u.endswith("(ws_stream): tma") for u in doc["unmet_expectations"])
    # ... and said on stderr too, without the expectation's own exit line (the regression decided)
    assert "wsperf compare: expectation not met: " in worse.stderr and "exit 6" not in worse.stderr, worse.stderr
