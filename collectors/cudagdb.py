"""Where every warp of a hung kernel waits: cuda-gdb's text, mapped onto the SASS.

cuda-gdb has no machine-readable output, so this module parses the text it prints, and
strictly: each command's output must start with the table header that cuda-gdb 13 prints
for it, and every line after it must be a row or a group line of that table; anything
else raises CudaGdbOutputError naming the line. The capture is the one
`fixtures/collect_correctness.sh` takes by attaching to the hung process:

    cuda-gdb -p PID -batch -ex "echo ==== info cuda kernels\\n" -ex "info cuda kernels" ...

that is, every command preceded by an `echo` of itself as a `==== <command>` line, which
is how the output is split by command. Understood commands: `info cuda kernels`,
`info cuda blocks`, `info cuda sms`, `info cuda warps`, `info cuda lanes`,
`info cuda threads` (coalesced or not), `x/Ni $pc` and `info line *$pc`; the output of
any other command (`cuda block ...`, `bt`, `set ...`) is skipped.

`info cuda warps` lists the SM in focus only, so a capture holds one such table per SM
(the collect script focuses on each block in turn). PCs in cuda-gdb are virtual
addresses; `x/i $pc` prints them as <function+offset>, which gives each function's load
address, and with it every warp's PC becomes an offset into `cuobjdump -sass` of the
same binary (`parse_cuobjdump_sass`). `map_waits` then says for every warp which
instruction it sits at and what it waits on: an mbarrier try-wait spin loop
(`SYNCS.PHASECHK.TRANS64.TRYWAIT`, the `@!P0 BRA` back to it, or the `YIELD` in
between), a block barrier (`BAR.SYNC`), or nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from wsperf.collectors.errors import InputError
from wsperf.collectors.files import GiB, read_input

MAX_TEXT_BYTES = GiB  # a capture or a SASS dump (a few MiB in practice)

Dim3 = tuple[int, int, int]

MARKER = "==== "  # what the capture's `echo` prints before each command's output
# A spin loop's back branch is this close after the PC (in instructions) or it is none.
_LOOP_WINDOW = 8


class CudaGdbOutputError(InputError):
    """A cuda-gdb capture or a cuobjdump SASS dump cannot be read."""


@dataclass(frozen=True)
class GdbKernel:
    """A row of `info cuda kernels`."""

    kernel_id: int
    parent: int | None
    device: int
    grid_id: int
    status: str  # 'Active', 'Pending', ...
    sms_mask: int  # bit i: SM i runs part of the kernel
    grid_dim: Dim3
    block_dim: Dim3
    invocation: str  # e.g. 'ws_pipeline<(Bug)5>()'


@dataclass(frozen=True)
class GdbBlocks:
    """A row of `info cuda blocks` (coalesced): a range of blocks in one state."""

    kernel_id: int
    first: Dim3
    last: Dim3
    count: int
    state: str  # 'running', ...


@dataclass(frozen=True)
class GdbWarp:
    """A row of `info cuda warps`: one resident warp (hardware slot `warp` of an SM)."""

    device: int
    sm: int
    warp: int
    active_lanes: int  # mask
    divergent_lanes: int  # mask
    pc: int  # virtual address of the warp's active PC
    kernel_id: int
    block: Dim3
    first_thread: Dim3  # threadIdx of its first active lane


@dataclass(frozen=True)
class GdbLane:
    """A row of `info cuda lanes`."""

    device: int
    sm: int
    warp: int
    lane: int
    state: str  # 'active', ...
    pc: int
    thread: Dim3
    exception: str  # 'None' when there is none


@dataclass(frozen=True)
class GdbThreads:
    """A row of `info cuda threads`: one thread (not coalesced: count 1 and the thread's
    device, SM, warp and lane) or a coalesced range of threads at one PC."""

    kernel_id: int
    first_block: Dim3
    first_thread: Dim3
    last_block: Dim3
    last_thread: Dim3
    count: int
    pc: int
    source_file: str
    source_line: int
    device: int | None = None
    sm: int | None = None
    warp: int | None = None
    lane: int | None = None


@dataclass(frozen=True)
class PcInfo:
    """What `x/i $pc` and `info line *$pc` said about one PC."""

    pc: int
    function: str  # mangled, e.g. '_Z11ws_pipelineIL3Bug5EEvPKfS2_Pfi'
    offset: int  # bytes from the function's start
    instruction: str | None  # cuda-gdb's disassembly of it
    source_file: str | None = None  # innermost line (an inlined helper's, if any)
    source_line: int | None = None
    inlined_function: str | None = None  # the inlined helper the line belongs to
    call_file: str | None = None  # where that helper was inlined (the kernel's own line)
    call_line: int | None = None


@dataclass(frozen=True)
class HangCapture:
    """Everything a capture holds, in the order printed (repeated tables appear once per
    print; `warps()`/`lanes()` de-duplicate)."""

    kernels: tuple[GdbKernel, ...]
    blocks: tuple[GdbBlocks, ...]
    sms: dict[tuple[int, int], int]  # (device, sm) -> active warps mask
    warp_rows: tuple[GdbWarp, ...]
    lane_rows: tuple[GdbLane, ...]
    threads: tuple[GdbThreads, ...]
    pcs: dict[int, PcInfo]

    def warps(self) -> tuple[GdbWarp, ...]:
        """Each resident warp once, by (device, sm, warp)."""
        return tuple({(w.device, w.sm, w.warp): w for w in self.warp_rows}.values())

    def lanes(self) -> tuple[GdbLane, ...]:
        """Each lane once, by (device, sm, warp, lane)."""
        return tuple({(l.device, l.sm, l.warp, l.lane): l for l in self.lane_rows}.values())

    def resident_warps(self) -> int:
        """Warps the SMs report active (`info cuda sms` masks): what `warps()` must cover."""
        return sum(bin(m).count("1") for m in self.sms.values())


@dataclass(frozen=True)
class SassInstr:
    """One instruction of a `cuobjdump -sass` listing."""

    offset: int  # bytes from the function's start (the /*XXXX*/ column)
    guard: str | None  # e.g. '@!P0'
    opcode: str  # mnemonic with modifiers, e.g. 'SYNCS.PHASECHK.TRANS64.TRYWAIT'
    operands: str  # e.g. 'P0, [R17+URZ], R4'

    @property
    def text(self) -> str:
        return " ".join(x for x in (self.guard, self.opcode, self.operands) if x)


class WaitKind(StrEnum):
    """What a warp's PC says it is waiting for."""

    MBARRIER = "mbarrier-try-wait"  # in an mbarrier try-wait loop (SYNCS.PHASECHK...TRYWAIT)
    BLOCK_BARRIER = "block-barrier"  # at a block (named) barrier, BAR.SYNC / BAR.RED
    NONE = "not-waiting"  # at some other instruction


