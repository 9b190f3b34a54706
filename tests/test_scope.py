"""What the sanitizer checks: a Python repro's own kernels by default (the ones Triton's cache
in the bundle names), --kernel's, or every kernel; read from real bundles collected on the
H200 (fixtures/evidence), and the scope a manifest records read back only when it is one
wsperf wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support import ROOT, assert_one_error_line, wsperf
from wsperf.analyses.correctness import correctness_report
from wsperf.analyses.evidence import gather
from wsperf.collectors.scope import (SanitizerScope, Scope, ScopeMode, choose_scope, finding_scope, jit_kernels,
                                     short_name, vendor_library)
from wsperf.collectors.store import open_store

EVIDENCE = ROOT / "fixtures" / "evidence"


def _generated(name: str) -> tuple[Path, dict[str, str]]:
    root = EVIDENCE / name
    manifest = json.loads((root / "bundle.json").read_text())
    return root, {k: v for r in manifest["runs"] if r["phase"] == "generated" for k, v in r["outputs"].items()}


@pytest.mark.parametrize("bundle, kernels", [
    ("gluon_ws_rowsum", ("gluon_ws_rowsum",)),  # Gluon warp_specialize
    ("triton_ws4", ("persistent_matmul_ws",)),  # Triton's own warp specialization
    ("triton", ("matmul_tma",)),  # the 4096^3 TMA matmul, launched twice
    ("torch_vendor", ("scale_rows",)),  # next to cuBLAS and cuDNN in a PyTorch program
    ("tvm_block_sum", ("tvm_block_sum_kernel",)),  # a TVM module, kept by wsperf's sitecustomize
])
def test_a_python_repro_is_scoped_to_the_kernels_it_compiled(bundle, kernels):
    root, gen = _generated(bundle)
    scope = choose_scope(None, False, root, gen)
    assert scope.mode is ScopeMode.USER and scope.kernels == kernels
    assert scope.sanitizer_args(None) == [a for k in kernels for a in ("--kernel-name", f"kne={k}")]
    assert scope.sanitizer_args(3)[-2:] == ["--launch-count", "3"]  # only when asked for
    assert re.search(scope.judged, kernels[0]) and not re.search(scope.judged, kernels[0] + "_2")
    text = scope.describe()
    assert kernels[0] in text and "--all-kernels" in text and "not checked" in text


@pytest.mark.parametrize("bundle", ["deadlock_ptx", "release_per_thread", "phase_source"])
def test_a_binary_repro_without_a_jit_cache_is_checked_whole(bundle):
    root, gen = _generated(bundle)
    scope = choose_scope(None, False, root, gen)
    assert scope.mode is ScopeMode.ALL and scope.sanitizer_args(None) == [] and scope.judged is None
    assert scope.describe() is None and "no JIT cache" in scope.why


def test_kernel_and_all_kernels_override_the_cache():
    root, gen = _generated("torch_vendor")
    k = choose_scope("scale", False, root, gen)
    assert k.mode is ScopeMode.KERNEL and k.sanitizer_args(None) == ["--kernel-name", "regex=scale", "--launch-count",
                                                                     "1"]
    a = choose_scope(None, True, root, gen)
    assert a.mode is ScopeMode.ALL and a.sanitizer_args(None) == []


def test_the_scope_judges_library_kernels_and_filter_artifacts_as_kernel_does():
    # torch_vendor4096: racecheck's records inside cuBLAS's nvjet and cuDNN's SDPA kernels
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "torch_vendor4096"])
    scope = choose_scope(None, False, *_generated("torch_vendor4096"))
    found = [f for _, o in ev.sanitizer for f in o.findings if f.kernel]
    assert found and {vendor_library(f.kernel) for f in found} == {"cuBLAS", "cuDNN"}
    assert {finding_scope(f, scope.judged) for f in found} == {Scope.VENDOR}
    # torch_filter: initcheck's host copy out of memory the unchecked kernels wrote
    ev = gather(con, [EVIDENCE / "torch_filter"])
    scope = choose_scope(None, False, *_generated("torch_filter"))
    assert scope.kernels == ("scale_rows",)
    assert not correctness_report(ev.sanitizer, scope.judged).broken
    assert correctness_report(ev.sanitizer, None).broken


def test_a_kernel_outside_the_scope_is_listed_not_judged():
    """A finding names its kernel by its short name (`<func>`), the scope by the mangled one:
    `block_rowsum` is _Z12block_rowsumPKfPfi's. Once a tool runs again without the filter
    (torch_ext's initcheck), a kernel the repro did not compile (PyTorch's ATen copy kernel,
    whose short name no library pattern tells apart) is listed, not judged; the extension's
    own kernel still is."""
    assert short_name("_Z12block_rowsumPKfPfi") == "block_rowsum"
    assert short_name("_ZN2ns6kernelEv") == "kernel"
    assert short_name("_Z9ws_streamILi4ELb1ELb0EEvPKfPfi") == "ws_stream"
    assert short_name("gluon_ws_rowsum") is None
    scope = SanitizerScope(ScopeMode.USER, ("_Z12block_rowsumPKfPfi",))
    assert re.fullmatch(scope.judged, "block_rowsum") and re.fullmatch(scope.judged, "_Z12block_rowsumPKfPfi")
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "torch_ext"])
    found = [f for _, o in ev.sanitizer for f in o.findings if f.kernel == "unrolled_elementwise_kernel"]
    assert found and {finding_scope(f, scope.judged) for f in found} == {Scope.VENDOR}
    assert {finding_scope(f, None) for f in found} == {Scope.USER}  # checked whole, they would stop it
    assert not correctness_report(ev.sanitizer, scope.judged).broken


@pytest.mark.parametrize("doc", [
    {"mode": "user-kernels", "kernels": ["a,kne=b"]},  # a second filter smuggled into the name
    {"mode": "user-kernels", "kernels": ["a|.*"]},  # a regex that judges every kernel
    {"mode": "user-kernels", "kernels": []},
    {"mode": "kernel", "pattern": None},
    {"mode": "everything"},
    ["user-kernels"],
    None,
])
def test_a_scope_wsperf_did_not_write_is_not_read(doc):
    assert SanitizerScope.from_json(doc) is None


def test_a_recorded_scope_reads_back_as_written():
    root, gen = _generated("gluon_ws_rowsum")
    scope = choose_scope(None, False, root, gen)
    assert SanitizerScope.from_json(json.loads(json.dumps(scope.as_json()))) == scope


def test_a_kernel_name_no_filter_takes_checks_every_kernel(tmp_path):
    # Triton's names are identifiers; anything else is not put into a filter as it is.
    (tmp_path / "k.json").write_text(json.dumps({"name": "odd,name"}))
    (tmp_path / "j.json").write_text(json.dumps({"name": "scale_rows"}))
    gen = {"json:h/k.json": "k.json", "json:h/j.json": "j.json"}
    assert jit_kernels(tmp_path, gen) == (("scale_rows",), ("odd,name",))
    scope = choose_scope(None, False, tmp_path, gen)
    assert scope.mode is ScopeMode.ALL and "odd,name" in scope.why


def test_kernel_and_all_kernels_together_are_refused(tmp_path):
    p = wsperf("collect", "--out", tmp_path / "b", "--kernel", "x", "--all-kernels", "--", "true")
    assert_one_error_line(p, 2, "--kernel and --all-kernels")
    assert not (tmp_path / "b").exists()


def _analyze(name: str) -> tuple[int, dict]:
    p = wsperf("analyze", EVIDENCE / name, "--format", "json")
    return p.returncode, json.loads(p.stdout)


def _manifest(name: str) -> dict:
    return json.loads((EVIDENCE / name / "bundle.json").read_text())


# (bundle, scope mode, what the run that decides checked)
RETRIED = [("torch_gluon", "user-kernels", "the kernels named gluon_ws_rowsum or whose names contain nvjet"),
           ("torch_gluon_kernel", "kernel", "every kernel")]


@pytest.mark.parametrize("name, mode, decides", RETRIED)
def test_a_tool_that_fails_under_the_filter_tries_the_next_scope(name, mode, decides):
    # A PyTorch program around the Gluon kernel (H200, 2026-12-03): racecheck under the
    # kernel filter fails inside itself, cuBLAS's unchecked kernel faulting. The user's
    # kernel with the libraries' kernels checked beside it works (scripts/gpu-filter-probe.sh),
    # and is what the user-kernels scope tries first; under --kernel (one launch), every kernel.
    m = _manifest(name)
    assert m["scope"]["mode"] == mode and m["outcome"] == "clean"
    attempts = [r for r in m["runs"] if r["phase"] == "sanitizer-attempt"]
    assert [r["tool"] for r in attempts] == ["racecheck"]
    assert "Internal Sanitizer Error" in attempts[0]["note"] and "--kernel-name" in attempts[0]["argv"]
    retry = [r for r in m["runs"] if r["phase"] == "sanitizer" and r["tool"] == "racecheck"]
    assert len(retry) == 1 and retry[0]["exit_code"] == 0
    assert ("kns=nvjet" in retry[0]["argv"]) == (mode == "user-kernels")
    assert ("--kernel-name" in retry[0]["argv"]) == (mode == "user-kernels")
    others = [r for r in m["runs"] if r["phase"] == "sanitizer" and r["tool"] != "racecheck"]
    assert others and all("--kernel-name" in r["argv"] for r in others)
    code, doc = _analyze(name)
    assert code == 0, doc
    assert {"scope", "sanitizer-retry", "vendor-kernel"} <= {c["kind"] for c in doc["caveats"]}
    caveats = [c["text"] for c in doc["caveats"]]
    assert any(c.startswith("compute-sanitizer checked") for c in caveats)
    # what the run that decides checked is read from its own command line
    assert any("failed inside the tool under the kernel filter" in c and f"the run that decides checked {decides}"
               in c for c in caveats)
    # the unscoped run checked cuBLAS and cuDNN: their records are listed, not judged
    assert any("inside cuBLAS's kernel nvjet" in c for c in caveats)
    (prof,) = [r for r in m["runs"] if r["phase"] == "profile"]  # the profile is scoped too (its report not kept)
    assert prof["exit_code"] == 0 and prof["argv"][prof["argv"].index("-c") + 1] == "1"
    assert prof["argv"][prof["argv"].index("-k") + 1] in ("regex:^(gluon_ws_rowsum)$", "regex:gluon_ws_rowsum")


def test_the_tma_matmul_is_checked_and_profiled_in_a_minute():
    # 4096^3 bf16, launched twice, all four tools and the profile (the row ran alone on the GPU)
    m = _manifest("triton")
    assert m["scope"] == {"mode": "user-kernels", "kernels": ["matmul_tma"], "pattern": None,
                          "why": "named by Triton's cache in the bundle"}
    san = [r for r in m["runs"] if r["phase"] == "sanitizer"]
    assert sorted(r["tool"] for r in san) == ["initcheck", "memcheck", "racecheck", "synccheck"]
    assert all(r["exit_code"] == 0 and not r["timed_out"] for r in san)
    assert all(r["argv"][3:5] == ["--kernel-name", "kne=matmul_tma"] for r in san)
    total = sum(r["seconds"] for r in m["runs"])
    assert total < 90, total  # 49 s measured; the unscoped initcheck alone did not finish in 250 s
    (prof,) = [r for r in m["runs"] if r["phase"] == "profile"]
    assert prof["argv"][prof["argv"].index("-k") + 1] == "regex:^(matmul_tma)$"
    assert prof["argv"][prof["argv"].index("-c") + 1] == "1"


def test_a_cute_dsl_repro_is_scoped_to_the_modules_its_dump_kept(tmp_path):
    # CuTe DSL 4.8.1 with CUTE_DSL_KEEP=ptx,cubin writes <module>.sm_90a.ptx into the dump
    # (fixtures/src/cute: the PTX of fixtures/ptx/cute_ws_ring.ptx is that file's content)
    from wsperf.collectors.collect import Options, _State

    st = _State(tmp_path, ["python3", "repro.py"], Options(tmp_path / "b"), lambda _: None)
    env = st.env()
    assert env["CUTE_DSL_KEEP"] == "ptx,cubin" and Path(env["CUTE_DSL_DUMP_DIR"]).is_dir()
    dump = Path(env["CUTE_DSL_DUMP_DIR"])
    ptx = (ROOT / "fixtures" / "ptx" / "cute_ws_ring.ptx").read_text()
    (dump / "cutlass_host_FakeTensor_4_1.sm_90a.ptx").write_text(ptx)
    from wsperf.collectors.generated import keep_cute_dump

    keep_cute_dump(st)
    (entry,) = re.findall(r"\.entry\s+([^\s(]+)", ptx)
    scope = choose_scope(None, False, tmp_path, st.generated)
    assert scope.mode is ScopeMode.USER and scope.kernels == (entry,)
    assert scope.sanitizer_args(None) == ["--kernel-name", f"kne={entry}"]
    assert "CuTe DSL's dump" in scope.why


def test_a_torch_extension_built_in_the_bundle_scopes_to_its_kernels(tmp_path):
    # The layout torch.utils.cpp_extension leaves in TORCH_EXTENSIONS_DIR: <dir>/<name>/<name>.so.
    # The library is built here by nvcc from the extension's own kernel (fixtures/src/torch_ext_mix.py).
    import shutil
    import subprocess

    from wsperf.collectors.collect import Options, _State
    from wsperf.collectors.disasm import find_tool
    from wsperf.collectors.generated import keep_torch_extensions, torch_extensions_dir

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    st = _State(tmp_path, ["python3", "repro.py"], Options(tmp_path / "b"), lambda _: None)
    build = torch_extensions_dir(tmp_path, st.env())
    assert str(build) == st.env()["TORCH_EXTENSIONS_DIR"] and build.is_relative_to(tmp_path.resolve())
    src = (ROOT / "fixtures" / "src" / "torch_ext_mix.py").read_text()
    kernel = src[src.index("__global__"):src.index("torch::Tensor rowsum")]
    (tmp_path / "k.cu").write_text(kernel)
    so = build / "wsperf_rowsum" / "wsperf_rowsum.so"
    so.parent.mkdir(parents=True)
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]",
                    "-o", str(so), str(tmp_path / "k.cu")], check=True, capture_output=True, timeout=300)
    (build / "wsperf_rowsum" / "alias.so").symlink_to(so)  # a link is not followed: listed once
    keep_torch_extensions(st, build, find_tool("cuobjdump"))
    assert set(st.generated) == {"ptx:torch_ext/wsperf_rowsum", "sass:torch_ext/wsperf_rowsum"}
    assert ".entry _Z12block_rowsumPKfPfi" in (tmp_path / st.generated["ptx:torch_ext/wsperf_rowsum"]).read_text()
    scope = choose_scope(None, False, tmp_path, st.generated)
    assert scope.mode is ScopeMode.USER and scope.kernels == ("_Z12block_rowsumPKfPfi",)
    assert scope.sanitizer_args(None) == ["--kernel-name", "kne=_Z12block_rowsumPKfPfi"]
    assert "torch extensions" in scope.why
    # A TORCH_EXTENSIONS_DIR the user set is read where it is.
    assert torch_extensions_dir(tmp_path, {"TORCH_EXTENSIONS_DIR": "/opt/ext"}) == Path("/opt/ext")


def test_the_fallbacks_are_the_measured_order_and_say_what_they_check():
    # scripts/gpu-filter-probe.sh on the H200: kne=/kns=/regex= of the Gluon kernel, or one
    # launch, all failed inside racecheck; the kernel with kns=nvjet beside it, and every
    # kernel, worked. The user's kernels with the libraries' come first.
    from wsperf.collectors.scope import LIBRARY_FILTERS, checked_by

    user = SanitizerScope(ScopeMode.USER, ("gluon_ws_rowsum", "other_kernel"))
    forms = user.fallbacks(None)
    assert [label for label, _ in forms] == ["with the libraries' kernels checked beside them", "without the filter",
                                             "on one launch of the filtered kernels"]
    libs, every, one = (args for _, args in forms)
    assert libs[:4] == user.sanitizer_args(None) and "kns=nvjet" in libs and every == []
    assert checked_by(libs) == ("the kernels named gluon_ws_rowsum, other_kernel or whose names contain "
                                + ", ".join(LIBRARY_FILTERS))
    assert checked_by(every) == "every kernel"
    assert checked_by(one) == "the kernels named gluon_ws_rowsum, other_kernel, at most 1 launch of them"
    # with a launch count, library launches would use up the count: no library form
    assert [label for label, _ in user.fallbacks(3)] == ["without the filter", "on one launch of the filtered kernels"]
    # --kernel (one launch by default): only every kernel remains to try; every kernel: nothing
    assert [args for _, args in SanitizerScope(ScopeMode.KERNEL, pattern="gemm").fallbacks(1)] == [[]]
    assert SanitizerScope(ScopeMode.ALL).fallbacks(None) == []
    assert checked_by(["--kernel-name", "regex=gemm", "--launch-count", "1"]) == \
        "the kernels matching the regular expression gemm, at most 1 launch of them"
