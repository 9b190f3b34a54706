"""The joined evidence path: the handoff worksheet of the code that ran, tied to what the
tools saw.

- `sheets(generated)` fills the worksheet (analyses/worksheet.py) from the generated code
  a bundle keeps (collectors/generated.py) or `--source` files, and keeps each kernel's
  PTX with the source line of every PTX line (`.loc`, present when the code was built
  with -lineinfo or -G; `.cu` files are compiled with -lineinfo here).
- `store_sheets(con, sheets)` writes the barriers, arrivals, waits and flags as tables
  (queries/worksheet_schema.sql), so SQL can join them with hang captures, sanitizer
  findings and profiles.
- `wait_handoff(sheets, group)` finds the barrier a hung warp group waits on: the SASS
  wait's source line (cuda-gdb's `info line *$pc`: the inlined helper's line and its
  call site) against the `.loc` of each PTX wait.
- `releases(sheets)` classifies how each role releases a stage it read (the racecheck
  question): per thread, one lane after `bar.warp.sync` (valid under the PTX memory
  model; racecheck reports it), one lane without it (a real race), or after waiting for
  async-proxy reads (wgmma / TMA store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable

from wsperf.analyses.correctness import (Basis, CorrectnessReport, DeadlockReport, Item, ToolRun, correctness_report,
                                         deadlock_report)
from wsperf.analyses.worksheet import analyse
from wsperf.analyses.worksheet_model import Barrier, KernelSheet, Wait, phase_arrivals
from wsperf.collectors.bundle import Bundle, read_bundle, resolve
from wsperf.collectors.cudagdb import WaitKind
from wsperf.collectors.cubin import Cubin, Disassembly, find_cubins, functions
from wsperf.collectors.errors import InputError, WsperfError
from wsperf.collectors.files import find_binary
from wsperf.collectors.sanitizer import Handoff, SanitizerFinding
from wsperf.collectors.scope import SanitizerScope
from wsperf.collectors.ptx import parse, read_ptx
from wsperf.queries import read_query

SCHEMA = "worksheet_schema.sql"
# Generated files the worksheet reads, by the kind collect records (collectors/generated.py).
_READABLE = ("ptx", "cu", "cubin", "binary")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")


@dataclass(frozen=True)
class Loc:
    """The source line a PTX line came from, and the call it was inlined at."""

    file: str
    line: int
    call_file: str | None = None
    call_line: int | None = None

    def __str__(self) -> str:
        call = f" (inlined at {PurePath(self.call_file).name}:{self.call_line})" if self.call_file else ""
        return f"{PurePath(self.file).name}:{self.line}{call}"


@dataclass(frozen=True)
class GeneratedSheet:
    """A kernel's worksheet and the PTX it was read from."""

    sheet: KernelSheet
    origin: str  # the file (bundle-relative when from a bundle) and how it was read
    locations: dict[int, Loc]  # PTX line -> source line
    text: str  # the PTX module the sheet was read from

    def loc(self, ptx_line: int) -> Loc | None:
        return self.locations.get(ptx_line)


def ptx_locations(text: str) -> dict[int, Loc]:
    """Every PTX line after a `.loc` directive mapped to that source line (1-based
    line numbers, as the worksheet's sites give them)."""
    files = {int(n): path for n, path in _FILE.findall(text)}
    out: dict[int, Loc] = {}
    cur: Loc | None = None
    for no, line in enumerate(text.split("\n"), 1):
        s = line.lstrip()
        if s.startswith(".loc"):
            m = _LOC.match(s)
            if m:
                cf = files.get(int(m.group(3))) if m.group(3) else None
                cur = Loc(files.get(int(m.group(1)), f"file{m.group(1)}"), int(m.group(2)), cf,
                          int(m.group(4)) if m.group(4) else None)
            continue
        if s.startswith((".entry", ".visible", ".func")):
            cur = None
        if cur is not None:
            out[no] = cur
    return out


def sheets(generated: Iterable[tuple[str, Path]], root: Path | None = None) -> tuple[list[GeneratedSheet], list[str]]:
    """Worksheets of every kernel in the readable generated files; what could not be read."""
    out: list[GeneratedSheet] = []
    problems: list[str] = []
    seen: set[str] = set()
    for kind, path in generated:
        if kind not in _READABLE:
            continue
        shown = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)
        try:
            modules = read_ptx(path)
        except WsperfError as e:
            problems.append(f"{shown}: {e}")
            continue
        for label, text in modules:
            try:
                entries = parse(text)
            except InputError as e:
                problems.append(f"{shown}: {e}")
                continue
            locs = ptx_locations(text)
            for e in entries:
                if e.name in seen:  # the same kernel from the binary and from --source: the first kept
                    continue
                seen.add(e.name)
                out.append(GeneratedSheet(analyse(e, label), shown, locs, text))
    return out, problems


# ---------------------------------------------------------------------------------------
# a hung warp group -> its barrier


@dataclass(frozen=True)
class WaitHandoff:
    """The barrier a group of hung warps waits on, read from the worksheet."""

    kernel: str
    barrier: str
    role: str  # the worksheet's role of the waiting code (evidence: read from the PTX)
    parity: str | None
    ptx_line: int
    source: str  # the PTX wait's source line
    init_counts: tuple[int | None, ...]
    arrivals_per_phase: int | None  # what one phase gets from all arriving roles (None: not derived)
    arrivers: tuple[str, ...]  # "<kind> by <role>, N thread(s) (line L)"
    flags: tuple[str, ...]  # worksheet flags on this barrier
    origin: str
    # How the hung warps were tied to this wait: their source line (`.loc`), the SASS wait's
    # shared-memory offset against the PTX's, or (an assumption) the kernel's only flagged barrier.
    join: str = "source line"
    join_basis: Basis = Basis.EVIDENCE


def _name(path: str | None) -> str | None:
    return PurePath(path).name if path else None


def _split(where: str | None) -> tuple[str | None, int | None]:
    if not where or ":" not in where:
        return None, None
    f, _, ln = where.rpartition(":")
    return _name(f), int(ln) if ln.isdigit() else None


def wait_handoff(gs: list[GeneratedSheet], function: str, inner_source: str | None,
                 call_source: str | None) -> WaitHandoff | None:
    """The worksheet barrier whose PTX wait has the SASS wait's source line. `function`
    is the kernel (mangled, as cuda-gdb names it); `inner_source` the innermost file:line
    of the waiting PC; `call_source` the kernel's own line that led there."""
    ifile, iline = _split(inner_source)
    cfile, cline = _split(call_source)
    if iline is None and cline is None:
        return None
    for g in gs:
        if g.sheet.kernel != function:
            continue
        hits: list[tuple[int, Barrier, Wait]] = []
        for b in g.sheet.barriers:
            for w in b.waiters:
                loc = g.loc(w.site.line)
                if loc is None:
                    continue
                score = 0
                if iline is not None and (_name(loc.file), loc.line) == (ifile, iline):
                    score += 1
                    if cline is not None and (_name(loc.call_file), loc.call_line) == (cfile, cline):
                        score += 2
                elif cline is not None and (_name(loc.file), loc.line) == (cfile, cline):
                    score += 2  # no inlining: the kernel's own line
                if score:
                    hits.append((score, b, w))
        if not hits:
            continue
        best = max(s for s, _, _ in hits)
        found = {(b.name, w.site.line): (b, w) for s, b, w in hits if s == best}
        if len(found) != 1 and best < 2:
            continue  # the helper's line alone names several waits: not decided
        b, w = next(iter(found.values()))
        return _handoff(g, b, w)
    return None


