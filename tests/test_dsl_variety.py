"""The worksheet on a variety of compiler-generated warp-specialized kernels: a persistent
tcgen05 GEMM (double-buffered tensor-memory accumulator) and a wgmma GEMM written in TVM TIRx
(fixtures/src/tirx/tirx_pgemm.py, tirx_hgemm.py) and sixteen kernels Triton 3.6 specializes
itself (fixtures/src/triton_tma/ws_variety.py). The READMEs beside the generators hold the
design's truth these tests assert: a correct kernel raises no evidence flag and its warps get
the roles the design gives them; each planted bug raises exactly its own flag, with evidence,
on the barrier (or statement) the bug is in.

Triton generates its barriers itself, so its planted bugs are edits of the PTX it generated:
each test replaces the exact statement(s) of the committed fixture and reads the result."""

from __future__ import annotations

import re
import shutil

import pytest

from support import ROOT, warp_roles as _warp_roles
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet

PTX = ROOT / "fixtures" / "ptx"

# --- truth tables -------------------------------------------------------------------------

# tirx_pgemm and its correct variants: warp 0 issues the MMA, warp 1 loads with TMA, warp 2
# owns tensor memory, warp 3 has nothing to do, warps 4-7 are the writeback warpgroup.
_PGEMM = {0: "consumer", 1: "producer", 2: "tensor-memory owner", 3: "idle", 4: "epilogue", 5: "epilogue",
          6: "epilogue", 7: "epilogue"}
# tirx_pgemm_wbowner: warp 4 (an epilogue warp) allocates and frees tensor memory; warps 2-3 idle
_WBOWNER = {**_PGEMM, 2: "idle"}
# tirx_hgemm: warp 0 loads, warps 1-3 (the rest of warpgroup 0) idle, two consumer warpgroups
_HGEMM = {0: "producer", 1: "idle", 2: "idle", 3: "idle", **{w: "consumer" for w in range(4, 12)}}

# Triton on sm_100a with 4 default warps: default = epilogue, partition1 (2 warps) = TMA loader,
# partition0 (1 warp) = MMA, warp 7 = padding or an empty partition
_T8 = {0: "epilogue", 1: "epilogue", 2: "epilogue", 3: "epilogue", 4: "producer", 5: "producer", 6: "consumer",
       7: "idle"}
# ... with num_warps=8: default warps 0-7, loader 8-9, MMA 10, padding 11
_T12 = {**{w: "epilogue" for w in range(8)}, 8: "producer", 9: "producer", 10: "consumer", 11: "idle"}
# sigmoid attention: the default warps turn S into P (tensor memory) between the two MMAs
_SIGATTN = {**_T8, **{w: "softmax" for w in range(4)}}
# row sums without MMA: the default warps consume the ring; partition0 (empty) and warp 7 idle
_ROWSUM = {**_T8, **{w: "consumer" for w in range(4)}, 6: "idle"}
# sm_90a: the default warpgroup is the producer, two consumer warpgroups run wgmma
_H90 = {**{w: "producer" for w in range(4)}, **{w: "consumer" for w in range(4, 12)}}

TIRX_CORRECT = [("tirx_pgemm", _PGEMM, {}),
                ("tirx_pgemm_warpelect", _PGEMM, {}),
                ("tirx_pgemm_wbowner", _WBOWNER, {4: {"tensor-memory owner"}}),
                ("tirx_pgemm_arrivecount", _PGEMM, {}),
                ("tirx_pgemm_dynacc", _PGEMM, {}),
                ("tirx_pgemm_init_role_ok", _PGEMM, {}),
                ("tirx_pgemm_init_role_private", _PGEMM, {}),
                ("tirx_hgemm", _HGEMM, {})]

TRITON_CORRECT = [("tws_bias_relu_s2_w8", _T12), ("tws_bias_gelu_s5_w8", _T12), ("tws_bias_relu_dev_s2_w8", _T12),
                  ("tws_batched_sm100", _T8), ("tws_splitk_sm100", _T8), ("tws_sigattn_sm100", _SIGATTN),
                  ("tws_sigattn_causal_sm100", _SIGATTN), ("tws_swiglu_sm100", _T8), ("tws_fp8_sm100", _T8),
                  ("tws_kloop_bm64_sm100", _T8), ("tws_two_loops_bn64_sm100", _T8), ("tws_single_acc_sm100", _T8),
                  ("tws_rowsum_sm100", _ROWSUM), ("tws_h_128x256_sm90", _H90), ("tws_h_fp8_sm90", _H90),
                  ("tws_h_kloop_w4_sm90", _H90)]

