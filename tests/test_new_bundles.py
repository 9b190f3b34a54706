"""Bundles collected on the H200 by scripts/gpu-evidence.sh for barriers in static shared
variables, Triton's own sm_90 split copy, and a torch extension's kernel
(fixtures/evidence/README.md): each classification, read offline from the bundle."""

from __future__ import annotations

import json
import re

from support import ROOT, wsperf

EVIDENCE = ROOT / "fixtures" / "evidence"


def _analyze(name: str, code: int) -> dict:
    done = wsperf("analyze", EVIDENCE / name, "--format", "json")
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout)


def test_a_missing_expect_tx_hang_shows_the_bytes_no_expect_tx_announced():
    # ws_bulk.cu -DWS_BULK_MISSING_TX: each stage's full barrier (init 1) gets the arrival and
    # then copies' bytes nothing expected; the words were read at 0x2400/0x2408 (smem_layout)
    doc = _analyze("bulk_missing_tx", 4)
    first = doc["causes"][0]
    assert first["basis"] == "evidence" and first["text"].startswith("live state of full")
    # (how far the bytes ran ahead depends on when the hang was read: -12,288 / -8,192 in one
    # capture, -8,192 in both barriers in the next)
    assert re.search(r"1 of 1 arrival\(s\) in, 0 pending, -[\d,]+ tx byte\(s\) outstanding", first["text"])
    assert "more than any expect_tx announced" in first["text"]
    assert any(c["basis"] == "evidence" and "nothing announces them" in c["text"] for c in doc["causes"])


def test_a_collective_in_a_role_hang_is_tied_to_its_barrier_and_shows_the_release_never_made():
    # ws_bulk.cu -DWS_BULK_COLLECTIVE: the consumers sit in __syncthreads() (ws_bulk.cu:69);
    # cuda-gdb reports them at the instruction after the BAR.SYNC. The worksheet's flag 3 names
    # that barrier, joined by its source line, first; no consumer thread has arrived on
    # empty[] (init 64), read live. Before, those warps read "not-waiting" at a BSSY.
    doc = _analyze("bulk_collective", 4)
    first, second = doc["causes"][:2]
    assert first["basis"] == "evidence" and "the worksheet's flag 3, joined by its source line" in first["text"]
    assert "BAR.SYNC" in first["text"] and "ws_bulk.cu:69" in first["text"]
    assert second["basis"] == "evidence" and second["text"].startswith("live state of empty")
    assert "0 of 64 arrival(s) in, 64 pending" in second["text"]
    (bar,) = [g for g in doc["groups"] if g["wait"] == "block-barrier"]
    assert (bar["role"], bar["role_basis"], bar["offset"]) == ("consumer", "evidence", 0x410), bar


def test_a_cpp_count_deadlock_reads_its_static_barriers():
    # ws_deadlock.cu: full[] initialized for 64 arrivals, 32 producer lanes arrive
    doc = _analyze("deadlock_ptx_live", 4)
    first = doc["causes"][0]
    assert first["basis"] == "evidence" and "32 of 64 arrival(s) in, 32 pending" in first["text"]
    assert any("init with 32" in c["text"] and c["basis"] == "evidence" for c in doc["causes"])


def test_triton_split_copy_is_clean():
    # BK = 128: two elected lanes copy a block's two boxes; right on the H200. Racecheck's
    # partition-table records (one at the kernel's def line, which also holds the copies)
    # are the toolchain protocol.
    for name in ("triton_split", "triton_split_ok"):
        doc = _analyze(name, 0)
        assert doc["outcome"] == "clean"
        assert any(c["kind"] == "toolchain-protocol" and c["text"].startswith("toolchain-protocol")
                   for c in doc["caveats"])


