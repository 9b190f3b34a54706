"""The correctness path: a broken kernel gets a diagnosis of the handoff it breaks, never
performance advice.

Two reports, both frozen dataclasses that `cli/render.py` draws:

- `CorrectnessReport` (exit code 3): compute-sanitizer findings grouped by the handoff of
  a warp-specialized kernel they break (`sanitizer.Handoff`), with the kernels, source
  lines, warps and roles they name, and a worksheet (roles / storage / handoff: producer,
  consumer, barrier, count, phase, fence / lifetime) whose every item says whether it is
  `evidence` (the tool's output says so) or an `assumption` (inferred; check it).
- `DeadlockReport` (exit code 4): where every resident warp of a hung kernel waits
  (cuda-gdb capture mapped onto the SASS, `collectors/cudagdb.py`), grouped by wait
  site, with the role of each group and the likely causes to check.

Roles: compute-sanitizer and cuda-gdb name threads and warps, not roles. A role is
inferred from what the access does (the side that writes a shared stage produces it;
the side that writes the output is the epilogue, usually the consumer's) or from the
warp rank (warp-specialized kernels usually put the producer first, as CUTLASS does):
those are always marked `assumption`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from wsperf.collectors.cudagdb import (
    HangCapture,
    WaitKind,
    map_waits,
    read_cudagdb,
    read_cuobjdump_sass,
    wait_sites,
)
from wsperf.collectors.errors import InputError
from wsperf.collectors.sanitizer import Handoff, SanitizerFinding, SanitizerOutput, is_error
from wsperf.collectors.scope import Scope, finding_scope, vendor_library

if TYPE_CHECKING:  # evidence.py builds on this module's report types
    from wsperf.analyses.evidence import Evidence

# Source lines are shown only from files that look like source, and only this large.
_SOURCE_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".hh", ".cpp", ".cc", ".cxx", ".c", ".py", ".inl"}
_MAX_SOURCE_BYTES = 4 << 20


class Basis(StrEnum):
    """Why an item of a report is believed."""

    EVIDENCE = "evidence"  # a tool's output says so
    ASSUMPTION = "assumption"  # inferred; check it


@dataclass(frozen=True)
class Item:
    """One line of a worksheet or of the likely causes."""

    aspect: str  # roles | storage | handoff.producer | handoff.consumer | handoff.barrier |
    #              handoff.count | handoff.phase | handoff.fence | lifetime | cause
    text: str
    basis: Basis


@dataclass(frozen=True)
class Site:
    """One source line of a kernel where findings of one handoff point."""

    kernel: str | None
    source_file: str | None
    source_line: int | None
    source_text: str | None  # the line itself, when the file is readable here
    access: str | None  # read | write | None (a barrier)
    warps: tuple[int, ...]  # warp ranks in the block (threadIdx.x // 32) the findings name
    role: str | None  # producer | consumer | None: not inferred
    role_basis: Basis
    role_reason: str
    findings: int


@dataclass(frozen=True)
class HandoffGroup:
    """Every finding that breaks one kind of handoff."""

    handoff: Handoff
    tools: tuple[str, ...]
    findings: int
    records: int
    kernels: tuple[str, ...]
    messages: tuple[str, ...]  # distinct messages, as the tool wrote them
    sites: tuple[Site, ...]
    worksheet: tuple[Item, ...]


@dataclass(frozen=True)
class ToolRun:
    """One sanitizer output file and what it held."""

    tool: str | None
    source: str  # the file (bundle-relative in a bundle)
    records: int
    errors: int  # findings that break a handoff or are reported as errors


@dataclass(frozen=True)
class VendorFinding:
    """Findings inside one library kernel (`collectors/vendor.py`): listed, not the user's
    broken handoff, and no stop unless --kernel targets that kernel."""

    library: str
    kernel: str
    tool: str | None
    handoff: str | None  # the classification the finding would have in the user's kernel
    findings: int
    hazards: int  # racecheck's hazard counts summed (0 for other tools)


@dataclass(frozen=True)
class SetAside:
    """Findings that are no error of the user's, counted apart from the handoffs, with the
    sentence that says why (one caveat). Kinds: `filter-artifact` (the sanitizer's own
    kernel filter can cause them: with --kernel-name, initcheck does not see what unchecked
    kernels write, so a host read of that memory is reported as uninitialized, measured on
    the H200), `sass-artifact` (the kept machine code shows them to be no read of the data:
    analyses/handoffs.py, discarded_reads), `toolchain-protocol` (racecheck hazards whose
    two sides are code the compiler generates for its own runtime: analyses/handoffs.py,
    toolchain_protocol)."""

    kind: str
    text: str
    tool: str | None
    kernel: str | None  # the kernel the findings name (None: a host-side read)
    findings: int
    hazards: int  # racecheck's hazard counts summed (0 for other tools)


@dataclass(frozen=True)
class CorrectnessReport:
    runs: tuple[ToolRun, ...]
    groups: tuple[HandoffGroup, ...]
    other_errors: tuple[str, ...]  # errors that break no handoff by themselves (API errors)
    vendor: tuple[VendorFinding, ...] = ()
    set_aside: tuple[SetAside, ...] = ()  # in kind order: filter, then sass, then toolchain
    kernel_filter: str | None = None

    @property
    def broken(self) -> bool:
        return any(r.errors for r in self.runs)

    def _texts(self, kind: str) -> tuple[str, ...]:
        return tuple(a.text for a in self.set_aside if a.kind == kind)

    @property
    def filter_artifacts(self) -> tuple[str, ...]:
        return self._texts("filter-artifact")

    @property
    def sass_artifacts(self) -> tuple[str, ...]:
        return self._texts("sass-artifact")

    @property
    def toolchain_protocol(self) -> tuple[str, ...]:
        return self._texts("toolchain-protocol")


@dataclass(frozen=True)
class WaitGroup:
    """Resident warps that wait at one instruction."""

    function: str
    offset: int
    wait: WaitKind
    instruction: str
    source: str | None  # the kernel's own file:line (the call site of an inlined wait helper)
    inner_source: str | None  # the innermost file:line (the helper's)
    warps: tuple[tuple[tuple[int, int, int], int], ...]  # (block, warp rank in the block)
    role: str | None
    role_basis: Basis
    role_reason: str


@dataclass(frozen=True)
class DeadlockReport:
    hung: str  # what hung, as collect saw it
    kernels: tuple[str, ...]
    resident_warps: int
    groups: tuple[WaitGroup, ...]
    causes: tuple[Item, ...]
    note: str = ""  # why there is no (complete) mapping, when there is none
    capture: str | None = None
    sass: str | None = None
    # The barrier each group waits on, from the worksheet of the generated code
    # (analyses/handoffs.py: WaitHandoff), aligned with `groups`; None where not found.
    handoffs: tuple[Any, ...] = ()
    settle: str = ""  # without the generated code: what would settle the cause


# ---------------------------------------------------------------------------------------
# sanitizer findings -> correctness report


def correctness_report(outputs: Iterable[tuple[str, SanitizerOutput]], kernel_filter: str | None = None,
                       discarded: Callable[[SanitizerFinding], str | None] | None = None,
                       protocol: Callable[[SanitizerFinding], str | None] | None = None) -> CorrectnessReport:
    """Group the findings of `outputs` by the handoff they break. `kernel_filter` is the
    --kernel the sanitizer ran under (a bundle's): a library kernel it names is judged
    like the user's own, and findings only the filter causes are set apart. `discarded`
    says why a finding is no error, from the machine code that ran (None: it is one);
    `protocol`, why it is the compiler's own protocol, from the generated PTX."""
    runs: list[ToolRun] = []
    by_class: dict[Handoff, list[SanitizerFinding]] = {}
    other: list[str] = []
    vendor: dict[tuple[str, str, str | None, str | None], list[SanitizerFinding]] = {}
    # (kind, text) -> [tool, kernel, findings, hazards]: each distinct sentence once
    aside: dict[tuple[str, str], list] = {}

    def set_aside(kind: str, text: str, f: SanitizerFinding, tool: str | None) -> None:
        counts = aside.setdefault((kind, text), [f.tool or tool, f.kernel, 0, 0])
        counts[2] += 1
        counts[3] += f.hazard_count or 0

    for label, out in outputs:
        errors = 0
        for f in out.findings:
            if not is_error(f):
                continue
            why = discarded(f) if discarded is not None else None
            if why is not None:
                set_aside("sass-artifact", why, f, out.tool)
                continue
            why = protocol(f) if protocol is not None else None
            if why is not None:
                set_aside("toolchain-protocol", why, f, out.tool or "racecheck")
                continue
            scope = finding_scope(f, kernel_filter)
            if scope is Scope.VENDOR:
                vendor.setdefault((vendor_library(f.kernel) or "?", f.kernel or "?", f.tool or out.tool,
                                   f.classification.value if f.classification else None), []).append(f)
                continue
            if scope is Scope.FILTER:
                set_aside("filter-artifact", f"{f.tool or out.tool or 'initcheck'}: {f.message}"
                          + (f" ({f.api_call})" if f.api_call else "")
                          + f": under the sanitizer's kernel filter ({kernel_filter}) the kernels left "
                            "unchecked may have written this memory", f, out.tool or "initcheck")
                continue
            if f.classification is not None:
                by_class.setdefault(f.classification, []).append(f)
            else:
                other.append(f"{f.tool or out.tool or 'sanitizer'}: {f.message}")
            errors += 1
        runs.append(ToolRun(out.tool, label, out.records, errors))
    groups = tuple(_group(h, fs) for h, fs in sorted(by_class.items(), key=lambda kv: list(Handoff).index(kv[0])))
    vend = tuple(VendorFinding(lib, k, tool, h, len(fs), sum(f.hazard_count or 0 for f in fs))
                 for (lib, k, tool, h), fs in sorted(vendor.items(), key=lambda kv: (kv[0][0], kv[0][1])))
    order = ("filter-artifact", "sass-artifact", "toolchain-protocol")
    kept = tuple(SetAside(kind, _counted(text, n) if kind != "filter-artifact" else text, tool, kernel, n, h)
                 for (kind, text), (tool, kernel, n, h) in sorted(aside.items(), key=lambda kv: order.index(kv[0][0])))
    return CorrectnessReport(tuple(runs), groups, tuple(dict.fromkeys(other)), vend, kept, kernel_filter)


def _counted(text: str, n: int) -> str:
    """The text with how many findings said it."""
    return f"{text} ({n} finding{'s' if n > 1 else ''})"


def _warp(t: tuple[int, int, int] | None) -> int | None:
    # A warp is 32 consecutive linear thread ids; without blockDim only a thread with
    # y = z = 0 has a known linear id (its x).
    if t is None or t[1] or t[2]:
        return None
    return t[0] // 32


_ROLE_RULES: dict[tuple[Handoff, str | None], tuple[str | None, str]] = {
    (Handoff.RACE, "write"): ("producer", "the side that writes a shared stage is taken as its producer"),
    (Handoff.RACE, "read"): ("consumer", "the side that reads a shared stage is taken as its consumer"),
    (Handoff.OUT_OF_BOUNDS, "write"): ("consumer", "a global write is taken as the epilogue, the consumer's"),
    (Handoff.OUT_OF_BOUNDS, "read"): ("producer", "a global read is taken as a tile load, the producer's"),
    (Handoff.UNINITIALIZED, None): ("producer", "a global read is taken as a tile load, the producer's"),
    (Handoff.UNINITIALIZED, "read"): ("producer", "a global read is taken as a tile load, the producer's"),
}


def _group(h: Handoff, fs: list[SanitizerFinding]) -> HandoffGroup:
    acc: dict[tuple, dict[str, Any]] = {}

    def add(kernel, file, line, access, warp, n):
        key = (kernel, file, line, access)
        a = acc.setdefault(key, {"warps": set(), "n": 0})
        if warp is not None:
            a["warps"].add(warp)
        a["n"] += n

    for f in fs:
        add(f.kernel, f.source_file, f.source_line, f.access, _warp(f.thread), 1)
        if f.other_source_line is not None or f.other_access is not None:
            add(f.kernel, f.other_source_file, f.other_source_line, f.other_access, _warp(f.other_thread), 1)
    sites = []
    for (kernel, file, line, access), a in acc.items():
        role, reason = _ROLE_RULES.get((h, access), (None, "the tool's output does not say which role this is"))
        sites.append(Site(kernel, file, line, _source_text(file, line), access, tuple(sorted(a["warps"])), role,
                          Basis.ASSUMPTION, reason, a["n"]))
    sites.sort(key=lambda s: (-s.findings, s.source_line or 0))
    return HandoffGroup(
        h, tuple(sorted({f.tool for f in fs if f.tool})), len(fs), len({(f.tool, f.record_idx) for f in fs}),
        tuple(sorted({f.kernel for f in fs if f.kernel})),
        tuple(dict.fromkeys(f"{f.message}" + (f" ({f.error_type})" if f.error_type and f.error_type not in f.message
                                               else "") for f in fs))[:5],
        tuple(sites), _worksheet(h, fs, sites))


def _where(sites: Iterable[Site]) -> str:
    parts = []
    for s in sites:
        w = f" (warps {', '.join(map(str, s.warps))})" if s.warps else ""
        parts.append(f"{Path(s.source_file).name if s.source_file else '?'}:{s.source_line or '?'}{w}")
    return ", ".join(dict.fromkeys(parts)) or "no source line in the output"


def _worksheet(h: Handoff, fs: list[SanitizerFinding], sites: list[Site]) -> tuple[Item, ...]:
    E, A = Basis.EVIDENCE, Basis.ASSUMPTION
    writes = [s for s in sites if s.access == "write"]
    reads = [s for s in sites if s.access == "read"]
    space = next((f.memory_space for f in fs if f.memory_space), "memory")
    if h is Handoff.RACE:
        hazards = sum(f.hazard_count or 0 for f in fs)
        return (
            Item("roles", f"writers at {_where(writes)}; readers at {_where(reads)}", E),
            Item("roles", "the writers are the producer and the readers the consumer of the stage", A),
            Item("storage", f"{space} written and read with no ordering between the two sides "
                            f"({hazards:,} hazards in the records kept)", E),
            Item("handoff.producer", "the producer's writes into a stage must wait for the consumers' release "
                                     "(the 'empty' barrier) of that stage", A),
            Item("handoff.consumer", "the consumers must release the stage only after their last read of it: an "
                                     "arrive on 'empty' before the reads lets the producer overwrite them", A),
            Item("handoff.barrier", "racecheck names the accesses, not the barrier: find the arrive/wait pair that "
                                    "should order these lines", A),
            Item("handoff.phase", "check the parity each wait passes for this use of the stage", A),
            Item("handoff.fence", "a generic-proxy write read by TMA/wgmma (async proxy) also needs "
                                  "fence.proxy.async", A),
            Item("lifetime", "the stage is reused (overwritten) while a previous use is still being read", A),
        )
    if h is Handoff.OUT_OF_BOUNDS:
        f0 = fs[0]
        who = f"block {f0.block}, thread {f0.thread}" if f0.block else "a thread"
        return (
            Item("roles", f"{_where(sites)}: {who}", E),
            Item("roles", "; ".join(f"{s.access or 'access'} at line {s.source_line}: {s.role} ({s.role_reason})"
                                    for s in sites if s.role) or "the role is not inferred", A),
            Item("storage", f"{space} access of {f0.access_size or '?'} bytes at {f0.address:#x} outside "
                            "its allocation" if f0.address else f"{space} access outside its allocation", E),
            Item("handoff.count", "the tile or buffer bound: a guard like `i <= n` where `i < n` belongs, or a "
                                  "partial last tile copied or stored whole", A),
            Item("lifetime", "the buffer is smaller than the grid's tiles cover", A),
        )
    if h is Handoff.UNINITIALIZED:
        return (
            Item("roles", f"readers at {_where(sites)}", E),
            Item("roles", "the reader is the producer loading its inputs", A),
            Item("storage", f"{len(fs)} reads of {space} nothing wrote", E),
            Item("handoff.producer", "whatever should have written this data (a host upload, a memset, an "
                                     "earlier kernel) did not run before the kernel", A),
            Item("lifetime", "the data is read before its producer's write", A),
        )
    # BARRIER
    kinds = sorted({f.error_type or f.message for f in fs})
    return (
        Item("roles", f"threads at {_where(sites)}", E),
        Item("handoff.barrier", f"synccheck: {'; '.join(kinds)}", E),
        Item("handoff.barrier", "a block barrier (__syncthreads / bar.sync) written inside one role's branch: "
                                "every thread of the block must reach the same barrier instruction", A),
        Item("handoff.count", "a named barrier's thread count must equal the threads of every role that "
                              "reach it", A),
        Item("lifetime", "teardown (mbarrier.inval, smem reuse) must follow a barrier all roles reach", A),
    )


def _source_text(file: str | None, line: int | None) -> str | None:
    if not file or not line or Path(file).suffix not in _SOURCE_SUFFIXES:
        return None
    try:
        p = Path(file)
        if not p.is_file() or p.stat().st_size > _MAX_SOURCE_BYTES:
            return None
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else None


# ---------------------------------------------------------------------------------------
# hang -> deadlock report


def deadlock_report(ev: "Evidence") -> DeadlockReport:
    """Where the warps of the hung kernel wait. Without a capture (cuda-gdb absent or
    failed) the report says so and lists what can still be checked."""
    run = ev.hang
    hung = (f"`{' '.join(run.argv)}` was still running at the time limit ({run.phase} phase) and was killed"
            if run is not None and run.timed_out else "the repro hung")
    if ev.capture is None:
        note = "no cuda-gdb capture in the bundle (cuda-gdb missing, or it could not attach)" + (
            f"; the run: {run.note}" if run is not None and run.note else "")
        return DeadlockReport(hung, (), 0, (), _causes([]), note)
    try:
        capture: HangCapture = read_cudagdb(ev.capture)
    except InputError as e:  # a damaged capture is still a hang: say so, keep exit 4
        return DeadlockReport(hung, (), 0, (), _causes([]), str(e), str(ev.capture))
    kernels = tuple(k.invocation for k in capture.kernels)
    if ev.sass is None:
        return DeadlockReport(hung, kernels, capture.resident_warps(), (), _causes([]),
                              "no SASS of the repro in the bundle: the warps' PCs are not mapped", str(ev.capture))
    try:
        waits = map_waits(capture, read_cuobjdump_sass(ev.sass))
    except InputError as e:
        return DeadlockReport(hung, kernels, capture.resident_warps(), (), _causes([]), str(e), str(ev.capture),
                              str(ev.sass))
    sites = wait_sites(waits)
    groups = []
    ranks = [frozenset(w.warp_in_block for w in s.warps) for s in sites]
    disjoint = len(sites) > 1 and sum(len(r) for r in ranks) == len(frozenset().union(*ranks))
    lowest = min(min(r) for r in ranks) if ranks else 0
    for s, r in zip(sites, ranks):
        if disjoint:
            role = "producer" if lowest in r else "consumer"
            reason = ("warps of each group are disjoint; the group holding the block's lowest warp is taken as the "
                      "producer (CUTLASS-style kernels put it first)")
        else:
            role, reason = None, "warps of several roles wait here, or only one site: no role inferred"
        first = s.warps[0]
        src = f"{first.call_file}:{first.call_line}" if first.call_line else (
            f"{first.source_file}:{first.source_line}" if first.source_line else None)
        inner = f"{first.source_file}:{first.source_line}" if first.source_line else None
        groups.append(WaitGroup(s.function, s.offset, s.wait, s.instruction.text, src, inner,
                                tuple((w.block, w.warp_in_block) for w in s.warps), role, Basis.ASSUMPTION, reason))
    return DeadlockReport(hung, kernels, capture.resident_warps(), tuple(groups), _causes(groups), "",
                          str(ev.capture), str(ev.sass))


def _causes(groups: list[WaitGroup]) -> tuple[Item, ...]:
    E, A = Basis.EVIDENCE, Basis.ASSUMPTION
    out: list[Item] = []
    mbar = [g for g in groups if g.wait is WaitKind.MBARRIER]
    bar = [g for g in groups if g.wait is WaitKind.BLOCK_BARRIER]
    idle = [g for g in groups if g.wait is WaitKind.NONE]
    if groups and not idle:
        out.append(Item("cause", "every resident warp waits; none can make the progress another waits for", E))
    if len(mbar) > 1:
        out.append(Item("cause", f"the roles wait on {len(mbar)} different mbarriers: each waits for an arrival "
                                 "the other makes only after its own wait completes", E))
    if bar and (mbar or idle):
        out.append(Item("cause", "some warps sit at a block barrier while others are elsewhere: a "
                                 "__syncthreads / bar.sync inside one role's branch, or a named barrier whose count "
                                 "includes warps that never reach it", E))
    out += [
        Item("handoff.count", "arrival count: mbarrier.init's count must equal the arrivals of one phase (threads "
                              "that arrive, or 1 for an elected arrive.expect_tx); a count of the other role's size "
                              "never completes", A),
        Item("handoff.phase", "phase parity: use k of a stage waits for parity (k / STAGES) & 1; the producer's first "
                              "waits on 'empty' must pass at once (parity 1 on a fresh barrier)", A),
        Item("handoff.fence", "init: mbarrier.init must be made visible (fence.mbarrier_init, then a block or "
                              "cluster barrier) before any role waits", A),
        Item("handoff.barrier", "a collective (__syncthreads, cluster sync, elect/warp sync) inside a role branch "
                                "that the other role never reaches", A),
    ]
    if idle:
        out.append(Item("cause", "warps not at a barrier wait: they may spin in a software loop (a flag in "
                                 "memory, a missing volatile/acquire)", A))
    return tuple(out)

