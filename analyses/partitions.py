"""Warp-specialization partitions from SASS: which warps run which code, and the job of each.

`roles.py` splits a kernel's code by what it does (copies, math); this module splits it by
who runs it. A warp-specialized kernel picks its partition from the warp index, and every
compiler spells that dispatch its own way in SASS:

- hand-written CUDA and CuTe DSL: `S2R SR_TID.X`, `SHF.R.U32.HI R, RZ, 0x5` (the warp),
  often `SHFL.IDX` of it (warp-uniform), then `ISETP` against constants and guarded `BRA`;
- Triton / Gluon `warp_specialize`: the default warps (`warp < 4`) run one partition; the
  other warps read a byte per warp from a table in shared memory (`LDS.U8 [base + warp +
  off]`, filled by the default warps with `STS` of a constant) and branch on it, directly
  (`ISETP`, `BRA`) or through a jump table (`LDC c[0x2][...]`, `BRX`);
- `ELECT` and lane tests (`LOP3.LUT P, RZ, R, 0x1f`) split lanes, not warps: both ways.

Each warp of the CTA is run through the control-flow graph once (`_Walk`), with the values
that derive from its thread index known lane by lane and everything else unknown: a branch
whose predicate is uniform over the warp's 32 lanes takes one edge, any other both. Warps
that reach the same blocks form one partition. A block every partition reaches is setup
(before the dispatch) or shared by all (after it); one that some reach is named by those.

A partition's job is read from what its own blocks issue: TMA / bulk / cp.async loads
(producer), wgmma / tcgen05 / mma.sync issue or FMA math (consumer; an FMA by the zero
register is a constant move, not math), Cluster Launch Control's work fetch alone
(`UGETNEXTWORKID`: scheduler, whose role key is producer; where no partition does math, the
partitions working on the fetched tiles are its consumers), tensor-memory loads
and TMA or global stores without loads or math (epilogue), exp2 per score without MMA (softmax),
tensor memory read, rescaled and written back without MMA (correction), or
nothing (idle). Its register budget is the first `USETMAXREG` on its own path, else the
first in code it shares with some partitions but not all (its warpgroup's, run before the
branch that tells its warps apart).

What the SASS cannot decide is said, not guessed (`Partitions.basis`): the CTA's warp
count is not in the SASS (a profile's launch gives it; otherwise the last partition's warps
are open-ended, "4+"), a warp table's values are taken as its first stores, and a `BRX`
jump table lives in a constant bank the SASS text does not hold. Where the cubin is at hand
(a `.cubin` given to `inspect`, a report's embedded cubins) the loader appends the kernel's
bank 2 to the `BRX` (`cubin.jump_tables`) and its entries are the targets, in table order;
otherwise the targets are taken as the blocks nothing else branches to, in address order
(Triton's table is not in address order: that reading swapped its loader and idle warps).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

LANES = 32
SOFTMAX_EX2 = 8  # exp2 (MUFU.EX2 / ex2.) in a partition without MMA from which it is a softmax (one per score)
# Warps tried when the CTA's size is unknown (static SASS): the most a CTA holds.
_MAX_WARPS = 32
_REG = re.compile(r"^!?(U?R\d+|U?RZ|U?P\d+|U?PT)$")
_PRED = re.compile(r"^!?U?P(\d+|T)$")
_IMM = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")
_ADDR = re.compile(r"\[([^\]]*)\]")
_TARGET = re.compile(r"(0x[0-9a-fA-F]+)\s*;?\s*$")
_CMP = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
        "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}
# Writers of many registers at once (accumulators, tensor-memory loads): every tracked
# register from the destination up is dropped.
_WIDE = re.compile(r"^(HGMMA|UTC|LDTM|HMMA|IMMA|QGMMA|LDSM)")


def _imm(tok: str) -> int | None:
    return int(tok, 0) & 0xFFFFFFFF if _IMM.match(tok) else None


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass(frozen=True)
class _Op:
    """One instruction, parsed once: guard, opcode with modifiers, operands."""

    pc: int
    guard: str | None
    op: str
    args: tuple[str, ...]
    targets: tuple[int, ...] | None = None  # a BRX's jump table, read from the cubin (`cubin.jump_tables`)

    @property
    def base(self) -> str:
        return self.op.split(".")[0]


_BANK2 = re.compile(r'\s*\(\*"c\[0x2\] (0x[0-9a-fA-F]+(?:,0x[0-9a-fA-F]+)*)"\*\)\s*$')


def _parse(pc: int, text: str) -> _Op:
    t = (text or "").strip().rstrip(";").strip()
    targets = None
    if "(*" in t and (m := _BANK2.search(t)):
        targets = tuple(int(x, 16) for x in m.group(1).split(",") if x)
        t = t[:m.start()].rstrip(" ;")
    guard = None
    if t.startswith("@"):  # ncu pads the guard with spaces, nvdisasm with one
        guard, _, t = t.partition(" ")
        guard, t = guard[1:], t.strip()
    op, _, rest = t.partition(" ")
    args = tuple(a.strip().replace(".reuse", "") for a in rest.split(",")) if rest.strip() else ()
    return _Op(pc, guard, op, args, targets)


@dataclass
class Partition:
    name: str  # producer | consumer | scheduler | epilogue | softmax | correction | idle
    warps: tuple[int, ...]
    open_ended: bool  # the CTA's size is unknown: the last warps go on past these
    job: str  # what its own code issues, e.g. 'TMA load', 'MMA issue (tcgen05), TMA store'
    registers: int | None  # first setmaxnreg on its own path
    blocks: set[int] = field(default_factory=set)

    @property
    def role(self) -> str:
        """The role key the hypotheses read: producer, consumer or common. A scheduler
        produces the work its kernel's consumers wait for (on an mbarrier): a producer."""
        if self.name == "scheduler":
            return "producer"
        return self.name if self.name in ("producer", "consumer") else "common"

    @property
    def warps_text(self) -> str:
        runs: list[list[int]] = []
        for w in self.warps:
            if runs and w == runs[-1][1] + 1:
                runs[-1][1] = w
            else:
                runs.append([w, w])
        text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
        if self.open_ended:
            text = (text.rsplit("-", 1)[0] if runs[-1][0] != runs[-1][1] else text) + "+"
        return text

    @property
    def label(self) -> str:
        one = len(self.warps) == 1 and not self.open_ended
        return f"{self.name} (warp{'' if one else 's'} {self.warps_text})"