# byte offsets of the barriers (from the dynamic shared-memory symbol)
PG_FULL, PG_EMPTY = {147456, 147464, 147472, 147480}, {147488, 147496, 147504, 147512}
PG_ACC_FULL, PG_ACC_EMPTY = {147520, 147528}, {147536, 147544}
HG_EMPTY = {131104, 131112, 131120, 131128}

# --- reading the sheet ---------------------------------------------------------------------


def _sheet(path):
    (k,) = worksheet([path]).kernels
    return k


def _evidence(k):
    return [f for f in k.flags if f.basis is Basis.EVIDENCE]




def _assert_roles(k, truth: dict[int, str], extra: dict[int, set[str]] | None = None):
    got = _warp_roles(k)
    want = {w: {r} | (extra or {}).get(w, set()) for w, r in truth.items()}
    assert got == want, ([r.text for r in k.roles], want)


def _slots(text: str) -> list[set[int]]:
    """The barrier groups a flag names, in order ('sym+{a,b}' or 'sym+a')."""
    return [{int(x) for x in m.strip("{}").split(",")}
            for m in re.findall(r"(?:global_smem|s_buf_w_offset_ptr)\+(\{[\d,]+\}|\d+)", text)]


def _lines(path, pattern: str) -> set[int]:
    return {i for i, line in enumerate(path.read_text().split("\n"), 1) if re.search(pattern, line)}


# --- correct kernels ----------------------------------------------------------------------


@pytest.mark.parametrize("name, truth, extra", TIRX_CORRECT, ids=[n for n, _, _ in TIRX_CORRECT])
def test_tirx_correct_kernel_is_silent_and_its_roles_are_the_design(name, truth, extra):
    k = _sheet(PTX / f"{name}.ptx")
    assert _evidence(k) == [], k.flags
    _assert_roles(k, truth, extra)


@pytest.mark.parametrize("name, truth", TRITON_CORRECT, ids=[n for n, _ in TRITON_CORRECT])
def test_triton_correct_kernel_is_silent_and_its_roles_are_the_design(name, truth):
    k = _sheet(PTX / f"{name}.ptx")
    assert _evidence(k) == [], k.flags
    _assert_roles(k, truth)


def test_tirx_pgemm_accumulator_handoff_counts():
    """acc_empty is initialized with 128 and all 128 writeback threads arrive each phase;
    the other rings are count 1 with one elected lane arriving."""
    k = _sheet(PTX / "tirx_pgemm.ptx")
    counts = {s: c for b in k.barriers for s in b.slots for _, c in b.inits}
    assert {s: counts.get(s) for s in PG_ACC_EMPTY} == {s: 128 for s in PG_ACC_EMPTY}
    assert {counts.get(s) for s in PG_FULL | PG_EMPTY | PG_ACC_FULL} == {1}


# --- TIRx planted variants ----------------------------------------------------------------


@pytest.mark.parametrize("name, slots, count, arrivals", [
    ("tirx_pgemm_accempty_elect", PG_ACC_EMPTY, 128, 1),  # one elected lane arrives on a count-128 barrier
    ("tirx_pgemm_accempty_over", PG_ACC_EMPTY, 1, 128),  # all 128 threads arrive on a count-1 barrier
    ("tirx_hgemm_count1", HG_EMPTY, 1, 2),  # two consumer warpgroups release a count-1 barrier
])
def test_tirx_init_count_bug(name, slots, count, arrivals):
    k = _sheet(PTX / f"{name}.ptx")
    (f,) = _evidence(k)
    assert (f.code, f.name) == (2, "init-count"), k.flags
    assert _slots(f.text)[0] == slots, f.text
    assert f"count {count} " in f.text and f"{arrivals} arrival(s)" in f.text, f.text