# The shared-memory operand of a SASS barrier instruction: [UR16+0xc060], [R5+0x8], [0x40].
_SASS_SMEM = re.compile(r"\[([^\]]*)\]")
_EXTERN_SHARED = re.compile(r"^\s*\.extern\s+\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)\s*\[\s*\]", re.M)
_STATIC_SHARED = re.compile(r"^\s*(?:\.visible\s+|\.global\s+)?\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+[\w$]+\s*\[",
                            re.M)


def sass_offset(instruction: str) -> tuple[int, bool] | None:
    """The byte offset in a SASS barrier instruction's shared-memory operand, and whether
    a register adds to it ([UR16+0xc060], [R35+URZ+0xc040]: the register may hold a stage's
    offset, or more); None when it has no such operand."""
    if not instruction or "SYNCS" not in instruction:
        return None
    m = _SASS_SMEM.search(instruction)
    if m is None:
        return None
    off, reg = 0, False
    for part in (x.strip() for x in m.group(1).split("+")):
        if re.fullmatch(r"-?0x[0-9a-fA-F]+", part):
            off += int(part, 16)
        elif re.fullmatch(r"U?R\d+(?:\.\w+)*", part):
            reg = True
        elif part not in ("RZ", "URZ"):
            return None
    return off, reg


def _dynamic_base(text: str) -> set[str]:
    """The module's `.extern .shared` symbols whose offset 0 is the start of the CTA's
    shared window as SASS addresses it: only when the module declares no static shared
    variable (ptxas places those first). Measured on the H200 with Triton 3.6: the
    mbarrier inits of `global_smem+49216` are `SYNCS.EXCH.64 [UR8+0xc040]` in the cubin."""
    if _STATIC_SHARED.search(text):
        return set()
    return set(_EXTERN_SHARED.findall(text))


def unlined_handoff(gs: list[GeneratedSheet], function: str, instruction: str, mbarrier: bool) -> WaitHandoff | None:
    """The worksheet wait of hung warps whose code has no line info: by the SASS wait's
    shared-memory offset against the barriers of the kernel's dynamic shared memory
    (evidence), else the kernel's only barrier a worksheet flag names (an assumption:
    which barrier the warps wait on is not read)."""
    for g in gs:
        if g.sheet.kernel != function:
            continue
        found = sass_offset(instruction)
        base = _dynamic_base(g.text)
        if found is not None and base:
            off, reg = found
            hits = [(b, w) for b in g.sheet.barriers if b.slots and b.name.split("+", 1)[0] in base
                    and min(b.slots) <= off <= max(b.slots) for w in b.waiters]
            if hits and len({b.name for b, _ in hits}) == 1 and len({w.parity for _, w in hits}) == 1:
                b, w = hits[0]
                sym = b.name.split("+", 1)[0]
                if reg:  # a register adds to the offset: the array is the likely one, not a certainty
                    return replace(_handoff(g, b, w), join=f"the SASS wait's offset {off:#x} ({sym}+{off}) lies "
                                   f"in this array's slots; a register adds to it, so the array is inferred (no "
                                   f"line info)", join_basis=Basis.ASSUMPTION)
                return replace(_handoff(g, b, w), join=f"the SASS wait's address {off:#x} is {sym}+{off} in the "
                                                       "PTX (no line info)")
        flagged = [b for b in g.sheet.barriers if b.waiters and any(
            f.basis is Basis.EVIDENCE and f.text.startswith(f"{b.name}:") for f in g.sheet.flags)]
        if len(flagged) == 1 and mbarrier:
            b = flagged[0]
            return replace(_handoff(g, b, b.waiters[0]), join=f"the only barrier of {function} a worksheet flag "
                                                              "names (no line info: the waiting PC is not tied "
                                                              "to it)", join_basis=Basis.ASSUMPTION)
    return None


_ROLE_BRANCH = re.compile(r"inside a role branch \((.+?), (\d+) of (\d+) threads\)")


def block_barrier_cause(gs: list[GeneratedSheet], group: Any) -> tuple[Item, str | None] | None:
    """The worksheet's flag 3 (a CTA-wide barrier inside one role's branch) that hung warps
    sitting at a block barrier are at: by the waiting PC's source line against the flag's PTX
    line (evidence), else the kernel's only such flag when neither side has line info (an
    assumption). With the role the flag names, for the wait group."""
    ifile, iline = _split(group.inner_source)
    cfile, cline = _split(group.source)
    for g in gs:
        if g.sheet.kernel != group.function:
            continue
        flags = [f for f in g.sheet.flags if f.code == 3 and f.basis is Basis.EVIDENCE]
        hits = []
        for f in flags:
            m = re.match(r"line (\d+):", f.text)
            loc = g.loc(int(m.group(1))) if m else None
            if loc is not None and ((iline is not None and (_name(loc.file), loc.line) == (ifile, iline))
                                    or (cline is not None and (_name(loc.file), loc.line) == (cfile, cline))):
                hits.append(f)
        basis, join = Basis.EVIDENCE, "its source line"
        if not hits and len(flags) == 1 and iline is None and cline is None:
            hits, basis, join = flags, Basis.ASSUMPTION, "the kernel's only such flag (no line info)"
        if len(hits) != 1:
            continue
        f = hits[0]
        role = _ROLE_BRANCH.search(f.text)
        where = group.source or group.inner_source or f"{group.function}+{group.offset:#x}"
        text = (f"{len(group.warps)} warp(s) sit at {group.instruction} ({where}), a block barrier, while the other "
                f"warps are elsewhere: the worksheet's flag 3, joined by {join}: {f.text}")
        return Item("cause", text, basis), (role.group(1) if role else None)
    return None


def _handoff(g: GeneratedSheet, b: Barrier, w: Wait) -> WaitHandoff:
    arrivers = [f"{a.kind} by {a.site.role}, {a.site.threads if a.site.threads is not None else '?'} "
                f"thread(s) (PTX line {a.site.line}" + (f", {g.loc(a.site.line)}" if g.loc(a.site.line) else "") + ")"
                for a in b.arrivers]
    pops = phase_arrivals(b)  # counted as the count flag counts them (worksheet_flags)
    per_phase = None if not pops or any(v is None for v in pops.values()) else sum(v for v in pops.values() if v)
    flags = tuple(f.text for f in g.sheet.flags if f.text.startswith(f"{b.name}:"))
    loc = g.loc(w.site.line)
    return WaitHandoff(g.sheet.kernel, b.name, w.site.role, w.parity, w.site.line, str(loc) if loc else "?",
                       tuple(c for _, c in b.inits), per_phase, tuple(dict.fromkeys(arrivers)), flags, g.origin)