@dataclass(frozen=True)
class WarpWait:
    """One resident warp of the hung kernel and what it waits on."""

    kernel_id: int
    kernel: str  # the kernel's invocation as `info cuda kernels` prints it
    device: int
    sm: int
    hw_warp: int  # warp slot on the SM
    block: Dim3
    first_thread: Dim3
    warp_in_block: int  # linear index of its first thread // 32: the warp's rank in its block
    active_lanes: int  # how many lanes are active
    pc: int  # virtual address
    function: str
    offset: int  # pc - the function's load address: the SASS offset
    instruction: SassInstr  # the instruction at the PC
    wait: WaitKind
    wait_instruction: SassInstr | None  # the try-wait or barrier instruction waited on
    source_file: str | None  # innermost source line of the PC (None without line info)
    source_line: int | None
    call_file: str | None  # the kernel's own line when the PC is in an inlined helper
    call_line: int | None


@dataclass(frozen=True)
class WaitSite:
    """Warps grouped by the instruction they wait at."""

    function: str
    offset: int  # of the wait instruction (the PC's instruction when not waiting)
    wait: WaitKind
    instruction: SassInstr
    call_file: str | None
    call_line: int | None
    warps: tuple[WarpWait, ...]


# ---------------------------------------------------------------------------------------
# cuda-gdb text

