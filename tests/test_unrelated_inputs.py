"""Inputs that do not belong together are said so, not joined silently: a sanitizer XML of
another program's kernel beside a report, an Nsight Systems timeline from another GPU
beside Nsight Compute reports. Real files only: the H200 fixtures, the public RTX 3060
export, the correctness and evidence fixtures."""

from __future__ import annotations

import dataclasses
import json

from support import PUBLIC, REPORTS, ROOT, wsperf

RTX3060 = PUBLIC / "nsys" / "vecadd_rtx3060_nsys2025.5.sqlite.gz"
SYNCCHECK = ROOT / "fixtures" / "correctness" / "barrier_misuse.synccheck.xml"  # kernel ws_pipeline


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ": warning: " in ln]


def test_a_sanitizer_file_of_another_kernel_is_said_so():
    p = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--sanitizer", SYNCCHECK)
    assert p.returncode == 3  # its findings still stop: correctness first
    (w,) = _warnings(p.stderr)
    assert "kernel(s) ws_pipeline" in w and "(gemm_ffma)" in w and "different programs" in w
    # the same program's files: the release ring's racecheck beside its own kernel's report
    same = wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", "--sanitizer",
                  ROOT / "fixtures" / "evidence" / "release_warp_synced" / "sanitizer" / "racecheck.xml")
    assert same.returncode == 3 and not _warnings(same.stderr)
    # with verdicts (the findings are cuBLAS's and cuDNN's, listed, not judged): the names
    # are read from the launches loaded for them
    listed = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--sanitizer",
                    ROOT / "fixtures" / "evidence" / "torch_vendor4096" / "sanitizer" / "racecheck.xml")
    assert listed.returncode == 0
    (w,) = _warnings(listed.stderr)
    assert "nvjet_sm90" in w and "(gemm_ffma)" in w


def test_a_sanitizer_file_of_another_kernel_is_in_the_json_too():
    # as the timeline's device warning is: JSON's `warnings`, beside the line on stderr
    p = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--sanitizer", SYNCCHECK, "--format", "json")
    assert p.returncode == 3
    (w,) = _warnings(p.stderr)
    doc = json.loads(p.stdout)
    assert doc["outcome"] == "correctness" and doc["warnings"] == [w.split(": warning: ", 1)[1]]
    listed = wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--sanitizer",
                    ROOT / "fixtures" / "evidence" / "torch_vendor4096" / "sanitizer" / "racecheck.xml", "-f", "json")
    assert listed.returncode == 0
    (w,) = json.loads(listed.stdout)["warnings"]
    assert "nvjet_sm90" in w and "(gemm_ffma)" in w
    same = wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", "--sanitizer",
                  ROOT / "fixtures" / "evidence" / "release_warp_synced" / "sanitizer" / "racecheck.xml", "-f", "json")
    assert same.returncode == 3 and "warnings" not in json.loads(same.stdout)


def test_a_timeline_from_another_gpu_is_said_so():
    # an RTX 3060 export beside an H200 report: nothing of one is the other's run
    for command in ("analyze", "nsys"):
        p = wsperf(command, REPORTS / "gemm_ffma.ncu-rep", RTX3060, "--format", "json")
        assert p.returncode == 0, p.stderr
        (w,) = _warnings(p.stderr)
        assert "ran on NVIDIA H200" in w and "NVIDIA GeForce RTX 3060" in w
    doc = json.loads(wsperf("nsys", REPORTS / "gemm_ffma.ncu-rep", RTX3060, "--format", "json").stdout)
    assert len(doc["warnings"]) == 1
    assert json.loads(wsperf("nsys", RTX3060, "--format", "json").stdout)["warnings"] == []


def test_the_same_gpu_is_not_warned_about():
    # the rule itself, on the real export's summary and a real analysis whose device is
    # set to the export's GPU (no H200 export exists: nsys does not run there)
    from wsperf.analyses.analyze import analyze
    from wsperf.analyses.nsys import summarize_nsys
    from wsperf.cli.nsys import unrelated
    from wsperf.collectors.ncu import load_reports
    from wsperf.collectors.nsys import load_nsys_export
    from wsperf.collectors.store import open_store

    con = open_store(None)
    summary = summarize_nsys(con, [load_nsys_export(con, RTX3060).export_id])
    load_reports(con, [REPORTS / "gemm_ffma.ncu-rep"])
    (a,) = analyze(con)
    assert unrelated(summary, [a])
    same = dataclasses.replace(a, summary=dataclasses.replace(a.summary, device="NVIDIA GeForce RTX 3060"))
    assert unrelated(summary, [same]) == ()