def deadlock_causes(handoffs: list[tuple[str, str, WaitHandoff]]) -> list[Item]:
    """Causes read from the joined evidence: (who waits, where, their barrier's sheet)."""
    E = Basis.EVIDENCE
    out: list[Item] = []
    for who, where, h in handoffs:
        counts = sorted({c for c in h.init_counts if c is not None})
        joined = "" if h.join == "source line" else f" (joined by {h.join})"
        if h.flags:
            for f in h.flags:
                out.append(Item("cause", f"{who} wait at {where} on {h.barrier}: {f.split(': ', 1)[-1]}{joined}",
                                h.join_basis))
        elif counts and h.arrivals_per_phase is not None and h.arrivals_per_phase < min(counts):
            out.append(Item("cause", f"{who} wait at {where} on {h.barrier}, initialized with count "
                                     f"{min(counts)} that gets {h.arrivals_per_phase} arrival(s) per phase: no phase "
                                     f"completes; init with {h.arrivals_per_phase}{joined}", h.join_basis))
    # A cycle: each group waits on a barrier that only the other waiting groups arrive on.
    waiting_roles = {h.role for _, _, h in handoffs}
    if len(handoffs) > 1 and not any(i.aspect == "cause" for i in out):
        blocked = []
        for who, where, h in handoffs:
            by = {a.split(" by ", 1)[1].split(",", 1)[0] for a in h.arrivers if " by " in a}
            if by and by <= waiting_roles:
                blocked.append(f"{who} wait on {h.barrier} (parity {h.parity or '?'}, {where}), which only "
                               f"{', '.join(sorted(by))} arrive(s) on")
        if len(blocked) == len(handoffs):
            joins = [f"{h.barrier} by {h.join}" for _, _, h in handoffs if h.join != "source line"]
            basis = Basis.ASSUMPTION if any(h.join_basis is Basis.ASSUMPTION for _, _, h in handoffs) else E
            out.append(Item("cause", "; ".join(blocked) + ": every arriver is itself waiting, so no phase can "
                                     "complete. With matching counts this is the phase: check the parity of each "
                                     "role's first wait (a producer's first wait on a fresh 'empty' barrier must "
                                     "pass at once: parity 1)" + (f" (joined: {'; '.join(joins)})" if joins else ""),
                            basis))
    return out


# ---------------------------------------------------------------------------------------
# how a role releases a stage it read


class Release(StrEnum):
    PER_THREAD = "per-thread-release"  # every reading thread arrives
    WARP_SYNCED = "warp-synced-single-lane-release"  # bar.warp.sync, then one lane arrives: valid; racecheck reports it
    UNSYNCED = "unsynced-single-lane-release"  # one lane arrives with no warp sync: a real race
    ASYNC_PROXY = "async-proxy-read"  # wgmma/TMA reads waited for before the arrive
    EARLY = "release-before-reads"  # the role arrives, then still reads the stage: a real race
    UNSURE = "single-lane-release-unsure"  # SASS only: one lane arrives, a NOP where a __syncwarp may have been


ACCEPTABLE = (Release.WARP_SYNCED.value,)
_WARP_SYNC = re.compile(r"^\s*(@\S+\s+)?bar\.warp\.sync\b")
# What reads a stage: generic loads, matrix loads and MMAs from shared memory, and bulk
# copies out of it (a TMA store).
_READS = re.compile(r"^\s*(@\S+\s+)?(ld\.shared|ldmatrix|ld\.volatile\.shared|wgmma\.mma_async|tcgen05\.mma|"
                    r"cp\.async\.bulk(\.tensor)?\.\w*global\.shared)")
_ASYNC_WAIT = re.compile(r"^\s*(@\S+\s+)?(wgmma\.wait_group|cp\.async\.bulk\.wait_group\.read|"
                         r"tcgen05\.wait::ld|cp\.async\.bulk\.wait_group)\b")


@dataclass(frozen=True)
class ReleaseClass:
    kernel: str
    barrier: str  # the barrier the role releases the stage on (its 'empty')
    role: str
    release: Release
    arrive_line: int  # PTX line
    source: str | None
    evidence: str  # what in the PTX decided it
    check: str  # a falsifiable experiment


def releases(gs: list[GeneratedSheet]) -> list[ReleaseClass]:
    """The release class of every barrier a role arrives on after waiting on another
    barrier (a consumer's 'empty' after its 'full'), from the PTX between that wait and
    the arrive."""
    out = []
    for g in gs:
        ptx = g.text.split("\n")
        for b in g.sheet.barriers:
            for a in b.arrivers:
                if a.kind != "arrive" or a.site.via:
                    continue
                role = a.site.role
                # the same role's waits elsewhere: what it read the stage after
                waits = [w for o in g.sheet.barriers if o is not b for w in o.waiters if w.site.role == role
                         and w.site.line < a.site.line]
                if not waits:
                    continue
                w = max(waits, key=lambda x: x.site.line)
                later = [x.site.line for o in g.sheet.barriers for x in o.waiters
                         if x.site.role == role and x.site.line > a.site.line]
                between = ptx[w.site.line:a.site.line - 1]
                after = _until_back_edge(ptx, a.site.line, min(later) if later else None)
                reads_before, reads_after = any(_READS.match(x) for x in between), any(_READS.match(x) for x in after)
                if not (reads_before or reads_after):
                    continue  # the role wrote the stage (a producer's release): not the racecheck question
                role_threads = w.site.threads
                loc = g.loc(a.site.line)
                where = f"PTX lines {w.site.line}-{a.site.line}"
                if reads_after:
                    kind, ev = Release.EARLY, (f"PTX line {a.site.line}: {role} arrives on {b.name}, then reads the "
                                               "stage again before its next wait")
                elif any(_ASYNC_WAIT.match(x) for x in between):
                    kind, ev = Release.ASYNC_PROXY, f"{where}: the async-proxy reads are waited for before the arrive"
                elif a.site.threads is None or role_threads is None:
                    continue
                elif a.site.threads >= role_threads:
                    kind, ev = Release.PER_THREAD, f"{where}: all {a.site.threads} threads of {role} arrive"
                elif any(_WARP_SYNC.match(x) for x in between):
                    kind, ev = Release.WARP_SYNCED, (f"{where}: bar.warp.sync, then {a.site.threads} of "
                                                     f"{role_threads} threads arrive (one lane per warp)")
                else:
                    kind, ev = Release.UNSYNCED, (f"{where}: {a.site.threads} of {role_threads} threads arrive "
                                                  "with no bar.warp.sync between the reads and the arrive")
                out.append(ReleaseClass(g.sheet.kernel, b.name, role, kind, a.site.line, str(loc) if loc else None,
                                        ev, _CHECK[kind].format(n=role_threads or "N")))
    return out


_LABEL_DEF = re.compile(r"^\s*([$\w]+):")
_BRA = re.compile(r"^\s*(@!?%?\w+\s+)?bra(\.uni)?\s+([$\w]+)\s*;")
_END = re.compile(r"^\s*(ret|exit)\s*;")


