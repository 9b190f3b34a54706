"""The worksheet on what the compilers emit: PTX that Gluon (Triton 3.6), TVM TIRx, CuTe DSL
(4.8), nvcc on CUTLASS 4.2's C++ headers and Triton's own warp specialization generated from
kernels written here (fixtures/src/gluon, fixtures/src/tirx, fixtures/src/cute,
fixtures/src/cutlass, fixtures/src/triton_tma, fixtures/src/triton_ws_matmul.py;
each README states the design's truth). Correct kernels raise no evidence flag and get their partitions named; each planted
bug is flagged with its cause."""

from __future__ import annotations

import json

import pytest

from support import ROOT, wsperf
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet
from wsperf.analyses.worksheet_eval import _Kernel
from wsperf.analyses.worksheet_model import phase_arrivals
from wsperf.collectors.ptx import parse

PTX = ROOT / "fixtures" / "ptx"
CUBINS = ROOT / "fixtures" / "cubins"

# Every PTX fixture of a kernel that is correct by design (the planted ones are not here).
CORRECT = ["gemm.ptx", "tcgen05.ptx", "ws_stream.ptx", "triton_plain_matmul.ptx", "triton_ws_matmul.ptx",
           "gluon_ws_gemm.ptx", "tirx_ws_gemm.ptx", "cute_ws_ring.ptx", "cute_ws_ring_cluster.ptx", "cute_ws_gemm.ptx",
           "cute_ws_gemm_cluster.ptx", "triton_ws_sm100.ptx", "triton_ws_sm100_kloop.ptx",
           "triton_ws_sm90_desc.ptx", "triton_ws_sm90_split.ptx", "cutlass_ws_gemm.ptx", "cutlass_builder_gemm.ptx",
           "ws_bulk.ptx", "gluon_ws_3part.ptx", "gluon_ws_3part_s4_4.ptx", "gluon_ws_3part_slow_store.ptx",
           "cute_tcgen05_gemm.ptx", "cute_tcgen05_gemm_cluster.ptx", "tirx_ws_gemm_cluster.ptx",
           "gluon_ws_wgmma_sm90.ptx", "gluon_ws_3part_sm90.ptx", "triton_ws_attn_sm100.ptx",
           "triton_ws_sm100_epilogue_subtile.ptx", "cute_pipe_wgmma2.ptx", "cute_pipe_wgmma2_cluster.ptx",
           "cute_pipe_pingpong.ptx", "cute_pipe_pingpong_named.ptx", "cute_pipe_tmastore.ptx", "cute_pipe_cpasync.ptx",
           "cute_pipe_umma_persistent.ptx", "cute_pipe_umma_cluster.ptx", "cute_pipe_2cta.ptx", "cute_pipe_clc.ptx",
           "tirx_pgemm.ptx", "tirx_pgemm_warpelect.ptx", "tirx_pgemm_wbowner.ptx", "tirx_pgemm_arrivecount.ptx",
           "tirx_pgemm_dynacc.ptx", "tirx_pgemm_init_role_ok.ptx", "tirx_pgemm_init_role_private.ptx", "tirx_hgemm.ptx",
           "tws_bias_relu_s2_w8.ptx", "tws_bias_gelu_s5_w8.ptx", "tws_bias_relu_dev_s2_w8.ptx", "tws_batched_sm100.ptx",
           "tws_splitk_sm100.ptx", "tws_sigattn_sm100.ptx", "tws_sigattn_causal_sm100.ptx", "tws_swiglu_sm100.ptx",
           "tws_fp8_sm100.ptx", "tws_kloop_bm64_sm100.ptx", "tws_two_loops_bn64_sm100.ptx", "tws_single_acc_sm100.ptx",
           "tws_rowsum_sm100.ptx", "tws_h_128x256_sm90.ptx", "tws_h_fp8_sm90.ptx", "tws_h_kloop_w4_sm90.ptx",
           "gluon_pgemm.ptx", "gluon_pgemm_cnt128.ptx", "gluon_pgemm_thr128.ptx", "gluon_pgemm_thr128b.ptx",
           "gluon_pgemm_predcommit.ptx", "gluon_pgemm_2exp.ptx", "gluon_two_cons.ptx", "gluon_quad_gemm.ptx",
           "gluon_cgemm.ptx", "gluon_tworeg.ptx", "gluon_pvt_bias.ptx", "gluon_reinit_bias.ptx", "gluon_wide90.ptx",
           "gluon_mmadef.ptx", "gluon_gather_gemm.ptx", "cute_chain.ptx", "cute_umma_tmastore.ptx",
           "cute_cluster_rowsum.ptx", "cute_tworegions.ptx", "cute_tmem2cta.ptx", "cute_prerelease.ptx",
           "cute_bulkloop.ptx", "cute_multiarrive.ptx", "cute_multiarrive3.ptx", "gluon_rings23.ptx",
           "gluon_rings23_nopeel.ptx", "gluon_loadmma.ptx", "gluon_epi8.ptx", "gluon_h_prod4.ptx",
           "tws2_ns1_sm100.ptx", "cutlass_pingpong_async.ptx", "cutlass_persistent_async.ptx",
           "cutlass_cluster_mc.ptx", "tirx_dualacc.ptx", "gluon_zp5.ptx", "gluon_zp3.ptx", "gluon_zp7_bk32.ptx",
           "gluon_zp5_tf32.ptx", "gluon_zp5_w4.ptx", "gluon_unroll3.ptx", "gluon_h_lag6.ptx",
           "tws3_grouped_s3_sm100.ptx", "tws3_grouped_fp8_s6_sm100.ptx", "tws3_tri_s5_sm100.ptx",
           "cute_multicons.ptx", "cute_multicons_scale.ptx", "cute_wgpersist.ptx", "cute_wgpersist_amax.ptx",
           "cute_wgpersist_amaxtail.ptx", "cute_grouped.ptx", "cute_grouped_peek.ptx", "cute_unroll7.ptx",
           "cute_transform.ptx", "tirx_p5.ptx", "tirx_p5r.ptx", "tirx_p5_cfull_warp.ptx",
           "cutlass_sm100_1sm.ptx", "cutlass_sm100_2sm.ptx", "cutlass_sm100_streamk.ptx", "cutlass_sm100_mxf8.ptx",
           "cutlass_sm100_grouped.ptx"]

