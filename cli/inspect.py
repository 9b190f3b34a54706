"""`wsperf inspect`: the analysis of compiled code, without a GPU. Registered on the app
in cli/main.py; its error boundary and consoles are main's (imported when it runs, since
main imports this module)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.analyze import unmet_expectations
from wsperf.analyses.static import inspect as run_inspect
from wsperf.analyses.sql import check_kernel_regex
from wsperf.cli import render
from wsperf.cli.common import emit, error_boundary, expectation_gate
from wsperf.collectors.store import open_store
from wsperf.cli.render import OutputFormat as Format
from wsperf.collectors.errors import InputError


def inspect(
    paths: list[Path] = typer.Argument(..., help="Executables or shared libraries with embedded cubins, .cubin or "
                                       "fatbin files, or .cu files (compiled with nvcc for --arch).",
                                       show_default=False),
    arch: Optional[str] = typer.Option(None, "--arch", "-a", help="Architecture to inspect, e.g. sm_90a or sm_100a. "
                                       "Default: the newest the file holds; sm_90a for .cu files."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only kernels whose name matches this regular "
                                         "expression (RE2 syntax)."),
    expect: list[str] = typer.Option([], "--expect", "-e", help="What the kernel should use (repeatable): tma, "
                                     "tensor-core, wgmma, tcgen05, setmaxnreg, warp-specialized."),
    expect_advisory: bool = typer.Option(False, "--expect-advisory", help="Say an unmet expectation but exit 0 "
                                         "(default: exit 6, docs/exit-codes.md)."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file to load the static rows into (created if "
                                      "absent, appended to if present). Default: an in-memory database."),
) -> None:
    """Disassemble compiled kernels (no GPU needed) and print, per kernel: registers and
    shared memory, which instruction paths its SASS holds (tcgen05 / wgmma / mma.sync,
    TMA / cp.async / ld/st, mbarrier, setmaxnreg, local memory), the compiler's notes,
    and the verdicts that static code can give; the others say no_data."""
    with error_boundary():
        check_kernel_regex(kernel)
        for p in paths:
            if p.name.endswith((".ncu-rep", ".ncu-repz", ".ncu-rep.gz")):
                raise InputError(f"{p}: an Nsight Compute report, not compiled code: `wsperf analyze {p}` reads it "
                                 "(inspect disassembles executables, shared libraries, cubins, fatbins and .cu files)")
        con = open_store(db)
        result = run_inspect(con, paths, arch=arch, kernel=kernel, expect=expect)
        emit(fmt, result, render.inspection_text, render.inspection_json,
              render.inspection_markdown)
        unmet = expectation_gate(unmet_expectations(k.analysis for k in result.kernels), expect_advisory, "inspect")
    if unmet:
        raise typer.Exit(unmet)
