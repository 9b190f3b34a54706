"""`wsperf worksheet` on committed PTX (fixtures/ptx/README.md says how each was built):
the correct kernels raise no flag and list every barrier; each planted mistake is
flagged, and only it. The Blackwell kernels (sm_100a) are compiled and read, never run
(fixtures/BLACKWELL.md). The binary path runs the cuobjdump wheel on a committed fatbin;
the .cu path needs nvcc and is skipped without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support import wsperf
from test_cli import assert_one_error_line
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet
from wsperf.cli.main import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PTX = FIXTURES / "ptx"
MISCOUNT_FATBIN = FIXTURES / "cubins" / "tcgen05_miscount.compute_100a.fatbin"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the .cu path compiles with it)")


def sheets(name: str):
    return {k.kernel: k for k in worksheet([PTX / name]).kernels}


def codes(k) -> set[int]:
    return {f.code for f in k.flags}


def test_ws_stream_barriers_and_no_flag():
    ks = sheets("ws_stream.ptx")
    assert len(ks) == 5
    for k in ks.values():
        assert k.flags == (), (k.kernel, k.flags)
        bars = {b.name: b for b in k.barriers}
        assert set(bars) == {"full", "empty"}
        assert {a.site.role for b in bars.values() for a in b.arrivers} <= {"producer (warp 0)",
                                                                              "consumer (warps 1-4)"}
    healthy = ks["_Z9ws_streamILi4ELb0ELi32ELb0ELi1EEvPKfPfi"]
    full, empty = {b.name: b for b in healthy.barriers}["full"], {b.name: b for b in healthy.barriers}["empty"]
    assert [c for _, c in full.inits] == [1, 1, 1, 1] and [c for _, c in empty.inits] == [4, 4, 4, 4]
    assert {(a.kind, a.site.role, a.arrivals) for a in full.arrivers} == {
        ("arrive.expect_tx", "producer (warp 0)", 1), ("complete_tx", "producer (warp 0)", 0)}
    assert {(a.kind, a.site.role, a.arrivals) for a in empty.arrivers} == {("arrive", "consumer (warps 1-4)", 4)}
    assert {(w.site.role, w.site.threads) for w in full.waiters} == {("consumer (warps 1-4)", 128)}
    assert {(w.site.role, w.site.threads) for w in empty.waiters} == {("producer (warp 0)", 1)}
    by_hand = ks["_Z9ws_streamILi4ELb1ELi32ELb0ELi1EEvPKfPfi"]
    full = {b.name: b for b in by_hand.barriers}["full"]
    assert {c for _, c in full.inits} == {32} and {a.arrivals for a in full.arrivers} == {32}


def test_ws_deadlock_flags_init_count_only():
    (k,) = sheets("ws_deadlock.ptx").values()
    assert codes(k) == {2}
    assert "count 64" in k.flags[0].text and "32 arrival" in k.flags[0].text
    bars = {b.name: b for b in k.barriers}
    assert {c for _, c in bars["full"].inits} == {64}
    assert {(a.site.role, a.arrivals) for a in bars["full"].arrivers} == {("producer (warp 0)", 32)}
    assert {(w.site.role, w.site.threads) for w in bars["full"].waiters} == {("consumer (warps 1-2)", 64)}


def test_barrier_misuse_flags_cta_barrier_in_roles_only():
    (k,) = sheets("barrier_misuse.ptx").values()
    assert codes(k) == {3}
    assert len(k.flags) == 2  # one bar.sync 0 in each role's branch


@pytest.mark.parametrize("name,code", [("init_in_role.ptx", 1), ("tmem_leak.ptx", 4), ("store_no_fence.ptx", 5)])
def test_planted_flag_and_its_fix(name, code):
    ks = list(sheets(name).values())
    broken = [k for k in ks if "ILb0E" in k.kernel]
    fixed = [k for k in ks if "ILb1E" in k.kernel]
    assert codes(broken[0]) == {code}
    assert codes(fixed[0]) == set()


def test_cli_text_and_json():
    r = CliRunner().invoke(app, ["worksheet", str(PTX / "ws_deadlock.ptx")])
    assert r.exit_code == 0, r.output
    assert "init-count" in r.output and "mbarrier full" in r.output
    r = CliRunner().invoke(app, ["worksheet", str(PTX / "ws_stream.ptx"), "-f", "json", "-k", "Li4ELb1E"])
    assert r.exit_code == 0 and '"flags": []' in r.output


def test_not_ptx_is_one_error_line(tmp_path):
    bad = tmp_path / "notes.ptx"
    bad.write_text("hello\n")
    r = CliRunner().invoke(app, ["worksheet", str(bad)])
    assert r.exit_code == 2
    assert r.output.strip().startswith("Error:") and "not PTX" in r.output and len(r.output.strip().splitlines()) == 1


def by_slots(k) -> dict[tuple[int, ...], object]:
    return {b.slots: b for b in k.barriers}


def arrivals(b) -> set[tuple]:
    return {(a.kind, a.site.role, a.site.threads, a.arrivals) for a in b.arrivers}


FULL, EMPTY, DONE = (0, 8, 16, 24), (32, 40, 48, 56), (64,)  # offsets in tcgen05.cu's `Ring` (80 bytes)


def test_tcgen05_gemm_elect_and_commit_count_one_arrival_each():
    k = sheets("tcgen05.ptx")["tcgen05_gemm"]
    assert k.flags == ()
    bars = by_slots(k)
    assert set(bars) == {FULL, EMPTY, DONE} and all(b.decided for b in bars.values())
    assert {c for _, c in bars[FULL].inits} == {1} and len(bars[FULL].inits) == 4
    # the producer's lane is chosen by elect.sync inside an inline-asm block: one thread
    assert arrivals(bars[FULL]) == {("arrive.expect_tx", "producer (warp 0)", 1, 1),
                                    ("complete_tx", "producer (warp 0)", 1, 0)}
    assert {c for _, c in bars[EMPTY].inits} == {1} and len(bars[EMPTY].inits) == 4
    assert arrivals(bars[EMPTY]) == {("tcgen05.commit", "consumer (warp 1)", 1, 1)}
    assert {(w.site.role, w.site.threads) for w in bars[EMPTY].waiters} == {("producer (warp 0)", 1)}
    assert [c for _, c in bars[DONE].inits] == [1]
    assert arrivals(bars[DONE]) == {("tcgen05.commit", "consumer (warp 1)", 1, 1)}
    assert {(w.site.role, w.site.threads) for w in bars[DONE].waiters} == {("epilogue (warps 2-5)", 128)}
    # the remainder loop's stepped pointer (ring+32, +8 per trip, at most 3 trips) stays in the full ring
    assert {a.site.address for a in bars[FULL].arrivers} >= {"ring", "ring+8", "ring+{0,8,16}"}
    elect = [i for i in k.roles if "elect.sync" in i.text]
    assert len(elect) == 1 and elect[0].basis is Basis.EVIDENCE
    assert not [n for n in k.notes if n.aspect.startswith("handoff") and n.aspect != "handoff.tx"], k.notes
    # its tensor maps are built on the host: the boxes, so the expected bytes, are not checked, and it says so
    assert [n.aspect for n in k.notes if n.aspect == "handoff.tx"] == ["handoff.tx"]


def test_tcgen05_fallback_counts_lane_zero_arrivals_per_warp():
    k = sheets("tcgen05.ptx")["tcgen05_fallback"]
    assert k.flags == ()
    bars = by_slots(k)
    assert {c for _, c in bars[EMPTY].inits} == {4}
    assert arrivals(bars[EMPTY]) == {("arrive", "consumer (warps 1-4)", 4, 4)}
    assert arrivals(bars[FULL]) == {("arrive.expect_tx", "producer (warp 0)", 1, 1),
                                    ("complete_tx", "producer (warp 0)", 1, 0)}


def test_tcgen05_miscount_flagged_through_the_embedded_ptx():
    """The planted count, read with the cuobjdump wheel from a committed fatbin (PTX only)."""
    ks = {k.kernel: k for k in worksheet([MISCOUNT_FATBIN]).kernels}
    assert set(ks) == {"tcgen05_gemm", "tcgen05_spill", "tcgen05_fallback"}
    assert all("cuobjdump -ptx" in k.source for k in ks.values())
    (flag,) = ks["tcgen05_gemm"].flags
    assert (flag.code, flag.basis) == (2, Basis.EVIDENCE)
    assert flag.text.startswith("ring+{32,40,48,56}: mbarrier.init count 4") and "1 arrival(s)" in flag.text
    assert "never completes (deadlock)" in flag.text
    assert ks["tcgen05_fallback"].flags == ()  # its four mma.sync warps do need 4


def test_cli_reads_a_fatbin_and_names_the_ptx_it_holds():
    p = wsperf("worksheet", MISCOUNT_FATBIN, "-k", "tcgen05_gemm", "-f", "json")
    assert p.returncode == 0, p.stderr
    (k,) = json.loads(p.stdout)["kernels"]
    assert [f["code"] for f in k["flags"]] == [2] and k["target"] == "sm_100a"
    assert_one_error_line(wsperf("worksheet", MISCOUNT_FATBIN, "--arch", "sm_90a"), 2,
                          "no PTX for sm_90a", "sm_100a")


def test_barriers_in_one_array_are_told_apart_by_offset():
    ks = {k.kernel.split("ILi")[1][0]: k for k in sheets("bars_array.ptx").values()}
    ok, planted, undecidable = ks["0"], ks["1"], ks["2"]
    assert ok.flags == ()
    bars = by_slots(ok)
    full, empty = bars[(0, 16, 32, 48)], bars[(8, 24, 40, 56)]
    assert {c for _, c in full.inits} == {1} and {c for _, c in empty.inits} == {4}
    assert arrivals(full) == {("arrive.expect_tx", "producer (warp 0)", 1, 1), ("complete_tx", "producer (warp 0)", 1, 0)}
    assert arrivals(empty) == {("arrive", "consumer (warps 1-4)", 4, 4)}
    (flag,) = planted.flags
    assert flag.code == 2 and flag.text.startswith("bars+{8,24,40,56}: mbarrier.init count 1")
    assert "4 arrival(s)" in flag.text and "completes early" in flag.text
    # the stage comes from memory: one group for the whole array, said to be an assumption
    assert undecidable.flags == ()
    (b,) = undecidable.barriers
    assert b.name == "bars" and not b.decided and len(b.slots) == 8
    notes = [n.text for n in undecidable.notes if n.basis is Basis.ASSUMPTION]
    assert any("not decided by the PTX" in t for t in notes) and any("counts not checked" in t for t in notes)


def test_calls_into_noinline_functions_count_in_the_callers_role():
    ks = {("fixed" if "ILb1E" in k.kernel else "broken"): k for k in sheets("noinline_call.ptx").values()}
    ok = ks["fixed"]
    assert ok.flags == ()
    called = [i.text for i in ok.roles if "call into .func" in i.text]
    assert len(called) == 2 and any("_Z7produce" in t for t in called) and any("_Z7release" in t for t in called)
    bars = {b.name: b for b in ok.barriers}
    assert arrivals(bars["full"]) == {("arrive.expect_tx", "producer (warp 0)", 1, 1),
                                      ("complete_tx", "producer (warp 0)", 1, 0)}
    assert all(a.site.via for a in bars["full"].arrivers)  # all inside produce()
    assert arrivals(bars["empty"]) == {("arrive", "consumer (warps 1-4)", 4, 4)}
    assert {(w.site.role, w.site.threads) for w in bars["empty"].waiters} == {("producer (warp 0)", 1)}
    (flag,) = ks["broken"].flags
    assert flag.code == 2 and "count 4" in flag.text and "128 arrival(s)" in flag.text
    assert "line 130 via call at line 319" in flag.text  # release()'s arrive, reached from the consumer loop


def test_call_without_a_body_is_named_not_guessed(tmp_path):
    """An .extern function (its body in another module) cannot be followed: the sheet
    says which call, instead of silently missing its barrier operations."""
    src = (PTX / "noinline_call.ptx").read_text()
    start = src.index(".func _Z7releaseILb1EEvPm(")
    end = src.index("}", src.index("{", start)) + 1
    ptx = tmp_path / "extern_call.ptx"
    ptx.write_text(src[:start] + ".extern .func _Z7releaseILb1EEvPm(\n\t.param .b64 _Z7releaseILb1EEvPm_param_0\n);"
                   + src[end:])
    (k,) = [k for k in worksheet([ptx]).kernels if "ILb1E" in k.kernel]
    (note,) = [n for n in k.notes if n.aspect == "calls"]
    assert note.basis is Basis.ASSUMPTION and "_Z7releaseILb1EEvPm not followed" in note.text
    assert {a.kind for b in k.barriers if b.name == "empty" for a in b.arrivers} == set()


@needs_nvcc
def test_cu_file_compiles_to_the_same_sheet():
    p = wsperf("worksheet", FIXTURES / "src" / "worksheet" / "noinline_call.cu", "-f", "json")
    assert p.returncode == 0, p.stderr
    ks = json.loads(p.stdout)["kernels"]
    assert all("nvcc -ptx -arch=sm_90a" in k["source"] for k in ks)
    got = {k["kernel"]: sorted(f["code"] for f in k["flags"]) for k in ks}
    assert got == {k.kernel: sorted(f.code for f in k.flags) for k in sheets("noinline_call.ptx").values()}
    assert got["_Z13noinline_callILb0EEvPKfPfi"] == [2]


def test_input_text_is_escaped_in_each_output(tmp_path):
    """A line the parser cannot read is echoed in the sheet: without its control
    characters on the terminal; in Markdown inside a code span, where it is inert and
    shown as written (an escape there would show its backslash)."""
    src = (PTX / "init_in_role.ptx").read_text().splitlines(keepends=True)
    body = next(i for i, ln in enumerate(src) if ln.strip() == "{") + 1
    ptx = tmp_path / "odd.ptx"
    ptx.write_text("".join(src[:body] + ["\t\x1b[31m*not* [ptx](x)\n"] + src[body:]))
    text = CliRunner().invoke(app, ["worksheet", str(ptx)])
    assert text.exit_code == 0 and "\x1b" not in text.output and "could not read `[31m*not* [ptx](x)`" in text.output
    mdown = CliRunner().invoke(app, ["worksheet", str(ptx), "-f", "markdown"])
    assert mdown.exit_code == 0 and "could not read `[31m*not* [ptx](x)`" in mdown.output, mdown.output
    assert "\x1b" not in mdown.output and "\\*not" not in mdown.output


def test_recursive_and_indirect_calls_end(tmp_path):
    """Mutually recursive .funcs are expanded once each, then named as not followed; an
    indirect call (through a register) too. Hand-written PTX: nvcc emits recursion only
    with a call stack, this only pins down that the expansion stops."""
    ptx = tmp_path / "recursive.ptx"
    ptx.write_text("""\
