"""Nsight Compute's compressed reports (.ncu-repz, 2025.4 and later): zstd frames around the
report's bytes. No ncu that writes them runs here, so the files are the project's real H200
reports compressed into that layout; ncu_report 2026.3 (which reads .ncu-repz) is the
witness that the layout is the one it reads. wsperf decompresses them itself, so every
ncu_report it supports reads them, and a report and its .ncu-repz are one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from support import REPORTS, assert_one_error_line, kernels, wsperf
from wsperf.collectors.ncu import load_report
from wsperf.collectors.store import open_store

TMA = REPORTS / "gemm_wgmma_tma.ncu-rep"
MANY = REPORTS / "graph_workload.ncu-rep"  # several launches


def repz(src: Path, dest: Path, frames: int = 1) -> Path:
    """`src` as a .ncu-repz: one zstd frame, or `frames` frames back to back (a writer
    that compresses in blocks)."""
    data = src.read_bytes()
    step = -(-len(data) // frames)
    dest.write_bytes(b"".join(zstandard.ZstdCompressor(level=3).compress(data[i:i + step])
                              for i in range(0, len(data), step)))
    return dest


def same(a: list[dict], b: list[dict]) -> None:
    """The two analyses agree on everything but the report's path."""
    strip = lambda ks: json.dumps([{k: v for k, v in x.items() if k != "report"} for x in ks], sort_keys=True)
    assert strip(a) == strip(b)


@pytest.mark.parametrize("frames", [1, 3])
def test_a_compressed_report_gives_the_verdicts_of_the_report(tmp_path, frames):
    for src in (TMA, MANY):
        z = repz(src, tmp_path / f"{src.stem}.ncu-repz", frames)
        assert z.stat().st_size < src.stat().st_size / 2  # the compression is real
        got, want = kernels(z), kernels(src)
        assert len(got) == len(want) >= 1
        same(got, want)


def test_ncu_report_itself_reads_this_layout(tmp_path):
    """What wsperf decompresses is what NVIDIA's reader accepts as a .ncu-repz (where the
    installed ncu_report knows the format); a plain report merely named .ncu-repz it
    reads as empty, which wsperf does not (it goes by the bytes)."""
    ncu_report = pytest.importorskip("ncu_report")
    if ".ncu-repz" not in (ncu_report.load_report.__doc__ or ""):
        pytest.skip("this ncu_report predates .ncu-repz (wsperf reads it all the same)")
    z = repz(MANY, tmp_path / "many.ncu-repz", 3)
    a, b = ncu_report.load_report(str(z)), ncu_report.load_report(str(MANY))
    count = lambda c: [c.range_by_idx(i).num_actions() for i in range(c.num_ranges())]
    assert count(a) == count(b) and sum(count(a)) > 1
    plain = tmp_path / "plain.ncu-repz"
    plain.write_bytes(MANY.read_bytes())
    assert ncu_report.load_report(str(plain)).num_ranges() == 0
    same(kernels(plain), kernels(MANY))


def test_one_report_in_a_store_whatever_its_wrapping(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    first = load_report(con, TMA)
    again = load_report(con, repz(TMA, tmp_path / "t.ncu-repz"))
    assert again.already_present and again.report_id == first.report_id and again.sha256 == first.sha256
    con.close()


def test_compare_reads_a_compressed_side(tmp_path):
    z = repz(TMA, tmp_path / "t.ncu-repz")
    p = wsperf("compare", TMA, z, "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["regressions"] == 0 and out["kernels"] and not out["only_base"] and not out["only_cand"]


def test_bad_compressed_reports_are_one_error_line(tmp_path):
    good = zstandard.ZstdCompressor(level=3).compress(TMA.read_bytes())
    cases = {
        "truncated": (good[: len(good) // 2], "truncated zstd"),
        "damaged": (good[:5000] + bytes(b ^ 0xFF for b in good[5000:5100]) + good[5100:], "damaged or truncated zstd"),
        "not_a_report": (zstandard.ZstdCompressor().compress(b"not a report " * 1000), "decompresses to something"),
        "empty_frame": (zstandard.ZstdCompressor().compress(b""), "decompresses to nothing"),
    }
    for name, (data, needle) in cases.items():
        f = tmp_path / f"{name}.ncu-repz"
        f.write_bytes(data)
        assert_one_error_line(wsperf("analyze", f), 2, str(f), needle)
    # a compressed file of another format is still named as such
    xz = tmp_path / "r.ncu-rep.xz"
    xz.write_bytes(b"\xfd7zXZ\x00" + bytes(64))
    assert_one_error_line(wsperf("analyze", xz), 2, "xz-compressed")
