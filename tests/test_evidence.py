"""The joined evidence path on real bundles (fixtures/evidence: `wsperf collect` on the
H200 by scripts/gpu-evidence.sh): the generated code a bundle keeps, the worksheet filled
from it into the store, a hang tied to its barrier and a race to the release of its
stage, the sanitizer's scope (library kernels, its own kernel filter) and acceptance.

Each fixture's design decides the answer: ws_deadlock initializes full[] with 64 where 32
producer lanes arrive; ws_phase has right counts and a wrong first-wait parity; the three
ws_stream builds release a stage per thread, by one lane after __syncwarp, or by one lane
without it; torch_mix's own kernel is clean."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bundles import deadlock_bundle, sanitizer_bundle
from support import REPORTS, ROOT, assert_one_error_line, wsperf
from wsperf.analyses.correctness import correctness_report
from wsperf.analyses.evidence import gather
from wsperf.analyses.handoffs import Release, discarded_reads, releases, sheets
from wsperf.collectors.collect import Options, sanitizer_args, sanitizer_limit
from wsperf.collectors.scope import Scope, finding_scope, vendor_library
from wsperf.collectors.store import open_store

EVIDENCE = ROOT / "fixtures" / "evidence"


def _analyze(name: str, *extra: str) -> tuple[int, dict]:
    p = wsperf("analyze", EVIDENCE / name, "--format", "json", *extra)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout)


def test_a_miscount_deadlock_names_the_barrier_and_the_count_from_the_embedded_ptx():
    code, doc = _analyze("deadlock_ptx")
    assert code == 4 and doc["outcome"] == "deadlock"
    first = doc["causes"][0]
    assert first["basis"] == "evidence"
    assert "wait at pipeline.cuh:102 on full" in first["text"]
    assert "mbarrier.init count 64" in first["text"] and "32 arrival(s) per phase" in first["text"]
    assert "init with 32" in first["text"]
    # roles read from the PTX, not guessed from the warp rank
    assert {(g["role"], g["role_basis"]) for g in doc["groups"]} == {("consumer", "evidence"),
                                                                      ("producer", "evidence")}
    by_role = {h["role"].split(" ")[0]: h for h in doc["handoffs"]}
    assert by_role["consumer"]["barrier"] == "full" and by_role["consumer"]["arrivals_per_phase"] == 32
    assert by_role["producer"]["barrier"] == "empty"
    # the worksheet decided: the generic checklist (assumptions) is gone
    assert all(c["basis"] == "evidence" for c in doc["causes"])


def test_a_phase_deadlock_without_ptx_in_the_binary_is_settled_by_source():
    code, doc = _analyze("phase_source")
    assert code == 4
    first = doc["causes"][0]
    assert first["basis"] == "evidence" and "parity" in first["text"]
    assert "every arriver is itself waiting" in first["text"]
    assert not any("init with" in c["text"] for c in doc["causes"])  # the counts are right
    manifest = json.loads((EVIDENCE / "phase_source" / "bundle.json").read_text())
    kept = {k for r in manifest["runs"] if r["phase"] == "generated" for k in r["outputs"]}
    assert {"source:ws_phase.cu", "ptx:ws_phase.ptx", "sass:ws_phase"} <= kept
    # built with code=sm_90a only: cuobjdump -ptx printed fatbin headers, no PTX module
    assert b".version" not in (EVIDENCE / "phase_source" / "generated" / "ws_phase.ptx").read_bytes()


def test_without_generated_code_the_report_says_what_would_settle_it(tmp_path):
    p = wsperf("analyze", deadlock_bundle(tmp_path), "--format", "json")
    assert p.returncode == 4
    doc = json.loads(p.stdout)
    assert "--source" in doc["settle"] and all(h is None for h in doc["handoffs"] or [None])
    assert all(g["role_basis"] == "assumption" for g in doc["groups"])


def test_code_whose_lines_do_not_match_the_hang_claims_nothing(tmp_path):
    # The committed capture (tests/bundles.py) predates first_parity: its waits sit at
    # pipeline.cuh:96/79, the newer PTX's at 102/85. No wait matches, so no role or cause
    # is taken from the worksheet, and the report says why.
    ptx = EVIDENCE / "deadlock_ptx" / "generated" / "ws_deadlock.ptx"
    p = wsperf("analyze", deadlock_bundle(tmp_path), "--source", ptx, "--format", "json")
    assert p.returncode == 4
    doc = json.loads(p.stdout)
    assert all(g["role_basis"] == "assumption" for g in doc["groups"])
    assert "-lineinfo" in doc["settle"]


def test_the_worksheet_of_the_generated_code_is_in_the_store():
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "deadlock_ptx"])
    assert ev.sheets and not ev.sheet_problems
    rows = con.sql("""
        SELECT b.barrier, b.init_count, sum(a.arrivals) AS per_phase, any_value(w.call_line) AS waits_at
        FROM ws_barriers b JOIN ws_arrivals a USING (kernel, barrier) JOIN ws_waits w USING (kernel, barrier)
        GROUP BY ALL ORDER BY b.barrier""").fetchall()
    assert rows == [("empty", 64, 64, 85), ("full", 64, 32, 102)]
    (flag,) = con.sql("SELECT name, basis FROM ws_flags").fetchall()
    assert flag == ("init-count", "evidence")


@pytest.mark.parametrize("name, code, release", [
    ("release_warp_synced", 3, Release.WARP_SYNCED),
    ("release_unsynced", 3, Release.UNSYNCED),
])
def test_a_racecheck_report_names_the_release_of_its_stage(name, code, release):
    got, doc = _analyze(name)
    assert got == code and doc["outcome"] == "correctness"
    (rel,) = doc["releases"]
    assert rel["release"] == release.value and rel["barrier"] == "empty" and rel["role"].startswith("consumer")
    assert "rebuild" in rel["check"] or "__syncwarp" in rel["check"]


def test_the_per_thread_release_is_clean_and_classified_so():
    code, doc = _analyze("release_per_thread")
    assert code == 0 and doc["outcome"] == "clean"
    gs, problems = sheets([("ptx", EVIDENCE / "release_per_thread" / "generated" / "release_per_thread.ptx")])
    assert not problems
    assert {r.release for r in releases(gs) if r.barrier == "empty"} == {Release.PER_THREAD}


def test_an_accepted_warp_synced_release_goes_on_with_a_caveat_and_an_unsynced_one_never():
    code, doc = _analyze("release_warp_synced_accepted")
    assert code == 0
    (item,) = doc["caveats"]
    caveat = item["text"]
    assert item["kind"] == "accepted-race" and item["tool"] == "racecheck" and item["findings"] > 0
    assert "--accept-race warp-synced-single-lane-release" in caveat and "hazards on this stage must vanish" in caveat
    manifest = json.loads((EVIDENCE / "release_warp_synced_accepted" / "bundle.json").read_text())
    assert manifest["accepted"] == ["warp-synced-single-lane-release"] and manifest["outcome"] == "clean"
    # the unsynced build was collected with the same --accept-race: still a stop
    unsynced = json.loads((EVIDENCE / "release_unsynced" / "bundle.json").read_text())
    assert unsynced["options"]["accept_race"] == ["warp-synced-single-lane-release"]
    assert unsynced["outcome"] == "correctness" and unsynced["accepted"] == []


def test_a_triton_repro_keeps_its_generated_code_and_finishes_every_sanitizer_tool():
    manifest = json.loads((EVIDENCE / "triton" / "bundle.json").read_text())
    tools = {r["tool"]: r for r in manifest["runs"] if r["phase"] == "sanitizer"}
    assert sorted(tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]
    assert not any(r["timed_out"] for r in tools.values())
    kinds = {k.split(":")[0] for r in manifest["runs"] if r["phase"] == "generated" for k in r["outputs"]}
    assert {"ptx", "cubin", "ttgir", "json"} <= kinds
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "triton"])
    assert [g.sheet.kernel for g in ev.sheets] == ["matmul_tma"]
    assert ev.verification.verified
    code, doc = _analyze("triton")
    assert code == 0 and doc["outcome"] == "clean"


def test_caveats_in_json_carry_the_tool_kernel_and_counts_their_sentence_names():
    code, doc = _analyze("triton_ws4")
    assert code == 0
    by_kind = {c["kind"]: c for c in doc["caveats"]}
    assert set(by_kind) == {"scope", "sass-artifact", "toolchain-protocol"}
    scope, sass, proto = by_kind["scope"], by_kind["sass-artifact"], by_kind["toolchain-protocol"]
    assert scope["kernel"] == "persistent_matmul_ws" and "(persistent_matmul_ws;" in scope["text"]
    assert (sass["tool"], sass["kernel"], sass["findings"]) == ("initcheck", "persistent_matmul_ws", 20)
    assert sass["text"].startswith("initcheck:") and sass["text"].endswith("(20 findings)")
    assert (proto["tool"], proto["kernel"], proto["findings"]) == ("racecheck", "persistent_matmul_ws", 20)
    assert proto["hazards"] > 0 and proto["text"].endswith("(20 findings)")


def test_initchecks_host_copy_under_a_kernel_filter_is_the_filters_not_the_users():
    code, doc = _analyze("torch_filter")
    assert code == 0
    (item,) = doc["caveats"]
    caveat = item["text"]
    assert item["kind"] == "filter-artifact"
    # the fields the sentence is built from: the tool, and the two host-copy records
    assert (item["tool"], item["kernel"], item["findings"]) == ("initcheck", None, 2)
    assert "Host API uninitialized memory access" in caveat and "scale_rows" in caveat
    # the same finding without the filter is the user's: a stop
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "torch_filter"])
    assert not correctness_report(ev.sanitizer, ev.kernel_filter).broken
    assert correctness_report(ev.sanitizer, None).broken
    found = [f for _, o in ev.sanitizer for f in o.findings]  # 2 records: the same host copy, twice
    assert found and all(f.kind == "InitcheckApiError" and f.kernel is None for f in found)
    assert {finding_scope(f, "scale_rows") for f in found} == {Scope.FILTER}
    assert {finding_scope(f, None) for f in found} == {Scope.USER}


def test_library_kernels_are_recognised_by_their_real_names():
    real = {
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": "cuBLAS",  # from fixtures/reports/torch_mm
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0": "cuDNN",
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(int)":
            "PyTorch ATen",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": "NCCL",
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>(Flash_fwd_params)":
            "FlashAttention",
    }
    for name, lib in real.items():
        assert vendor_library(name) == lib, name
    for mine in ("matmul_tma", "scale_rows", "ws_pipeline", "void ws_stream<4, false, 32, false, 1>(const float *)",
                 "void cutlass::device_kernel<MyGemm>(MyGemm::Params)", None):
        assert vendor_library(mine) is None, mine


def test_the_repro_run_under_pytorch_with_cublas_and_attention_is_clean():
    code, doc = _analyze("torch_vendor")
    assert code == 0 and doc["outcome"] == "clean"


def test_the_sanitizer_is_scoped_by_kernel_and_timed_by_the_plain_run():
    assert sanitizer_args(Options(Path("x"))) == []
    assert sanitizer_args(Options(Path("x"), kernel="scale_rows")) == [
        "--kernel-name", "regex=scale_rows", "--launch-count", "1"]
    opts = Options(Path("x"), timeout=120.0)
    assert sanitizer_limit(opts, 1.0) == 120.0  # --timeout when longer
    assert sanitizer_limit(opts, 9.0) == 360.0  # 40x a 9 s Python repro
    assert sanitizer_limit(opts, 600.0) == 1800.0  # at most 30 minutes


def test_collect_refuses_an_unknown_acceptance_and_a_bad_source(tmp_path):
    p = wsperf("collect", "--out", tmp_path / "b", "--accept-race", "unsynced-single-lane-release", "--", "true")
    assert p.returncode == 2 and "only warp-synced-single-lane-release" in p.stderr
    p = wsperf("collect", "--out", tmp_path / "c", "--source", tmp_path / "missing.cu", "--", "true")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_report_md_for_a_hang_names_the_cause_and_a_falsifiable_fix(tmp_path):
    b = tmp_path / "deadlock_ptx"
    shutil.copytree(EVIDENCE / "deadlock_ptx", b)
    p = wsperf("analyze", b, "--write-report")
    assert p.returncode == 4 and "wrote" in p.stderr
    text = (b / "REPORT.md").read_text()
    for section in ("## Environment and commands", "## Launch shapes", "## Generated code", "## Symptom",
                    "## Conclusion", "## Experiments"):
        assert section in text
    assert "NVIDIA H200 (driver 580.159.04" in text and "`generated/ws_deadlock.ptx` (ptx)" in text
    # the bundle's environment.json could not read cuda-gdb's version: its note, not "?"
    assert "cuda-gdb (version not understood (exit 0))" in text and "cuda-gdb ?" not in text
    assert "| cause | evidence | consumers (warps 1-2) wait at pipeline.cuh:102 on full" in text
    assert "initialize full with count 32 (not 64): the repro must finish" in text
    assert "\\_" not in text.split("## Symptom")[0].split("## Launch shapes")[1]  # code spans show no escapes


def test_report_md_for_a_slow_kernel_proposes_the_experiment_compare_can_check(tmp_path):
    b = sanitizer_bundle(tmp_path, "clean", report="ws_stream_serialized")
    assert wsperf("analyze", b, "--write-report").returncode == 0
    text = (b / "REPORT.md").read_text()
    assert "actual: confirmed: serialized-roles" in text
    # the experiment carries the finding's estimated gain (analyses/gains.py)
    assert re.search(r"serialized-roles \(est\. [0-9]+-[0-9]+% \([^)]*\)\): Deepen the ring from 1 stage to 4", text)
    assert "wsperf compare BEFORE AFTER" in text
    assert "grid " in text.split("## Launch shapes")[1].split("##")[0]


def test_wgmma_consumers_release_after_waiting_for_their_async_reads():
    # fixtures/src/gemm.cu, TMA build: the consumer warpgroups wait wgmma.wait_group before
    # they arrive on the empty barrier; the cp.async build and the ws_stream rings do not
    # read through the async proxy (test_a_racecheck_report_names_the_release_of_its_stage).
    gs, problems = sheets([("ptx", ROOT / "fixtures" / "ptx" / "gemm.ptx")])
    assert not problems
    tma = [r for r in releases(gs) if r.kernel.startswith("_Z7gemm_wsILb1E")]
    assert tma and {r.release for r in tma} == {Release.ASYNC_PROXY}
    assert all(r.role.startswith("consumer") for r in tma)
    assert not [r for r in releases(gs) if r.release is Release.ASYNC_PROXY and not r.kernel.startswith("_Z7gemm_wsILb1E")]


def test_races_inside_cublas_and_cudnn_are_listed_not_blamed_on_the_user():
    # torch_mix.py --n 4096 on the H200: racecheck reports cuBLAS's nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT
    # (the kernel a plain bf16 torch.matmul runs) and cuDNN's flash SDPA kernel; the user's scale_rows is clean.
    code, doc = _analyze("torch_vendor4096")
    assert code == 0 and doc["outcome"] == "clean"
    # each caveat as data: its kind, tool, kernel, library and counts, with the sentence
    assert [(c["kind"], c["library"]) for c in doc["caveats"]] == [("vendor-kernel", "cuBLAS"), ("vendor-kernel", "cuDNN")]
    assert doc["caveats"][0]["kernel"].startswith("nvjet_sm90") and doc["caveats"][0]["tool"] == "racecheck"
    assert doc["caveats"][0]["findings"] >= 1 and doc["caveats"][0]["hazards"] >= 1
    cublas, cudnn = (c["text"] for c in doc["caveats"])
    assert "inside cuBLAS's kernel nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT" in cublas and "hazards" in cublas
    assert "inside cuDNN's kernel cudnn_generated_fort_native_sdpa_sm90_flash_fprop" in cudnn
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "torch_vendor4096"])
    rep = correctness_report(ev.sanitizer, None)
    assert not rep.broken and {v.library for v in rep.vendor} == {"cuBLAS", "cuDNN"}
    # naming the library kernel with --kernel makes it the subject: judged, a stop
    assert correctness_report(ev.sanitizer, "nvjet").broken


def test_write_report_needs_a_bundle():
    assert_one_error_line(wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", "--write-report"), 2,
                          "--write-report needs a bundle directory")


def test_a_compilers_wrong_answer_stops_the_performance_path():
    # Triton 3.6 warp-specializes fixtures/src/triton_ws_matmul.py; with a 5-stage ring its
    # answer is NaN (2-4 stages are right: fixtures/reports/triton_ws_matmul.sweep.txt). The
    # repro says so and exits 1: that is the correctness outcome. Racecheck's records are
    # both sides Triton's own partition table (a toolchain-protocol caveat, shown, not the
    # stop): the 4-stage build, whose answers are right, has the same records.
    name = "triton_ws_race"
    manifest = json.loads((EVIDENCE / name / "bundle.json").read_text())
    (plain,) = [r for r in manifest["runs"] if r["phase"] == "run"]
    assert plain["exit_code"] == 1
    assert "WRONG RESULT" in (EVIDENCE / name / "run" / "repro.stderr.txt").read_text()
    assert manifest["outcome"] == "correctness" and not any(r["phase"] == "profile" for r in manifest["runs"])
    code, doc = _analyze(name)
    assert code == 3 and doc["outcome"] == "correctness"
    assert [r["tool"] for r in doc["sanitizer_runs"] if r["errors"]] == ["repro"]
    (why,) = doc["other_errors"]
    assert why.startswith("the repro's plain run ended with exit 1") and "run/repro.stderr.txt" in why
    assert doc["handoffs"] == []  # nothing racecheck saw is the user's handoff
    text = wsperf("analyze", EVIDENCE / name)
    assert text.returncode == 3 and "The repro's own run failed: no performance advice" in text.stdout


def test_a_race_on_the_partition_table_is_the_toolchains_protocol():
    # racecheck names source lines; the PTX the bundle keeps says which instructions those
    # are. Triton's 5-stage build: both sides are its partition table (a byte each worker
    # warp reads after barrier.sync 1, stored by the default warps before barrier.sync 1),
    # not a stage of the ring: a caveat naming the lines and the PTX, no handoff.
    code, doc = _analyze("triton_ws_race")
    (caveat,) = doc["toolchain_protocol"]
    assert caveat.startswith("toolchain-protocol: racecheck hazards in persistent_matmul_ws between "
                             "triton_ws_matmul.py:51 and triton_ws_matmul.py:53 are the warp_specialize partition table")
    assert caveat.endswith("(20 findings)") and "a wrong answer from the repro, still stops" in caveat
    src = (ROOT / "fixtures" / "src" / "triton_ws_matmul.py").read_text().splitlines()
    assert src[50].startswith("def persistent_matmul_ws(") and "_tile_loop(" in src[52]
    # the PTX lines it names are the table's stores and its read
    ptx = (EVIDENCE / "triton_ws_race" / "generated").rglob("*.ptx")
    text = next(p for p in ptx if "persistent_matmul_ws" in p.read_text()).read_text().splitlines()
    lines = [int(x) for x in caveat.split("PTX lines ")[1].split(":")[0].split(", ")]
    assert [text[n - 1].split()[0] for n in lines] == ["st.shared.v2.b32", "ld.shared.b8", "st.shared.v2.b32"]


def test_each_side_of_a_race_is_read_in_the_generated_ptx():
    # ws_stream's race (lane-0 release after __syncwarp): a bulk copy writes the stage the
    # consumers read with ld.shared - the ring itself, one row per side across the
    # template's instantiations.
    _, doc = _analyze("release_warp_synced")
    acc = {a["access"]: a for a in doc["race_accesses"]}
    assert len(doc["race_accesses"]) == 2
    assert acc["write"]["instructions"][0].startswith("cp.async.bulk.shared") and "stage" in acc["write"]["what"]
    assert acc["read"]["instructions"][0].startswith("ld.shared.f32") and "partition" not in acc["read"]["what"]


def test_an_atomic_exchange_that_publishes_a_tensor_map_is_no_uninitialized_read():
    # Triton publishes each tensor map it builds on the device (tl.make_tensor_descriptor)
    # with atomic exchanges whose old value goes to RZ; initcheck reports each as a read of
    # uninitialized global memory (20 a launch on the H200) and stopped every such kernel.
    # The cubin the bundle keeps says what the instruction at each PC is.
    con = open_store(None)
    ev = gather(con, [EVIDENCE / "triton_plain_desc"])  # the loop without warp_specialize
    init = [f for _, o in ev.sanitizer for f in o.findings if f.tool == "initcheck"]
    assert len(init) == 20 and {f.pc_offset for f in init} == {0x630}
    assert correctness_report(ev.sanitizer, None).broken  # read as errors, it stops
    judged = correctness_report(ev.sanitizer, None, discarded_reads(ev.generated))
    assert not judged.broken
    (why,) = judged.sass_artifacts
    assert "ATOMG.E.EXCH.STRONG.GPU PT, RZ," in why and why.endswith("(20 findings)")
    manifest = json.loads((EVIDENCE / "triton_plain_desc" / "bundle.json").read_text())
    assert manifest["outcome"] == "clean"  # collect judged it so on the H200
    p = wsperf("analyze", EVIDENCE / "triton_plain_desc")
    assert p.returncode == 0 and "Caveat: initcheck" in p.stdout and "atomic exchange" in p.stdout
    # The warp-specialized 5-stage build still stops: its repro's own check failed.
    code, doc = _analyze("triton_ws_race")
    assert code == 3 and doc["handoffs"] == []
    assert [r["tool"] for r in doc["sanitizer_runs"] if r["errors"]] == ["repro"]
    assert len(doc["sass_artifacts"]) == 1 and "+0x47d0" in doc["sass_artifacts"][0]


@pytest.mark.parametrize("name, caveats", [("gluon_ws_rowsum", 2), ("triton_ws4", 1), ("gluon_3part", 2),
                                           ("gluon_3part_slow", 2)])
def test_a_correct_warp_specialized_kernel_is_not_stopped_by_the_compilers_dispatch(name, caveats):
    """Collected on the H200 (scripts/gpu-evidence.sh): a Gluon warp-specialized kernel and
    Triton's own warp_specialize at 4 stages, both right by their own checks. Racecheck's
    records are all on the partition table: without that reading they would stop the bundle
    (exit 3); with it, exit 0 and the records are caveats with their PTX lines."""
    manifest = json.loads((EVIDENCE / name / "bundle.json").read_text())
    (plain,) = [r for r in manifest["runs"] if r["phase"] == "run"]
    assert plain["exit_code"] == 0 and manifest["outcome"] == "clean"
    p = wsperf("analyze", EVIDENCE / name, "--format", "json")
    assert p.returncode == 0, p.stderr
    proto = [c["text"] for c in json.loads(p.stdout)["caveats"] if c["kind"] == "toolchain-protocol"]
    assert all(c.startswith("toolchain-protocol") for c in proto)
    assert len(proto) == caveats and all("partition table (PTX lines" in c for c in proto)
    # the classification is what decides: the same findings judged without it are broken
    con = open_store(None)
    ev = gather(con, [EVIDENCE / name])
    assert correctness_report(ev.sanitizer, ev.kernel_filter, discarded_reads(ev.generated)).broken
    con.close()


def test_a_hazard_on_a_stage_buffer_still_stops():
    # ws_stream's race touches the ring itself (a bulk copy into the stage, ld.shared of it):
    # no partition table in that kernel, so no toolchain-protocol caveat, and the stop stays.
    code, doc = _analyze("release_warp_synced")
    assert code == 3 and doc["toolchain_protocol"] == [] and doc["handoffs"]


@pytest.mark.parametrize("name, cause", [
    ("gluon_count2", "mbarrier.init count 2 (line 57) but 1 arrival(s) per phase"),
    ("gluon_phase", "which only producer (warp 6) arrive(s) on; producers (warp 6) wait on "
                    "global_smem+{49248,49256,49264} (parity %r13"),
])
def test_a_hang_in_jit_code_is_mapped_with_the_cubin_the_jit_kept(name, cause):
    """A Gluon kernel that deadlocks (collected on the H200): the interpreter holds no SASS,
    so collect lists the cubins Triton's cache kept (hang/sass.txt); the hung warps' waits map
    to the kernel's PTX through their DSL lines, and the first cause is evidence."""
    b = json.loads((EVIDENCE / name / "bundle.json").read_text())
    sass = [r for r in b["runs"] if r["phase"] == "hang" and r["tool"] == "cuobjdump"]
    assert sass and all(r["argv"][-1].endswith(".cubin") for r in sass) and sass[-1]["outputs"]["sass"]
    code, doc = _analyze(name)
    assert code == 4 and doc["outcome"] == "deadlock"
    # first the barriers' live state (tests/test_mbarrier.py), then the worksheet's cause
    assert doc["causes"][0]["basis"] == "evidence" and doc["causes"][0]["text"].startswith("live state")
    assert any(c["basis"] == "evidence" and cause in c["text"] for c in doc["causes"]), doc["causes"]
    roles = {g["role"] for g in doc["groups"]}
    assert roles == {"producer", "consumer"}