# Planted bugs in newer shapes (fixtures/src/cute/cute_tcgen05_gemm.py, fixtures/src/cute/cute_pipe_*.py,
# fixtures/src/tirx/tirx_ws_gemm_cluster.py, fixtures/src/triton_tma/sweep_ws.py): each raises exactly its flag.
# (cute_pipe_umma_cluster_mask, whose flag may rest on the cluster's shape, is in tests/test_cute_pipelines.py.)
PLANTED = [("cute_tcgen05_gemm_double_free.ptx", 6, "freed by 2 warps"),
           ("cute_tcgen05_gemm_cluster_init.ptx", 9, "only a CTA barrier"),
           ("cute_tcgen05_gemm_count.ptx", 2, "count 2"),
           ("tirx_ws_gemm_cluster_init.ptx", 9, "only a CTA barrier"),
           ("gluon_ws_wgmma_sm90_phase.ptx", 7, "parity"),
           ("gluon_ws_3part_sm90_count.ptx", 2, "count 2"),
           ("cute_pipe_wgmma2_count.ptx", 2, "count 256"),
           ("cute_pipe_wgmma2_phase.ptx", 7, "parity 0"),
           ("cute_pipe_cpasync_count.ptx", 2, "count 1 "),
           ("cute_pipe_umma_acccount.ptx", 2, "count 4"),
           ("cute_pipe_umma_accphase.ptx", 7, "parity 0"),
           ("cute_pipe_umma_multifree.ptx", 6, "freed by 4 warps"),
           ("cute_pipe_umma_nopermit.ptx", 4, "relinquish_alloc_permit"),
           ("cute_pipe_2cta_acccount.ptx", 2, "count 128"),
           ("cute_pipe_tmastore_nofence.ptx", 5, "fence.proxy.async"),
           ("cute_pipe_clc_count.ptx", 2, "count 128")]


def _sheet(name: str):
    (k,) = worksheet([PTX / name]).kernels
    return k


def _roles(k) -> list[str]:
    return [r.text.split(":")[0] for r in k.roles if "statements" in r.text]


@pytest.mark.parametrize("name", CORRECT)
def test_no_evidence_flag_on_a_correct_kernel(name):
    for k in worksheet([PTX / name]).kernels:
        assert [f for f in k.flags if f.basis is Basis.EVIDENCE] == [], (name, k.name, k.flags)


@pytest.mark.parametrize("name, code, cause", PLANTED)
def test_each_planted_bug_raises_its_own_flag_with_its_cause(name, code, cause):
    (k,) = worksheet([PTX / name]).kernels
    flags = [f for f in k.flags if f.basis is Basis.EVIDENCE]
    assert [f.code for f in flags] == [code], (name, k.flags)
    assert cause in flags[0].text, flags[0].text


@pytest.mark.parametrize("name", ["cute_tcgen05_gemm_cluster.ptx", "tirx_ws_gemm_cluster.ptx"])
def test_a_multicast_commit_arrives_once_from_each_cta_of_its_mask(name):
    """Each CTA of a (2,1,1) pair releases a shared stage with `tcgen05.commit ...
    .multicast::cluster` to mask 0b11, onto `empty[s]` initialized with 2: one arrival from
    its own MMA warp and one from its peer's. Counted as one, the sheet called the correct
    kernels deadlocked (count 2, 1 arrival a phase). The cluster's shape is a launch
    attribute, not in the PTX: the count rests on that, said as an assumption."""
    k = _sheet(name)
    assert k.flags == ()
    notes = [n for n in k.notes if n.aspect == "handoff.cluster" and "multicast tcgen05.commit" in n.text]
    assert notes and all(n.basis is Basis.ASSUMPTION for n in notes)
    empties = [b for b in k.barriers if {c for _, c in b.inits} == {2}]
    assert empties and all(sum(v for v in phase_arrivals(b).values()) == 2 for b in empties)


def test_attention_partitions_are_named_softmax_and_correction():
    """Triton 3.6's own warp specialization of an attention loop (fixtures/src/triton_tma/README.md):
    the default warps compute the softmax (an exp2 per score), partition2 the correction (the
    accumulator read from tensor memory, rescaled, written back), beside the loader and the MMA
    warp. They read "producer+consumer" and "consumer" before."""
    assert _roles(_sheet("triton_ws_attn_sm100.ptx")) == [
        "softmax (warps 0-3)", "idle (warp 11)", "consumer (warp 10)", "correction (warps 4-7)", "producer (warps 8-9)"]
    # a matmul's epilogue reads tensor memory and stores to global memory: no correction
    assert "epilogue (warps 0-3)" in _roles(_sheet("triton_ws_sm100.ptx"))


def test_the_partition_table_store_needs_no_proxy_fence():
    """Triton's warp -> partition table is written with st.shared and read with ld.shared by
    the worker warps; no async-proxy operation reads it, so no fence.proxy.async is due
    (it was flag 5, evidence, on gluon_ws_wgmma_sm90, whose wgmma reads other shared memory)."""
    k = _sheet("gluon_ws_wgmma_sm90.ptx")
    assert not [f for f in k.flags if f.code == 5]
    assert k.flags == ()