def _until_back_edge(ptx: list[str], start: int, stop: int | None) -> list[str]:
    """The PTX lines after line `start` (1-based) up to the role's next wait (`stop`),
    the loop's back edge (a branch to a label at or before `start`) or the end of the
    kernel, whichever comes first: what the role executes after its arrive in that use
    of the stage."""
    labels = {m.group(1): i + 1 for i, x in enumerate(ptx) if (m := _LABEL_DEF.match(x))}
    out = []
    for no in range(start + 1, min(len(ptx), (stop or len(ptx) + 1) - 1) + 1):
        x = ptx[no - 1]
        m = _BRA.match(x)
        if (m and labels.get(m.group(3), no + 1) <= start) or _END.match(x):
            break
        out.append(x)
    return out


_CHECK = {
    Release.EARLY: "move the arrive after the role's last read of the stage: the hazards must vanish",
    Release.WARP_SYNCED: "rebuild with every reading thread arriving (mbarrier.init count = {n}, each thread "
                         "arrives after its last read, no __syncwarp needed): racecheck's hazards on this stage must "
                         "vanish; if they do, the one-lane release was only beyond racecheck's model",
    Release.UNSYNCED: "put __syncwarp() (bar.warp.sync) between the warp's last read of the stage and the one lane's "
                      "arrive, or let every thread arrive (count = {n}): the hazards must vanish",
    Release.PER_THREAD: "every reader arrives: a remaining hazard is a missing wait or a wrong parity on the "
                        "producer's side",
    Release.ASYNC_PROXY: "the reads are async-proxy (wgmma/TMA): check the wait_group count before the arrive",
    Release.UNSURE: "rebuild with the PTX embedded (-gencode arch=compute_90a,code=[sm_90a,compute_90a]) or give "
                    "--source: the PTX says whether bar.warp.sync orders the lanes' reads before the one lane's "
                    "arrive; or let every thread arrive (count = {n}): the hazards must vanish",
}


# ---------------------------------------------------------------------------------------
# the store


def store_sheets(con: Any, gs: list[GeneratedSheet]) -> None:
    """Write the worksheets into ws_barriers / ws_arrivals / ws_waits / ws_flags
    (queries/worksheet_schema.sql), replacing earlier rows of the same kernels."""
    con.execute(read_query(SCHEMA.removesuffix(".sql")))
    for g in gs:
        k = g.sheet.kernel
        for t in ("ws_barriers", "ws_arrivals", "ws_waits", "ws_flags"):
            con.execute(f"DELETE FROM {t} WHERE kernel = ?", [k])
        for b in g.sheet.barriers:
            counts = [c for _, c in b.inits]
            con.execute("INSERT INTO ws_barriers VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [k, b.name, counts[0] if len(set(counts)) == 1 and counts else None,
                         b.inits[0][0].line if b.inits else None, b.decided, list(b.slots), g.origin])
            for a in b.arrivers:
                loc = g.loc(a.site.line)
                con.execute("INSERT INTO ws_arrivals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [k, b.name, a.site.role, a.site.threads, a.kind, a.arrivals, a.tx_bytes, a.site.line,
                             loc.file if loc else None, loc.line if loc else None])
            for w in b.waiters:
                loc = g.loc(w.site.line)
                con.execute("INSERT INTO ws_waits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [k, b.name, w.site.role, w.site.threads, w.parity, w.site.line,
                             loc.file if loc else None, loc.line if loc else None,
                             loc.call_file if loc else None, loc.call_line if loc else None])
        for f in g.sheet.flags:
            con.execute("INSERT INTO ws_flags VALUES (?, ?, ?, ?, ?, ?)",
                        [k, f.code, f.name, f.text, f.basis.value, f.line])


_READ_LABEL = re.compile(r"^(?P<kernel>[^:]+):(?P<barrier>.+)\[(?P<slot>\d+)\]$")


def store_mbarrier_words(con: Any, path: Path, gs: list[GeneratedSheet]) -> int:
    """Write the barrier words of a hang capture into ws_mbarrier_words, and the hung warps'
    waits read from their registers into ws_live_waits; how many words."""
    from wsperf.collectors.mbarrier import decode, parse_reads, parse_waits

    with open(path, "rb") as f:
        text = f.read(8 << 20).decode("utf-8", "replace")
    reads = parse_reads(text)
    waits = []
    for lw, r in _joined_waits(reads, parse_waits(text)):
        m = _READ_LABEL.match(r.label) if r is not None else None
        q = decode(r.word).phase_parity if r is not None and r.word is not None else None
        waits.append([m["kernel"] if m else None, m["barrier"] if m else None, int(m["slot"]) if m else None,
                      *lw.block, lw.warp, lw.offset, lw.instruction, lw.address, lw.parity, q,
                      None if q is None or lw.parity is None else q != lw.parity])
    con.execute(read_query(SCHEMA.removesuffix(".sql")))
    con.execute("DELETE FROM ws_live_waits")
    if waits:
        con.executemany("INSERT INTO ws_live_waits VALUES (" + ", ".join("?" * 13) + ")", waits)
    inits = {(g.sheet.kernel, b.name): {c for _, c in b.inits if c is not None} for g in gs for b in g.sheet.barriers}
    rows = []
    for r in reads:
        m = _READ_LABEL.match(r.label)
        if m is None:
            continue
        d = decode(r.word) if r.word is not None else None
        ok = d is not None and d.expected in inits.get((m["kernel"], m["barrier"]), set())
        rows.append([m["kernel"], m["barrier"], int(m["slot"]), *r.block, r.address, r.word,
                     d.phase_parity if d else None, d.expected if d else None, d.pending_arrivals if d else None,
                     d.pending_tx if d else None, ok])
    con.execute("DELETE FROM ws_mbarrier_words WHERE kernel IN (SELECT UNNEST(?))", [sorted({r[0] for r in rows})])
    if rows:
        con.executemany("INSERT INTO ws_mbarrier_words VALUES (" + ", ".join("?" * 13) + ")", rows)
    return len(rows)


# ---------------------------------------------------------------------------------------
# the reports, joined