@pytest.mark.parametrize("name, waiter, slots, line", [
    ("tirx_pgemm_parity", "producer (warp 1)", PG_EMPTY, 231),  # empty[s] first waited for parity 0
    ("tirx_pgemm_accparity", "consumer (warp 0)", PG_ACC_EMPTY, 1894),  # acc_empty[a] first waited for 0
    ("tirx_pgemm_dynacc_parity", "consumer (warp 0)", PG_ACC_EMPTY, 1837),  # the same, parity at run time
])
def test_tirx_first_trip_parity_bug(name, waiter, slots, line):
    k = _sheet(PTX / f"{name}.ptx")
    (f,) = _evidence(k)
    assert (f.code, f.name, f.line) == (7, "phase-deadlock", line), k.flags
    assert f.text.startswith(f"{waiter} waits on") and _slots(f.text)[0] == slots, f.text


def test_tirx_tensor_memory_never_freed():
    k = _sheet(PTX / "tirx_pgemm_no_dealloc.ptx")
    flags = _evidence(k)
    assert flags and {f.code for f in flags} == {4}, k.flags
    assert {f.line for f in flags} == {169}  # the tcgen05.alloc
    assert any("relinquish" in f.text for f in flags) and any("dealloc" in f.text for f in flags)


def test_tirx_missing_proxy_fence_before_tma_store():
    k = _sheet(PTX / "tirx_pgemm_no_fence.ptx")
    (f,) = _evidence(k)
    assert (f.code, f.line) == (5, 2914), k.flags  # st.shared of the staging tile, then the TMA store
    assert "line 2945" in f.text


def test_tirx_init_inside_a_role_branch():
    """acc_full / acc_empty are initialized by warp 4 inside the writeback branch, after the
    CTA barrier; warp 0 waits on acc_empty (line 1870) with nothing ordering it after the init."""
    path = PTX / "tirx_pgemm_init_role_bug.ptx"
    k = _sheet(path)
    (f,) = _evidence(k)
    assert (f.code, f.name) == (1, "init-in-role"), k.flags
    assert f.line in _lines(path, r"mbarrier\.init") and f.line > 2700
    assert _slots(f.text)[0] <= PG_ACC_FULL | PG_ACC_EMPTY, f.text
    assert re.search(r"\bwarp 0\b", f.text) and "line 1870" in f.text, f.text


def test_tirx_named_barrier_zero_inside_a_role_branch():
    """The writeback warpgroup's per-chunk barrier uses id 0 with 128 threads (bar.sync %r, %r
    with the registers set to 0 and 128) while the CTA's __syncthreads uses barrier 0 for 256."""
    path = PTX / "tirx_pgemm_bar0.ptx"
    k = _sheet(path)
    (f,) = _evidence(k)
    assert f.code == 3, k.flags
    assert f.line in _lines(path, r"bar\.sync %r\d+, %r\d+;"), f


def test_tirx_tensor_memory_freed_before_its_last_use():
    """Warp 2 frees tensor memory (line 2797) right after the allocation barrier, before the
    MMA writes it and the writeback warps read it."""
    k = _sheet(PTX / "tirx_pgemm_early_dealloc.ptx")
    (f,) = _evidence(k)
    assert (f.code, f.name) == (11, "tmem-freed-early"), k.flags
    assert f.line == 2797 or "line 2797" in f.text, f


def test_tirx_good_kernel_raises_none_of_the_planted_flags():
    assert _sheet(PTX / "tirx_pgemm.ptx").flags == ()
    assert _sheet(PTX / "tirx_hgemm.ptx").flags == ()


# --- Triton planted bugs: edits of the generated PTX --------------------------------------