def test_gluon_partitions_are_read_from_the_jump_table():
    k = _sheet("gluon_ws_gemm.ptx")
    # brx.idx over the table's bytes {2, 2, 0, 1}: warps 6 and 7 are the workers, 4-5 Triton's padding
    assert sorted(_roles(k)) == ["consumer (warp 7)", "epilogue (warps 0-3)", "idle (warps 4-5)",
                                 "producer (warp 6)"]
    assert all(r.basis is Basis.ASSUMPTION for r in k.roles if "statements" in r.text)  # the table's first values
    assert not any("branchtargets" in n.text for n in k.notes)


def test_gluon_ring_barriers_resolve_and_their_counts_are_checked():
    k = _sheet("gluon_ws_gemm.ptx")
    names = {b.name: b for b in k.barriers}
    ready, empty = names["global_smem+{131072,131080,131088}"], names["global_smem+{131104,131112,131120}"]
    # one elected thread a phase: expect_tx by the loader, tcgen05.commit by the MMA warp
    assert {(a.kind, a.site.role, a.arrivals) for a in ready.arrivers if a.arrivals} == {
        ("arrive.expect_tx", "producer (warp 6)", 1)}
    assert {(a.kind, a.site.role, a.arrivals) for a in empty.arrivers} == {("tcgen05.commit", "consumer (warp 7)", 1)}
    assert [w.site.role for w in ready.waiters] == ["consumer (warp 7)"]
    assert [w.site.role for w in empty.waiters] == ["producer (warp 6)"]
    assert not any(b.name.startswith("%") for b in k.barriers)  # nothing left unresolved
    assert not any("counts not checked" in n.text or "phases is not checked" in n.text for n in k.notes)


def test_gluon_count_bug_is_flagged_with_its_cause():
    (f,) = _sheet("gluon_ws_gemm_count2.ptx").flags
    assert (f.code, f.basis) == (2, Basis.EVIDENCE)
    assert "count 2" in f.text and "1 arrival(s) per phase" in f.text and "never completes" in f.text


def test_gluon_phase_bug_is_flagged_and_the_correct_one_is_not():
    (f,) = _sheet("gluon_ws_gemm_phase.ptx").flags
    assert (f.code, f.name, f.basis) == (7, "phase-deadlock", Basis.EVIDENCE)
    assert "producer (warp 6) waits on global_smem+{131104,131112,131120} for parity 0" in f.text
    assert "consumer (warp 7) waits on global_smem+{131072,131080,131088} for parity 0" in f.text
    # the correct kernel's loader waits for parity 1 first (phase ^ 1): no such flag
    assert not [x for x in _sheet("gluon_ws_gemm.ptx").flags if x.code == 7]


def test_gluon_cubins_hold_the_same_kernel():
    p = wsperf("inspect", CUBINS / "gluon_ws_gemm.sm_100a.cubin", "--format", "json")
    assert p.returncode == 0, p.stderr
    (k,) = json.loads(p.stdout)["kernels"]
    assert k["name"] == "gluon_ws_gemm" and k["families"]["tensor"] == "tcgen05" and "tma" in k["families"]["copies"]
    assert k["warp_specialized"] is True


def test_tirx_elected_lanes_count_once():
    k = _sheet("tirx_ws_gemm.ptx")
    # elect.sync %rx|%px, %r152 (%r152 = -1), then `@%px mov.s32 %r151, 1` over `mov %r151, 0`
    assert k.flags == ()
    arrivals = {(a.kind, a.site.role, a.site.threads) for b in k.barriers for a in b.arrivers if a.arrivals}
    assert arrivals == {("arrive.expect_tx", "producer (warp 0)", 1), ("tcgen05.commit", "consumer (warp 1)", 1)}
    assert sorted(_roles(k))[:2] == ["consumer (warp 1)", "epilogue (warps 4-7)"]
    assert "tensor-memory owner (warp 2)" in _roles(k)
    # the init guard is thread_rank() == 0 from %tid.x, %tid.y, %tid.z and %ntid: one thread
    assert {s.threads for b in k.barriers for s, _ in b.inits} == {1}


def test_tirx_count_bug_is_flagged():
    (f,) = _sheet("tirx_ws_gemm_count2.ptx").flags
    assert (f.code, f.basis) == (2, Basis.EVIDENCE) and "count 2" in f.text and "1 arrival(s)" in f.text


def test_tirx_tensor_memory_freed_by_two_warps_is_flagged():
    (f,) = _sheet("tirx_ws_gemm_double_free.ptx").flags
    assert (f.code, f.name, f.basis) == (6, "tmem-freed-twice", Basis.EVIDENCE)
    assert "warps 2-3" in f.text
    assert not [x for x in _sheet("tirx_ws_gemm.ptx").flags if x.code == 6]


def test_triton_sm90_stage_rings_resolve():
    """Triton 3.6's own warp_specialize on sm_90a: the consumers' stage barriers are
    addressed from a pointer the loop steps; they now resolve to their rings, so each
    ring's count is checked (128 consumer threads on the empty barriers)."""
    k = _sheet("triton_ws_matmul.ptx")
    assert k.flags == ()
    assert not any(b.name.startswith("%") for b in k.barriers)
    assert not any("counts not checked" in n.text for n in k.notes)
    empties = [b for b in k.barriers if {c for _, c in b.inits} == {128}]
    assert empties and all(w.site.role == "producer (warps 0-3)" for b in empties for w in b.waiters)