.version 8.0
.target sm_90a
.address_size 64
.func a(.param .b32 a_param_0);
.func b(.param .b32 b_param_0)
{
	.reg .b32 %r<2>;
	ld.param.u32 %r1, [b_param_0];
	{ .param .b32 param0;
	st.param.b32 [param0+0], %r1;
	call.uni a, (param0); }
	ret;
}
.func a(.param .b32 a_param_0)
{
	.reg .b32 %r<2>;
	ld.param.u32 %r1, [a_param_0];
	{ .param .b32 param0;
	st.param.b32 [param0+0], %r1;
	call.uni b, (param0); }
	ret;
}
.visible .entry k()
.maxntid 64, 1, 1
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	mov.u32 %r1, %tid.x;
	{ .param .b32 param0;
	st.param.b32 [param0+0], %r1;
	call.uni a, (param0); }
	call (retval0), %rd1, (param0), proto;
	ret;
}
""")
    (k,) = worksheet([ptx]).kernels
    followed = [i.text for i in k.roles if "followed" in i.text]
    assert len(followed) == 2
    missed = sorted(n.text for n in k.notes if n.aspect == "calls")
    assert len(missed) == 2 and "(recursive)" in missed[0] and "%rd1 not followed (indirect" in missed[1]


@needs_nvcc
def test_barriers_after_an_aligned_dynamic_buffer():
    """gemm.cu keeps full[]/empty[] after its tiles in `extern __shared__` memory aligned up
    to 1024 bytes: the aligned base is one base wherever a role recomputes it, and the two
    rings are told apart by offset."""
    (k,) = worksheet([FIXTURES / "src" / "gemm.cu"], kernel="gemm_wsILb1E").kernels
    assert k.flags == ()
    bars = by_slots(k)
    full, empty = bars[(131072, 131080, 131088, 131096)], bars[(131104, 131112, 131120, 131128)]
    assert full.name.startswith("align1024(smem_raw+1023)+")
    assert {c for _, c in full.inits} == {1} and {c for _, c in empty.inits} == {8}
    assert {(a.kind, a.site.role, a.arrivals) for a in full.arrivers if a.arrivals} == {
        ("arrive.expect_tx", "producer (warps 0-3)", 1)}
    assert arrivals(empty) == {("arrive", "consumer (warps 4-11)", 8, 8)}


def test_a_tensor_map_built_in_shared_memory_is_not_data_for_the_async_proxy():
    # Triton's device-side descriptors (tl.make_tensor_descriptor, fixtures/src/
    # triton_ws_matmul.py, the PTX Triton 3.6 generated): each 128-byte tensor map is
    # zero-filled with st.shared, its fields set with tensormap.replace and published by
    # tensormap.cp_fenceproxy; the kernel's wgmma reads the TMA-filled ring, not the map.
    # The zero fill was flagged as a generic store read by wgmma with no proxy fence.
    (k,) = sheets("triton_ws_matmul.ptx").values()
    text = (PTX / "triton_ws_matmul.ptx").read_text()
    assert "tensormap.replace" in text and "wgmma.mma_async" in text and "st.shared" in text
    assert 5 not in codes(k), [f.text for f in k.flags]
    # A store the async proxy reads with no fence is still flagged (the planted mistake).
    broken = [k for k in sheets("store_no_fence.ptx").values() if "ILb0E" in k.kernel]
    assert codes(broken[0]) == {5}


def test_triton_warp_specialization_roles_through_its_partition_table():
    # Triton 3.6 dispatches warp_specialize partitions through a table in shared memory:
    # warps 0-3 branch on the warp index (shfl of %tid.x / 32) to the default partition, the
    # others store nothing and read their own byte of a table warp 0-3 wrote with constants
    # ({0, 0x01010101}: warps 4-7 run partition 0, warps 8-11 partition 1). The roles come
    # from evaluating that table, an assumption the sheet states; the same loop compiled
    # without warp_specialize has one code path.
    (k,) = sheets("triton_ws_matmul.ptx").values()
    roles = {r.text.split(":")[0]: r for r in k.roles}
    assert set(roles) == {"producer (warps 0-3)", "consumer (warps 4-7)", "consumer (warps 8-11)"}, roles
    assert "cp.async" in roles["producer (warps 0-3)"].text
    assert all("wgmma" in roles[c].text for c in ("consumer (warps 4-7)", "consumer (warps 8-11)"))
    assert all(r.basis is Basis.ASSUMPTION for r in k.roles)
    (table,) = [n for n in k.notes if "table of constants" in n.text]
    assert table.basis is Basis.ASSUMPTION and "line(s) 196" in table.text and "1424" in table.text
    assert codes(k) == set()
    (plain,) = sheets("triton_plain_matmul.ptx").values()
    assert [r.text for r in plain.roles][0].startswith("no branch on a warp/warpgroup index")
