"""The state an mbarrier's 64-bit word holds, as measured on the H200, and the reads of
those words that collect's hang capture makes with cuda-gdb.

The object is opaque in PTX. Its layout here is what fixtures/src/mbarrier/mbarrier_probe.cu
measured on the H200 (fixtures/mbarrier/cases.jsonl: 199 cases, one barrier put into a known
state per case by init / arrive / expect_tx / complete_tx / arrive.expect_tx, counts up to
2^20-1, tx bytes up to 2^20-1 and below zero, phases that wrap; the raw word; which parities
mbarrier.test_wait says completed). A generic `ld.shared.u64` of the word lags the barrier
unit: in every case both loads (after a test_wait, a fence and 2 us) returned the word as
the previous case had left it, so case i's word is the one case i+1 printed; read so, all
198 cases decode to the state the operations predict, and the parity bit agrees with
test_wait in each (tests/test_mbarrier.py). The layout:

- bit 0: 0;
- bits 1-20: the expected arrival count per phase, negated (two's complement, 20 bits);
- bits 21-41: the transaction bytes still owed in the current phase, negated (21 bits);
- bit 42: 0;
- bits 43-62: the arrivals still pending in the current phase, negated (20 bits);
- bit 63: the parity of the current (incomplete) phase: a wait for the other parity passes.

cuda-gdb reads the same words while the kernel hangs (`print/x *(@shared unsigned long
long *)ADDR`, fixtures/mbarrier/hang_cudagdb.txt: four barriers in known states, each word as
the layout predicts). What was not established is listed in `NOT_ESTABLISHED`."""

from __future__ import annotations

import re
from dataclasses import dataclass

NOT_ESTABLISHED = (
    "the layout on any GPU but the H200 (sm_90): Blackwell's is not measured",
    "bits 0 and 42: always 0 in every measured word; what sets them is not known",
    "a pending transaction count above 2^20-1 bytes (the PTX limit per phase) or below -(2^20-1)",
)

_COUNT = (1, 20)
_TX = (21, 21)
_PENDING = (43, 20)


def _field(word: int, at: tuple[int, int]) -> int:
    """A negated field, read back as the positive number it holds."""
    shift, width = at
    v = (word >> shift) & ((1 << width) - 1)
    return (-v) & ((1 << width) - 1) if v else 0


def _signed(word: int, at: tuple[int, int]) -> int:
    """A negated two's-complement field as a signed number (the tx count may go below zero
    when bytes complete before they are expected)."""
    shift, width = at
    v = (word >> shift) & ((1 << width) - 1)
    n = (-v) & ((1 << width) - 1)
    return n - (1 << width) if n >= 1 << (width - 1) else n


@dataclass(frozen=True)
class MbarrierWord:
    word: int
    phase_parity: int  # parity of the phase in progress
    expected: int  # arrivals each phase needs (the init count)
    pending_arrivals: int  # still owed in the phase in progress
    pending_tx: int  # transaction bytes still owed in the phase in progress (negative: completed early)

    def describe(self) -> str:
        done = self.expected - self.pending_arrivals
        tx = f", {self.pending_tx:,} tx byte(s) outstanding" if self.pending_tx else ", no tx bytes outstanding"
        return (f"phase parity {self.phase_parity} incomplete: {done} of {self.expected} arrival(s) in, "
                f"{self.pending_arrivals} pending{tx}")


def decode(word: int) -> MbarrierWord:
    """The fields of a raw mbarrier word (layout: the module docstring)."""
    if not 0 <= word < 1 << 64:
        raise ValueError(f"{word!r} is not a 64-bit word")
    return MbarrierWord(word, word >> 63, _field(word, _COUNT), _field(word, _PENDING), _signed(word, _TX))


@dataclass(frozen=True)
class BarrierRead:
    """One word cuda-gdb read during the hang: which barrier, in which CTA, at which address."""

    label: str  # kernel:barrier[slot]
    block: tuple[int, int, int]
    address: int
    word: int | None  # None: cuda-gdb could not read it (its message is in the file)


_MARK = re.compile(r"^==== mbarrier (\S+) block \((\d+),(\d+),(\d+)\) (0x[0-9a-fA-F]+)\s*$")
_VALUE = re.compile(r"^\$\d+ = (0x[0-9a-fA-F]+)\s*$")


def read_commands(label: str, block: tuple[int, int, int], address: int) -> list[str]:
    """The cuda-gdb commands that read one barrier word (the block is in focus already)."""
    return [f"echo ==== mbarrier {label} block ({block[0]},{block[1]},{block[2]}) {address:#x}\\n",
            f"print/x *(@shared unsigned long long *){address:#x}"]


def parse_reads(text: str) -> list[BarrierRead]:
    """The words a capture of `read_commands` holds, in order."""
    out: list[BarrierRead] = []
    cur: tuple[str, tuple[int, int, int], int] | None = None
    for line in text.splitlines():
        m = _MARK.match(line.strip())
        if m:
            if cur is not None:
                out.append(BarrierRead(cur[0], cur[1], cur[2], None))
            cur = (m.group(1), (int(m.group(2)), int(m.group(3)), int(m.group(4))), int(m.group(5), 16))
            continue
        v = _VALUE.match(line.strip())
        if v and cur is not None:
            out.append(BarrierRead(cur[0], cur[1], cur[2], int(v.group(1), 16)))
            cur = None
    if cur is not None:
        out.append(BarrierRead(cur[0], cur[1], cur[2], None))
    return out