@pytest.mark.parametrize("name, stages, ostages", [("gluon_ws_3part.ptx", 3, 2), ("gluon_ws_3part_s4_4.ptx", 4, 4)])
def test_back_to_back_barrier_arrays_are_separate_rings(name, stages, ostages):
    """fixtures/src/gluon_ws_3part.py: four barrier arrays of one 8-byte stride. Gluon lays
    out_ready[] and out_empty[] (and at 4 stages in_ready[] and in_empty[]) back to back, and
    addresses a stage as base + ((i % n) << 3). The ring ends where the index can reach, not
    at the next array's first barrier: read as one ring of 4 (or 8), the compute and store
    warps' arrivals summed to 2 on barriers initialized with 1, a false init-count flag."""
    k = _sheet(name)
    assert k.flags == () and k.unchecked == ()
    rings = sorted(len(b.slots) for b in k.barriers)
    assert rings == sorted([stages, stages, ostages, ostages]), [(b.name, b.slots) for b in k.barriers]
    for b in k.barriers:
        assert {c for _, c in b.inits} == {1} and sum(phase_arrivals(b).values()) == 1, (b.name, b.arrivers)
    assert _roles(k) == ["consumer (warps 0-3)", "idle (warps 4-5)", "producer (warp 6)", "epilogue (warp 7)"]


def test_a_stage_index_read_from_memory_is_not_taken_as_a_ring():
    # bars_array<2> reads its stage from global memory: still every barrier of the array
    ks = {k.kernel: k for k in worksheet([PTX / "bars_array.ptx"]).kernels}
    (b,) = ks["_Z10bars_arrayILi2EEvPKfPfPKii"].barriers
    assert b.name == "bars" and not b.decided


def test_what_was_not_checked_is_said_on_the_first_line_and_in_json():
    ks = {k.kernel: k for k in worksheet([PTX / "bars_array.ptx"]).kernels}
    undecided = ks["_Z10bars_arrayILi2EEvPKfPfPKii"]  # its stage index is read from memory
    assert undecided.flags == () and any("not decided by the PTX" in u for u in undecided.unchecked)
    p = wsperf("worksheet", PTX / "bars_array.ptx", "--kernel", "bars_arrayILi2")
    assert p.returncode == 0
    assert "flags: none; 2 thing(s) not checked (below)" in p.stdout and "  not checked\n" in p.stdout
    doc = json.loads(wsperf("worksheet", PTX / "bars_array.ptx", "--kernel", "bars_arrayILi2", "--format",
                            "json").stdout)
    assert doc["kernels"][0]["unchecked"] == list(undecided.unchecked)
    # the generated kernels whose barriers all resolve leave nothing unchecked
    assert _sheet("gluon_ws_gemm.ptx").unchecked == ()
    # Triton's sm_90 PTX was kept without its .json, but its tensor maps are built on the
    # device: their boxes are in the PTX (tensormap.replace), so the copies' bytes are checked
    assert _sheet("triton_ws_matmul.ptx").unchecked == ()


def test_expected_bytes_are_checked_against_the_boxes_the_metadata_gives():
    # Gluon's loader expects A-box + B-box bytes (2 x 128x64 bf16 = 32768); the boxes come from
    # Triton's metadata beside the PTX (tensordesc_meta). The planted variant expects twice that.
    (f,) = _sheet("gluon_ws_gemm_tx.ptx").flags
    assert (f.code, f.name, f.basis) == (8, "tx-bytes", Basis.EVIDENCE)
    assert "expects 65536 bytes a phase (expect_tx) but its copies deliver 32768" in f.text and "never" in f.text
    ok = _sheet("gluon_ws_gemm.ptx")
    assert ok.flags == () and not any("expect_tx not checked" in u for u in ok.unchecked)
    # without the metadata the same PTX is not checked, and says so
    tirx = _sheet("tirx_ws_gemm.ptx")
    assert any("expect_tx not checked" in u for u in tirx.unchecked)


def test_the_worksheet_needs_the_metadata_beside_the_ptx_to_check_bytes(tmp_path):
    import shutil

    shutil.copy(PTX / "gluon_ws_gemm_tx.ptx", tmp_path / "k.ptx")  # no k.json beside it
    (k,) = worksheet([tmp_path / "k.ptx"]).kernels
    assert not [f for f in k.flags if f.code == 8] and any("expect_tx not checked" in u for u in k.unchecked)


# CuTe DSL's ring (fixtures/src/cute/README.md): full[4] at +0..24, empty[4] at +32..56, done at +64
# of the dynamic buffer, whose base CuTe makes warp-uniform (shfl.sync.idx of `mov %r, smem`)
CUTE_FULL, CUTE_EMPTY, CUTE_DONE = ("__dynamic_shmem__0+{0,8,16,24}", "__dynamic_shmem__0+{32,40,48,56}",
                                    "__dynamic_shmem__0+64")


@pytest.mark.parametrize("name", ["cute_ws_ring.ptx", "cute_ws_ring_cluster.ptx"])
def test_cute_roles_and_stage_barriers_resolve(name):
    k = _sheet(name)
    assert k.flags == ()
    # the warp index through shfl.sync.idx; consumers `warp - 1 <= 3` as an unsigned compare
    assert sorted(_roles(k)) == ["consumer (warps 1-4)", "epilogue (warp 5)", "producer (warp 0)"]
    assert all(r.basis is Basis.EVIDENCE for r in k.roles)
    names = {b.name: b for b in k.barriers}
    assert set(names) == {CUTE_FULL, CUTE_EMPTY, CUTE_DONE}  # nothing left as a register
    full, empty, done = names[CUTE_FULL], names[CUTE_EMPTY], names[CUTE_DONE]
    # the stage index `s = s + 1 == 4 ? 0 : s + 1` takes 4 values; the inits give the counts
    assert {c for _, c in full.inits} == {1} and {c for _, c in done.inits} == {128}
    assert {(a.kind, a.site.role, a.arrivals) for a in full.arrivers} == {
        ("arrive.expect_tx", "producer (warp 0)", 1), ("complete_tx", "producer (warp 0)", 0)}
    assert [w.site.role for w in full.waiters] == ["consumer (warps 1-4)"]
    assert [w.site.role for w in empty.waiters] == ["producer (warp 0)"]
    assert {(a.kind, a.site.role, a.arrivals) for a in done.arrivers} == {("arrive", "consumer (warps 1-4)", 128)}
    assert [(w.site.role, w.parity) for w in done.waiters] == [("epilogue (warp 5)", "0")]
    # only the copies' bytes are left: CuTe's boxes are in the tensor map, built on the host
    (left,) = k.unchecked
    assert "expect_tx not checked" in left


