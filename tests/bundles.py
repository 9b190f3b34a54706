"""Bundles as `wsperf collect` writes them, assembled from the committed real outputs in
fixtures/correctness (an H200 run of fixtures/collect_correctness.sh) and fixtures/reports:
the files are copied into the bundle layout (collectors/bundle.py) and a manifest naming
the commands that really produced them is written beside them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from wsperf.collectors.bundle import RunRecord, write_manifest

ROOT = Path(__file__).resolve().parents[1]
CORRECTNESS = ROOT / "fixtures" / "correctness"
REPORTS = ROOT / "fixtures" / "reports"
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
BUILD = "/tmp/wsperf-correctness-build"  # where collect_correctness.sh built the programs


def _provenance(fixture: str) -> dict:
    return json.loads((CORRECTNESS / f"{fixture}.provenance.json").read_text())


def _copy(src: Path, root: Path, rel: str) -> str:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, root / rel)
    return rel


def sanitizer_bundle(tmp: Path, fixture: str, report: str | None = None) -> Path:
    """A bundle of `fixture`'s plain run and four sanitizer runs; with `report` (a name
    in fixtures/reports) also a profile phase holding that report."""
    root = tmp / f"{fixture}.bundle"
    root.mkdir(parents=True)
    prov = _provenance(fixture)
    argv = [f"{BUILD}/{fixture}"]
    runs = [RunRecord("run", "repro", argv, 0, 1.0, stdout=_copy(CORRECTNESS / f"{fixture}.program.txt", root,
                                                                  "run/stdout.txt"))]
    by_tool = {r["kind"]: r for r in prov["runs"]}
    for tool in TOOLS:
        r = by_tool[tool]
        runs.append(RunRecord(
            "sanitizer", tool, r["command"], r["exit_code"], r["seconds"],
            stdout=_copy(CORRECTNESS / f"{fixture}.{tool}.stdout.txt", root, f"sanitizer/{tool}.stdout.txt"),
            outputs={"xml": _copy(CORRECTNESS / f"{fixture}.{tool}.xml", root, f"sanitizer/{tool}.xml")}))
    if report is not None:
        rp = json.loads((REPORTS / f"{report}.provenance.json").read_text())
        runs.append(RunRecord("profile", "ncu", rp["command"].split(), 0, 10.0, outputs={
            "report": _copy(REPORTS / f"{report}.ncu-rep", root, "profile/report.ncu-rep")}))
    write_manifest(root, {"argv": argv, "outcome": None}, runs)
    return root


def deadlock_bundle(tmp: Path) -> Path:
    """A bundle of ws_deadlock: the plain run that outlived the timeout, the cuda-gdb
    capture and the SASS dump."""
    root = tmp / "ws_deadlock.bundle"
    root.mkdir(parents=True)
    prov = _provenance("ws_deadlock")
    by_kind = {r["kind"]: r for r in prov["runs"]}
    argv = [f"{BUILD}/ws_deadlock"]
    runs = [
        RunRecord("run", "repro", argv, None, 5.0, timed_out=True,
                  stdout=_copy(CORRECTNESS / "ws_deadlock.program.txt", root, "run/stdout.txt")),
        RunRecord("hang", "cuda-gdb", by_kind["cuda-gdb"]["command"], by_kind["cuda-gdb"]["exit_code"],
                  by_kind["cuda-gdb"]["seconds"],
                  outputs={"capture": _copy(CORRECTNESS / "ws_deadlock.cudagdb.txt", root, "hang/cudagdb.txt")}),
        RunRecord("hang", "cuobjdump", by_kind["sass"]["command"], 0, 0.0,
                  outputs={"sass": _copy(CORRECTNESS / "ws_deadlock.sass.txt", root, "hang/sass.txt")}),
    ]
    write_manifest(root, {"argv": argv, "outcome": None}, runs)
    return root
