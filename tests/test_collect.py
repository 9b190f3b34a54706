"""`wsperf collect` and the offline handoff rule of `wsperf analyze`.

Offline (CPU): bundles assembled from the real H200 outputs in fixtures/correctness and a
real report from fixtures/reports (tests/bundles.py) go through `wsperf analyze` as a
user runs it: exit 3 with the handoff classes of each broken fixture, exit 4 with where
each role waits for ws_deadlock, 0 with verdicts for a clean sanitizer run + a profile.
collect itself on this machine (no GPU, no NVIDIA tools): real small programs that fail,
hang and flood stdout; the run must end, bounded, with one `Error:` line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bundles import CORRECTNESS, REPORTS, TOOLS as BUNDLE_TOOLS, deadlock_bundle, sanitizer_bundle
from support import ROOT, wsperf
from wsperf.collectors.bundle import BundleError, read_bundle, resolve
from wsperf.collectors.process import HEAD, TAIL, run_bounded

BROKEN = {"oob_write": {"out-of-bounds-or-misaligned"}, "smem_race": {"race-between-roles"},
          "uninit_read": {"uninitialized-read"}, "barrier_misuse": {"barrier-misuse"}}


def _json(p) -> dict:
    return json.loads(p.stdout)


@pytest.mark.parametrize("fixture", sorted(BROKEN))
def test_a_broken_fixture_gets_the_correctness_report_and_exit_3(tmp_path, fixture):
    p = wsperf("analyze", sanitizer_bundle(tmp_path, fixture), "--format", "json")
    assert p.returncode == 3, p.stderr
    doc = _json(p)
    assert doc["outcome"] == "correctness"
    assert {h["handoff"] for h in doc["handoffs"]} == BROKEN[fixture]
    for h in doc["handoffs"]:
        assert h["kernels"] == ["ws_pipeline"]
        assert all(s["source_line"] for s in h["sites"])
        bases = {i["basis"] for i in h["worksheet"]}
        assert bases == {"evidence", "assumption"}, bases
        assert {i["aspect"].split(".")[0] for i in h["worksheet"]} >= {"roles"}
    # No performance verdicts on a broken kernel.
    assert "kernels" not in doc and "hypothes" not in p.stdout


def test_the_race_names_both_sides_and_their_roles_as_assumptions(tmp_path):
    p = wsperf("analyze", sanitizer_bundle(tmp_path, "smem_race"), "--format", "json")
    (race,) = _json(p)["handoffs"]
    sides = {(s["source_line"], s["access"], s["role"], s["role_basis"]) for s in race["sites"]}
    # Consumer reads at lines 99 and 102, producer writes at lines 81 and 82 (CORRECTNESS.md).
    assert sides == {(99, "read", "consumer", "assumption"), (102, "read", "consumer", "assumption"),
                     (81, "write", "producer", "assumption"), (82, "write", "producer", "assumption")}


def test_the_oob_write_names_its_thread_and_warp(tmp_path):
    p = wsperf("analyze", sanitizer_bundle(tmp_path, "oob_write"))
    assert p.returncode == 3
    assert "pipeline.cuh:102" in p.stdout and "out-of-bounds-or-misaligned" in p.stdout
    doc = _json(wsperf("analyze", sanitizer_bundle(tmp_path / "j", "oob_write"), "--format", "json"))
    (site,) = doc["handoffs"][0]["sites"]
    assert site["warps"] == [2] and site["access"] == "write"  # thread 93 of CTA 1
    assert any("cudaErrorLaunchFailure" in m for m in doc["other_errors"])


def test_the_barrier_misuse_lists_the_consumer_threads(tmp_path):
    doc = _json(wsperf("analyze", sanitizer_bundle(tmp_path, "barrier_misuse"), "--format", "json"))
    (site,) = doc["handoffs"][0]["sites"]
    assert site["source_line"] == 106 and set(site["warps"]) <= {1, 2} and site["role"] is None


def test_analyze_with_sanitizer_files_applies_the_same_rule(tmp_path):
    p = wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", "--sanitizer",
               CORRECTNESS / "uninit_read.initcheck.xml", "--format", "markdown")
    assert p.returncode == 3, p.stderr
    assert "uninitialized-read" in p.stdout and "hypothesis" not in p.stdout


def test_the_deadlock_bundle_gets_where_each_role_waits_and_exit_4(tmp_path):
    p = wsperf("analyze", deadlock_bundle(tmp_path), "--format", "json")
    assert p.returncode == 4, p.stderr
    doc = _json(p)
    assert doc["outcome"] == "deadlock" and doc["resident_warps"] == 6 and doc["note"] == ""
    groups = {g["role"]: g for g in doc["groups"]}
    assert set(groups) == {"producer", "consumer"}
    assert {w[1] for w in groups["producer"]["warps"]} == {0} and len(groups["producer"]["warps"]) == 2
    assert {w[1] for w in groups["consumer"]["warps"]} == {1, 2} and len(groups["consumer"]["warps"]) == 4
    assert all(g["wait"] == "mbarrier-try-wait" and "TRYWAIT" in g["instruction"] for g in doc["groups"])
    # The kernel's own lines: the producer's mbar_wait(&empty...) and the consumers' mbar_wait(&full...).
    assert groups["producer"]["source"].endswith(":79") and groups["consumer"]["source"].endswith(":96")
    assert {c["aspect"] for c in doc["causes"]} >= {"cause", "handoff.count", "handoff.phase"}
    text = wsperf("analyze", deadlock_bundle(tmp_path / "t"))
    assert text.returncode == 4 and "producer (assumption)" in text.stdout


def test_a_clean_bundle_with_a_profile_gets_the_verdicts(tmp_path):
    p = wsperf("analyze", sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy"), "--format", "json")
    assert p.returncode == 0, p.stderr
    (k,) = _json(p)["kernels"]
    assert {f["id"]: f["status"] for f in k["findings"]}["producer-bound"] == "rejected"


def test_a_clean_bundle_without_a_profile_says_so(tmp_path):
    p = wsperf("analyze", sanitizer_bundle(tmp_path, "clean"))
    assert p.returncode == 0 and "found no error in your kernels; no Nsight Compute report" in p.stdout


def test_bundle_paths_may_not_escape_the_bundle(tmp_path):
    root = sanitizer_bundle(tmp_path, "clean")
    with pytest.raises(BundleError):
        resolve(root, "../outside.xml")
    with pytest.raises(BundleError):
        resolve(root, "/etc/passwd")
    (root / "sanitizer" / "link.xml").symlink_to(CORRECTNESS / "clean.memcheck.xml")
    with pytest.raises(BundleError):
        resolve(root, "sanitizer/link.xml")
    doc = json.loads((root / "bundle.json").read_text())
    doc["runs"][1]["outputs"]["xml"] = "../../etc/passwd"
    (root / "bundle.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError):
        read_bundle(root)
    p = wsperf("analyze", root)
    assert p.returncode == 2 and p.stderr.count("Error:") == 1 and "out of the bundle" in p.stderr


def test_a_directory_that_is_not_a_bundle_is_refused(tmp_path):
    p = wsperf("analyze", tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("Error:") and "bundle.json" in p.stderr


# ---- collect on a machine without a GPU: real programs, no mocks --------------------------

NO_TOOLS = os.environ.get("PATH", "")  # the NVIDIA tools are absent here; the GPU tests run elsewhere


def _collect(tmp_path, *argv, timeout="5"):
    out = tmp_path / "bundle"
    p = wsperf("collect", "--out", out, "--timeout", timeout, "--", *argv)
    return p, out


def _errors(p) -> list[str]:
    return [l for l in p.stderr.splitlines() if l.startswith("Error:")]


gpu_absent = pytest.mark.skipif(any(Path(d, "compute-sanitizer").exists() for d in NO_TOOLS.split(os.pathsep)),
                                reason="compute-sanitizer is installed here")


@gpu_absent
def test_collect_without_compute_sanitizer_says_what_to_install(tmp_path):
    p, out = _collect(tmp_path, sys.executable, "-c", "print('ok')")
    assert p.returncode == 5  # unverified: no sanitizer ran, so never a clean outcome
    # the first line says what this machine lacks and how to get it; no advice to collect
    # again with a larger --timeout, and not a bullet per tool that could not run
    first = p.stdout.splitlines()[0]
    assert first.startswith("Correctness cannot be checked on this machine: ") and "compute-sanitizer" in first
    assert "install" in first and "--timeout" not in p.stdout and p.stdout.count("  - ") == 1
    (line,) = _errors(p)
    assert "compute-sanitizer" in line and "install" in line
    b = read_bundle(out)
    (run,) = [r for r in b.runs if r.phase == "run"]
    assert run.exit_code == 0 and (out / run.stdout).read_text() == "ok\n"
    assert (out / "environment.json").is_file() and b.manifest["outcome"] == "unverified"


@gpu_absent
def test_collect_records_a_repro_that_fails(tmp_path):
    p, out = _collect(tmp_path, sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(1)")
    assert p.returncode == 5 and len(_errors(p)) == 1
    (run,) = [r for r in read_bundle(out).runs if r.phase == "run"]
    assert run.exit_code == 1 and not run.timed_out and "boom" in (out / run.stderr).read_text()
    assert run.argv[0] == sys.executable


@gpu_absent
def test_collect_kills_a_repro_that_outlives_the_timeout_with_its_children(tmp_path):
    marker = tmp_path / "child.pid"
    script = (f"import subprocess, time; c = subprocess.Popen(['sleep', '300']); "
              f"open({str(marker)!r}, 'w').write(str(c.pid)); time.sleep(300)")
    t0 = time.monotonic()
    p, out = _collect(tmp_path, sys.executable, "-c", script, timeout="2")
    assert time.monotonic() - t0 < 60
    assert p.returncode == 4, p.stderr  # a hang; cuda-gdb is missing, so it is named
    (line,) = _errors(p)
    assert "cuda-gdb" in line
    (run,) = [r for r in read_bundle(out).runs if r.phase == "run"]
    assert run.timed_out and run.exit_code is None
    child = int(marker.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the grandchild died with the process group
    assert "Deadlock" in p.stdout


@gpu_absent
def test_collect_bounds_a_flood_of_output(tmp_path):
    script = "import sys\nb = b'x' * 65536\nfor _ in range(3000): sys.stdout.buffer.write(b)\nprint('END')"
    p, out = _collect(tmp_path, sys.executable, "-c", script, timeout="60")
    assert p.returncode == 5
    (run,) = [r for r in read_bundle(out).runs if r.phase == "run"]
    assert run.stdout_bytes == 3000 * 65536 + 4
    kept = (out / run.stdout).read_bytes()
    assert len(kept) < HEAD + TAIL + 200 and kept.endswith(b"END\n") and b"not kept by wsperf" in kept


def test_run_bounded_survives_garbage_and_missing_programs(tmp_path):
    done = run_bounded([sys.executable, "-c", "import os; os.write(1, bytes(range(256)) * 10); os._exit(3)"],
                       timeout=30)
    assert done.exit_code == 3 and done.stdout_bytes == 2560 and done.stdout == bytes(range(256)) * 10
    with pytest.raises(OSError):
        run_bounded([str(tmp_path / "no-such-program")], timeout=5)


@pytest.mark.gpu
@pytest.mark.skipif(not (shutil.which("compute-sanitizer") and shutil.which("nvcc") and shutil.which("nvidia-smi")),
                    reason="needs an NVIDIA GPU, nvcc and compute-sanitizer")
def test_collect_on_the_clean_fixture_is_clean(tmp_path):
    exe = tmp_path / "clean"
    build = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-lineinfo", "-o", str(exe),
                            str(ROOT / "fixtures" / "src" / "broken" / "clean.cu")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    p = wsperf("collect", "--out", tmp_path / "b", "--timeout", "60", "--no-profile", "--", exe)
    assert p.returncode == 0, p.stderr
    assert {r.tool for r in read_bundle(tmp_path / "b").runs if r.phase == "sanitizer"} == set(BUNDLE_TOOLS)


def test_collect_refuses_a_nonempty_out_and_a_missing_command(tmp_path):
    (tmp_path / "x").write_text("keep me")
    p = wsperf("collect", "--out", tmp_path, "--", sys.executable, "-c", "pass")
    assert p.returncode == 2 and "not an empty directory" in p.stderr and (tmp_path / "x").exists()
    p = wsperf("collect", "--out", tmp_path / "new", "--tools", "memcheck,bogus", "--", "true")
    assert p.returncode == 2 and "bogus" in p.stderr
    p = wsperf("collect", "--out", tmp_path / "new2", "--", str(tmp_path / "nope"))
    assert p.returncode == 2 and _errors(p) and "cannot run" in p.stderr