def test_each_role_is_named_with_the_job_it_issues():
    def jobs(name):
        return {r.text.split(":")[0]: r.text.split(": ", 1)[1].split(";")[0] for r in _sheet(name).roles
                if "statements" in r.text}

    assert jobs("cute_ws_ring.ptx") == {"producer (warp 0)": "TMA load", "consumer (warps 1-4)": "FMA math",
                                        "epilogue (warp 5)": "global stores"}
    assert jobs("cute_ws_ring_cluster.ptx")["producer (warp 0)"] == "TMA load (multicast)"
    g = jobs("gluon_ws_gemm.ptx")
    assert (g["producer (warp 6)"], g["consumer (warp 7)"]) == ("TMA load", "MMA issue (tcgen05)")
    assert g["epilogue (warps 0-3)"] == "tensor-memory load, TMA store"
    assert jobs("triton_ws_matmul.ptx")["consumer (warps 4-7)"] == "MMA issue (wgmma), TMA store"


def test_cute_empty_ring_counts_one_elected_lane_per_consumer_warp():
    empty = {b.name: b for b in _sheet("cute_ws_ring.ptx").barriers}[CUTE_EMPTY]
    # bar.warp.sync, elect.sync, then mbarrier.arrive by the elected lane of each of 4 warps
    assert {c for _, c in empty.inits} == {4}
    assert {(a.kind, a.site.role, a.site.threads, a.arrivals) for a in empty.arrivers} == {
        ("arrive", "consumer (warps 1-4)", 4, 4)}


@pytest.mark.parametrize("name,empty_count", [("cute_ws_gemm.ptx", 4), ("cute_ws_gemm_cluster.ptx", 8)])
def test_cute_wgmma_gemm_reads_as_a_tma_producer_and_an_mma_warpgroup(name, empty_count):
    k = _sheet(name)
    assert k.flags == ()
    assert sorted(_roles(k)) == ["consumer (warps 4-7)", "producer (warp 0)"]
    (cons,) = [r.text for r in k.roles if r.text.startswith("consumer")]
    assert "MMA issue (wgmma)" in cons
    # warps 1-3 pass both role tests by: the code all warps run holds no copy and no math
    assert any(r.text.startswith("idle (warps 1-3): no code of their own") for r in k.roles)
    names = {b.name: b for b in k.barriers}
    assert set(names) == {CUTE_FULL, CUTE_EMPTY}
    full, empty = names[CUTE_FULL], names[CUTE_EMPTY]
    # one expect_tx of the A and B tiles (64x64 + 128x64 bf16), two copies completing on it
    (tx,) = [a for a in full.arrivers if a.kind == "arrive.expect_tx"]
    assert tx.tx_bytes == "24576" and len([a for a in full.arrivers if a.kind == "complete_tx"]) == 2
    assert {c for _, c in empty.inits} == {empty_count}
    assert sum(a.arrivals for a in empty.arrivers) == empty_count  # 4 elected lanes (+ the peer's 4)
    multicast = [a for a in full.arrivers if "multicast" in a.site.address]
    assert len(multicast) == (1 if "cluster" in name else 0)  # A is shared by the cluster's two CTAs


def test_cute_count_bug_is_flagged_with_its_cause():
    (f,) = _sheet("cute_ws_ring_count.ptx").flags
    assert (f.code, f.name, f.basis) == (2, "init-count", Basis.EVIDENCE)
    assert f.text.startswith(CUTE_EMPTY) and "count 128" in f.text and "4 arrival(s) per phase" in f.text
    assert "never completes" in f.text and "init with 4" in f.text


def test_cute_phase_bug_is_flagged_and_the_correct_one_is_not():
    (f,) = _sheet("cute_ws_ring_phase.ptx").flags
    assert (f.code, f.name, f.basis) == (7, "phase-deadlock", Basis.EVIDENCE)
    assert f"producer (warp 0) waits on {CUTE_EMPTY} for parity 0 on its first trip" in f.text
    assert f"consumer (warps 1-4) waits on {CUTE_FULL} for parity 0" in f.text
    # the correct producer's first parity is (~phase) & 1 = 1: `not.b32`, `and.b32 ..., 1`
    assert not [x for x in _sheet("cute_ws_ring.ptx").flags if x.code == 7]


def test_cute_cluster_remote_arrives_count_on_each_ctas_empty_barrier():
    k = _sheet("cute_ws_ring_cluster.ptx")
    empty = {b.name: b for b in k.barriers}[CUTE_EMPTY]
    # 4 local elected lanes + the peer's 4 through `mapa ... rank ^ 1`: the init count is 8
    assert {c for _, c in empty.inits} == {8}
    assert {(a.kind, a.site.role, a.arrivals) for a in empty.arrivers} == {
        ("arrive", "consumer (warps 1-4)", 4), ("remote arrive", "consumer (warps 1-4)", 4)}
    (remote,) = [a for a in empty.arrivers if a.kind == "remote arrive"]
    assert remote.site.address.endswith("in CTA rank ^ 1 (mapa)")
    (copy,) = [a for a in {b.name: b for b in k.barriers}[CUTE_FULL].arrivers if a.kind == "complete_tx"]
    assert "multicast" in copy.site.address
    # fence.mbarrier_init + barrier.cluster.arrive.relaxed / wait make the inits visible
    assert not [f for f in k.flags if f.code in (1, 9)]