@dataclass
class Partitions:
    """The partitions of one kernel and the label of every block."""

    parts: list[Partition]
    block_label: dict[int, str]  # block start -> partition label, or setup/shared label
    block_role: dict[int, str]  # block start -> producer | consumer | common
    basis: str  # 'evidence' (compares on the warp index) | 'assumption' (see the module)
    assumptions: tuple[str, ...]


_FMA = re.compile(r"^(FFMA|HFMA2|HFMA|DFMA)(\.|$)")
_ZERO = re.compile(r"^[-|]*U?RZ(\.[A-Z0-9_]+)?\|?$")


def constant_move(op: _Op) -> bool:
    """An FMA whose multiplicands include the zero register is no math: `HFMA2 R5, -RZ, RZ,
    0, 5.96e-08` is ptxas's way to load a constant (0 * x + c = c), in copy, TMA and
    epilogue code alike. (That is also how Triton's warp table gets its values: `_table`.)"""
    return bool(_FMA.match(op.op)) and len(op.args) >= 4 and any(_ZERO.match(t) for t in op.args[1:3])


_TMEM_REGS = re.compile(r"\.x(\d+)")


def _reg_range(op: _Op, arg: str) -> range:
    """The registers a tensor-memory load or store moves: `LDTM.x64 R4, ...` is R4..R67."""
    m = re.match(r"R(\d+)", arg.strip())
    if not m:
        return range(0)
    n = _TMEM_REGS.search(op.op)
    return range(int(m.group(1)), int(m.group(1)) + (int(n.group(1)) if n else 1))


def _rescales_tmem(ops: list[_Op]) -> bool:
    """The partition reads tensor memory, multiplies what it read and writes the products
    back (attention's correction: O times alpha, in place), traced through the registers in
    code order. A tcgen05.st of values no LDTM gave (Triton's epilogue zeroing its
    accumulator) is not a rescale."""
    loaded: set[int] = set()
    scaled: set[int] = set()
    for o in ops:
        if o.op.startswith("LDTM") and o.args:
            loaded.update(_reg_range(o, o.args[0]))
        elif re.match(r"^(FMUL|FFMA)\b", o.op) and len(o.args) >= 3:
            srcs = {int(m) for a in o.args[1:] for m in re.findall(r"\bR(\d+)", a)}
            d = re.match(r"R(\d+)", o.args[0].strip())
            if d and srcs & loaded:
                scaled.add(int(d.group(1)))
        elif o.op.startswith("STTM") and len(o.args) >= 2 and scaled.intersection(_reg_range(o, o.args[1])):
            return True
    return False


ROW_REDUCTION = 16  # selects chained through one register from which a partition reduces rows (a softmax's maximum)


def _select_chain(ops: list[_Op]) -> int:
    """The longest chain of compare-and-select (FSEL) or FMNMX results each fed to the next:
    a row maximum reduced one value at a time (CuTe writes `max` as FSETP + FSEL into one
    register). A clamp or GELU's range handling selects per element: chains of one or two."""
    chain: dict[str, int] = {}
    best = 0
    for o in ops:
        if not re.match(r"^(FSEL|FMNMX)\b", o.op) or len(o.args) < 3:
            if o.args and re.match(r"R\d+$", o.args[0].strip()):
                chain.pop(o.args[0].strip(), None)  # the register written by something else
            continue
        d = o.args[0].strip()
        n = 1 + max((chain.get(a.strip().split(".")[0], 0) for a in o.args[1:3]), default=0)
        chain[d] = n
        best = max(best, n)
    return best