# ---------------------------------------------------------------------------------------
# the waits themselves: which barrier each hung warp spins on, with which parity

# a try-wait (or test-wait) on an mbarrier's phase: `SYNCS.PHASECHK.TRANS64.TRYWAIT P1,
# [R35+URZ+0xc040], R4`: the predicate it sets, the address, the parity operand
# (cuda-gdb prints it without the spaces: `TRYWAIT P2[UR16+0xc060],R2`)
_PHASECHK = re.compile(r"SYNCS\.PHASECHK\.TRANS64(?:\.TRYWAIT)?\s+U?P\w+\s*,?\s*\[(?P<addr>[^\]]+)\]\s*,\s*"
                       r"(?P<parity>U?R\d+|U?RZ|0x[0-9a-fA-F]+|\d+)")
_WAIT_MARK = re.compile(r"^==== wait block \((\d+),(\d+),(\d+)\) warp (\d+)\s*$")
_INSN = re.compile(r"^(=>)?\s*0x([0-9a-fA-F]+)\s*<[^>]*\+(\d+)>:\s*(.*?)\s*$")
_REG = re.compile(r"^(U?R\d+|U?RZ|U?P\d+|PC)\s+(0x[0-9a-fA-F]+)\b")


@dataclass(frozen=True)
class LiveWait:
    """One hung warp's wait as its registers hold it during the hang."""

    block: tuple[int, int, int]
    warp: int
    offset: int | None  # the try-wait's offset in its function (None: no try-wait before the PC)
    instruction: str | None
    address: int | None  # the barrier's shared-window address (None: a register it needs was not read)
    parity: int | None  # the parity the wait asks for (bit 31 of its operand: _PARITY)


# The phase check's parity operand holds the parity in bit 31, measured on the H200: the
# waits of fixtures/evidence/bulk_missing_tx read 0x80000000 on barriers whose word shows
# phase parity 1 in progress (waiting for it), those of deadlock_ptx and the Gluon kernels 0
# on barriers in phase 0. Any other value is not read as a parity.
_PARITY = {0: 0, 0x80000000: 1}


def wait_commands(block: tuple[int, int, int], warp: int) -> list[str]:
    """The cuda-gdb commands that read one warp's wait (its thread is in focus already):
    the three instructions up to its PC (a spin loop's branch sits right after the
    try-wait; every SASS instruction is 16 bytes) and its registers."""
    return [f"echo ==== wait block ({block[0]},{block[1]},{block[2]}) warp {warp}\\n", "x/3i $pc-32",
            "info registers"]


def _operand(term: str, regs: dict[str, int]) -> int | None:
    term = term.strip()
    if term in ("RZ", "URZ"):
        return 0
    if re.fullmatch(r"-?0x[0-9a-fA-F]+|-?\d+", term):
        return int(term, 0)
    return regs.get(term)


def parse_waits(text: str) -> list[LiveWait]:
    """The waits a capture of `wait_commands` holds: for each warp whose instructions up to
    its PC include an mbarrier phase check, the address its operands compute and the parity
    it asks for, from the registers cuda-gdb printed (32-bit registers; an address of a
    register not printed is None)."""
    out: list[LiveWait] = []
    cur: tuple[tuple[int, int, int], int] | None = None
    insns: list[tuple[int, str, bool]] = []
    regs: dict[str, int] = {}

    def close() -> None:
        if cur is None:
            return
        at = [i for i, (_, _, here) in enumerate(insns) if here]
        upto = insns[: at[0] + 1] if at else insns
        chk = [(off, ins) for off, ins, _ in upto if _PHASECHK.search(ins)]
        if not chk:
            out.append(LiveWait(cur[0], cur[1], None, None, None, None))
            return
        off, ins = chk[-1]
        m = _PHASECHK.search(ins)
        assert m is not None
        parts = [_operand(t, regs) for t in re.split(r"\+", m["addr"].replace("-", "+-")) if t.strip()]
        addr = sum(p for p in parts if p is not None) & 0xFFFFFFFF if None not in parts else None
        par = _operand(m["parity"], regs)
        out.append(LiveWait(cur[0], cur[1], off, ins, addr, _PARITY.get(par & 0xFFFFFFFF) if par is not None
                            else None))

    for line in text.splitlines():
        s = line.strip()
        m = _WAIT_MARK.match(s)
        if m:
            close()
            cur = ((int(m.group(1)), int(m.group(2)), int(m.group(3))), int(m.group(4)))
            insns, regs = [], {}
            continue
        if cur is None:
            continue
        if (i := _INSN.match(s)) is not None:
            insns.append((int(i.group(3)), i.group(4), bool(i.group(1))))
        elif (r := _REG.match(s)) is not None:
            regs[r.group(1)] = int(r.group(2), 16)
    close()
    return out