def test_a_torch_extension_is_the_repros_own_kernel():
    m = json.loads((EVIDENCE / "torch_ext" / "bundle.json").read_text())
    assert m["scope"]["mode"] == "user-kernels" and m["scope"]["kernels"] == ["_Z12block_rowsumPKfPfi"]
    prof = [r for r in m["runs"] if r["phase"] == "profile"]
    assert prof and "--kernel-name-base" in prof[0]["argv"]
    assert _analyze("torch_ext", 0)["outcome"] == "clean"
    race = _analyze("torch_ext_race", 3)
    assert race["outcome"] == "correctness"
    assert any(r.get("tool") == "racecheck" and r.get("errors") for r in race["sanitizer_runs"])


def test_initcheck_of_a_torch_extension_finishes_and_is_decided_checking_every_kernel():
    """fixtures/src/torch_ext_mix.py on the H200, all four tools (re-collected): initcheck
    ran in 5 s twice. Before it did not finish in about 500 s: each of the millions of reads
    it reported carried a symbolized host backtrace (`--show-backtrace no` now). Under the
    kernel filter it reported the extension's reads of a tensor an unchecked ATen copy kernel
    wrote; once more checking every kernel, none are in the extension's kernel, and the copy
    kernel's own reads (of cuBLAS's output) are listed, not judged."""
    from wsperf.collectors.collect import _filtered_reads

    m = json.loads((EVIDENCE / "torch_ext" / "bundle.json").read_text())
    tools = {r["tool"]: r for r in m["runs"] if r["phase"] == "sanitizer"}
    assert sorted(tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]
    assert all("--show-backtrace" in r["argv"] for r in tools.values())
    (first,) = [r for r in m["runs"] if r["phase"] == "sanitizer-attempt" and r["tool"] == "initcheck"]
    assert "--kernel-name" in first["argv"] and "--kernel-name" not in tools["initcheck"]["argv"]
    assert first["seconds"] < 60 and tools["initcheck"]["seconds"] < 60
    assert _filtered_reads(EVIDENCE / "torch_ext" / "sanitizer" / "initcheck.scoped.xml") == 20
    doc = _analyze("torch_ext", 0)
    assert doc["outcome"] == "clean" and m["outcome"] == "clean"
    assert any("unrolled_elementwise_kernel, a kernel the repro did not compile" in c["text"] and c["kind"] == "vendor-kernel"
               for c in doc["caveats"])


def test_a_release_is_classified_from_the_sass_when_no_ptx_exists():
    # ws_stream.cu built code=sm_90a only: no PTX, no worksheet; the SASS decides. The
    # __syncwarp() of the warp-synced build is a NOP there (one instance keeps a WARPSYNC),
    # which the SASS cannot tell from padding: unsure, never unsynced; the build without
    # it has nothing between its LDS reads and the guarded arrive: unsynced.
    synced = {r["release"] for r in _analyze("release_warp_synced_sass", 3)["releases"]}
    assert synced == {"single-lane-release-unsure", "warp-synced-single-lane-release"}
    unsynced = _analyze("release_unsynced_sass", 3)["releases"]
    assert {r["release"] for r in unsynced} == {"unsynced-single-lane-release"}
    assert all("no WARPSYNC, BAR or NOP" in r["evidence"] for r in unsynced)
    # every reading thread arrives: racecheck finds nothing, nothing to classify
    assert _analyze("release_per_thread_sass", 0)["outcome"] == "clean"