def test_cute_cluster_init_behind_a_cta_barrier_only_is_flagged():
    (f,) = _sheet("cute_ws_ring_cluster_init.ptx").flags
    assert (f.code, f.name, f.basis) == (9, "init-not-cluster-visible", Basis.EVIDENCE)
    assert "only a CTA barrier (line 79)" in f.text
    # the peer's multicast into this CTA's full[] is what nothing holds back
    assert f"multicast copy completing on {CUTE_FULL} by producer (warp 0) at line 142" in f.text
    doc = json.loads(wsperf("worksheet", PTX / "cute_ws_ring_cluster_init.ptx", "--format", "json").stdout)
    assert [(x["code"], x["basis"]) for x in doc["kernels"][0]["flags"]] == [(9, "evidence")]


def test_cute_cubins_hold_the_same_kernels():
    for name in ("cute_ws_ring", "cute_ws_ring_cluster", "cute_ws_gemm", "cute_ws_gemm_cluster"):
        p = wsperf("inspect", CUBINS / f"{name}.sm_90a.cubin", "--format", "json")
        assert p.returncode == 0, p.stderr
        (k,) = json.loads(p.stdout)["kernels"]
        assert k["name"].startswith("kernel_cutlass_" + name.split("_")[2]) and "tma" in k["families"]["copies"]
        if "gemm" in name:
            assert k["families"]["tensor"] == "wgmma"
    # one CTA: the producer warp's path ends at its own EXIT, apart from the HGMMA path. (On a
    # cluster every warp runs on to the final cluster barrier, through the consumers' test, so
    # the SASS reader, which splits paths by what they reach, takes the TMA loop as common.)
    (k,) = json.loads(wsperf("inspect", CUBINS / "cute_ws_gemm.sm_90a.cubin", "--format", "json").stdout)["kernels"]
    assert k["warp_specialized"] is True


# Triton 3.6's own warp_specialize on sm_100 (fixtures/src/triton_tma/README.md): the barriers
# in global_smem, as the design's TTGIR allocates them
SM100_EMPTY, SM100_READY = "global_smem+{131072,131080,131088}", "global_smem+{131104,131112,131120}"
SM100_ACC_EMPTY, SM100_ACC_READY = "global_smem+{131136,131144}", "global_smem+{131152,131160}"


@pytest.mark.parametrize("name", ["triton_ws_sm100.ptx", "triton_ws_sm100_kloop.ptx"])
def test_triton_sm100_partitions_are_read_from_the_jump_table(name):
    k = _sheet(name)
    assert k.flags == () and k.unchecked == ()
    # table bytes {1, 1, 0, 2} for warps 4-7: loader warps 4-5, MMA warp 6, warp 7 Triton's padding
    jobs = {r.text.split(":")[0]: r.text.split(": ", 1)[1].split(";")[0] for r in k.roles if "statements" in r.text}
    assert jobs == {"epilogue (warps 0-3)": "tensor-memory load, TMA store", "producer (warps 4-5)": "TMA load",
                    "consumer (warp 6)": "MMA issue (tcgen05)", "idle (warp 7)": "4 statements"}


def test_triton_sm100_rings_and_counts():
    k = _sheet("triton_ws_sm100.ptx")
    names = {b.name: b for b in k.barriers}
    # Triton starts each stage counter at STAGES - 1: its first step wraps to 0, so every slot is reached
    assert set(names) == {SM100_EMPTY, SM100_READY, SM100_ACC_EMPTY, SM100_ACC_READY}
    assert all({c for _, c in b.inits} == {1} for b in names.values())
    assert all(sum(v for v in phase_arrivals(b).values()) == 1 for b in names.values())
    ready, empty = names[SM100_READY], names[SM100_EMPTY]
    # one thread of the two loader warps expects 2 x 128x64 bf16; warp 4's elected lane copies
    (tx,) = [a for a in ready.arrivers if a.kind == "arrive.expect_tx"]
    assert (tx.site.role, tx.site.threads, tx.arrivals, tx.tx_bytes) == ("producer (warps 4-5)", 1, 1, "32768")
    assert {(a.site.threads, a.arrivals) for a in ready.arrivers if a.kind == "complete_tx"} == {(1, 0)}
    assert {(a.kind, a.site.role, a.arrivals) for a in empty.arrivers} == {("tcgen05.commit", "consumer (warp 6)", 1)}
    # the MMA warp commits each tile's accumulator in its tile loop and arrives once after it
    acc = names[SM100_ACC_READY]
    assert {(a.kind, a.site.role, a.site.threads) for a in acc.arrivers} == {
        ("tcgen05.commit", "consumer (warp 6)", 1), ("arrive", "consumer (warp 6)", 1)}
    assert {(a.kind, a.site.role, a.site.threads) for a in names[SM100_ACC_EMPTY].arrivers} == {
        ("arrive", "epilogue (warps 0-3)", 1)}


def test_triton_sm100_first_trip_parities():
    """Triton flips a stage's phase at the top of its loop, before the wait (stage STAGES - 1
    + 1 wraps to 0 and flips the phase from 0 to 1): the loader's first wait on empty[0] is
    for parity 1 and passes, the MMA warp's on ready[0] is for parity 0."""
    k = _sheet("triton_ws_sm100.ptx")
    ek = _Kernel(parse((PTX / "triton_ws_sm100.ptx").read_text())[0])
    first = {}
    for b in k.barriers:
        for w in b.waiters:
            first.setdefault((b.name, w.site.role), ek.first_value(w.parity, at=ek.stmt_of(w.site)))
    assert first[(SM100_EMPTY, "producer (warps 4-5)")] == 1
    assert first[(SM100_READY, "consumer (warp 6)")] == 0
    assert first[(SM100_ACC_READY, "epilogue (warps 0-3)")] == 0
    assert first[(SM100_ACC_EMPTY, "consumer (warp 6)")] == 1