def deadlock(ev: Any) -> DeadlockReport:
    """The deadlock report of `ev` (analyses.evidence.Evidence) with each wait group tied
    to its barrier in the worksheet: roles read from the PTX (evidence), and the cause a
    worksheet flag or the barrier's counts give, first. The generic causes stay, as
    assumptions, only where no evidence decides."""
    rep = deadlock_report(ev)
    if not rep.groups:
        return rep
    gs = list(ev.sheets)
    if not gs:
        kernels = ", ".join(dict.fromkeys(g.function for g in rep.groups))
        settle = (f"no generated code of {kernels} in the bundle, so the barrier each group waits on, its init "
                  "count and its arrivals are not known: give the kernel's PTX or source "
                  "(`wsperf analyze BUNDLE --source kernel.cu`, or `wsperf collect --source ...`), or rebuild with "
                  "PTX embedded (-gencode arch=compute_90a,code=[sm_90a,compute_90a]) and -lineinfo")
        return replace(rep, settle=settle)
    found = [wait_handoff(gs, g.function, g.inner_source, g.source)
             or (unlined_handoff(gs, g.function, g.instruction, g.wait is WaitKind.MBARRIER)
                 if not (g.inner_source or g.source) else None)
             for g in rep.groups]
    groups = []
    joined = []
    for g, h in zip(rep.groups, found):
        if h is None:
            groups.append(g)
            continue
        role = h.role.split(" (", 1)[0]
        groups.append(replace(g, role=role, role_basis=h.join_basis,
                              role_reason=f"the PTX wait at line {h.ptx_line} ({h.source}) is in the worksheet's "
                                          f"role {h.role}" + ("" if h.join == "source line" else f"; joined by {h.join}")))
        who = f"{role}s ({h.role.split(' (', 1)[1].rstrip(')')})" if " (" in h.role else h.role
        joined.append((who, g.source or (h.source if h.source != "?" else f"{g.function}+{g.offset:#x}"), h))
    causes = deadlock_causes(joined)
    text, unread = _capture_text(ev)
    live, bad = live_states(text, found) if text is not None else ([], [])
    unread += bad
    causes = live + (live_waits(text, found) if text is not None else []) + causes
    # Warps at a block barrier inside one role: the worksheet's flag 3 names it, first.
    barred = []
    for k, g in enumerate(groups):
        hit = block_barrier_cause(gs, g) if g.wait is WaitKind.BLOCK_BARRIER else None
        if hit is None:
            continue
        item, role = hit
        barred.append(item)
        if role is not None and item.basis is Basis.EVIDENCE:
            groups[k] = replace(g, role=role.split(" (", 1)[0], role_basis=Basis.EVIDENCE,
                                role_reason=f"the worksheet's flag 3 names this barrier's role: {role}")
    causes = barred + causes
    settle = ""
    if not any(found):
        settle = (f"the generated code ({', '.join(dict.fromkeys(g.origin for g in gs))}) has no wait at the hung "
                  "warps' source lines: rebuild with -lineinfo (or give the source that was built) so each wait "
                  "maps to its barrier")
    if causes:
        # The worksheet decided: the generic checklist (assumptions) is left out.
        all_causes = tuple(causes + [c for c in rep.causes if c.basis is Basis.EVIDENCE])
    else:
        all_causes = rep.causes
    note = "; ".join(x for x in (rep.note, *unread) if x)
    return replace(rep, groups=tuple(groups), causes=all_causes, handoffs=tuple(found), settle=settle, note=note)


# The shared-window address of dynamic shared memory's byte 0 in a kernel with no static
# shared variable: measured on the H200, the first static shared variable sits at 0x400
# (fixtures/mbarrier/hang.jsonl), after the 1 KB the hardware reserves. Each read is checked
# against the worksheet: a word whose expected count is not the barrier's init count is not
# taken as that barrier's.
def barrier_sites(root: Path) -> list[tuple[str, int]]:
    """Where the mbarriers of the bundle's generated PTX live in the shared window, for
    collect's hang capture: (kernel:barrier[slot], address), by the layout ptxas gives the
    kernel's shared variables (`analyses/smem_layout.py`: static ones from 0x400 in the
    order the PTX declares them, dynamic memory after them). A barrier whose variable has
    no address there has none."""
    from wsperf.analyses.smem_layout import layouts

    ptx = sorted(p for p in (root / "generated").rglob("*.ptx") if p.is_file() and not p.is_symlink())
    gs, _ = sheets([("ptx", p) for p in ptx], root)
    out = []
    by_text: dict[int, dict] = {}
    for g in gs:
        lay = by_text.setdefault(id(g.text), layouts(g.text)).get(g.sheet.kernel)
        if lay is None:
            continue
        for b in g.sheet.barriers:
            base = lay.address(b.name.split("+", 1)[0]) if b.slots else None
            if base is not None:
                out += [(f"{g.sheet.kernel}:{b.name}[{i}]", base + off) for i, off in enumerate(sorted(set(b.slots)))]
    return out


def _capture_text(ev: Any) -> tuple[str | None, list[str]]:
    """The hang capture's barrier words and waits (hang/mbarriers.txt, its first 8 MiB), read
    once for the deadlock report; None and the problem when it cannot be read."""
    path = getattr(ev, "mbarriers", None)
    if path is None:
        return None, []
    try:
        with open(path, "rb") as f:
            return f.read(8 << 20).decode("utf-8", "replace"), []
    except OSError as e:
        return None, [f"{path}: {e.strerror or e}"]


def live_states(text: str, found: list[WaitHandoff | None]) -> tuple[list[Item], list[str]]:
    """What the barriers the hung warps wait on held during the hang (the words cuda-gdb
    read, decoded, from the capture's `text`), and the words that could not be taken as
    their barrier's."""
    from wsperf.collectors.mbarrier import decode, parse_reads

    reads = parse_reads(text)
    items: list[Item] = []
    problems: list[str] = []
    seen: set[str] = set()
    for h in found:
        if h is None or h.barrier in seen:
            continue
        seen.add(h.barrier)
        prefix = f"{h.kernel}:{h.barrier}["
        mine = [r for r in reads if r.label.startswith(prefix) and r.word is not None]
        counts = {c for c in h.init_counts if c is not None}
        bad = [r for r in mine if decode(r.word).expected not in counts]
        if bad:
            problems.append(f"{len(bad)} word(s) read for {h.barrier} expect a count other than its init count "
                            f"({', '.join(map(str, sorted(counts)))}): its address is not confirmed, so its live state "
                            "is not shown")
            continue
        if not mine:
            continue
        first = mine[0].block
        lines = [f"{r.label.split(':', 1)[1][len(h.barrier):]} {decode(r.word).describe()}"
                 for r in mine if r.block == first]
        others = {r.block for r in mine if r.block != first}
        same = all(decode(r.word).pending_arrivals == decode(m.word).pending_arrivals
                   for r in mine for m in mine if r.label == m.label)
        pending = sum(decode(r.word).pending_arrivals for r in mine if r.block == first)
        tx = sum(decode(r.word).pending_tx for r in mine if r.block == first)
        text = (f"live state of {h.barrier} (read by cuda-gdb during the hang) in CTA {first}: " + "; ".join(lines)
                + (f"; {len(others)} other CTA(s) read, {'the same pending arrivals' if same else 'other counts'}"
                   if others else ""))
        if pending and not tx:
            text += (f": {pending} arrival(s) are owed and no bytes are in flight, so only an arrival completes the "
                     f"phase; its arrivers: {', '.join(h.arrivers) or 'none found in the PTX'}")
        if tx < 0 and not pending:
            text += (f": every arrival is in, yet the copies delivered {-tx:,} byte(s) more than any expect_tx "
                     "announced (tx-count below zero), so the phase cannot complete: arrive with expect_tx of the "
                     "copies' bytes")
        fresh = [decode(r.word) for r in mine if r.block == first]
        if fresh and all(d.phase_parity == 0 and d.pending_arrivals == d.expected and not d.pending_tx for d in fresh):
            text += ("; no phase of it has completed yet, so a wait for parity 1 passes on it at once and a wait for "
                     "parity 0 blocks until its first phase completes")
        items.append(Item("cause", text, Basis.EVIDENCE))
    return items, problems