def test_a_tvm_module_is_the_repros_own_kernel():
    """fixtures/src/tvm/tvm_block_sum_mix.py on the H200: TVM compiled its kernel in memory;
    wsperf's sitecustomize kept the module's source and nvrtc's cubin, which named the scope.
    Clean with all four tools beside cuBLAS and SDPA; the planted race still stops it."""
    m = json.loads((EVIDENCE / "tvm_block_sum" / "bundle.json").read_text())
    assert m["scope"]["mode"] == "user-kernels" and m["scope"]["kernels"] == ["tvm_block_sum_kernel"]
    assert "TVM's CUDA modules" in m["scope"]["why"]
    (kept,) = [r["outputs"] for r in m["runs"] if r["phase"] == "generated" and r["tool"] == "tvm"]
    assert sorted(k.split(":")[0] for k in kept) == ["cubin", "ptx", "source"]
    cubin = EVIDENCE / "tvm_block_sum" / next(v for k, v in kept.items() if k.startswith("cubin:"))
    assert cubin.read_bytes()[:4] == b"\x7fELF"  # the binary TVM's own compiler made on the GPU
    tools = {r["tool"]: r for r in m["runs"] if r["phase"] == "sanitizer"}
    assert sorted(tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]
    doc = _analyze("tvm_block_sum", 0)
    assert doc["outcome"] == "clean"
    assert any("named by TVM's CUDA modules" in c["text"] and c["kind"] == "scope" for c in doc["caveats"])
    race = _analyze("tvm_block_sum_race", 3)
    assert race["outcome"] == "correctness"
    (rc,) = [r for r in race["sanitizer_runs"] if r.get("tool") == "racecheck"]
    assert rc["errors"] == 32
    assert any("tvm_block_sum_kernel" in h.get("kernels", []) or "tvm_block_sum_kernel" in str(h)
               for h in race["handoffs"])


def test_a_cute_dsl_module_is_the_repros_own_kernel():
    """fixtures/src/cute/cute_ws_ring_run.py on the H200: CuTe DSL compiled its ring kernel
    at run time; its dump (PTX and cubin, kept in generated/cute) named the scope. Clean
    with all four tools, checking that kernel only."""
    m = json.loads((EVIDENCE / "cute_ring" / "bundle.json").read_text())
    assert m["scope"]["mode"] == "user-kernels" and "CuTe DSL's dump" in m["scope"]["why"]
    (kernel,) = m["scope"]["kernels"]
    assert kernel.startswith("kernel_cutlass_ring_kernel")
    (kept,) = [r["outputs"] for r in m["runs"] if r["phase"] == "generated" and r["tool"] == "cute-dsl"]
    cubin = EVIDENCE / "cute_ring" / next(v for k, v in kept.items() if k.startswith("cubin:"))
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    tools = {r["tool"]: r for r in m["runs"] if r["phase"] == "sanitizer"}
    assert sorted(tools) == ["initcheck", "memcheck", "racecheck", "synccheck"]
    assert all(f"kne={kernel}" in r["argv"] for r in tools.values())
    doc = _analyze("cute_ring", 0)
    assert any("named by CuTe DSL's dump" in c["text"] and c["kind"] == "scope" for c in doc["caveats"])


def test_cute_dsl_count_and_phase_deadlocks_have_evidence_as_their_first_cause():
    """The same ring with its planted bugs (fixtures/src/cute/README.md): `empty[]`
    initialized for 128 arrivals and given 4 a phase; the producer's first wait on parity
    `phase` instead of `phase ^ 1`. The waits are mapped with the dump's cubin, not the
    interpreter's, and each first cause is the barrier read live, as evidence."""
    count = _analyze("cute_ring_count", 4)
    first = count["causes"][0]
    assert first["basis"] == "evidence" and first["text"].startswith("live state of __dynamic_shmem__0")
    # empty[] (the second ring of barriers) short of its count: 4 of 128 in every stage
    assert any(c["basis"] == "evidence" and "4 of 128 arrival(s) in, 124 pending" in c["text"]
               for c in count["causes"])
    assert any(c["basis"] == "evidence" and "mbarrier.init count 128" in c["text"] and "init with 4" in c["text"]
               for c in count["causes"])
    phase = _analyze("cute_ring_phase", 4)
    assert phase["causes"][0]["basis"] == "evidence"
    producer = [c for c in phase["causes"] if "(producer) spin on" in c["text"]]
    assert producer and producer[0]["basis"] == "evidence"
    assert "this is the producer's first wait" in producer[0]["text"] and "0 of 4 arrival(s) in" in producer[0]["text"]
    for doc in (count, phase):
        roles = {g["role"] for g in doc["groups"]}
        assert roles == {"producer", "consumer", "epilogue"}, roles
        assert all(g["source"].endswith(("cute_ws_ring.py:104", "cute_ws_ring.py:175", "cute_ws_ring.py:186"))
                   for g in doc["groups"])