@pytest.mark.parametrize("name, cause, join", [
    # Triton with TRITON_DISABLE_LINE_INFO=1: the SASS wait's operand [R35+URZ+0xc040] against
    # the PTX's global_smem+{49216,...} (a register adds to it: the array is inferred)
    ("gluon_count2_nolines", "mbarrier.init count 2", "offset 0xc040 (global_smem+49216) lies in this array"),
    ("gluon_phase_nolines", "every arriver is itself waiting", "offset 0xc060 (global_smem+49248) lies in this array"),
    # CUDA C++ without -lineinfo: static shared barriers have no offset in the PTX
    ("deadlock_nolines", "init with 32", "the only barrier of _Z11ws_pipelineIL3Bug5EEvPKfS2_Pfi a worksheet flag"),
])
def test_a_hang_without_line_info_is_tied_to_its_barrier_and_says_how(name, cause, join):
    root = EVIDENCE / name
    ptx = [p for p in root.joinpath("generated").rglob("*.ptx")]
    assert ptx and all(b".loc" not in p.read_bytes() for p in ptx)  # really built without line info
    assert "Filename  Line" in (root / "hang" / "probe.stdout.txt").read_text()
    code, doc = _analyze(name)
    assert code == 4
    named = next(c for c in doc["causes"] if cause in c["text"])
    assert join in named["text"], named
    assert named["basis"] == "assumption"  # the join is inferred, and says so
    # where the barriers were read live during the hang (the Gluon bundles, re-collected
    # 2026-12-03), that read is the first cause, as evidence; else the join is
    live = (root / "hang" / "mbarriers.txt").is_file()
    assert live == name.startswith("gluon")
    first = doc["causes"][0]
    assert (first["basis"], first["text"].startswith("live state")) == ("evidence", True) if live else first == named
    assert {g["role"] for g in doc["groups"]} <= {"consumer", "producer"}