def _joined_waits(reads: list, waits: list) -> list[tuple[Any, Any]]:
    """Each live wait with the word read at its address in its CTA (None: none read)."""
    at = {(r.block, r.address): r for r in reads}
    return [(w, at.get((w.block, w.address)) if w.address is not None else None) for w in waits]


def live_waits(text: str, found: list | None = None) -> list[Item]:
    """What the hung warps' registers say they wait for (the capture's `text`), joined with
    the barrier words read in the same CTA: one item per (CTA, barrier, parity) of the first
    CTA read, with its warps. A warp that spins on a wait for a phase the word shows
    complete is the contradiction a wrong parity (or a wait on another barrier than the one
    named) gives."""
    from wsperf.collectors.mbarrier import decode, parse_reads, parse_waits

    reads = parse_reads(text)
    joined = [(w, r) for w, r in _joined_waits(reads, parse_waits(text))
              if w.address is not None and w.parity is not None]
    if not joined:
        return []
    first = joined[0][0].block
    # nothing has happened on any barrier read in this CTA: no phase completed, no arrival,
    # no bytes; the waits are then each role's first
    untouched = all((d := decode(r.word)).phase_parity == 0 and d.pending_arrivals == d.expected and not d.pending_tx
                    for r in reads if r.block == first and r.word is not None)
    groups: dict[tuple, list[int]] = {}
    for w, r in joined:
        if w.block == first:
            label = r.label.split(":", 1)[1] if r is not None else None
            groups.setdefault((w.address, w.parity, label, r.word if r is not None else None), []).append(w.warp)
    others = len({w.block for w, _ in joined} - {first})
    # the worksheet's role of the warps that wait on a barrier (the deadlock report's join)
    role_of = {h.barrier: h.role for h in (found or []) if h is not None}
    items = []
    for (addr, parity, label, word), warps in groups.items():
        barrier = label.rsplit("[", 1)[0] if label else None
        role = role_of.get(barrier) if barrier else None
        who = f"warp(s) {_warp_list(warps)} of CTA {first}" + (f" ({role.split(' (', 1)[0]})" if role else "")
        name = f"{label} ({addr:#x})" if label else f"the barrier at shared address {addr:#x}"
        text = f"{who} spin on {name} waiting for parity {parity} (read from their registers during the hang)"
        if word is None:
            items.append(Item("cause", text + "; no word was read at that address", Basis.EVIDENCE))
            continue
        d = decode(word)
        if d.phase_parity == parity:
            done = d.expected - d.pending_arrivals
            text += (f": the barrier is in that phase, {done} of {d.expected} arrival(s) in"
                     + (f", {d.pending_tx:,} tx byte(s) outstanding" if d.pending_tx else "")
                     + ", so they wait for it to complete")
            if parity == 0 and d.pending_arrivals == d.expected and not d.pending_tx:
                if role and role.startswith("producer") and untouched:
                    text += ("; no barrier read in this CTA has had an arrival yet, so this is the producer's "
                             "first wait: it waits for its consumers' release of a stage it has not filled. A "
                             "producer's first wait on a fresh 'empty' barrier must pass at once: it asks for parity "
                             "0 where it needs 1 (phase ^ 1): the wrong parity is this wait's")
                elif role is None:
                    text += ("; no arrival has reached it yet: if these warps fill the stage it guards, their first "
                             "wait should ask for parity 1 (phase ^ 1), which passes on a fresh barrier")
                else:
                    text += "; no arrival has reached it yet"
        else:
            text += (f", but the barrier's phase in progress has parity {d.phase_parity}: the phase with parity "
                     f"{parity} has completed, so a wait for it passes at once, yet they still spin: the parity "
                     "they ask for is not the one the phase they need has (a wrong parity), or the wait is on "
                     "another barrier than the one named")
        items.append(Item("cause", text + (f"; {others} other CTA(s) read" if others else ""), Basis.EVIDENCE))
    return items


def _warp_list(warps: list[int]) -> str:
    ws = sorted(set(warps))
    runs: list[list[int]] = []
    for w in ws:
        if runs and w == runs[-1][-1] + 1:
            runs[-1].append(w)
        else:
            runs.append([w])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def races(ev: Any, corr: CorrectnessReport) -> tuple[ReleaseClass, ...]:
    """The release classes of the code racecheck names in `corr`, from the worksheets of
    the evidence `ev` (analyses.evidence.Evidence); from the bundle's SASS when no
    worksheet covers the kernels it names (a binary built without PTX). The SASS classes
    explain a stop; `--accept-race` never takes them (`accepted_races` reads PTX only)."""
    found = race_releases(list(ev.sheets), corr)
    if found:
        return found
    kernels = {k for g in corr.groups if g.handoff is Handoff.RACE for k in g.kernels}
    if not kernels or _sheets_of(list(ev.sheets), kernels):
        return found
    from wsperf.analyses.sass_release import sass_releases

    seen: dict[tuple, ReleaseClass] = {}
    for kind, path in getattr(ev, "generated", ()):
        if kind != "sass":
            continue
        try:
            with open(path, "rb") as f:
                text = f.read(64 << 20).decode("utf-8", "replace")
        except OSError:
            continue
        for r in sass_releases(text, lambda f: f in kernels or _demangled_in(f, kernels)):
            rel = Release(r.release)
            seen.setdefault((r.function, rel), ReleaseClass(
                r.function, f"the barrier of SASS {r.offset:#06x}", "the role reading the stage", rel, 0, None,
                r.evidence, _CHECK[rel].format(n="N")))
    return tuple(seen.values())


def race_releases(all_sheets: list[GeneratedSheet], corr: CorrectnessReport) -> tuple[ReleaseClass, ...]:
    """The release classes of the code racecheck names: the sheets of the kernels it names
    (the XML gives the function's short name) whose PTX holds a racing access's source
    line; one row per (barrier, role, class), the first kernel named."""
    sites = {(_name(s.source_file), s.source_line) for g in corr.groups if g.handoff is Handoff.RACE
             for s in g.sites if s.source_line}
    kernels = {k for g in corr.groups if g.handoff is Handoff.RACE for k in g.kernels}
    if not kernels:
        return ()
    gs = [g for g in _sheets_of(all_sheets, kernels)
          if not sites or any((_name(loc.file), loc.line) in sites for loc in g.locations.values())]
    seen: dict[tuple, ReleaseClass] = {}
    for r in releases(gs):
        seen.setdefault((r.barrier, r.role, r.release), r)
    return tuple(seen.values())


@dataclass(frozen=True)
class RaceAccess:
    """The PTX instructions behind one side of a race racecheck reported: the shared-memory
    accesses of that kind the kernel's PTX attributes to the source line it named."""

    kernel: str
    access: str  # read | write
    source: str  # file:line, as racecheck named it
    ptx_lines: tuple[int, ...]
    instructions: tuple[str, ...]  # the PTX text of each line
    what: str  # what the worksheet knows of them
    barrier: str | None  # the nearest CTA barrier before a read / after a write, in the PTX text