_D3 = r"\((\d+),(\d+),(\d+)\)"
_HEX = r"(0x[0-9a-fA-F]+)"
_STAR = r"^[* ]\s*"

_KERNELS_HEAD = re.compile(r"^\s*Kernel\s+Parent\s+Dev\s+Grid\s+Status\s+SMs Mask\s+GridDim\s+BlockDim\s+Invocation\s*$")
_KERNELS_ROW = re.compile(_STAR + rf"(\d+)\s+(-|\d+)\s+(\d+)\s+(-?\d+)\s+(\w+)\s+{_HEX}\s+{_D3}\s+{_D3}\s+(.+?)\s*$")
_BLOCKS_HEAD = re.compile(r"^\s*BlockIdx\s+To BlockIdx\s+Count\s+State\s*$")
_BLOCKS_ROW = re.compile(_STAR + rf"{_D3}\s+{_D3}\s+(\d+)\s+(\w+)\s*$")
_SMS_HEAD = re.compile(r"^\s*SM\s+Active Warps Mask\s*$")
_SMS_ROW = re.compile(_STAR + rf"(\d+)\s+{_HEX}\s*$")
_WARPS_HEAD = re.compile(
    r"^\s*Wp\s+Active Lanes Mask\s+Divergent Lanes Mask\s+Active PC\s+Kernel\s+BlockIdx\s+First Active ThreadIdx\s*$")
_WARPS_ROW = re.compile(_STAR + rf"(\d+)\s+{_HEX}\s+{_HEX}\s+{_HEX}\s+(\d+)\s+{_D3}\s+{_D3}\s*$")
_LANES_HEAD = re.compile(r"^\s*Ln\s+State\s+PC\s+ThreadIdx\s+Exception\s*$")
_LANES_ROW = re.compile(_STAR + rf"(\d+)\s+(\w+)\s+{_HEX}\s+{_D3}\s+(.+?)\s*$")
_THREADS_HEAD = re.compile(
    r"^\s*BlockIdx\s+ThreadIdx\s+To BlockIdx\s+ThreadIdx\s+Count\s+(?:Virtual )?PC\s+Filename\s+Line\s*$")
# Code without line info leaves Filename empty and Line 0 (cuda-gdb 13.0 on the H200, a
# Triton kernel built with TRITON_DISABLE_LINE_INFO=1): the file is then "".
_FILE = r"(?:\s+(\S*[^\d\s]\S*))?"
_THREADS_ROW = re.compile(_STAR + rf"{_D3}\s+{_D3}\s+{_D3}\s+{_D3}\s+(\d+)\s+{_HEX}{_FILE}\s+(\d+)\s*$")
_THREAD_HEAD = re.compile(r"^\s*BlockIdx\s+ThreadIdx\s+(?:Virtual )?PC\s+Dev\s+SM\s+Wp\s+Ln\s+Filename\s+Line\s*$")
_THREAD_ROW = re.compile(_STAR + rf"{_D3}\s+{_D3}\s+{_HEX}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+){_FILE}\s+(\d+)\s*$")
_GROUP_DEVICE = re.compile(r"^Device (\d+)$")
_GROUP_SM = re.compile(r"^Device (\d+) SM (\d+)$")
_GROUP_WARP = re.compile(r"^Device (\d+) SM (\d+) Warp (\d+)$")
_GROUP_KERNEL = re.compile(r"^Kernel (\d+)$")
_DISASM = re.compile(rf"^(=>)?\s+{_HEX} <([^+>\s]+)\+(\d+)>:\s+(.+?)\s*$")
_LINE = re.compile(
    rf'^Line (\d+) of "([^"]+)"\s+(?:starts at|is at) address {_HEX}(?: <[^>]*>)?'
    rf"(?: and ends at {_HEX}(?: <[^>]*>)?)?(?: inlined from (\S+) at line (\d+) of (\S+?))?\.$")