def test_triton_sm100_inits_are_ordered_by_the_named_barrier_every_thread_meets(tmp_path):
    """The inits sit in the default warps' branch; `barrier.sync 1` (all threads, no count)
    follows them there and the worker warps meet it before their dispatch. Without it the
    same PTX raises flag 1 for every init."""
    text = (PTX / "triton_ws_sm100.ptx").read_text()
    assert not [f for f in _sheet("triton_ws_sm100.ptx").flags if f.code == 1]
    (tmp_path / "k.ptx").write_text(text.replace("barrier.sync \t1;", "// removed"))
    (k,) = worksheet([tmp_path / "k.ptx"]).kernels
    hits = [f for f in k.flags if f.code == 1]
    # one flag per barrier symbol, which counts the other inits of it
    assert len(hits) == 1 and hits[0].basis is Basis.EVIDENCE and "warps 0-3" in hits[0].text
    assert "(9 more init(s) of it there)" in hits[0].text


def test_triton_sm100_cubins_hold_the_same_kernels():
    for name, kernel in (("triton_ws_sm100", "tile_loop"), ("triton_ws_sm100_kloop", "k_loop")):
        p = wsperf("inspect", CUBINS / f"{name}.sm_100a.cubin", "--format", "json")
        assert p.returncode == 0, p.stderr
        (k,) = json.loads(p.stdout)["kernels"]
        assert k["name"] == kernel and k["families"]["tensor"] == "tcgen05" and "tma" in k["families"]["copies"]


def test_triton_sm90_split_copy_counts_each_elected_lane():
    """Triton 3.6's own sm_90 lowering with BK = 128 (fixtures/src/triton_tma/README.md): a
    block is two 64-wide boxes; one copy instruction per barrier, issued by an elected lane
    in each of the producer's first two warps. Each phase gets its whole block, and the
    kernel answered right on the H200 (rel_err 0.00166): no flag."""
    k = _sheet("triton_ws_sm90_split.ptx")
    assert k.flags == ()
    copies = [a for b in k.barriers for a in b.arrivers if a.kind == "complete_tx"]
    assert copies and {a.site.threads for a in copies} == {2}
    assert sorted({a.tx_bytes for b in k.barriers for a in b.arrivers if a.kind == "arrive.expect_tx"}) == [
        "16384", "32768"]
    assert sorted(_roles(k)) == ["consumer (warps 4-7)", "consumer (warps 8-11)", "producer (warps 0-3)"]


def test_copies_no_expect_tx_announces_are_flagged():
    # fixtures/src/broken/ws_bulk.cu with -DWS_BULK_MISSING_TX: a plain arrive where
    # arrive.expect_tx belongs; on the H200 it hangs with -8192 tx bytes pending on full[]
    # (fixtures/evidence/bulk_missing_tx). The correct build raises nothing.
    bad = _sheet("ws_bulk_missing_tx.ptx")
    (f,) = bad.flags
    assert (f.code, f.basis) == (8, Basis.EVIDENCE) and f.text.startswith("full: copies complete their bytes")
    assert "no mbarrier.expect_tx / arrive.expect_tx" in f.text
    assert _sheet("ws_bulk.ptx").flags == ()


@pytest.mark.parametrize("name", ["triton_ws_sm90_desc.ptx", "triton_ws_matmul.ptx"])
def test_triton_sm90_whole_boxes_are_not_flagged(name):
    # BK = 64: a row is one 128-byte box; each expect_tx matches its copy's box (the second
    # one ran correctly on an H200), and nothing is left unchecked
    k = _sheet(name)
    assert k.flags == () and k.unchecked == ()
    tx = [a for b in k.barriers for a in b.arrivers if a.kind == "arrive.expect_tx"]
    assert sorted({a.tx_bytes for a in tx}) == ["16384", "8192"]


# CUTLASS C++ (fixtures/src/cutlass/README.md): PipelineTmaAsync's full[4] and empty[4] after the
# A and B stages (2 x 64 KB) in the dynamic buffer ws::smem_raw
CUTLASS_FULL = "_ZN2ws8smem_rawE+{131072,131080,131088,131096}"
CUTLASS_EMPTY = "_ZN2ws8smem_rawE+{131104,131112,131120,131128}"


def test_cutlass_roles_are_a_producer_warp_and_two_consumer_warpgroups():
    k = _sheet("cutlass_ws_gemm.ptx")
    assert k.flags == ()
    # canonical_warp_idx_sync (shfl.sync.idx %r|%p); `warp % 4 == 0 && elect_one_sync()` as one and.pred
    jobs = {r.text.split(":")[0]: r.text.split(": ", 1)[1].split(";")[0] for r in k.roles if "statements" in r.text}
    assert jobs == {"producer (warp 0)": "TMA load", "consumer (warps 4-11)": "MMA issue (wgmma), global stores",
                    "idle (warps 1-3)": "3 statements"}
    assert all(r.basis is Basis.EVIDENCE for r in k.roles)
    assert not any("not warp-specialized" in r.text for r in k.roles)