_SHARED_READ = re.compile(r"^(?:@!?%\w+\s+)?ld\.shared")
_SHARED_WRITE = re.compile(r"^(?:@!?%\w+\s+)?(?:st\.shared|atom\.shared|red\.shared|cp\.async\S*\.shared)")
_CTA_BARRIER = re.compile(r"^(?:@!?%\w+\s+)?(?:bar|barrier)\.sync\b")


def race_accesses(all_sheets: list[GeneratedSheet], corr: CorrectnessReport) -> tuple[RaceAccess, ...]:
    """For each side of each race: the shared loads (a read) or stores (a write) whose `.loc`
    is the line racecheck named, in the PTX of the kernels it names; with the CTA barrier
    that orders it, when one is next to it (a read's before it, a write's after it), and
    whether the worksheet read those lines as a partition table (Triton's warp_specialize
    dispatch) rather than a stage of the ring."""
    out: list[RaceAccess] = []
    seen: set[tuple] = set()
    for grp in corr.groups:
        if grp.handoff is not Handoff.RACE:
            continue
        # Each sheet's PTX lines and the span of its kernel, once for all its sites.
        gs = [(g, lines, _entry_lines(lines, g.sheet.kernel))
              for g in _sheets_of(all_sheets, set(grp.kernels)) for lines in [g.text.split("\n")]]
        for site in grp.sites:
            if site.access not in ("read", "write") or site.source_line is None:
                continue
            for g, lines, span in gs:
                hits = _side_hits(g, lines, span, site.source_file, site.source_line, site.access)
                shown = tuple(" ".join(lines[no - 1].split()).rstrip(";") for no in hits[:8])
                key = (site.access, site.source_line, tuple(re.sub(r"%\w+", "%", t) for t in shown))
                if not hits or key in seen:
                    continue  # another instantiation of the same template: the same PTX, other registers
                seen.add(key)
                table = set(g.sheet.dispatch_table)
                what = ("the partition table of a warp_specialize (the worksheet reads each worker warp's "
                        "partition from it): not a stage of the ring" if set(hits) <= table else
                        "an asynchronous copy into shared memory (a stage the producer fills)"
                        if all(t.startswith("cp.async") for t in shown) else
                        "shared memory" + (" (some of it the partition table)" if table & set(hits) else ""))
                out.append(RaceAccess(g.sheet.kernel, site.access, f"{_name(site.source_file)}:{site.source_line}",
                                      tuple(hits[:8]), shown, what,
                                      _next_barrier(lines, hits, site.access == "read")))
    return tuple(out)


def _side_hits(g: GeneratedSheet, lines: list[str], span: tuple[int, int], file: str | None, line: int,
               access: str | None) -> list[int]:
    """The PTX lines of `g`'s kernel (its `span`) whose `.loc` is file:line and that access
    shared memory as `access` says (a read, a write; either when None)."""
    want = _SHARED_READ if access == "read" else _SHARED_WRITE if access == "write" else None
    first, last = span
    return [no for no, loc in sorted(g.locations.items())
            if first <= no <= last and (_name(loc.file), loc.line) == (_name(file), line)
            and (want.match(lines[no - 1].strip()) if want is not None
                 else _SHARED_READ.match(lines[no - 1].strip()) or _SHARED_WRITE.match(lines[no - 1].strip()))]


def toolchain_protocol(all_sheets: list[GeneratedSheet]) -> Callable[[SanitizerFinding], str | None] | None:
    """correctness_report's `protocol`: a racecheck hazard both of whose sides are, in the
    kernel's PTX, nothing but the partition table the worksheet read (Triton's and Gluon's
    warp_specialize: the default warps store each worker warp's partition before
    `barrier.sync 1`, each worker reads its byte after it) is the compiler's own dispatch,
    not a handoff the user wrote; so is one whose one side is only table accesses and whose
    other side's line holds a table access too (Triton attributes the table's stores and the
    ring's copies to the kernel's `def` line alike). Measured: every correct Triton/Gluon warp-specialized
    kernel racecheck saw on the H200 had such records. Hazards that touch any other
    shared access (a stage of the ring) stay errors; None without sheets with a table."""
    tabled = [g for g in all_sheets if g.sheet.dispatch_table]
    if not tabled:
        return None
    split: dict[int, tuple[list[str], tuple[int, int]]] = {}

    def lines_of(g: GeneratedSheet) -> tuple[list[str], tuple[int, int]]:
        if id(g) not in split:
            lines = g.text.split("\n")
            split[id(g)] = (lines, _entry_lines(lines, g.sheet.kernel))
        return split[id(g)]

    def why(f: SanitizerFinding) -> str | None:
        if f.classification is not Handoff.RACE or f.source_line is None or f.other_source_line is None \
                or not f.kernel:
            return None
        for g in _sheets_of(tabled, {f.kernel}):
            lines, span = lines_of(g)
            table = set(g.sheet.dispatch_table)
            a = _side_hits(g, lines, span, f.source_file, f.source_line, f.access)
            b = _side_hits(g, lines, span, f.other_source_file, f.other_source_line, f.other_access)
            # A hazard is two accesses of one address. When one side's line holds only table
            # accesses, that address is in the table, so the other side's access is the table
            # access its line holds (its line's other accesses, the stage copies Triton
            # attributes to the kernel's `def`, cannot be on it).
            if a and b and (set(a) <= table or set(b) <= table) and table & set(a) and table & set(b):
                a, b = [x for x in a if x in table], [x for x in b if x in table]
                sides = sorted({f"{_name(f.source_file)}:{f.source_line}", f"{_name(f.other_source_file)}:"
                                f"{f.other_source_line}"})
                between = f"between {sides[0]} and {sides[1]}" if len(sides) > 1 else f"at {sides[0]} (both sides)"
                return (f"toolchain-protocol: racecheck hazards in {g.sheet.kernel} {between} are "
                        f"the warp_specialize partition table (PTX lines {', '.join(map(str, sorted(set(a) | set(b))[:6]))}: "
                        "the default warps store each worker warp's partition before barrier.sync 1, the workers read "
                        "it after), code the compiler generates for its own dispatch, not a stage of your ring; not a "
                        "stop. Falsifiable: a hazard at any other shared access, or a wrong answer from the repro, "
                        "still stops")
        return None

    return why


def _entry_lines(lines: list[str], kernel: str) -> tuple[int, int]:
    """The first and last PTX line (1-based) of `.entry kernel` in a module's lines: up to
    the next function or the end."""
    first = next((i for i, t in enumerate(lines, 1) if re.match(rf"\s*(\.visible\s+)?\.entry\s+{re.escape(kernel)}\b", t)),
                 None)
    if first is None:
        return 1, len(lines)
    nxt = next((i for i, t in enumerate(lines[first:], first + 1)
                if re.match(r"\s*(\.visible\s+|\.weak\s+)?\.(entry|func)\b", t)), len(lines) + 1)
    return first, nxt - 1


