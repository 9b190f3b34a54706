"""The handoff worksheet from PTX, without a GPU (`wsperf worksheet`).

Per kernel (`.entry`): roles (branches on %tid.x-derived warp/warpgroup/lane conditions
and elect.sync, named by what they contain), storage (.shared buffers, tensor memory),
handoffs (every mbarrier: init count, who arrives, who waits, fences) and lifetimes, and
the known mistakes visible statically (`Flag`, codes 1-5). Items reuse the correctness
worksheet's `Item` / `Basis`: `evidence` is read from the PTX, `assumption` is inferred.

How populations are derived: each register defined once from %tid.x by mov / shr / shl /
and / or / div / rem / add / sub / mul with constants is evaluated for every thread of
the block (.reqntid, else .maxntid, x only). A conditional branch on such a predicate
splits the control-flow graph: blocks reachable only through its taken edge run for the
threads where it holds, blocks reachable only through the fall-through for the others.
A condition that is a union of whole warps makes a role; a thread/lane condition (tid ==
0, lane == 0, elect.sync) narrows who executes. `elect.sync` with membermask 0xffffffff
sets its predicate in exactly one lane of the warp (counted as lane 0); with another
mask that is an assumption. A predicate that and/or-combines such a condition with a
value not derived from %tid.x (`lane != 0 || n < 1`) splits by the thread part. Other
branches are taken as not splitting the block's threads (assumption, counted). Calls to
`.func` bodies arrive here already expanded in place (collectors/ptx.py).

How barriers are told apart: shared addresses are evaluated to a symbol plus the set of
byte offsets they can take: constants, ring indices bounded by a mask (`(k & 3) << 3`),
and pointers stepped by a loop whose trip count a counter bounds; a dynamic buffer
aligned up (`(smem + 1023) & -1024`) is a base of its own. Each (symbol, offset)
that an mbarrier.init initializes is a barrier, so `full[s]` and `empty[s]` in one
struct, or `bars[2*s]` and `bars[2*s+1]`, stay apart whenever their offsets do; an
address whose index the PTX does not decide is taken as any barrier of its symbol, and
the sheet says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from wsperf.analyses.correctness import Basis, Item
from wsperf.analyses.sql import check_kernel_regex, matching
from wsperf.collectors.errors import InputError
from wsperf.collectors.ptx import Entry, Stmt, parse, read_ptx

Fn = Callable[[int], "int | None"]
# (symbol or None for a plain number, the byte offsets / values it can take or None when
# the index is not derived); None: nothing known
Val = "tuple[str | None, frozenset[int] | None] | None"
_MAX_VALUES = 256

_BAR0 = re.compile(r"^(bar|barrier)\.(sync|cta\.sync|aligned\.sync|cta\.aligned\.sync)?")
_ARRIVE = ("mbarrier.arrive", "mbarrier.arrive_drop")
_WAIT = ("mbarrier.try_wait", "mbarrier.test_wait")
FLAG_NAMES = {1: "init-in-role", 2: "init-count", 3: "cta-barrier-in-role", 4: "tmem-not-freed",
              5: "missing-proxy-fence"}


@dataclass(frozen=True)
class Site:
    line: int
    instruction: str
    role: str
    threads: int | None  # how many threads of the CTA execute it (None: not derived)
    address: str = ""  # the mbarrier operand, resolved: symbol[+offset], symbol+{a,b,..}, symbol[+?]
    via: int = 0  # inside a called .func: the kernel's line that calls it (0: the kernel's own code)


@dataclass(frozen=True)
class Arrive:
    site: Site
    kind: str  # arrive | arrive.expect_tx | complete_tx | tcgen05.commit | cp.async.mbarrier.arrive
    arrivals: int | None  # arrivals it adds per phase (threads x 1; 0 for complete_tx)
    tx_bytes: str | None


@dataclass(frozen=True)
class Wait:
    site: Site
    parity: str | None


@dataclass(frozen=True)
class Barrier:
    name: str  # symbol (all of its barriers), symbol+offset / symbol+{offsets}, or the address expression
    inits: tuple[tuple[Site, int | None], ...]  # (site, count)
    arrivers: tuple[Arrive, ...]
    waiters: tuple[Wait, ...]
    invals: tuple[Site, ...]
    slots: tuple[int, ...] = ()  # byte offsets of the barriers in this group, from the symbol
    decided: bool = True  # False: some operation's slot is not decided by the PTX


@dataclass(frozen=True)
class Flag:
    code: int
    name: str
    text: str
    basis: Basis
    line: int | None


@dataclass(frozen=True)
class KernelSheet:
    kernel: str
    source: str
    target: str | None
    threads: int | None
    roles: tuple[Item, ...]
    storage: tuple[Item, ...]
    barriers: tuple[Barrier, ...]
    fences: tuple[Item, ...]
    lifetime: tuple[Item, ...]
    notes: tuple[Item, ...]  # assumptions about what could not be read
    flags: tuple[Flag, ...]


@dataclass(frozen=True)
class Worksheet:
    kernels: tuple[KernelSheet, ...]


def worksheet(paths: list[Path], arch: str | None = None, kernel: str | None = None) -> Worksheet:
    check_kernel_regex(kernel)  # RE2, as every --kernel: no expression can hang the match
    sheets: list[KernelSheet] = []
    for p in paths:
        for label, text in read_ptx(p, arch):
            try:
                entries = parse(text)
            except InputError as e:
                raise InputError(f"{p}: {e}") from None
            wanted = set(matching([e.name for e in entries], kernel or None))
            sheets += [analyse(e, label) for e in entries if e.name in wanted]
    if not sheets:
        raise InputError(f"no kernel matches --kernel {kernel!r}" if kernel else "no kernel found")
    return Worksheet(tuple(sheets))


# ---------------------------------------------------------------------------------------
# one kernel


class _Kernel:
    def __init__(self, e: Entry):
        self.e = e
        self.stmts: list[Stmt] = [s for s in e.body if isinstance(s, Stmt)]
        self.notes: list[Item] = [Item("unparsed", f"line {ln}: could not read `{t[:80]}`; it is ignored",
                                       Basis.ASSUMPTION) for ln, t in e.unparsed]
        self.n = e.ntid[0] if e.ntid and e.ntid[1] == 1 and e.ntid[2] == 1 else None
        if e.ntid is None:
            self.notes.append(Item("threads", "no .reqntid/.maxntid: thread counts are not derived (add "
                                   "__launch_bounds__)", Basis.ASSUMPTION))
        elif self.n is None:
            self.notes.append(Item("threads", f"block {e.ntid} is not 1-D: thread counts are not derived",
                                   Basis.ASSUMPTION))
        elif e.ntid_kind == "maxntid":
            self.notes.append(Item("threads", f"thread counts assume the block has .maxntid = {self.n} threads",
                                   Basis.ASSUMPTION))
        self.defs: dict[str, list[Stmt]] = {}
        self.index: dict[int, int] = {}  # id(stmt) -> its index in self.stmts
        for i, s in enumerate(self.stmts):
            self.index[id(s)] = i
            d = _dest(s)
            if d:
                self.defs.setdefault(d, []).append(s)
        self.elect: dict[int, bool] = {}  # line of each elect.sync read -> its membermask is all 32 lanes
        self._vals: dict[str, Val] = {}
        self._busy: set[str] = set()
        self._blocks()
        self._populations()

    # ---- values derived from %tid.x ----
    def value(self, op: str, depth: int = 0) -> Fn | None:
        """t -> the value of `op` in thread t, for values computed from %tid.x and constants.
        A predicate combined by and/or with a value not derived from %tid.x (uniform: a
        kernel argument, a loop bound) gives None for the threads it leaves undecided."""
        op = op.strip()
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            c = int(op, 0)
            return lambda t: c
        if op == "%tid.x":
            return lambda t: t
        if op == "%laneid":
            return lambda t: t % 32
        if op == "%ntid.x" and self.n:
            n = self.n
            return lambda t: n
        ds = self.defs.get(op)
        if depth > 24 or not ds or len(ds) != 1:
            return None
        s = ds[0]
        base = s.opcode.split(".")[0]
        if base == "elect":
            mask = s.operands[1] if len(s.operands) > 1 else ""
            self.elect[s.line] = mask.lower() in ("0xffffffff", "-1", "4294967295")
            return lambda t: int(t % 32 == 0)
        args = [self.value(a, depth + 1) for a in s.operands[1:]]
        if base in ("mov", "cvt") and len(args) == 1:
            return args[0]
        if base == "selp" and len(args) == 3 and all(args):
            a, b, c = args
            return lambda t: (None if (x := c(t)) is None else a(t) if x else b(t))
        if base == "not" and s.opcode.endswith("pred") and args and args[0]:
            a = args[0]
            return lambda t: None if (x := a(t)) is None else int(not x)
        if base in ("and", "or") and s.opcode.endswith("pred") and len(args) == 2 and any(args):
            a = args[0] or args[1]
            if not all(args):  # the other side is uniform: it decides nothing per thread
                if base == "or":
                    return lambda t: 1 if a(t) else None
                return lambda t: None if a(t) else 0
        if base == "setp" and len(args) == 2 and all(args):
            cmp = s.opcode.split(".")[1]
            a, b = args
            f = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
                 "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
                 "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y,
                 "hs": lambda x, y: x >= y}.get(cmp)
            if f is None:
                return None
            return lambda t: None if (x := a(t)) is None or (y := b(t)) is None else int(f(x, y))
        ops2 = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "shr": lambda x, y: x >> y,
                "shl": lambda x, y: x << y, "and": lambda x, y: x & y, "or": lambda x, y: x | y,
                "div": lambda x, y: x // y if y else 0, "rem": lambda x, y: x % y if y else 0,
                "xor": lambda x, y: x ^ y}
        if s.opcode.startswith("mul.lo") or s.opcode in ("mul.s32", "mul.u32"):
            ops2["mul"] = lambda x, y: x * y
        if base in ops2 and len(args) == 2 and all(args):
            a, b = args
            g = ops2[base]
            return lambda t: None if (x := a(t)) is None or (y := b(t)) is None else g(x, y)
        return None

    # ---- shared-memory addresses ----
    def vals(self, op: str, depth: int = 0) -> Val:
        """(symbol or None, the values `op` can take) for a shared address or an integer
        computed from symbols and constants; None when not derived. A ring index such as
        `(k & 3) << 3` gives its few possible values, an address stepped through an array
        by a loop gives one value per trip when the trip count is bounded by a counter
        (nvcc's remainder loops)."""
        op = op.strip()
        if op.startswith("[") and op.endswith("]"):
            op = op[1:-1].strip()
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        if m:
            return _shift(self.vals(m.group(1), depth), int(m.group(2)))
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            return None, frozenset({int(op, 0)})
        if op not in self.defs:
            # a symbol; a register never defined (or one the parser scoped: name$sN) is not
            if op.startswith("%") or not re.fullmatch(r"[A-Za-z_$][\w$.]*", op) or re.search(r"\$[sc]\d", op):
                return None
            return op, frozenset({0})
        if op in self._vals:
            return self._vals[op]
        if op in self._busy or depth > 32:
            return None
        self._busy.add(op)
        try:
            ds = self.defs[op]
            loop = [s for s in ds if op in s.operands[1:]]
            init = [self._val_def(s, depth + 1) for s in ds if s not in loop]
            res = _union(init) if init else None
            if res is not None and loop:
                ind = self._induction(op, res, loop, depth) if res[1] is not None else None
                res = ind if ind is not None else (res[0], None) if res[0] else None
        finally:
            self._busy.discard(op)
        self._vals[op] = res
        return res

    def _val_def(self, s: Stmt, depth: int) -> Val:
        base = s.opcode.split(".")[0]
        ops = s.operands[1:]
        if base in ("mov", "cvt", "cvta") and len(ops) == 1:
            return self.vals(ops[0], depth)
        if base == "selp" and len(ops) == 3:
            return _union([self.vals(ops[0], depth), self.vals(ops[1], depth)])
        if base in ("neg", "not") and len(ops) == 1:
            v = self.vals(ops[0], depth)
            if v is None or v[0] is not None or v[1] is None:
                return None
            return None, frozenset((-x if base == "neg" else ~x) for x in v[1])
        if len(ops) != 2:
            return None
        a, b = self.vals(ops[0], depth), self.vals(ops[1], depth)
        if base == "and" and a and b and (a[0] is None) != (b[0] is None):
            # (buffer + 1023) & -1024: a dynamic shared buffer aligned up. The result is a
            # new base, the same wherever the same expression recomputes it
            (sym, c), (_, m) = (a, b) if a[0] is not None else (b, a)  # type: ignore[misc]
            if c is not None and m is not None and len(c) == 1 and len(m) == 1 and (al := -next(iter(m))) > 0 \
                    and al & (al - 1) == 0:
                off = next(iter(c))
                return f"align{al}({_local(sym)}{f'+{off}' if off else ''})", frozenset({0})
            return None
        if base == "and" and (a is None) != (b is None):
            # x & MASK with x unknown: a submask of MASK (few bits: a ring index)
            (sym, c) = a or b  # type: ignore[misc]
            if sym is None and c is not None and len(c) == 1 and (m := next(iter(c))) >= 0 and bin(m).count("1") <= 8:
                return None, frozenset(_submasks(m))
            return None
        if base == "rem" and a is None and b is not None and b[0] is None and b[1] is not None and len(b[1]) == 1:
            c = next(iter(b[1]))
            if 0 < c <= _MAX_VALUES:
                return None, frozenset(range(c) if ".u" in s.opcode else range(1 - c, c))
            return None
        if base in ("add", "sub") and (a or b) and ((a or b)[0] is not None) and (a is None or b is None):
            # a symbol plus an index not derived: the barrier array is known, the slot is not
            return (a[0], None) if a is not None else (b[0], None) if base == "add" else None  # type: ignore[index]
        if a is None or b is None:
            return None
        if base == "add":
            if a[0] is not None and b[0] is not None:
                return None
            return _combine(a[0] or b[0], a[1], b[1], lambda x, y: x + y)
        if base == "sub" and b[0] is None:
            return _combine(a[0], a[1], b[1], lambda x, y: x - y)
        if a[0] is not None or b[0] is not None or a[1] is None or b[1] is None:
            return None
        f = {"mul": lambda x, y: x * y, "shl": lambda x, y: x << y if 0 <= y < 64 else 0,
             "shr": lambda x, y: x >> y if 0 <= y < 64 else 0, "and": lambda x, y: x & y,
             "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y, "min": min, "max": max,
             "rem": lambda x, y: x % y if y else 0, "div": lambda x, y: x // y if y else 0}.get(base)
        return _combine(None, a[1], b[1], f) if f else None

    def _induction(self, op: str, init: tuple[str | None, frozenset], loop: list[Stmt], depth: int) -> Val:
        """`op` = init, then `op += step` once per trip: its values over the trips, when a
        counter stepped in the same block bounds the trip count (nvcc's `x = -n; loop: ...;
        x += 1; x != 0 -> loop`, with n from a bounded value such as `k & 3`)."""
        step = _step(op, loop, self)
        if step is None:
            return None
        i = self.index[id(loop[0])]
        b = self.block_of[i]
        end = self.starts[b + 1] if b + 1 < len(self.starts) else len(self.stmts)
        block = self.stmts[self.starts[b]:end]
        last = block[-1]
        if not last.opcode.startswith("bra") or not last.guard:
            return None
        cond = next((s for s in block if _dest(s) == last.guard and s.opcode.startswith("setp")), None)
        if cond is None or len(cond.operands) != 3:
            return None
        cnt, bound = cond.operands[1], cond.operands[2]
        cdefs = self.defs.get(cnt, [])
        cloop = [s for s in cdefs if cnt in s.operands[1:]]
        if len(cloop) != 1 or self.block_of[self.index[id(cloop[0])]] != b:
            return None
        cstep = _step(cnt, cloop, self)
        cinit = _union([self._val_def(s, depth + 1) for s in cdefs if s not in cloop])
        lim = self.vals(bound, depth + 1)
        if not cstep or cinit is None or cinit[0] is not None or cinit[1] is None or lim is None \
                or lim[0] is not None or lim[1] is None or len(lim[1]) != 1:
            return None
        after = self.index[id(cloop[0])] < self.index[id(cond)]  # the test sees the stepped counter
        limit = next(iter(lim[1]))
        if cond.opcode.split(".")[1] not in ("ne", "eq"):  # nvcc's counted loops run to equality
            return None
        trips = 0
        for x0 in cinit[1]:
            if (limit - x0) % cstep:
                return None
            # a counter starting at its limit would wrap around: nvcc guards the loop
            # against that start, so it contributes no trip
            trips = max(trips, (limit - x0) // cstep + (0 if after else 1))
        if trips <= 0:
            return None
        if trips * len(init[1]) > _MAX_VALUES:
            return None
        return init[0], frozenset(v + step * j for v in init[1] for j in range(trips))

    def sym_of(self, op: str) -> str | None:
        v = self.vals(op)
        return v[0] if v else None

    # ---- control flow ----
    def _blocks(self) -> None:
        labels: dict[tuple[str, int], int] = {}
        self.starts: list[int] = [0]
        idx = 0
        for item in self.e.body:
            if isinstance(item, tuple):
                labels[(item[0], item[1])] = idx
                self.starts.append(idx)
            else:
                idx += 1
                if item.opcode.split(".")[0] in ("bra", "ret", "exit", "trap"):
                    self.starts.append(idx)
        self.starts = sorted({s for s in self.starts if s < len(self.stmts)} | {0})
        self.block_of = [0] * len(self.stmts)
        for b, st in enumerate(self.starts):
            end = self.starts[b + 1] if b + 1 < len(self.starts) else len(self.stmts)
            for i in range(st, end):
                self.block_of[i] = b
        nb = len(self.starts)
        self.succ: list[list[int]] = [[] for _ in range(nb)]
        self.cond_branches: list[tuple[int, Stmt, int, int | None]] = []  # (block, stmt, taken, fall)
        for b, st in enumerate(self.starts):
            end = self.starts[b + 1] if b + 1 < nb else len(self.stmts)
            if end == 0:
                break  # a body with no statement: one empty block
            last = self.stmts[end - 1]
            base = last.opcode.split(".")[0]
            fall = b + 1 if b + 1 < nb else None
            if base == "bra":
                tgt = self._resolve(labels, last.operands[0] if last.operands else "", last.scope)
                if tgt is None:
                    self.notes.append(Item("unparsed", f"line {last.line}: branch target "
                                           f"{last.operands} not found", Basis.ASSUMPTION))
                    tb = None
                else:
                    tb = self.block_of[tgt] if tgt < len(self.stmts) else None
                if tb is not None:
                    self.succ[b].append(tb)
                if last.guard and fall is not None:
                    self.succ[b].append(fall)
                    if tb is not None:
                        self.cond_branches.append((b, last, tb, fall))
            elif base in ("ret", "exit", "trap") and not last.guard:
                pass
            elif fall is not None:
                self.succ[b].append(fall)

    def _resolve(self, labels: dict, name: str, scope: int) -> int | None:
        while True:
            if (name, scope) in labels:
                return labels[(name, scope)]
            if scope == 0:
                return None
            scope = self.e.parents.get(scope, 0)

    def reach(self, start: int, avoid: set[int]) -> set[int]:
        seen, todo = set(), [start]
        while todo:
            b = todo.pop()
            if b in seen or b in avoid:
                continue
            seen.add(b)
            todo += self.succ[b]
        return seen

    def _populations(self) -> None:
        nb = len(self.starts)
        all_t = frozenset(range(self.n)) if self.n else None
        self.pop: list[frozenset | None] = [all_t] * nb
        self.role: list[frozenset | None] = [frozenset(range((self.n + 31) // 32)) if self.n else None] * nb
        self.uniform_branches = 0
        for b, st, tb, fb in self.cond_branches:
            f = self.value(st.guard)
            if f is None or all_t is None:
                self.uniform_branches += 1 if f is None and not st.guard[0].isupper() else 0
                continue
            taken = {t: _holds(f(t), st.negated) for t in all_t}
            if None in taken.values():
                self.uniform_branches += 1
            # who may run each side: the threads where the predicate holds (or is uniform)
            yes = frozenset(t for t, v in taken.items() if v is not False)
            no = frozenset(t for t, v in taken.items() if v is not True)
            rt, rf = self.reach(tb, {b}), self.reach(fb, {b})
            for region, keep in ((rt - rf, yes), (rf - rt, no)):
                warps = frozenset(t // 32 for t in keep)
                warp_level = all((t // 32 in warps) == (t in keep) for t in all_t)
                for x in region:
                    self.pop[x] = self.pop[x] & keep if self.pop[x] is not None else None
                    if warp_level and self.role[x] is not None:
                        self.role[x] = self.role[x] & warps
        if self.uniform_branches:
            self.notes.append(Item("roles", f"{self.uniform_branches} conditional branch(es) on values not derived "
                                   "from %tid.x (kernel arguments, loop counters, data) were taken as not splitting "
                                   "the block's threads", Basis.ASSUMPTION))

    def threads(self, i: int) -> frozenset | None:
        s = self.stmts[i]
        p = self.pop[self.block_of[i]]
        if p is not None and s.guard:
            f = self.value(s.guard)
            if f is None:
                return None if not s.opcode.startswith("bra") else p
            p = frozenset(t for t in p if _holds(f(t), s.negated) is not False)
        return p


def _holds(v: int | None, negated: bool) -> bool | None:
    """A guard's truth in one thread: None when it depends on a uniform unknown."""
    return None if v is None else bool(v) != negated


def _step(op: str, loop: list[Stmt], k: _Kernel) -> int | None:
    """The constant c of the one `op = op + c` (or - c) among `loop`."""
    if len(loop) != 1:
        return None
    s = loop[0]
    base = s.opcode.split(".")[0]
    if base not in ("add", "sub") or len(s.operands) != 3:
        return None
    a, b = s.operands[1], s.operands[2]
    other = b if a == op else a if base == "add" else None
    v = k.vals(other) if other is not None and other != op else None
    if v is None or v[0] is not None or v[1] is None or len(v[1]) != 1:
        return None
    c = next(iter(v[1]))
    return -c if base == "sub" else c


def _union(vs: list[Val]) -> Val:
    if not vs or any(v is None for v in vs) or len({v[0] for v in vs}) != 1:  # type: ignore[index]
        return None
    sym = vs[0][0]  # type: ignore[index]
    if any(v[1] is None for v in vs):  # type: ignore[index]
        return (sym, None) if sym else None
    out = frozenset().union(*(v[1] for v in vs))  # type: ignore[index]
    return (sym, out) if len(out) <= _MAX_VALUES else (sym, None) if sym else None


def _combine(sym: str | None, a: frozenset | None, b: frozenset | None, f) -> Val:
    if a is None or b is None or len(a) * len(b) > 16 * _MAX_VALUES:
        return (sym, None) if sym else None
    out = frozenset(f(x, y) for x in a for y in b)
    return (sym, out) if len(out) <= _MAX_VALUES else (sym, None) if sym else None


def _shift(v: Val, c: int) -> Val:
    return None if v is None else (v[0], None if v[1] is None else frozenset(x + c for x in v[1]))


def _submasks(m: int) -> list[int]:
    out, s = [], m
    while True:
        out.append(s)
        if s == 0:
            return out
        s = (s - 1) & m


def _dest(s: Stmt) -> str | None:
    base = s.opcode.split(".")[0]
    if base in ("st", "bra", "bar", "barrier", "fence", "mbarrier", "cp", "ret", "exit", "tcgen05", "wgmma",
                "membar", "red", "call", "trap", "prefetch", "griddepcontrol", "cvta"):
        return None if base != "cvta" else s.operands[0] if s.operands else None
    if base == "elect" and s.operands:
        return s.operands[0].split("|")[-1]
    return s.operands[0] if s.operands else None


def _warps(ws: frozenset) -> str:
    w = sorted(ws)
    if not w:
        return "no warp"
    if len(w) == 1:
        return f"warp {w[0]}"
    if w == list(range(w[0], w[-1] + 1)):
        return f"warps {w[0]}-{w[-1]}"
    return "warps " + ",".join(map(str, w))


_PRODUCER = re.compile(r"^(cp\.async\.bulk(\.tensor\.\w+)?\.shared::\w+\.global|cp\.async\.(ca|cg)|ld\.global)")
_CONSUMER = re.compile(r"^(wgmma\.mma_async|tcgen05\.mma|mma\.sync|fma\.|mul\.(rn\.)?f|mad\.(rn\.)?f)")


def analyse(e: Entry, source: str) -> KernelSheet:
    k = _Kernel(e)
    stmts = k.stmts
    all_warps = frozenset(range((k.n + 31) // 32)) if k.n else None

    # ---- roles ----
    groups: dict[frozenset | None, list[int]] = {}
    for i in range(len(stmts)):
        groups.setdefault(k.role[k.block_of[i]], []).append(i)
    role_name: dict[frozenset | None, str] = {}
    roles: list[Item] = []
    for ws, idx in groups.items():
        if ws is None or ws == all_warps:
            role_name[ws] = "all" if ws is not None else "?"
            continue
        ops = [stmts[i].opcode for i in idx]
        if all(o.split(".")[0] in ("setp", "bra") for o in ops):  # only the branch to the next role
            role_name[ws] = f"dispatch ({_warps(ws)})"
            continue
        prod = any(_PRODUCER.match(o) for o in ops) and (
            any(o.startswith("cp.async") for o in ops) or any(o.startswith("st.shared") for o in ops))
        cons = any(_CONSUMER.match(o) for o in ops)
        kind = "producer+consumer" if prod and cons else "producer" if prod else "consumer" if cons else \
            "epilogue" if any(o.startswith("st.global") for o in ops) else "other"
        role_name[ws] = f"{kind} ({_warps(ws)})"
        what = sorted({o.split(".")[0] + ("." + o.split(".")[1] if o.split(".")[0] in ("cp", "tcgen05", "wgmma",
                                                                                        "mma", "ld", "st") else "")
                       for o in ops if _PRODUCER.match(o) or _CONSUMER.match(o) or o.startswith("st.shared")})
        roles.append(Item("roles", f"{role_name[ws]}: {len(idx)} statements" + (f"; {', '.join(what)}" if what
                                                                                else ""), Basis.EVIDENCE))
    if not roles:
        roles.append(Item("roles", "no branch on a warp/warpgroup index derived from %tid.x: not warp-specialized "
                          "(or its roles are not readable statically)", Basis.ASSUMPTION))
    full = sorted(ln for ln, f in k.elect.items() if f)
    if full:
        roles.append(Item("roles", f"elect.sync with membermask 0xffffffff (line(s) {', '.join(map(str, full[:6]))}): "
                          "exactly one lane of each warp runs what it guards (counted as lane 0)", Basis.EVIDENCE))
    part = sorted(ln for ln, f in k.elect.items() if not f)
    if part:
        roles.append(Item("roles", f"elect.sync with a membermask other than 0xffffffff (line(s) "
                          f"{', '.join(map(str, part[:6]))}) is taken as electing lane 0 of each warp",
                          Basis.ASSUMPTION))

    def site(i: int, address: str = "") -> Site:
        s = stmts[i]
        p = k.threads(i)
        return Site(s.line, s.opcode, role_name.get(k.role[k.block_of[i]], "?"), len(p) if p is not None else None,
                    address, s.via)

    # ---- storage ----
    storage = [Item("storage", f".shared {d.name}: " + (f"{d.size} bytes" if d.size is not None else
                                                          "dynamic (extern, size set at launch)"),
                    Basis.EVIDENCE) for d in e.shared]
    lifetime: list[Item] = []
    flags: list[Flag] = []
    allocs = [i for i, s in enumerate(stmts) if s.opcode.startswith("tcgen05.alloc")]
    deallocs = [i for i, s in enumerate(stmts) if s.opcode.startswith("tcgen05.dealloc")]
    relinq = [i for i, s in enumerate(stmts) if s.opcode.startswith("tcgen05.relinquish_alloc_permit")]
    for name, lst in (("tcgen05.alloc", allocs), ("tcgen05.dealloc", deallocs),
                      ("tcgen05.relinquish_alloc_permit", relinq)):
        for i in lst:
            st = site(i)
            storage.append(Item("storage", f"tensor memory: {name} (line {st.line}, {st.role}"
                                f"{', columns ' + stmts[i].operands[-1] if name != 'tcgen05.relinquish_alloc_permit' else ''})",
                                Basis.EVIDENCE))
    if allocs and not deallocs:
        flags.append(Flag(4, FLAG_NAMES[4], f"tensor memory is allocated (tcgen05.alloc, line {stmts[allocs[0]].line}) "
                          "but never deallocated: add tcgen05.dealloc of the same columns before the CTA exits",
                          Basis.EVIDENCE, stmts[allocs[0]].line))
    if allocs and not relinq:
        flags.append(Flag(4, FLAG_NAMES[4], "tcgen05.alloc without tcgen05.relinquish_alloc_permit: other CTAs on "
                          "the SM may block in their allocation", Basis.EVIDENCE, stmts[allocs[0]].line))
    if allocs and deallocs:
        lifetime.append(Item("lifetime", f"tensor memory: allocated at line {stmts[allocs[0]].line}, freed at line "
                             f"{stmts[deallocs[-1]].line}", Basis.EVIDENCE))

    # ---- handoffs ----
    fences: list[Item] = []
    ops: list[tuple[str, int, str]] = []  # (init | arrive | wait | inval, statement, mbarrier operand)
    for i, s in enumerate(stmts):
        o, a = s.opcode, s.operands
        if o.startswith("mbarrier.init") and a:
            ops.append(("init", i, a[0]))
        elif o.startswith(_ARRIVE) and len(a) > 1:
            ops.append(("arrive", i, a[1]))
        elif o.startswith("cp.async.bulk") and "mbarrier::complete_tx" in o and len(a) > 2:
            # [dst], [tensorMap, {coords}], [mbar] (, ctaMask, cache policy) for .tensor;
            # [dst], [src], size, [mbar] (, ...) for a plain bulk copy
            mbar = a[2] if ".tensor" in o else a[3] if len(a) > 3 else None
            if mbar:
                ops.append(("arrive", i, mbar))
        elif o.startswith("tcgen05.commit") and "mbarrier" in o and a:
            ops.append(("arrive", i, a[0]))
        elif o.startswith("cp.async.mbarrier.arrive") and a:
            ops.append(("arrive", i, a[0]))
        elif o.startswith(_WAIT) and len(a) > 1:
            ops.append(("wait", i, a[1]))
        elif o.startswith("mbarrier.inval") and a:
            ops.append(("inval", i, a[0]))
        elif o.startswith(("fence.proxy.async", "fence.mbarrier_init")) or _BAR0.match(o):
            st = site(i)
            who = f"{st.threads} thread(s)" if st.threads is not None else "threads not derived"
            fences.append(Item("handoff.fence", f"line {st.line}: {o} {' '.join(a)} ({st.role}, {who})",
                               Basis.EVIDENCE))
    barriers = _barriers(k, ops, site)
    for b in barriers:
        if b.invals:
            lifetime.append(Item("lifetime", f"{b.name}: invalidated at line(s) "
                                 f"{', '.join(str(s.line) for s in b.invals)}", Basis.EVIDENCE))
    for c in e.calls:
        if c.followed:
            roles.append(Item("roles", f"line {c.line}: call into .func {c.callee} followed: its {c.statements} "
                              "statements run under the caller's conditions and count in the caller's role",
                              Basis.EVIDENCE))
        else:
            k.notes.append(Item("calls", f"line {c.line}: call to {c.callee} not followed ({c.why}): mbarrier "
                                "operations inside it are missing from this sheet", Basis.ASSUMPTION))

    flags += _flag_init_in_role(k, stmts)
    flags += _flag_counts(k, barriers)
    flags += _flag_cta_barrier(k, stmts, site)
    flags += _flag_proxy_fence(k, stmts)
    return KernelSheet(e.name, source, e.target, k.n, tuple(roles), tuple(storage), barriers, tuple(fences),
                       tuple(lifetime), tuple(k.notes), tuple(flags))


def _barriers(k: _Kernel, ops: list[tuple[str, int, str]], site) -> tuple[Barrier, ...]:
    """Every mbarrier operation grouped by the barrier(s) it may address. A barrier is a
    (symbol, byte offset) that some mbarrier.init initializes; an operation whose address
    takes several values (`full[s]` in a ring) may address each of them, so those
    barriers form one group; an address with an index the PTX does not decide groups all
    of its symbol's barriers (`decided` False). Groups of one symbol that look alike
    (same counts, same arrivers and waiters) are shown as one."""
    stmts = k.stmts
    resolved: list[tuple[str, int, str, str | None, frozenset | None]] = []
    for kind, i, op in ops:
        v = k.vals(op)
        if v is None or v[0] is None:
            name = op.strip("[] ")
            k.notes.append(Item("handoff.barrier", f"line {stmts[i].line}: address {name} does not resolve to a "
                                ".shared symbol: kept as written", Basis.ASSUMPTION))
            resolved.append((kind, i, op, None, None))
        else:
            resolved.append((kind, i, op, v[0], v[1]))
    keys: dict[str, set[int]] = {}
    opaque: set[str] = set()  # a symbol with an init whose offset is not decided: one group for all of it
    for kind, _, _, sym, offs in resolved:
        if sym is not None and kind == "init":
            if offs is None:
                opaque.add(sym)
            else:
                keys.setdefault(sym, set()).update(offs)
    parent: dict[tuple, tuple] = {}

    def find(x: tuple) -> tuple:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    cands: list[list[tuple]] = []
    undecided: dict[str, list[int]] = {}
    for kind, i, op, sym, offs in resolved:
        if sym is None:
            c = [("raw", op.strip("[] "))]
        elif offs is None or sym in opaque:
            undecided.setdefault(sym, []).append(stmts[i].line)
            c = [(sym, None)] + [(sym, o) for o in sorted(keys.get(sym, ()))]
        else:
            c = [(sym, o) for o in sorted(offs) if o in keys.get(sym, ())] or [(sym, o) for o in sorted(offs)]
        for x in c[1:]:
            parent[find(x)] = find(c[0])
        find(c[0])
        cands.append(c)
    groups: dict[tuple, dict] = {}
    for (kind, i, op, sym, offs), c in zip(resolved, cands):
        g = groups.setdefault(find(c[0]), {"sym": sym, "slots": set(), "inits": [], "arr": [], "wait": [],
                                           "inval": []})
        g["slots"].update(x[1] for x in c if x[0] != "raw" and x[1] is not None)
        addr = _fmt(sym, offs) if sym else op.strip("[] ")
        s = stmts[i]
        if kind == "init":
            cnt = k.value(s.operands[1]) if len(s.operands) > 1 else None
            g["inits"].append((site(i, addr), cnt(0) if cnt else None))
        elif kind == "wait":
            g["wait"].append(Wait(site(i, addr), _shown(k, s.operands[2]) if ".parity" in s.opcode
                                  and len(s.operands) > 2 else None))
        elif kind == "inval":
            g["inval"].append(site(i, addr))
        else:
            g["arr"].append(_arrive(k, i, site(i, addr)))
    # one entry per look-alike group of a symbol
    merged: dict[tuple, dict] = {}
    for g in groups.values():
        sig = (g["sym"] if g["sym"] is not None else id(g), tuple(sorted({str(c) for _, c in g["inits"]})),
               frozenset((a.kind, a.site.role, a.site.threads, a.arrivals) for a in g["arr"]),
               frozenset((w.site.role, w.site.threads) for w in g["wait"]))
        m = merged.get(sig)
        if m is None:
            merged[sig] = g
        else:
            for key in ("inits", "arr", "wait", "inval"):
                m[key] += g[key]
            m["slots"] |= g["slots"]
    out = []
    for g in merged.values():
        sym, slots = g["sym"], frozenset(g["slots"])
        if sym is None:
            name = g["wait"][0].site.address if g["wait"] else g["arr"][0].site.address if g["arr"] else \
                g["inits"][0][0].address if g["inits"] else "?"
        elif not slots or slots == frozenset(keys.get(sym, ())):
            name = _local(sym)
        else:
            name = _fmt(sym, slots)
        decided = sym is None or sym not in undecided
        sites = [s for s, _ in g["inits"]] + [a.site for a in g["arr"]] + [w.site for w in g["wait"]] + g["inval"]
        first = min(s.line for s in sites)
        out.append((first, Barrier(name, tuple(g["inits"]), tuple(g["arr"]), tuple(g["wait"]), tuple(g["inval"]),
                                   tuple(sorted(slots)), decided)))
    for sym, lines in undecided.items():
        n = len(keys.get(sym, ()))
        k.notes.append(Item("handoff.barrier", f"{_local(sym)}: the barrier addressed at line(s) "
                            f"{', '.join(map(str, sorted(set(lines))[:6]))} is not decided by the PTX (its index is "
                            "not computed from constants): "
                            + (f"taken as any of the {n} barrier(s) of {_local(sym)}" if n and sym not in opaque else
                               f"all barriers of {_local(sym)} are taken as one"), Basis.ASSUMPTION))
    return tuple(b for _, b in sorted(out, key=lambda x: x[0]))


def _arrive(k: _Kernel, i: int, st: Site) -> Arrive:
    """What one arriving statement adds to its barrier's pending count, per phase."""
    s = k.stmts[i]
    o = s.opcode
    p = k.threads(i)
    n = len(p) if p is not None else None
    if o.startswith("cp.async.bulk"):
        return Arrive(st, "complete_tx", 0, _shown(k, s.operands[2]) if ".tensor" not in o and len(s.operands) > 3
                      else None)
    if o.startswith("tcgen05.commit"):
        # .mbarrier::arrive::one: one arrive-on per issuing thread, once its tcgen05 ops complete
        return Arrive(st, "tcgen05.commit", n, None)
    if o.startswith("cp.async.mbarrier.arrive"):
        return Arrive(st, "cp.async.mbarrier.arrive", n if ".noinc" in o else 0, None)
    if "expect_tx" in o:
        return Arrive(st, "arrive.expect_tx", n, _shown(k, s.operands[2]) if len(s.operands) > 2 else None)
    count = 1
    if len(s.operands) > 2:  # mbarrier.arrive ... state, [addr], count
        c = k.value(s.operands[2])
        count = c(0) if c else None  # type: ignore[assignment]
    return Arrive(st, "arrive", n * count if n is not None and count is not None else None, None)


def _shown(k: _Kernel, op: str) -> str:
    """An operand as the sheet shows it: its value when constant, else as written (without
    the scope / call tags the parser adds to register names)."""
    v = k.vals(op)
    if v and v[0] is None and v[1] is not None and len(v[1]) == 1:
        return str(next(iter(v[1])))
    return re.sub(r"\$[sc]\d+", "", op)


def _where(st: Site) -> str:
    return f"line {st.line}" + (f" via call at line {st.via}" if st.via else "")


def _fmt(sym: str, offs: frozenset | None) -> str:
    name = _local(sym)
    if offs is None:
        return f"{name}[+?]"
    o = sorted(offs)
    if o == [0]:
        return name
    if len(o) == 1:
        return f"{name}+{o[0]}"
    return f"{name}+{{{','.join(map(str, o))}}}"


def _local(sym: str) -> str:
    """`full` from a demoted function-local `_ZZ...E4full`; other symbols as they are."""
    m = re.fullmatch(r"_ZZ.*E(\d+)(\w+)", sym)
    if m and len(m.group(2)) >= int(m.group(1)):
        return m.group(2)[: int(m.group(1))]
    return sym


def _is_cta_barrier(s: Stmt) -> bool:
    """bar.sync 0 / barrier.sync 0 (/ .aligned), without a thread count: __syncthreads."""
    return bool(_BAR0.match(s.opcode)) and ".arrive" not in s.opcode and ".red" not in s.opcode and \
        len(s.operands) == 1 and s.operands[0] == "0"


def _flag_init_in_role(k: _Kernel, stmts: list[Stmt]) -> list[Flag]:
    out = []
    cta_blocks = {k.block_of[i] for i, s in enumerate(stmts) if _is_cta_barrier(s) and k.pop[k.block_of[i]] is not
                  None and len(k.pop[k.block_of[i]]) == k.n}
    for i, s in enumerate(stmts):
        if not s.opcode.startswith("mbarrier.init"):
            continue
        bi = k.block_of[i]
        role = k.role[bi]
        all_w = frozenset(range((k.n + 31) // 32)) if k.n else None
        if role is None or role == all_w:
            continue  # thread 0 / lane 0 of the whole CTA: the usual, checked below only in roles
        sym = k.sym_of(s.operands[0])
        after = {b for b in cta_blocks if b in k.reach(bi, set())}
        for j, w in enumerate(stmts):
            if not w.opcode.startswith(_WAIT) or k.sym_of(w.operands[1]) != sym:
                continue
            wr = k.role[k.block_of[j]]
            if wr is None or wr <= role:
                continue
            if k.block_of[j] in k.reach(0, after):
                out.append(Flag(1, FLAG_NAMES[1], f"mbarrier.init of {sym} (line {s.line}) sits inside the branch of "
                                f"{_warps(role)}, and {_warps(wr - role)} wait on it (line {w.line}) with no CTA-wide "
                                "barrier after the init: initialize before the role branch (thread 0), then "
                                "fence.mbarrier_init + __syncthreads()", Basis.EVIDENCE, s.line))
                break
    return out


def _flag_counts(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 2: per barrier (group), the arrivals one phase gets against the init count.
    Each role's arrival pattern is counted once per phase: the sites of one role on one
    barrier (an unrolled copy and the loop it came from, the slots of a ring) are taken
    as one arrival per executing thread per phase."""
    out = []
    partial_elect = not all(k.elect.values())
    for b in barriers:
        counts = {c for _, c in b.inits}
        if not b.inits or not b.arrivers or None in counts:
            continue
        pops: dict[tuple, int | None] = {}
        for a in b.arrivers:
            if a.arrivals == 0:
                continue
            pops[(a.site.role, a.site.threads, a.kind == "tcgen05.commit")] = a.arrivals
        if not pops:
            continue
        if not b.decided and len(b.slots) > 1 and (len(pops) > 1 or len(counts) > 1):
            k.notes.append(Item("handoff.count", f"{b.name}: {len(b.slots)} barriers the PTX does not tell apart, "
                                f"init counts {sorted(counts)}, arrivals from {len(pops)} role(s): counts not "
                                "checked", Basis.ASSUMPTION))
            continue
        if len(counts) > 1:
            k.notes.append(Item("handoff.count", f"{b.name}: init counts {sorted(counts)} differ between its barriers: "
                                "counts not checked", Basis.ASSUMPTION))
            continue
        if any(v is None for v in pops.values()):
            continue
        total = sum(v for v in pops.values() if v)
        count = counts.pop()
        if total != count:
            who = "; ".join(sorted({f"{a.kind} by {a.site.role}, {a.site.threads} thread(s)" for a in b.arrivers
                                    if a.arrivals}))
            lines = ", ".join(sorted({_where(a.site) for a in b.arrivers if a.arrivals})[:6])
            basis = Basis.ASSUMPTION if partial_elect else Basis.EVIDENCE
            out.append(Flag(2, FLAG_NAMES[2], f"{b.name}: mbarrier.init count {count} (line {b.inits[0][0].line}) but "
                            f"{total} arrival(s) per phase ({who}; {lines}): a phase "
                            + ("never completes (deadlock)" if total < count else "completes early")
                            + f"; init with {total}", basis, b.inits[0][0].line))
    return out


def _flag_cta_barrier(k: _Kernel, stmts: list[Stmt], site) -> list[Flag]:
    out = []
    for i, s in enumerate(stmts):
        if _is_cta_barrier(s):
            p = k.threads(i)
            if p is not None and k.n and len(p) < k.n:
                st = site(i)
                out.append(Flag(3, FLAG_NAMES[3], f"line {s.line}: {s.opcode} {s.operands[0]} (CTA-wide, "
                                f"__syncthreads) inside a role branch ({st.role}, {len(p)} of {k.n} threads): every "
                                "thread must reach the same barrier instruction; move it after the branches join, or "
                                "use a named barrier with a thread count", Basis.EVIDENCE, s.line))
    return out


_ASYNC_SMEM_READ = re.compile(r"^(cp\.async\.bulk(\.tensor\.\w+)?\.global\.shared|cp\.reduce\.async\.bulk|"
                              r"wgmma\.mma_async|tcgen05\.mma|tcgen05\.cp)")


def _flag_proxy_fence(k: _Kernel, stmts: list[Stmt]) -> list[Flag]:
    """st.shared, then (on some path) an async-proxy reader of shared memory with no
    fence.proxy.async in between."""
    for i, s in enumerate(stmts):
        if not s.opcode.startswith("st.shared"):
            continue
        seen: set[int] = set()
        todo = [(i + 1, k.block_of[i])]
        while todo:
            j, b = todo.pop()
            end = k.starts[b + 1] if b + 1 < len(k.starts) else len(stmts)
            stop = False
            for x in range(j, end):
                o = stmts[x].opcode
                if o.startswith("fence.proxy.async"):
                    stop = True
                    break
                if _ASYNC_SMEM_READ.match(o):
                    return [Flag(5, FLAG_NAMES[5], f"st.shared (line {s.line}, generic proxy) is followed by "
                                 f"{o} (line {stmts[x].line}, async proxy reading shared memory) with no "
                                 "fence.proxy.async.shared::cta on the path: add the fence after the stores (before "
                                 "the barrier that publishes them)", Basis.EVIDENCE, s.line)]
            if stop:
                continue
            for nb in k.succ[b]:
                if nb not in seen:
                    seen.add(nb)
                    todo.append((k.starts[nb], nb))
    return []