def test_with_line_info_the_same_hang_is_joined_by_its_source_line():
    code, doc = _analyze("gluon_count2")
    worksheet = [c for c in doc["causes"] if "mbarrier.init count 2" in c["text"]]
    assert code == 4 and worksheet and worksheet[0]["basis"] == "evidence" and "joined" not in worksheet[0]["text"]


def test_a_wrong_answer_only_under_the_tools_is_a_stop_and_a_right_one_is_not():
    # gluon_early_release: the consumer releases a stage before reading it; right in its
    # plain run, wrong under memcheck, racecheck and synccheck, none of which names the race
    code, doc = _analyze("gluon_early_release")
    assert code == 3 and doc["outcome"] == "correctness"
    (why,) = [e for e in doc["other_errors"] if "under compute-sanitizer" in e]
    # racecheck is left out: its records (the partition table) are findings of its own
    assert "--tool memcheck, synccheck" in why and "sanitizer/synccheck.stdout.txt" in why
    manifest = json.loads((EVIDENCE / "gluon_early_release" / "bundle.json").read_text())
    assert manifest["outcome"] == "correctness"
    assert [r["exit_code"] for r in manifest["runs"] if r["phase"] == "run"] == [0]
    code, doc = _analyze("gluon_ws_rowsum")  # the correct kernel: right under every tool
    assert code == 0 and not any("under compute-sanitizer" in c["text"] for c in doc.get("caveats", []))