# name -> (base, [(line, statement, replacement)])
TRITON_PLANTS = {
    # the loader's first wait on empty[0] for parity 0 instead of 1
    "tws_rowsum_sm100_phase": ("tws_rowsum_sm100", [
        (559, "mov.b32 \t%r249, 0;", "mov.b32 \t%r249, 1;"),
        (560, "mov.b32 \t%r251, %r249;", "mov.b32 \t%r251, 0;")]),
    # ready[s] expects half the bytes its two copies deliver
    "tws_batched_sm100_tx": ("tws_batched_sm100", [
        (1105, "[%r62], 32768;", "[%r62], 16384;")]),
    # the fence between the epilogue's st.shared and its TMA store removed (both stores)
    "tws_batched_sm100_nofence": ("tws_batched_sm100", [
        (848, "fence.proxy.async.shared::cta;", "// (removed) fence.proxy.async"),
        (1302, "fence.proxy.async.shared::cta;", "// (removed) fence.proxy.async")]),
    # tensor memory never freed
    "tws_sigattn_sm100_leak": ("tws_sigattn_sm100", [
        (1471, "@%p46 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1063, 512;", "// (removed) tcgen05.dealloc")]),
    # ready[] initialized with count 2, one expect_tx a phase
    "tws_bias_relu_s2_w8_count": ("tws_bias_relu_s2_w8", [
        (138, "mbarrier.init.shared::cta.b64 [%r64], 1;", "mbarrier.init.shared::cta.b64 [%r64], 2;"),
        (143, "mbarrier.init.shared::cta.b64 [%r65], 1;", "mbarrier.init.shared::cta.b64 [%r65], 2;"),
        (148, "mbarrier.init.shared::cta.b64 [%r66], 1;", "mbarrier.init.shared::cta.b64 [%r66], 2;")]),
    # one consumer warpgroup's A-half empty ring initialized with 256, 128 threads arrive
    "tws_h_fp8_sm90_count": ("tws_h_fp8_sm90", [
        (102, "mbarrier.init.shared::cta.b64 [%r193], 128;", "mbarrier.init.shared::cta.b64 [%r193], 256;"),
        (111, "mbarrier.init.shared::cta.b64 [%r195], 128;", "mbarrier.init.shared::cta.b64 [%r195], 256;"),
        (120, "mbarrier.init.shared::cta.b64 [%r197], 128;", "mbarrier.init.shared::cta.b64 [%r197], 256;")]),
    # the producer's first waits on its empty barriers for parity 0
    "tws_h_128x256_sm90_phase": ("tws_h_128x256_sm90", [
        (388, "not.b32 \t%r264, %r263;", "mov.b32 \t%r264, %r263;")]),
    # B's ready ring expects 32768, its one copy delivers 16384
    "tws_h_kloop_w4_sm90_tx": ("tws_h_kloop_w4_sm90", [
        (452, "[%r180], 16384;", "[%r180], 32768;")]),
    # bytes moved between A-half0's ring (8192 -> 16384) and B's (16384 -> 8192): the sum unchanged
    "tws_h_kloop_w4_sm90_txswap": ("tws_h_kloop_w4_sm90", [
        (412, "[%r175], 8192;", "[%r175], 16384;"),
        (452, "[%r180], 16384;", "[%r180], 8192;")]),
    # the producer's first waits on its empty barriers for parity 0 (selp operands swapped)
    "tws_h_kloop_w4_sm90_phase": ("tws_h_kloop_w4_sm90", [
        (398, "selp.b32 \t%r174, 1, 0, %p26;", "selp.b32 \t%r174, 0, 1, %p26;")]),
    # SwiGLU's W3 ring expects 32768, its one copy delivers 16384
    "tws_swiglu_sm100_tx": ("tws_swiglu_sm100", [
        (2888, "[%r18], 16384;", "[%r18], 32768;")]),
    # bytes moved between SwiGLU's two ready rings (A+W1 32768 -> 16384, W3 16384 -> 32768)
    "tws_swiglu_sm100_txswap": ("tws_swiglu_sm100", [
        (2858, "[%r12], 32768;", "[%r12], 16384;"),
        (2888, "[%r18], 16384;", "[%r18], 32768;")]),
    # the K-empty ring initialized with count 2, one MMA commit a phase
    "tws_sigattn_sm100_count": ("tws_sigattn_sm100", [
        (185, "mbarrier.init.shared::cta.b64 [%r128], 1;", "mbarrier.init.shared::cta.b64 [%r128], 2;"),
        (190, "mbarrier.init.shared::cta.b64 [%r129], 1;", "mbarrier.init.shared::cta.b64 [%r129], 2;"),
        (195, "mbarrier.init.shared::cta.b64 [%r130], 1;", "mbarrier.init.shared::cta.b64 [%r130], 2;")]),
}

KLOOP_B, KLOOP_A0 = {164096, 164104, 164112, 164120}, {164160, 164168, 164176, 164184}
KLOOP_EMPTIES = {164192 + 8 * i for i in range(16)}
SWIGLU_X, SWIGLU_Y = {147696, 147704, 147712}, {147760, 147768, 147776}


