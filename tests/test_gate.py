"""The correctness gate can't be fooled: a bundle whose sanitizer evidence is missing,
empty, unreadable, not a regular file, cut short, failed inside the tool, or contradicts
its manifest is `unverified` (exit 5), never clean, in analyze and in compare; the
verdicts come only when asked for (--allow-unverified), marked unverified.

The bundles are the real H200 outputs of fixtures/correctness assembled by
tests/bundles.py (oob_write: memcheck found an out-of-bounds write; clean: no tool found
anything), then damaged the way a copy, a full disk or a hand can damage them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bundles import CORRECTNESS, sanitizer_bundle
from support import REPORTS, wsperf


def _manifest(b: Path) -> dict:
    return json.loads((b / "bundle.json").read_text())


def _write_manifest(b: Path, doc: dict) -> None:
    (b / "bundle.json").write_text(json.dumps(doc))


def _unverified(p, *needles: str) -> None:
    assert p.returncode == 5, (p.returncode, p.stdout[-800:], p.stderr[-800:])
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert doc["outcome"] == "unverified" and doc["exit_code"] == 5
    text = " ".join(doc["problems"])
    for n in needles:
        assert n in text, text


def _damage_memcheck(b: Path, how: str) -> None:
    xml = b / "sanitizer" / "memcheck.xml"
    xml.unlink()
    if how == "fifo":
        os.mkfifo(xml)
    elif how == "directory":
        xml.mkdir()
    elif how == "empty":
        xml.write_bytes(b"")
    elif how == "truncated":
        xml.write_bytes((CORRECTNESS / "oob_write.memcheck.xml").read_bytes()[:300])


@pytest.mark.parametrize("how, says", [
    ("deleted", "is missing"),
    ("fifo", "not a regular file"),
    ("directory", "not a regular file"),
    ("empty", "is empty"),
    ("truncated", "cannot be read"),
])
def test_damaged_memcheck_evidence_is_never_a_clean_outcome(tmp_path, how, says):
    b = sanitizer_bundle(tmp_path, "oob_write", report="ws_stream_healthy")
    _damage_memcheck(b, how)
    p = wsperf("analyze", b, "--format", "json")
    _unverified(p, "memcheck", says)
    assert "kernels" not in json.loads(p.stdout)  # no performance verdicts


def test_a_clean_xml_swapped_in_contradicts_the_manifest(tmp_path):
    b = sanitizer_bundle(tmp_path, "oob_write")
    doc = _manifest(b)
    doc["outcome"] = "correctness"  # what collect recorded for this repro
    _write_manifest(b, doc)
    shutil.copyfile(CORRECTNESS / "clean.memcheck.xml", b / "sanitizer" / "memcheck.xml")
    _unverified(wsperf("analyze", b, "--format", "json"), "the bundle was changed after collect")


def test_a_tool_cut_short_or_failing_inside_itself_is_unverified(tmp_path):
    b = sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy")
    doc = _manifest(b)
    for r in doc["runs"]:
        if r["tool"] == "racecheck":
            r["timed_out"], r["exit_code"], r["note"] = True, None, "did not finish in 120 s under racecheck: killed"
    _write_manifest(b, doc)
    _unverified(wsperf("analyze", b, "--format", "json"), "racecheck did not finish")

    b2 = sanitizer_bundle(tmp_path / "2", "clean")
    # compute-sanitizer's own words when it breaks (seen on the H200 with a kernel-name exclude filter)
    (b2 / "sanitizer" / "initcheck.stdout.txt").write_text(
        "========= COMPUTE-SANITIZER\n========= Internal Sanitizer Error: The Sanitizer failed to handle a "
        "hardware exception\n")
    _unverified(wsperf("analyze", b2, "--format", "json"), "initcheck failed inside the tool",
                "Internal Sanitizer Error")


def test_a_bundle_where_no_sanitizer_ran_is_unverified_and_its_verdicts_come_only_when_asked(tmp_path):
    b = sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy")
    doc = _manifest(b)
    doc["runs"] = [r for r in doc["runs"] if r["phase"] != "sanitizer"]
    doc["outcome"] = "unverified"
    _write_manifest(b, doc)
    _unverified(wsperf("analyze", b, "--format", "json"), "no sanitizer ran")
    text = wsperf("analyze", b)
    assert text.returncode == 5 and "Correctness is unverified" in text.stdout
    assert "found no error" not in text.stdout + text.stderr
    p = wsperf("analyze", b, "--format", "json", "--allow-unverified")
    assert p.returncode == 5
    got = json.loads(p.stdout)
    assert got["kernels"] and any(c["kind"] == "unverified" and "correctness unverified" in c["text"] for c in got["caveats"])


def test_compare_refuses_an_unverified_side(tmp_path):
    b = sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy")
    (b / "sanitizer" / "synccheck.xml").unlink()
    p = wsperf("compare", REPORTS / "ws_stream_healthy.ncu-rep", b)
    assert p.returncode == 5 and "unverified" in p.stderr and "Traceback" not in p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1


def test_the_whole_bundle_still_gives_its_verdict(tmp_path):
    # the control: the same bundles undamaged
    assert wsperf("analyze", sanitizer_bundle(tmp_path, "oob_write"), "--format", "json").returncode == 3
    p = wsperf("analyze", sanitizer_bundle(tmp_path / "c", "clean", report="ws_stream_healthy"), "--format", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["kernels"]