def test_cutlass_pipeline_barriers_resolve_with_their_counts():
    k = _sheet("cutlass_ws_gemm.ptx")
    names = {b.name: b for b in k.barriers}
    assert set(names) == {CUTLASS_FULL, CUTLASS_EMPTY} and all(b.decided for b in k.barriers)
    full, empty = names[CUTLASS_FULL], names[CUTLASS_EMPTY]
    assert {c for _, c in full.inits} == {1} and {c for _, c in empty.inits} == {256}
    assert {s.threads for b in k.barriers for s, _ in b.inits} == {1}  # warp 0's elected lane
    # the producer's one elected lane: expect_tx of both tiles, two copies completing on it
    assert {(a.kind, a.site.role, a.site.threads, a.arrivals, a.tx_bytes) for a in full.arrivers
            if a.arrivals} == {("arrive.expect_tx", "producer (warp 0)", 1, 1, "32768")}
    # consumer_release: mapa to CTA 0, which in a one-CTA cluster is this CTA's own barrier
    assert {(a.kind, a.site.role, a.site.threads, a.arrivals) for a in empty.arrivers} == {
        ("arrive", "consumer (warps 4-11)", 256, 256)}
    assert all(a.site.address.endswith("in CTA 0 (mapa: this CTA)") for a in empty.arrivers)
    assert {w.site.role for w in full.waiters} == {"consumer (warps 4-11)"}
    assert {w.site.role for w in empty.waiters} == {"producer (warp 0)"}
    (note,) = [n for n in k.notes if n.aspect == "handoff.cluster"]
    assert note.basis is Basis.ASSUMPTION and "declares no cluster shape" in note.text
    # the consumers' 2x-unrolled ring rotates its stage through two registers: still decided
    assert not any("not decided" in u or "counts not checked" in u for u in k.unchecked)
    (left,) = k.unchecked
    assert "expect_tx not checked" in left


def test_cutlass_mapa_to_cta_0_counts_locally_only_in_a_one_cta_cluster(tmp_path):
    text = (PTX / "cutlass_ws_gemm.ptx").read_text()
    for shape, local in (("1, 1, 1", True), ("2, 1, 1", False)):
        f = tmp_path / f"k{shape[0]}.ptx"
        f.write_text(text.replace(".maxntid 384, 1, 1", f".maxntid 384, 1, 1\n.reqnctapercluster {shape}", 1))
        (k,) = worksheet([f]).kernels
        empty = {b.name: b for b in k.barriers}[CUTLASS_EMPTY]
        kinds = {a.kind for a in empty.arrivers}
        if local:  # declared: evidence that CTA 0 is this CTA
            assert kinds == {"arrive"} and k.flags == ()
            (note,) = [n for n in k.notes if n.aspect == "handoff.cluster"]
            assert note.basis is Basis.EVIDENCE
        else:  # two CTAs send their releases to CTA 0: not counted, and said so
            assert kinds == {"remote arrive"} and not [x for x in k.flags if x.code == 2]
            # and CTA 1 may arrive on CTA 0's barriers before CTA 0 has initialized them
            assert [(x.code, x.basis) for x in k.flags] == [(9, Basis.EVIDENCE)]
            assert any("mapa on CTA 0" in u and "counts not checked" in u for u in k.unchecked)


def test_cutlass_count_bug_is_flagged_with_its_cause():
    (f,) = _sheet("cutlass_ws_gemm_count.ptx").flags
    assert (f.code, f.name, f.basis) == (2, "init-count", Basis.EVIDENCE)
    assert f.text.startswith(CUTLASS_EMPTY) and "count 384" in f.text and "256 arrival(s) per phase" in f.text
    assert "never completes" in f.text and "init with 256" in f.text
    assert not [x for x in _sheet("cutlass_ws_gemm.ptx").flags if x.code == 2]


def test_cutlass_phase_bug_is_flagged_and_the_correct_one_is_not():
    (f,) = _sheet("cutlass_ws_gemm_phase.ptx").flags
    assert (f.code, f.name, f.basis) == (7, "phase-deadlock", Basis.EVIDENCE)
    assert f"producer (warp 0) waits on {CUTLASS_EMPTY} for parity 0 on its first trip (line 338" in f.text
    # the remainder loop's wait, which runs first when the 4x-unrolled loop is skipped
    assert f"producer (warp 0) waits on {CUTLASS_EMPTY} for parity 0 on its first trip (line 585" in f.text
    assert f"consumer (warps 4-11) waits on {CUTLASS_FULL} for parity 0" in f.text
    # make_producer_start_state(): phase 1, so the correct producer's first lap passes
    assert not [x for x in _sheet("cutlass_ws_gemm.ptx").flags if x.code == 7]


def test_cutlass_init_without_a_cta_barrier_is_flagged_once():
    (f,) = _sheet("cutlass_ws_gemm_init.ptx").flags
    assert (f.code, f.name, f.basis) == (1, "init-in-role", Basis.EVIDENCE)
    assert "sits inside the branch of warp 0, and warps 4-11 wait on it" in f.text
    assert "(7 more init(s) of it there)" in f.text  # one flag for the 8 inits of the pipeline
    assert not [x for x in _sheet("cutlass_ws_gemm.ptx").flags if x.code == 1]


def test_cutlass_builder_kernel_raises_no_flag_and_says_what_it_did_not_check():
    k = _sheet("cutlass_builder_gemm.ptx")
    assert k.flags == ()
    # the consumers load alpha and beta and stage the epilogue in shared memory: still consumers;
    # warp 8's one TMA-store branch is their epilogue (CUTLASS's collective store), not a role
    assert {"producer (warp 0)", "consumer (warps 4-11)"} <= set(_roles(k))
    assert "epilogue (warp 8)" not in set(_roles(k))
    assert any(r.text.startswith("consumer (warps 4-11): global loads, MMA issue (wgmma), FMA math, TMA store;")
               for r in k.roles)
    # the persistent tile loop keeps its stage indices in registers the sheet does not bound
    assert any("not decided by the PTX" in u for u in k.unchecked)


def test_cutlass_cubins_hold_the_same_kernels():
    for name in ("cutlass_ws_gemm", "cutlass_ws_gemm_count", "cutlass_ws_gemm_phase", "cutlass_ws_gemm_init",
                 "cutlass_builder_gemm"):
        p = wsperf("inspect", CUBINS / f"{name}.sm_90a.cubin", "--format", "json")
        assert p.returncode == 0, p.stderr
        (k,) = json.loads(p.stdout)["kernels"]
        assert k["families"]["tensor"] == "wgmma" and "tma" in k["families"]["copies"]
        assert k["warp_specialized"] is True