def _planted(tmp_path, name):
    """The base fixture with the planted statements replaced, and Triton's metadata beside it."""
    base, edits = TRITON_PLANTS[name]
    assert _evidence(_sheet(PTX / f"{base}.ptx")) == []  # the kernel as Triton made it is silent
    lines = (PTX / f"{base}.ptx").read_text().split("\n")
    for line, old, new in edits:
        assert lines[line - 1].count(old) == 1, (name, line, lines[line - 1])
        lines[line - 1] = lines[line - 1].replace(old, new)
    path = tmp_path / f"{name}.ptx"
    path.write_text("\n".join(lines))
    shutil.copy(PTX / f"{base}.json", tmp_path / f"{name}.json")
    return _sheet(path)


def _tx(f) -> tuple[int, int]:
    m = re.search(r"expects (\d+) bytes.*?deliver (\d+)", f.text)
    assert m, f.text
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("name, slots, count, arrivals", [
    ("tws_bias_relu_s2_w8_count", {196768, 196776, 196784}, 2, 1),
    ("tws_h_fp8_sm90_count", {131424, 131432, 131440}, 256, 128),
    ("tws_sigattn_sm100_count", {114944, 114952, 114960}, 2, 1),
])
def test_triton_planted_init_count(tmp_path, name, slots, count, arrivals):
    k = _planted(tmp_path, name)
    (f,) = _evidence(k)
    assert (f.code, f.name) == (2, "init-count"), k.flags
    assert _slots(f.text)[0] == slots and f"count {count} " in f.text and f"{arrivals} arrival(s)" in f.text, f.text


@pytest.mark.parametrize("name, waiter, slots, line", [
    ("tws_rowsum_sm100_phase", "producer (warps 4-5)", {49232, 49240, 49248}, 577),
    ("tws_h_128x256_sm90_phase", "producer (warps 0-3)", None, 404),
    ("tws_h_kloop_w4_sm90_phase", "producer (warps 0-3)", KLOOP_EMPTIES, None),
])
def test_triton_planted_first_trip_parity(tmp_path, name, waiter, slots, line):
    k = _planted(tmp_path, name)
    flags = _evidence(k)
    assert [f.code for f in flags] == [7], k.flags
    (f,) = flags
    m = re.search(re.escape(waiter) + r" waits on (\S+) for parity 0 on its first trip \(line (\d+)", f.text)
    assert m, f.text
    if slots is not None:
        (got,) = _slots(m.group(1))
        assert got <= slots, f.text
    if line is not None:
        assert int(m.group(2)) == line, f.text


@pytest.mark.parametrize("name, rings", [
    ("tws_batched_sm100_tx", [({131104, 131112, 131120}, 16384, 32768)]),
    ("tws_h_kloop_w4_sm90_tx", [(KLOOP_B, 32768, 16384)]),
    ("tws_h_kloop_w4_sm90_txswap", [(KLOOP_A0, 16384, 8192), (KLOOP_B, 8192, 16384)]),
    ("tws_swiglu_sm100_tx", [(SWIGLU_Y, 32768, 16384)]),
    ("tws_swiglu_sm100_txswap", [(SWIGLU_X, 16384, 32768), (SWIGLU_Y, 32768, 16384)]),
])
def test_triton_planted_expect_tx_bytes(tmp_path, name, rings):
    """Each ring's phase expects what its own copies deliver; a wrong ring is flagged on its
    own barriers with its own numbers (bytes of different rings are not summed)."""
    k = _planted(tmp_path, name)
    flags = _evidence(k)
    assert flags and {f.code for f in flags} == {8}, k.flags
    got = sorted((sorted(_slots(f.text)[0]), *_tx(f)) for f in flags)
    assert got == sorted((sorted(s), e, d) for s, e, d in rings), [f.text for f in flags]


def test_triton_planted_missing_proxy_fence(tmp_path):
    k = _planted(tmp_path, "tws_batched_sm100_nofence")
    flags = _evidence(k)
    assert flags and {f.code for f in flags} == {5}, k.flags
    assert all("fence.proxy.async" in f.text and "st.shared" in f.text for f in flags)


def test_triton_planted_tensor_memory_leak(tmp_path):
    k = _planted(tmp_path, "tws_sigattn_sm100_leak")
    flags = _evidence(k)
    assert [f.code for f in flags] == [4], k.flags
    assert "dealloc" in flags[0].text
