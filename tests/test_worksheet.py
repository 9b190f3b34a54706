"""`wsperf worksheet` on committed PTX (fixtures/ptx/README.md says how each was built):
the correct kernels raise no flag and list every barrier; each planted mistake is
flagged, and only it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wsperf.analyses.worksheet import worksheet
from wsperf.cli.main import app

PTX = Path(__file__).resolve().parents[1] / "fixtures" / "ptx"


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