def _job(ops: list[_Op]) -> tuple[str, str]:
    """(partition name, job) from the opcodes a partition's own blocks issue."""
    names = [o.op for o in ops]
    has = lambda p: any(re.match(p, n) for n in names)  # noqa: E731
    loads = [j for p, j in ((r"^UTMALDG", "TMA load"), (r"^UBLKCP\.S\.G", "bulk copy load"),
                            (r"^LDGSTS", "cp.async load")) if has(p)]
    math = sum(bool(re.match(r"^(FFMA|FMUL|FADD|HFMA2|HMUL2|HADD2|DFMA|DMUL|DADD)", o.op)) and not constant_move(o)
               for o in ops)
    mma = [j for p, j in ((r"^[HQIB]GMMA", "MMA issue (wgmma)"), (r"^UTC[A-Z]*MMA", "MMA issue (tcgen05)"),
                          (r"^[HID]MMA", "MMA (mma.sync)")) if has(p)]
    if not loads and not mma and not math >= 4 and has(r"^LDG") and has(r"^STS"):
        loads = ["global loads"]
    stores = [j for p, j in ((r"^LDTM", "tensor-memory load"), (r"^UTMASTG", "TMA store"), (r"^STG", "global stores"))
              if has(p)]
    softmax = has(r"^MUFU\.EX2")
    tmem = [j for p, j in ((r"^LDTM", "tensor-memory load"), (r"^STTM", "tensor-memory store")) if has(p)]
    ex2 = sum(n.startswith("MUFU.EX2") for n in names)
    # a softmax that also stores the final output (attention's default warps) keeps the name:
    # its row maxima (FMNMX) tell it from an epilogue's activation (SiLU, GELU: no maximum)
    # (a compare-and-select maximum, FSETP + FSEL, counts only as a chain through one
    # register: GELU's and SwiGLU's range handling has as many selects, each on its own value)
    softmax_rows = not mma and ex2 >= SOFTMAX_EX2 and (sum(n.startswith("FMNMX") for n in names) >= 4
                                                       or _select_chain(ops) >= ROW_REDUCTION)
    if not mma and ex2 < SOFTMAX_EX2 and len(tmem) == 2 and _rescales_tmem(ops):
        # the correction, though it also stores the final O / l at the end: the accumulator
        # rescaled in place is no epilogue's work
        return "correction", ", ".join(["rescales tensor memory (correction)"] + [
            j for j in stores if j not in tmem])
    if not mma and not softmax_rows and "TMA load" not in loads and has(r"^LDTM") and \
            any(j in stores for j in ("TMA store", "global stores")):
        # an epilogue: the accumulator loaded from tensor memory, its math elementwise (bias,
        # an activation whose exp2 is no softmax: SiLU, sigmoid, GELU), the results stored to
        # global memory, by TMA or not. A softmax keeps its result on chip for the next MMA.
        return "epilogue", ", ".join(loads + stores + (["FMA math"] if math >= 4 else []))
    if not mma and ex2 >= SOFTMAX_EX2:
        # attention's softmax without MMA: an exp2 per score (Triton's sm_100 attention lowering)
        return "softmax", ", ".join(["softmax (exp2)"] + loads + tmem + [j for j in stores if j not in tmem])
    if not mma and len(tmem) == 2 and math >= 4 and not has(r"^(STG|UTMASTG|UBLKCP\.G\.S|REDG|ATOMG|RED\.)"):
        # the correction: the accumulator in tensor memory read, rescaled and written back
        # there. One that also stores to global memory (STG, TMA or bulk store) is an
        # epilogue: Triton's default warps zero the accumulator (tcgen05.st), then load it
        # (tcgen05.ld) and store the results.
        return "correction", "rescales tensor memory (correction)"
    work = mma or (["FMA math"] if math >= 4 else [])
    # Cluster Launch Control (sm_100 `clusterlaunchcontrol.try_cancel` -> UGETNEXTWORKID): an
    # asynchronous fetch of the next tile that completes transaction bytes on an mbarrier.
    clc = ["CLC work fetch"] if has(r"^UGETNEXTWORKID") else []
    if loads and not work:
        return "producer", ", ".join(loads + clc)
    if work:
        return "consumer", ", ".join(work + loads + (["softmax (exp2)"] if softmax else []) + stores + clc)
    if clc:
        return "scheduler", ", ".join(clc + stores)
    if softmax:
        return "softmax", ", ".join(["softmax (exp2)"] + stores)
    if stores:
        return "epilogue", ", ".join(stores)
    return "idle", "none"