def read_cudagdb(path: str | os.PathLike[str]) -> HangCapture:
    """Parse the cuda-gdb capture at `path` (see the module docstring)."""
    return parse_cudagdb(_read_text(path), source=str(path))


def _read_text(path: str | os.PathLike[str]) -> str:
    # A regular file, bounded: captures and SASS dumps are a few MiB.
    return read_input(path, kind="a cuda-gdb capture or cuobjdump SASS dump", limit=MAX_TEXT_BYTES,
                      error=CudaGdbOutputError).decode("utf-8", errors="replace")


def parse_cudagdb(text: str, *, source: str = "<text>") -> HangCapture:
    """Parse a cuda-gdb capture held in `text`. Raises CudaGdbOutputError when it holds
    no `==== <command>` sections, or when a section of a command this module reads is
    not the table cuda-gdb prints for it."""
    sections = _sections(text)
    if not sections:
        raise CudaGdbOutputError(
            f"{source}: holds no `{MARKER}<command>` sections: not a capture taken as "
            "fixtures/collect_correctness.sh takes it (cuda-gdb -batch, each -ex command preceded by "
            f"-ex 'echo {MARKER}<command>\\n')")
    out = _Collected()
    for lineno, command, body in sections:
        where = f"{source}: `{command}` (line {lineno})"
        if command.startswith("info cuda kernels"):
            _table(where, body, _KERNELS_HEAD, {}, _KERNELS_ROW, out.kernel)
        elif command.startswith("info cuda blocks"):
            _table(where, body, _BLOCKS_HEAD, {_GROUP_KERNEL: "kernel"}, _BLOCKS_ROW, out.block)
        elif command.startswith("info cuda sms"):
            _table(where, body, _SMS_HEAD, {_GROUP_DEVICE: "device"}, _SMS_ROW, out.sm)
        elif command.startswith("info cuda warps"):
            _table(where, body, _WARPS_HEAD, {_GROUP_SM: "device sm"}, _WARPS_ROW, out.warp)
        elif command.startswith("info cuda lanes"):
            _table(where, body, _LANES_HEAD, {_GROUP_WARP: "device sm warp"}, _LANES_ROW, out.lane)
        elif command.startswith("info cuda threads"):
            head = next((l for l in body if l.strip()), "")
            if _THREAD_HEAD.match(head):
                _table(where, body, _THREAD_HEAD, {_GROUP_KERNEL: "kernel"}, _THREAD_ROW, out.thread)
            else:
                _table(where, body, _THREADS_HEAD, {_GROUP_KERNEL: "kernel"}, _THREADS_ROW, out.threads_range)
        elif command.startswith("x/"):
            out.disasm(where, body)
        elif command.startswith("info line"):
            out.line(where, body)
    return HangCapture(tuple(out.kernels), tuple(out.blocks), dict(out.sms), tuple(out.warps), tuple(out.lanes),
                       tuple(out.threads), dict(out.pcs))


# gdb's own asynchronous notices, printed between or after commands' output (e.g.
# "[Inferior 1 (process 3556) detached]" after the last -ex of a -batch attach): not
# part of any table.
_GDB_NOTICE = re.compile(r"^\[(Inferior \d+ \(process \d+\) detached|New Thread .*|Thread .* exited|"
                         r"New LWP \d+|Detaching after (fork|vfork) .*|Switching focus to .*)\]$")


