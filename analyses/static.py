"""`wsperf inspect` as a library call: the analysis of compiled code, without a GPU.

The static rows (collectors/disasm.py) sit in the same tables as a profile, so the same
summary, roles and hypotheses run over them: instruction families come from what the
SASS holds, `missing-specialized-instructions` and `register-spills` judge the code's
presence of paths and of LDL/STL in loops, and the hypotheses that need executed counts
or PC samples say `no_data`. What only the compiler knows (ptxas -v: spills, stack,
C7515/C7508 performance notes) is carried beside each kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import duckdb

from wsperf.analyses.analyze import KernelAnalysis, analyze
from wsperf.analyses.hypotheses import check_expectations
from wsperf.collectors.disasm import CompilerInfo, StaticLoad, load_static
from wsperf.collectors.errors import InputError


@dataclass(frozen=True)
class StaticKernel:
    """One kernel of an inspected file: its analysis and what only the binary or the
    compiler tells."""

    analysis: KernelAnalysis
    cubin_arch: str  # e.g. 'sm_100a' (the summary's arch is the family, 'sm_100')
    stack_bytes: int | None  # cuobjdump --dump-resource-usage STACK
    local_bytes: int | None  # ... LOCAL
    compiler: CompilerInfo | None  # ptxas -v, when wsperf compiled the .cu


@dataclass(frozen=True)
class InspectedFile:
    path: str
    arch: str  # the architecture inspected
    archs: tuple[str, ...]  # every architecture the file holds
    already_present: bool
    compiler_messages: tuple[str, ...]


@dataclass(frozen=True)
class Inspection:
    files: tuple[InspectedFile, ...]
    kernels: tuple[StaticKernel, ...]


def inspect(
    con: duckdb.DuckDBPyConnection,
    paths: Iterable[str | os.PathLike[str]],
    arch: str | None = None,
    kernel: str | None = None,
    expect: Iterable[str] = (),
) -> Inspection:
    """Disassemble (compiling .cu files first) each path into the store and analyze its
    kernels, optionally those whose name matches the regular expression `kernel`."""
    expect = check_expectations(expect)
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("nothing to inspect: give an executable, shared library, fatbin, .cubin or .cu file")
    loads: list[StaticLoad] = [load_static(con, p, arch) for p in paths]
    report_ids = [l.report_id for l in loads]
    rows = con.execute("SELECT launch_id, report_id, kernel_mangled FROM launches WHERE list_contains($ids, report_id)",
                       {"ids": report_ids}).fetchall()
    by_launch = {lid: (rid, name) for lid, rid, name in rows}
    loads_by_report = {l.report_id: l for l in loads}
    kernels = []
    for a in analyze(con, kernel, expect=expect):
        if a.summary.launch_id not in by_launch:
            continue  # a launch of another report in the same --db
        rid, name = by_launch[a.summary.launch_id]
        load = loads_by_report[rid]
        k = load.kernel_info.get(name)
        kernels.append(StaticKernel(a, load.arch, k.stack_bytes if k else None, k.local_bytes if k else None,
                                    k.compiler if k else None))
    if not kernels:
        what = f"matches --kernel {kernel!r}" if kernel else "was found"
        raise InputError(f"no kernel {what} in {len(paths)} file(s)")
    files = tuple(InspectedFile(str(l.path), l.arch, l.archs, l.already_present, l.compiler_messages) for l in loads)
    return Inspection(files, tuple(kernels))