class _Walk:
    """The blocks one warp reaches (see the module docstring)."""

    def __init__(self, ops: dict[int, list[_Op]], succ: dict[int, list[int]], brx: list[int],
                 tables: list[dict[int, int]]) -> None:
        self.ops, self.succ, self.brx, self.tables = ops, succ, brx, tables or [{}]

    def run(self, warp: int) -> tuple[set[int], bool, bool]:
        """(blocks reached, whether a warp table was read, whether it missed the table):
        the union over the warp table's versions (a second `warp_specialize` region's
        stores send a worker warp to another entry), missed when the first misses."""
        reached, read, missed = set(), False, False
        for k, table in enumerate(self.tables):
            r, rd, ms = self._run(warp, table)
            reached |= r
            read |= rd
            if k == 0:
                missed = ms
            if not rd:
                break  # no table read: every version walks alike
        return reached, read, missed

    def _run(self, warp: int, table: dict[int, int]) -> tuple[set[int], bool, bool]:
        self.warp, self.read_table, self.missed, self.table = warp, False, False, table
        entry = min(self.ops)
        states: dict[int, dict] = {entry: {}}
        work = [entry]
        while work:
            b = work.pop()
            st = dict(states[b])
            for t in self._block(b, st):
                old = states.get(t)
                new = st if old is None else {k: v for k, v in old.items() if st.get(k) == v}
                if old is None or new != old:
                    states[t] = new
                    work.append(t)
        return set(states), self.read_table, self.missed

    # -- values: a register maps to its 32 lanes' values, a predicate to 32 bools
    def _val(self, st: dict, tok: str):
        neg = tok.startswith("!")
        tok = tok.lstrip("!")
        v = _imm(tok)
        if v is not None:
            return (v,) * LANES
        minus = tok.startswith("-")
        tok = tok.lstrip("-")
        if tok in ("RZ", "URZ"):
            return (0,) * LANES
        if tok in ("PT", "UPT"):
            return (not neg,) * LANES
        v = st.get(tok)
        if v is not None and neg:
            v = tuple(not x for x in v)
        if v is not None and minus:
            v = tuple(-x & 0xFFFFFFFF for x in v)
        return v

    def _uniform(self, st: dict, pred: str) -> bool | None:
        v = self._val(st, pred)
        return v[0] if v is not None and all(x == v[0] for x in v) else None

    def _kill(self, st: dict, op: _Op) -> None:
        """Forget what `op` writes: its destination, and a second one when that is a
        predicate (carries, ISETP's pair)."""
        dests = [t.lstrip("!") for t in op.args[:2]]
        dests = dests[:1] + [t for t in dests[1:] if _PRED.match(t)]
        for tok in dests:
            if not _REG.match(tok):
                break
            for k in (tok, "b:" + tok, "jt:" + tok):
                st.pop(k, None)
            if not tok.startswith("R") or tok == "RZ":
                continue
            n = int(tok[1:])
            if _WIDE.match(op.op):
                for k in [k for k in st if k[:1] == "R" and k[1:].isdigit() and int(k[1:]) >= n]:
                    del st[k]
            elif any(w in op.op for w in (".64", ".WIDE", ".128", "CS2R")):
                for k in range(1, 4 if ".128" in op.op else 2):  # a register pair or quad
                    st.pop(f"R{n + k}", None)
                    st.pop(f"b:R{n + k}", None)

    def _exec(self, st: dict, op: _Op) -> None:
        a, name, base = op.args, op.op, op.base
        out = None
        if base in ("S2R", "CS2R") and len(a) == 2:
            if a[1] == "SR_TID.X":
                out = tuple(LANES * self.warp + lane for lane in range(LANES))
            elif a[1] == "SR_LANEID":
                out = tuple(range(LANES))
        elif base in ("MOV", "UMOV", "R2UR") and len(a) >= 2:
            out = self._val(st, a[1])
            if out is None and st.get("b:" + a[1]) is not None:
                # a window base + warp moved to another register (then spilled: Gluon's
                # `MOV R0, UR4; STL [R1+0x64], R0` before its setmaxnreg)
                based = st["b:" + a[1]]
                self._kill(st, op)
                st["b:" + a[0]] = based
                return
        elif name in ("IMAD.MOV.U32", "IMAD.MOV", "IMAD.U32") and len(a) == 4 and a[1] in ("RZ", "URZ"):
            out = self._val(st, a[3])
        elif base in ("SHF", "USHF") and len(a) == 4:
            x, s = (self._val(st, a[3]), _imm(a[2])) if ".R." in name else (self._val(st, a[1]), _imm(a[2]))
            if x is not None and s is not None and (a[1] in ("RZ", "URZ") if ".R." in name else a[3] in ("RZ", "URZ")):
                out = tuple((v >> s) if ".R." in name else (v << s) & 0xFFFFFFFF for v in x)
        elif base in ("VIADD", "IADD3", "UIADD3") or name == "IMAD.IADD":
            # Sums: a term that is not known is a base (a shared-memory window), kept apart
            # so that base + warp still indexes a warp table.
            terms = [t for t in a[1:] if not _PRED.match(t.lstrip("!"))]
            if name == "IMAD.IADD" and len(terms) == 3 and terms[1] == "0x1":
                terms = [terms[0], terms[2]]
            if a and 2 <= len(terms) <= 3:
                vals, based, tracked = [], False, False
                for t in terms:
                    v = self._val(st, t)
                    if v is None:
                        v, based = st.get("b:" + t.lstrip("-")), True
                    elif _imm(t.lstrip("-")) is None and t.lstrip("-") not in ("RZ", "URZ"):
                        tracked = True
                    vals.append(v if v is not None else (0,) * LANES)
                total = tuple(sum(c) & 0xFFFFFFFF for c in zip(*vals))
                if based and (tracked or any(st.get("b:" + t.lstrip("-")) for t in terms)):
                    self._kill(st, op)
                    st["b:" + a[0]] = total
                    return
                if not based:
                    out = total
        elif name in ("IMAD.SHL.U32", "IMAD.SHL") and len(a) == 4:
            x, y = self._val(st, a[1]), self._val(st, a[2])
            if x is not None and y is not None:
                out = tuple((p * q) & 0xFFFFFFFF for p, q in zip(x, y))
        elif base in ("VIMNMX", "IMNMX", "UIMNMX") and len(a) >= 4 and _PRED.match(a[-1].lstrip("!")):
            # min / max: `VIMNMX.U32 R0, PT, PT, R132, 0x3, PT` (sm_100, two predicate
            # outputs first) or `VIMNMX R4, R2, 0x700, !PT` (sm_90); the last predicate picks
            # min (true) or max (false). TIRx clamps the warp index into its BRX table so.
            srcs = [t for t in a[1:-1] if not _PRED.match(t.lstrip("!"))]
            sel = self._val(st, a[-1])
            vals = [self._val(st, t) for t in srcs]
            if len(srcs) == 2 and sel is not None and None not in vals:
                key = (lambda v: v) if ".U32" in name else _s32
                out = tuple((min if s else max)(p, q, key=key) for p, q, s in zip(*vals, sel))
        elif base in ("VIADDMNMX", "UVIADDMNMX") and len(a) == 5 and _PRED.match(a[-1].lstrip("!")):
            # add then min / max: `VIADDMNMX.U32 R0, R2, R0, 0x2, PT` is min(R2 + R0, 2) (the
            # last predicate picks min when true): CuTe's and TIRx's warp index clamped into a
            # BRX table, `min(warp - 4, 2)` (warps below 4 wrap, as .U32, to the last entry)
            x, y, c = (self._val(st, t) for t in a[1:4])
            sel = self._val(st, a[-1])
            if None not in (x, y, c, sel):
                key = (lambda v: v) if ".U32" in name else _s32
                out = tuple((min if q else max)((p + r) & 0xFFFFFFFF, w, key=key)
                            for p, r, w, q in zip(x, y, c, sel))  # type: ignore[arg-type]
        elif base in ("LOP3", "ULOP3") and len(a) in (6, 7) and a[-1] in ("!PT", "!UPT") \
                and a[-2] == "0xc0" and a[-3] in ("RZ", "URZ"):
            # a AND: LOP3.LUT R, a, b, RZ, 0xc0, !PT (`R132 & 0xfffffffc`: TIRx's warpgroup
            # test) or LOP3.LUT P, R, a, b, RZ, 0xc0, !PT (P = (a & b) != 0: a lane or warp
            # test). Other functions stay unknown: evaluated, they decided a cp.async
            # producer's remainder loop test per lane (gemm.sm_90a) and left it unreached.
            x, y, z = (self._val(st, t) for t in a[-5:-2])
            lut = 0xc0
            res = None if None in (x, y, z) else tuple(_lut(lut, p, q, r) for p, q, r in zip(x, y, z))
            if len(a) == 7:
                if not _PRED.match(a[0]):
                    self._kill(st, op)
                    return
                self._set(st, a[0], None if res is None else tuple(v != 0 for v in res))
                self._set(st, a[1], res)
                return
            out = res
        elif base in ("ISETP", "UISETP") and len(a) == 5:
            self._set(st, a[0], self._compare(st, name, a))
            self._set(st, a[1], None)
            return
        elif name == "PLOP3.LUT" and len(a) == 7 and a[5] == "0x80":
            x, y, z = (self._val(st, t) for t in a[2:5])
            self._set(st, a[0], None if None in (x, y, z) else tuple(p and q and r for p, q, r in zip(x, y, z)))
            self._set(st, a[1], None)
            return
        elif base == "SHFL" and name.startswith("SHFL.IDX") and len(a) == 5:
            x, src = self._val(st, a[2]), self._val(st, a[3])
            if x is not None and src is not None and all(s == src[0] for s in src):
                out = (x[src[0] % LANES],) * LANES
            self._set(st, a[0], None)
            self._set(st, a[1], out)
            return
        elif base == "ELECT" and a:
            self._set(st, a[0], tuple(lane == 0 for lane in range(LANES)))  # one lane: counted as lane 0
            for t in a[1:2]:
                self._set(st, t, None)
            return
        elif base == "STL" and len(a) == 2:
            # a spill: the value (or the window base) kept under its local address, for the
            # LDL that reloads it (Gluon's gather GEMM spills `base + warp` across its
            # setmaxnreg loop, then reads the warp table through the reload)
            slot = "l:" + a[0].replace(" ", "")
            wide = ".64" in name or ".128" in name
            for k in [k for k in st if k.startswith("l:")]:
                if wide or not _local_disjoint(k, slot):
                    del st[k]
            v, b = st.get(a[1]), st.get("b:" + a[1])
            if not wide and (v is not None or b is not None):
                st[slot] = (v, b)
            return
        elif base == "LDL" and len(a) == 2 and ".64" not in name and ".128" not in name:
            kept = st.get("l:" + a[1].replace(" ", ""))
            self._kill(st, op)
            if kept is not None:
                v, b = kept
                self._set(st, a[0], v)
                if b is not None:
                    st["b:" + a[0]] = b
            return
        elif name.startswith("LDS.U8") and len(a) == 2:
            out = self._lookup(st, a[1])
        elif base == "LDC" and len(a) == 2 and a[1].startswith("c[0x2]["):
            idx = self._val(st, a[1][len("c[0x2]["):].rstrip("]"))
            st["jt:" + a[0]] = None if idx is None else tuple(v // 4 for v in idx)
            st.pop(a[0], None)
            return
        self._kill(st, op)
        if out is not None and a:
            self._set(st, a[0], out)

    def _set(self, st: dict, reg: str, v) -> None:
        if reg in ("PT", "UPT", "RZ", "URZ"):
            return
        st.pop("b:" + reg, None)
        st.pop("jt:" + reg, None)
        if v is None:
            st.pop(reg, None)
        else:
            st[reg] = v

    def _compare(self, st: dict, name: str, a: tuple[str, ...]):
        parts = name.split(".")
        cmp = next((p for p in parts if p in _CMP), None)
        x, y, c = self._val(st, a[2]), self._val(st, a[3]), self._val(st, a[4])
        if cmp is not None and (x is None or y is None) and c is not None and \
                a[4].lstrip("!") not in ("PT", "UPT") and ("OR" in parts or "AND" in parts):
            # the compare is not a warp test (CuTe's `warp == 4 and tile < n` as `P1 = warp != 4;
            # P0 = tile >= n || P1`) and the predicate it combines with is known: the warp test
            # decides, as the other way round below
            return c
        if cmp is None or x is None or y is None:
            return None
        f = _CMP[cmp]
        res = tuple(f(p, q) if "U32" in parts else f(_s32(p), _s32(q)) for p, q in zip(x, y))
        if c is None:
            # the combined predicate is not a warp test (a tile loop's bound, a kernel argument:
            # CuTe's `warp != 1 || no tile` before the TMA-store warp's EXIT): it is taken as
            # letting the code run, as the worksheet takes such branches, so the warp test
            # alone decides the partition
            return res if "OR" in parts or "AND" in parts else None
        if "OR" in parts:
            return tuple(r or k for r, k in zip(res, c))
        if "AND" in parts:
            return tuple(r and k for r, k in zip(res, c))
        return None

    def _lookup(self, st: dict, addr: str):
        """A byte of the warp table: the address is base + warp + offset."""
        m = _ADDR.search(addr)
        if not m:
            return None
        terms = m.group(1).replace("-", "+-").split("+")
        off, known = 0, []
        for t in terms:
            t = t.strip()
            v = _imm(t)
            if v is not None:
                off += _s32(v)
            elif st.get(t) is not None or st.get("b:" + t) is not None:
                known.append(st.get(t) or st["b:" + t])
        if len(known) != 1 or not all(v == known[0][0] for v in known[0]):
            return None
        self.read_table = True
        at = off + known[0][0]
        if at not in self.table:
            self.missed = True
            return None
        return (self.table[at],) * LANES

    def _block(self, b: int, st: dict) -> list[int]:
        ops = self.ops[b]
        for op in ops[:-1]:
            self._guarded(st, op)
        last = ops[-1]
        succ = self.succ[b]
        if last.base == "BRX":
            idx = st.get("jt:" + (last.args[0].split()[0] if last.args else ""))
            if last.targets is not None:  # the table itself, from the cubin's constant bank
                table = [t for t in last.targets if t in self.ops]
                if idx is not None and all(v == idx[0] for v in idx):
                    t = last.targets[idx[0]] if idx[0] < len(last.targets) else None
                    return [t] if t in self.ops else []
                return table
            if idx is not None and all(v == idx[0] for v in idx):
                return [self.brx[idx[0]]] if idx[0] < len(self.brx) else []  # past the targets: the exit entry
            return list(self.brx)
        taken = None
        if last.base in ("BRA", "EXIT", "RET", "JMP"):
            cond = last.guard or (last.args[0] if len(last.args) == 2 and _PRED.match(last.args[0]) else None)
            taken = True if cond is None else self._uniform(st, cond)
        else:
            self._guarded(st, last)
        if taken is None or last.base not in ("BRA", "JMP", "EXIT", "RET"):
            return succ
        target = _branch_target(last)
        if last.base in ("EXIT", "RET"):
            return [] if taken else [s for s in succ]
        return [s for s in succ if (s == target) == taken]

    def _guarded(self, st: dict, op: _Op) -> None:
        if op.guard is None:
            self._exec(st, op)
            return
        g = self._uniform(st, op.guard)
        if g is True:
            self._exec(st, op)
        elif g is None:
            self._kill(st, op)


_LOCAL = re.compile(r"^l:\[(\w+)(?:\+(0x[0-9a-fA-F]+))?\]$")


def _local_disjoint(k1: str, k2: str) -> bool:
    """Two 32-bit local slots `[R1+0xac]`, `[R1+0xb0]` on one base register do not overlap."""
    m1, m2 = _LOCAL.match(k1), _LOCAL.match(k2)
    if not m1 or not m2 or m1.group(1) != m2.group(1):
        return False
    return int(m1.group(2) or "0", 16) != int(m2.group(2) or "0", 16)


def _lut(lut: int, a: int, b: int, c: int) -> int:
    """LOP3's three-input function: bit i of `lut` is the result where (a, b, c) = i's bits."""
    out = 0
    for i in range(8):
        if lut >> i & 1:
            out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return out & 0xFFFFFFFF


def _branch_target(op: _Op) -> int | None:
    m = _TARGET.search(op.args[-1]) if op.args else None
    return int(m.group(1), 16) if m else None


def _table(ops: list[_Op]) -> list[dict[int, int]]:
    """Versions of the warp table, shared-memory offset -> byte, from `STS` of constants in
    code order: the first stores per offset (the first region's dispatch), then after each
    store that changes a byte the table with it written (a second `warp_specialize` region's
    values, the exit value the default warps store when done)."""
    consts: dict[str, int] = {}
    table: dict[int, int] = {}
    current: dict[int, int] = {}
    versions: list[dict[int, int]] = []
    for op in ops:
        a = op.args
        if op.op in ("IMAD.MOV.U32", "IMAD.MOV") and len(a) == 4 and a[1] == "RZ" and a[2] == "RZ":
            v = _imm(a[3]) if a[3] != "RZ" else 0
            if v is not None and op.guard is None:
                consts[a[0]] = v
                continue
        if op.base == "HFMA2" and len(a) == 5 and a[1] in ("RZ", "-RZ") and a[2] in ("RZ", "-RZ") \
                and op.guard is None:
            # -0 * 0 + (a, b): ptxas's way to put a constant whose halves are fp16 immediates
            # (0x02020202 is `HFMA2 R6, -RZ, RZ, 3.06e-05, 3.06e-05`); the first is the HIGH
            # half: Triton's table 0x02000101 (bytes {1, 1, 0, 2}, its IMAD.MOV.U32 form) is
            # `HFMA2 R7, -RZ, RZ, 3.0517578125e-05, 1.5318393707275390625e-05` (0x0200, 0x0101)
            try:
                hi, lo = (struct.unpack("<H", struct.pack("<e", float(x)))[0] for x in a[3:5])
            except (ValueError, OverflowError, struct.error):
                lo = hi = None
            if lo is not None and hi is not None:
                consts[a[0]] = lo | (hi << 16)
                continue
        if op.base == "MOV" and len(a) == 2 and (a[1] == "RZ" or _imm(a[1]) is not None) and op.guard is None:
            consts[a[0]] = 0 if a[1] == "RZ" else _imm(a[1])  # `MOV R4, RZ`: table bytes {0, 0, 0, 0}
            continue
        if op.base == "STS" and len(a) == 2 and op.guard is None:
            m = _ADDR.search(a[0])
            words = {"STS": 1, "STS.64": 2, "STS.128": 4}.get(op.op)
            src = a[1]
            if m and words and src.startswith("R") and src != "RZ":
                off = next((_s32(v) for t in m.group(1).split("+") if (v := _imm(t.strip())) is not None), 0)
                n = int(src[1:])
                vals = [consts.get(f"R{n + k}") for k in range(words)]
                if all(v is not None for v in vals):
                    changed = False
                    for k, v in enumerate(vals):
                        for j in range(4):
                            at, byte = off + 4 * k + j, (v >> (8 * j)) & 0xFF
                            changed |= at in table and current.get(at) != byte
                            table.setdefault(at, byte)
                            current[at] = byte
                    if changed:
                        versions.append(dict(current))
        for t in a[:1]:
            if t in consts and not (op.base == "STS"):
                consts.pop(t)
    return [table] + versions


def recover(instrs: list, blocks: dict, warps: int | None = None) -> Partitions | None:
    """The partitions of one kernel (`roles.Instr` rows, `roles.Block`s), or None when its
    warps all run one code path (or the dispatch is not readable)."""
    if not blocks or not any("SR_TID.X" in (i.text or "") for i in instrs):
        return None
    ops = {s: [_parse(i.pc, i.text) for i in b.instrs] for s, b in blocks.items()}
    starts = sorted(blocks)
    nxt = dict(zip(starts, starts[1:]))
    succ: dict[int, list[int]] = {}
    for s, b in blocks.items():
        out = sorted(b.succ)
        last = ops[s][-1]
        if last.base in ("EXIT", "RET") and last.guard and s in nxt and nxt[s] not in out:
            out.append(nxt[s])  # a guarded exit falls through
        succ[s] = out
    assumptions: list[str] = []
    has_brx = any(o[-1].base == "BRX" and o[-1].targets is None for o in ops.values())
    preds = {t for v in succ.values() for t in v}
    brx = []
    if has_brx:
        # Jump-table targets: blocks nothing branches to, but for the entry, padding and the
        # trap loop the compiler ends a function with.
        brx = [s for s in starts if s not in preds and s != starts[0]
               and not all(o.base == "NOP" for o in ops[s]) and not _self_loop(ops[s], s)]
        assumptions.append(f"BRX jump table read as its {len(brx)} target block(s) in address order "
                           "(the table is in a constant bank, not in the SASS)")
    walk = _Walk(ops, succ, brx, _table([o for s in starts for o in ops[s]]))
    n = warps or _MAX_WARPS
    reach: dict[int, frozenset[int]] = {}
    used_table = False
    for w in range(n):
        r, read, missed = walk.run(w)
        used_table |= read
        if missed and warps is None:
            continue  # past the warp table: taken as absent (Triton sizes the CTA to it)
        reach[w] = frozenset(r)
    if used_table:
        assumptions.append("warp table in shared memory read as the values its constant stores give, in turn")
    # Warps that reach the same work are one partition: warp 0 of the default warps may
    # also allocate tensor memory or initialize barriers, which is no job of its own.
    work = {s for s in starts if _job(ops[s])[0] != "idle"}
    by_work: dict[frozenset[int], list[int]] = {}
    for w, r in reach.items():
        by_work.setdefault(frozenset(r & work), []).append(w)
    groups: dict[frozenset[int], list[int]] = {}
    for ws in by_work.values():
        groups[frozenset().union(*(reach[w] for w in ws))] = ws
    if len(groups) < 2:
        return None
    open_end = warps is None and not used_table and (n - 1) in reach
    if warps is None and not used_table:
        assumptions.append("the CTA's warp count is not in the SASS: the last partition's warps are open-ended")
    owners: dict[int, set[frozenset[int]]] = {s: set() for s in blocks}
    for r in groups:
        for s in r:
            owners[s].add(r)
    parts: list[Partition] = []
    by_group: dict[frozenset[int], Partition] = {}
    for r, ws in sorted(groups.items(), key=lambda kv: kv[1][0]):
        own = sorted(s for s in r if len(owners[s]) == 1)
        own_ops = [o for s in own for o in ops[s]]
        name, job = _job(own_ops)
        regs = _setmaxnreg(own_ops)
        if regs is None:
            # A setmaxnreg in code this partition shares with some others but not all (CuTe
            # DSL's producer warpgroup: `USETMAXREG.DEALLOC 40` run by warps 0-3 before the
            # producer warp's own branch) sets this partition's budget too.
            regs = _setmaxnreg([o for s in sorted(r) if 1 < len(owners[s]) < len(groups) for o in ops[s]])
        p = Partition(name, tuple(ws), open_end and (n - 1) in ws, job, regs, set(own))
        parts.append(p)
        by_group[r] = p
    if any(p.name == "scheduler" for p in parts) and not any(p.role == "consumer" for p in parts):
        # A Cluster Launch Control kernel without MMA or math: the warps that work on the
        # tiles the scheduler fetches (loads, stores) are its consumers.
        for p in parts:
            if p.name in ("epilogue", "softmax"):
                p.name = "consumer"
    setup = _prefix(starts[0], succ, owners, len(groups))
    label: dict[int, str] = {}
    role: dict[int, str] = {}
    for s in blocks:
        o = owners[s]
        if len(o) == 1:
            p = by_group[next(iter(o))]
            label[s], role[s] = p.label, p.role
        elif len(o) == len(groups):
            label[s], role[s] = ("setup (all warps)" if s in setup else "all warps"), "common"
        elif o:
            ps = sorted((by_group[g] for g in o), key=lambda p: p.warps[0])
            label[s] = "shared: " + ", ".join(p.label for p in ps)
            roles = {p.role for p in ps}
            role[s] = roles.pop() if len(roles) == 1 else "common"
        else:
            label[s], role[s] = "unreached (padding)", "common"
    for prev, s in zip(starts, starts[1:]):
        # A NOP block no walk reaches is alignment or a reconvergence point (BSSY/BSYNC):
        # the code before it runs it.
        if not owners[s] and all(o.base == "NOP" for o in ops[s]) and owners[prev]:
            label[s], role[s] = label[prev], role[prev]
            owners[s] = owners[prev]
    basis = "assumption" if assumptions else "evidence"
    return Partitions(parts, label, role, basis, tuple(assumptions))


def _setmaxnreg(ops: list[_Op]) -> int | None:
    """The register budget of the first `USETMAXREG` among `ops`."""
    return next((_imm(o.args[-1]) for o in ops if o.base == "USETMAXREG" and o.args), None)


def _self_loop(ops: list[_Op], start: int) -> bool:
    return len(ops) == 1 and ops[0].base == "BRA" and _branch_target(ops[0]) == start


def _prefix(entry: int, succ: dict[int, list[int]], owners: dict, n: int) -> set[int]:
    """Blocks every partition runs before any partition's own code: the setup."""
    seen, work = {entry}, [entry]
    while work:
        b = work.pop()
        for t in succ[b]:
            if t not in seen and len(owners[t]) == n:
                seen.add(t)
                work.append(t)
    return seen if len(owners[entry]) == n else set()