def _sections(text: str) -> list[tuple[int, str, list[str]]]:
    sections: list[tuple[int, str, list[str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(MARKER):
            sections.append((n, line[len(MARKER):].strip(), []))
        elif sections and not _GDB_NOTICE.match(line.strip()):
            sections[-1][2].append(line)
    return sections  # lines before the first marker (attach messages) are not read


def _table(where: str, body: list[str], head: re.Pattern[str], groups: dict[re.Pattern[str], str],
           row: re.Pattern[str], emit) -> None:
    lines = [l for l in body if l.strip()]
    if not lines or not head.match(lines[0]):
        said = lines[0].strip() if lines else "nothing"
        raise CudaGdbOutputError(f"{where}: cuda-gdb printed {said!r} where the table header belongs; "
                                 "capture the command again while the kernel is hung")
    group: tuple[int, ...] = ()
    for line in lines[1:]:
        for pattern in groups:
            if m := pattern.match(line.strip()):
                group = tuple(int(g) for g in m.groups())
                break
        else:
            m = row.match(line)
            if not m:
                raise CudaGdbOutputError(f"{where}: line {line.strip()!r} is neither a row of the table nor a "
                                         "group header; the capture is damaged or from an unknown cuda-gdb version")
            if groups and not group:
                raise CudaGdbOutputError(f"{where}: row {line.strip()!r} comes before the line that says which "
                                         f"{next(iter(groups.values()))} it belongs to")
            emit(group, m.groups())


def _d3(g: tuple[str, ...], i: int) -> Dim3:
    return (int(g[i]), int(g[i + 1]), int(g[i + 2]))


class _Collected:
    """Rows as the sections are read; `pc` is the focus PC from the last `x/i $pc`."""

    def __init__(self) -> None:
        self.kernels: list[GdbKernel] = []
        self.blocks: list[GdbBlocks] = []
        self.sms: dict[tuple[int, int], int] = {}
        self.warps: list[GdbWarp] = []
        self.lanes: list[GdbLane] = []
        self.threads: list[GdbThreads] = []
        self.pcs: dict[int, PcInfo] = {}
        self.pc: int | None = None

    def kernel(self, _group, g) -> None:
        self.kernels.append(GdbKernel(int(g[0]), None if g[1] == "-" else int(g[1]), int(g[2]), int(g[3]), g[4],
                                      int(g[5], 16), _d3(g, 6), _d3(g, 9), g[12]))

    def block(self, group, g) -> None:
        self.blocks.append(GdbBlocks(group[0], _d3(g, 0), _d3(g, 3), int(g[6]), g[7]))

    def sm(self, group, g) -> None:
        self.sms[(group[0], int(g[0]))] = int(g[1], 16)

    def warp(self, group, g) -> None:
        self.warps.append(GdbWarp(group[0], group[1], int(g[0]), int(g[1], 16), int(g[2], 16), int(g[3], 16),
                                  int(g[4]), _d3(g, 5), _d3(g, 8)))

    def lane(self, group, g) -> None:
        self.lanes.append(GdbLane(group[0], group[1], group[2], int(g[0]), g[1], int(g[2], 16), _d3(g, 3), g[6]))

    def thread(self, group, g) -> None:
        block, thread = _d3(g, 0), _d3(g, 3)
        self.threads.append(GdbThreads(group[0], block, thread, block, thread, 1, int(g[6], 16),
                                       g[11] or "", int(g[12]), int(g[7]), int(g[8]), int(g[9]), int(g[10])))

    def threads_range(self, group, g) -> None:
        self.threads.append(GdbThreads(group[0], _d3(g, 0), _d3(g, 3), _d3(g, 6), _d3(g, 9),
                                       int(g[12]), int(g[13], 16), g[14] or "", int(g[15])))

    def disasm(self, where: str, body: list[str]) -> None:
        lines = [l for l in body if l.strip()]
        if not lines:
            raise CudaGdbOutputError(f"{where}: no disassembly; cuda-gdb needs cuobjdump on its PATH for x/i")
        for line in lines:
            m = _DISASM.match(line)
            if not m:
                raise CudaGdbOutputError(f"{where}: line {line.strip()!r} is not a disassembled instruction")
            current, pc, func, off, instr = m.groups()
            pc_i = int(pc, 16)
            old = self.pcs.get(pc_i)
            self.pcs[pc_i] = PcInfo(pc_i, func, int(off), instr, *(
                (old.source_file, old.source_line, old.inlined_function, old.call_file, old.call_line) if old
                else (None,) * 5))
            if current:
                self.pc = pc_i

    def line(self, where: str, body: list[str]) -> None:
        lines = [l for l in body if l.strip()]
        if self.pc is None:
            raise CudaGdbOutputError(f"{where}: `info line` before any `x/i $pc`: its PC is unknown")
        if len(lines) != 1:
            raise CudaGdbOutputError(f"{where}: expected one line of output, got {len(lines)}")
        if lines[0].startswith("No line number information"):
            return
        m = _LINE.match(lines[0].strip())
        if not m:
            raise CudaGdbOutputError(f"{where}: {lines[0].strip()!r} is not what `info line` prints")
        line, file, _start, _end, inlined, call_line, call_file = m.groups()
        old = self.pcs[self.pc]
        self.pcs[self.pc] = PcInfo(old.pc, old.function, old.offset, old.instruction, file, int(line), inlined,
                                   call_file, int(call_line) if call_line else None)


# ---------------------------------------------------------------------------------------
# cuobjdump -sass

# a function header of `cuobjdump -sass` (multiline: `findall` over a whole listing names them all)
SASS_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.M)
_SASS = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(@!?U?P(?:T|\d))?\s*([A-Z][A-Z0-9_.]*)\s*([^;]*?)\s*;?\s*(?:/\*.*\*/)?\s*$")


def read_cuobjdump_sass(path: str | os.PathLike[str]) -> dict[str, dict[int, SassInstr]]:
    """Parse the `cuobjdump -sass` listing at `path`."""
    return parse_cuobjdump_sass(_read_text(path), source=str(path))


def parse_cuobjdump_sass(text: str, *, source: str = "<text>") -> dict[str, dict[int, SassInstr]]:
    """function (mangled name) -> offset -> instruction, from `cuobjdump -sass` text."""
    functions: dict[str, dict[int, SassInstr]] = {}
    current: dict[int, SassInstr] | None = None
    for line in text.splitlines():
        if m := SASS_FUNCTION.match(line):
            current = functions.setdefault(m.group(1), {})
        elif current is not None and (m := _SASS.match(line)):
            off, guard, opcode, operands = m.groups()
            current[int(off, 16)] = SassInstr(int(off, 16), guard, opcode, operands.strip())
    if not functions or not any(functions.values()):
        raise CudaGdbOutputError(f"{source}: no `Function :` with instructions: not a `cuobjdump -sass` listing")
    return functions


# ---------------------------------------------------------------------------------------
# warps -> waits


def map_waits(capture: HangCapture, sass: dict[str, dict[int, SassInstr]]) -> tuple[WarpWait, ...]:
    """Every resident warp of the capture, with the SASS instruction at its PC and what
    it waits on. Raises CudaGdbOutputError when a PC falls in no function whose load
    address the capture shows, or at no instruction of the SASS (another build's dump)."""
    kernels = {k.kernel_id: k for k in capture.kernels}
    bases = {(p.function, p.pc - p.offset) for p in capture.pcs.values()}
    lines = {(t.first_block, t.first_thread): t for t in capture.threads if t.count == 1}
    ordered = {f: sorted(ins) for f, ins in sass.items()}
    out = []
    for w in capture.warps():
        k = kernels.get(w.kernel_id)
        if k is None:
            raise CudaGdbOutputError(f"warp {w.warp} of SM {w.sm} runs kernel {w.kernel_id}, which "
                                     "`info cuda kernels` does not list")
        func, offset = _locate(w.pc, bases, sass)
        instrs = sass[func]
        if offset not in instrs:
            raise CudaGdbOutputError(f"PC {w.pc:#x} is offset {offset:#x} of {func}, where the SASS dump has no "
                                     "instruction: is the dump of the same binary?")
        wait, waited = _wait(instrs, ordered[func], offset)
        info = capture.pcs.get(w.pc)
        t = lines.get((w.block, w.first_thread))
        bx, by, _ = k.block_dim
        linear = w.first_thread[0] + w.first_thread[1] * bx + w.first_thread[2] * bx * by
        out.append(WarpWait(
            w.kernel_id, k.invocation, w.device, w.sm, w.warp, w.block, w.first_thread, linear // 32,
            bin(w.active_lanes).count("1"), w.pc, func, offset, instrs[offset], wait, waited,
            info.source_file if info and info.source_file else (t.source_file if t else None),
            info.source_line if info and info.source_line else (t.source_line if t else None),
            info.call_file if info else None, info.call_line if info else None))
    return tuple(sorted(out, key=lambda x: (x.kernel_id, x.block[::-1], x.warp_in_block)))


def wait_sites(waits: Iterable[WarpWait]) -> tuple[WaitSite, ...]:
    """The warps grouped by the instruction they wait at, most warps first."""
    groups: dict[tuple[str, int], list[WarpWait]] = {}
    for w in waits:
        ins = w.wait_instruction or w.instruction
        groups.setdefault((w.function, ins.offset), []).append(w)
    sites = []
    for (func, off), ws in groups.items():
        first = ws[0]
        sites.append(WaitSite(func, off, first.wait, first.wait_instruction or first.instruction,
                              first.call_file, first.call_line, tuple(ws)))
    return tuple(sorted(sites, key=lambda s: (-len(s.warps), s.offset)))


def _locate(pc: int, bases: set[tuple[str, int]], sass: dict[str, dict[int, SassInstr]]) -> tuple[str, int]:
    for func, base in bases:
        if func in sass and 0 <= pc - base <= max(sass[func]):
            return func, pc - base
    known = ", ".join(sorted({f for f, _ in bases})) or "none"
    raise CudaGdbOutputError(f"PC {pc:#x} lies in no function whose load address the capture shows (known: "
                             f"{known}); capture `x/i $pc` for a warp of that kernel")


def _is_try_wait(i: SassInstr) -> bool:
    return i.opcode.startswith("SYNCS.PHASECHK") and "TRYWAIT" in i.opcode


def _wait(instrs: dict[int, SassInstr], order: list[int], pc: int) -> tuple[WaitKind, SassInstr | None]:
    at = instrs[pc]
    if _is_try_wait(at):
        return WaitKind.MBARRIER, at
    if at.opcode.startswith(("BAR.SYNC", "BAR.RED")):
        return WaitKind.BLOCK_BARRIER, at
    i = order.index(pc)
    # The guarded branch right after a try-wait consumes its predicate: still waiting.
    if at.guard and at.opcode == "BRA" and i > 0 and _is_try_wait(instrs[order[i - 1]]):
        return WaitKind.MBARRIER, instrs[order[i - 1]]
    # A warp blocked in a block barrier is reported at the instruction after it (measured on
    # the H200: fixtures/evidence/bulk_collective, 64 warps at 0x420, the BAR.SYNC at 0x410).
    if i > 0 and instrs[order[i - 1]].opcode.startswith(("BAR.SYNC", "BAR.RED")):
        return WaitKind.BLOCK_BARRIER, instrs[order[i - 1]]
    # In a spin loop (YIELD / NANOSLEEP / try-wait / back branch): the first branch at or
    # after the PC jumps back to or before it, and the loop holds a try-wait.
    for off in order[i:i + _LOOP_WINDOW]:
        ins = instrs[off]
        if ins.opcode in ("BRA", "EXIT", "RET", "BRX", "JMP"):
            target = re.match(r"(0x[0-9a-fA-F]+)", ins.operands)
            if ins.opcode == "BRA" and target and int(target.group(1), 16) <= pc:
                loop = [instrs[o] for o in order if int(target.group(1), 16) <= o <= off]
                waits = [x for x in loop if _is_try_wait(x)]
                if waits:
                    return WaitKind.MBARRIER, waits[-1]
            break
    return WaitKind.NONE, None