def _next_barrier(lines: list[str], hits: list[int], before: bool) -> str | None:
    """The CTA barrier at most a few statements before every hit (`before`) or after
    every hit, when each has one: 'barrier.sync 1 (PTX line 527)'."""
    found: list[str] = []
    for no in hits:
        step, i, seen, got = (-1 if before else 1), no - 1, 0, None
        while 0 <= i + step < len(lines) and seen < 4:
            i += step
            t = lines[i].strip()
            if not t or t.startswith(("//", ".loc", "$", "{", "}")):
                continue
            seen += 1
            if _CTA_BARRIER.match(t):
                got = f"{' '.join(t.rstrip(';').split())} (PTX line {i + 1})"
                break
        if got is None:
            return None
        found.append(got)
    return "; ".join(dict.fromkeys(found))


def _sheets_of(all_sheets: list[GeneratedSheet], kernels: set[str]) -> list[GeneratedSheet]:
    """The sheets of the kernels a sanitizer names (by function name or demangled)."""
    return [g for g in all_sheets if g.sheet.kernel in kernels or _demangled_in(g.sheet.kernel, kernels)]


def _demangled_in(mangled: str, names: set[str]) -> bool:
    # compute-sanitizer names a kernel by its function name ("ws_pipeline") or demangled
    # ("void ws_stream<4, ...>(...)"), the PTX by its mangled .entry name, which holds the
    # identifier with its length before it (_Z11ws_pipelineIL3Bug5EE...).
    for n in names:
        ident = _ident(n)
        if ident and (mangled == ident or f"{len(ident)}{ident}" in mangled):
            return True
    return False


def _ident(name: str) -> str | None:
    m = re.search(r"([A-Za-z_]\w*)\s*(<|\()", name) or re.fullmatch(r"\s*([A-Za-z_]\w*)\s*", name)
    return m.group(1) if m else None


def accepted_races(all_sheets: list[GeneratedSheet], corr: CorrectnessReport, accepted: Iterable[str]
                   ) -> tuple[str, ...]:
    """The release classes that excuse every error of `corr`: when each is a race and every
    release of the stages racecheck names is of a class in `accepted` (`--accept-race`),
    those classes; otherwise none. A race with no generated code to read is never excused."""
    accepted = set(accepted)
    if not accepted or not corr.broken or corr.other_errors or any(g.handoff is not Handoff.RACE
                                                                     for g in corr.groups):
        return ()
    cls = race_releases(all_sheets, corr)
    if not cls or any(c.release.value not in accepted for c in cls):
        return ()
    return tuple(sorted({c.release.value for c in cls}))


def evidence_correctness(ev: Any) -> CorrectnessReport:
    """The correctness report of the evidence `ev` (analyses.evidence.Evidence): its
    sanitizer outputs under its kernel filter, the machine code it keeps answering what it
    can (`discarded_reads`). What analyze and compare judge a bundle by; collect's judge
    (`release_judge`) is the same from the bundle it is writing."""
    corr = correctness_report(ev.sanitizer, ev.kernel_filter, discarded_reads(ev.generated),
                              toolchain_protocol(list(ev.sheets)))
    failed = getattr(ev, "repro_failed", None)
    if failed:  # the repro says the kernel is wrong: no performance advice, whatever the tools found
        corr = replace(corr, runs=corr.runs + (ToolRun("repro", "run/repro", 1, 1),),
                       other_errors=corr.other_errors + (failed,))
    return corr


def release_judge(kernel: str | None, accepted: tuple[str, ...]):
    """collect's judge (collectors/collect.Judge): stop on any error of the user's kernels,
    unless `accepted_races` excuses them, read from the bundle's generated code. The
    kernels judged are the manifest's scope (--kernel's, or the ones a JIT repro compiled)."""
    def judge(root: Path, outputs: list) -> tuple[bool, list[str]]:
        b = read_bundle(root)
        generated = generated_files(b)
        kept = sheets(generated, root)[0]
        scope = SanitizerScope.from_json(b.manifest.get("scope"))
        judged = scope.judged if scope is not None else kernel
        corr = correctness_report(outputs, judged, discarded_reads(generated), toolchain_protocol(kept))
        if not corr.broken:
            return False, []
        ok = accepted_races(kept, corr, accepted) if accepted else ()
        return (False, list(ok)) if ok else (True, [])
    return judge


# An atomic exchange whose old value goes to RZ: the read half of the exchange reaches no
# register, so nothing is read (initcheck counts it as a read of uninitialized memory).
_DISCARDED_EXCHANGE = re.compile(r"^(?:@!?U?P\w+\s+)?ATOMG?\S*\.EXCH\S*\s+(?:U?P\w+,\s*)?RZ,")


def discarded_reads(generated: Iterable[tuple[str, Path]]) -> Callable[[SanitizerFinding], str | None] | None:
    """correctness_report's `discarded`, from the cubins a bundle keeps (Triton's cache):
    an initcheck "uninitialized read" at an atomic exchange whose old value is discarded
    is no read of the data. Triton publishes a tensor map it builds on the device
    (tensormap.cp_fenceproxy) with such exchanges into fresh global memory, and initcheck
    stops every such kernel (measured on the H200: 20 findings a launch). None without a
    cubin or nvdisasm; a finding whose instruction cannot be read (no cubin holds its
    kernel, or two hold different code under its name) stays an error."""
    cubins = [p for kind, p in generated if kind == "cubin"]
    tool = find_binary("nvdisasm") if cubins else None
    if tool is None:
        return None
    found: list[Cubin] = []
    for p in cubins:
        try:
            found += find_cubins(p.read_bytes())
        except OSError:
            continue
    by_name = functions(found)  # a name two cubins hold with different code: None, not read
    listings: dict[str, dict[int, str]] = {}

    def judge(f: SanitizerFinding) -> str | None:
        if f.classification is not Handoff.UNINITIALIZED or f.pc_offset is None or not f.kernel:
            return None
        name = f.kernel if f.kernel in by_name else next(
            (n for n in by_name if _demangled_in(n, {f.kernel})), None)
        code = by_name.get(name) if name is not None else None
        if code is None:
            return None
        if name not in listings:
            listings[name] = Disassembly(code, [name], tool).listing().get(name) or {}
        text = listings[name].get(f.pc_offset)
        if text is None or not _DISCARDED_EXCHANGE.match(text):
            return None
        return (f"initcheck: {f.message} in {name} at +{f.pc_offset:#x} `{text}`"
                + (f" ({PurePath(f.source_file).name}:{f.source_line})" if f.source_file and f.source_line else "")
                + ": an atomic exchange whose old value is discarded (RZ) writes and reads nothing back, as a "
                  "tensor map made on the device is published (tensormap.cp_fenceproxy)")
    return judge


def generated_files(b: Bundle) -> list[tuple[str, Path]]:
    """(kind, path) of the generated code the bundle `b`'s manifest lists."""
    out = []
    for r in b.runs:
        if r.phase == "generated":
            for key, rel in r.outputs.items():
                p = resolve(b.root, rel)
                if p.is_file():
                    out.append((key.split(":", 1)[0], p))
    return out
