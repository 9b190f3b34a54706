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
0, lane == 0, elect.sync, taken as lane 0 of each warp) narrows who executes. Branches
on anything else are taken as not splitting the block's threads (assumption, counted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from wsperf.analyses.correctness import Basis, Item
from wsperf.collectors.errors import InputError
from wsperf.collectors.ptx import Entry, Stmt, parse, read_ptx

Fn = Callable[[int], int]

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
    address: str = ""  # the mbarrier operand, resolved: symbol[+offset], [+?] when not constant


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
    name: str  # symbol[+offset], or the address expression
    inits: tuple[tuple[Site, int | None], ...]  # (site, count)
    arrivers: tuple[Arrive, ...]
    waiters: tuple[Wait, ...]
    invals: tuple[Site, ...]


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
    pattern = None
    if kernel:
        try:
            pattern = re.compile(kernel)
        except re.error as e:
            raise InputError(f"--kernel {kernel!r}: not a regular expression ({e})") from None
    sheets: list[KernelSheet] = []
    for p in paths:
        for label, text in read_ptx(p, arch):
            try:
                entries = parse(text)
            except InputError as e:
                raise InputError(f"{p}: {e}") from None
            sheets += [analyse(e, label) for e in entries if pattern is None or pattern.search(e.name)]
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
        for s in self.stmts:
            d = _dest(s)
            if d:
                self.defs.setdefault(d, []).append(s)
        self.used_elect = False
        self._blocks()
        self._populations()

    # ---- values derived from %tid.x ----
    def value(self, op: str, depth: int = 0) -> Fn | None:
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
        args = [self.value(a, depth + 1) for a in s.operands[1:]]
        if base == "elect":
            self.used_elect = True
            return lambda t: int(t % 32 == 0)
        if base in ("mov", "cvt") and len(args) == 1:
            return args[0]
        if base == "selp" and len(args) == 3 and all(args):
            a, b, c = args
            return lambda t: a(t) if c(t) else b(t)
        if base == "not" and s.opcode.endswith("pred") and args and args[0]:
            a = args[0]
            return lambda t: int(not a(t))
        if base == "setp" and len(args) == 2 and all(args):
            cmp = s.opcode.split(".")[1]
            a, b = args
            f = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
                 "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
                 "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y,
                 "hs": lambda x, y: x >= y}.get(cmp)
            if f is None:
                return None
            return lambda t: int(f(a(t), b(t)))
        ops2 = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "shr": lambda x, y: x >> y,
                "shl": lambda x, y: x << y, "and": lambda x, y: x & y, "or": lambda x, y: x | y,
                "div": lambda x, y: x // y if y else 0, "rem": lambda x, y: x % y if y else 0,
                "xor": lambda x, y: x ^ y}
        if s.opcode.startswith("mul.lo") or s.opcode in ("mul.s32", "mul.u32"):
            ops2["mul"] = lambda x, y: x * y
        if base in ops2 and len(args) == 2 and all(args):
            a, b = args
            g = ops2[base]
            return lambda t: g(a(t), b(t))
        return None

    def address(self, op: str, depth: int = 0) -> tuple[str | None, int | None]:
        """(symbol, byte offset or None when not constant) of a shared address operand."""
        op = op.strip().strip("[]")
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        if m:
            sym, off = self.address(m.group(1), depth)
            return sym, None if off is None else off + int(m.group(2))
        if not op.startswith("%"):
            return (op, 0) if re.fullmatch(r"[\w$.]+", op) else (None, None)
        ds = self.defs.get(op)
        if depth > 16 or not ds or len(ds) != 1:
            return None, None
        s = ds[0]
        base = s.opcode.split(".")[0]
        if base in ("mov", "cvta", "cvt") and len(s.operands) == 2:
            return self.address(s.operands[1], depth + 1)
        if base == "add" and len(s.operands) == 3:
            a, b = s.operands[1], s.operands[2]
            for x, y in ((a, b), (b, a)):
                sym, off = self.address(x, depth + 1)
                if sym is not None:
                    c = self.value(y)
                    const = None
                    if c is not None and y.lstrip("-").isdigit():
                        const = int(y)
                    return sym, (off + const) if (off is not None and const is not None) else None
        return None, None

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
            f = self.value(st.guard if st.guard.startswith("%") or st.guard in self.defs else st.guard)
            if f is None or all_t is None:
                self.uniform_branches += 1 if f is None and not st.guard[0].isupper() else 0
                continue
            yes = frozenset(t for t in all_t if bool(f(t)) != st.negated)
            no = all_t - yes
            rt, rf = self.reach(tb, {b}), self.reach(fb, {b})
            warp_level = all((t // 32 in {u // 32 for u in yes}) == (t in yes) for t in all_t)
            for region, keep in ((rt - rf, yes), (rf - rt, no)):
                for x in region:
                    self.pop[x] = self.pop[x] & keep if self.pop[x] is not None else None
                    if warp_level and self.role[x] is not None:
                        self.role[x] = self.role[x] & frozenset(t // 32 for t in keep)
        if self.uniform_branches:
            self.notes.append(Item("roles", f"{self.uniform_branches} conditional branch(es) on values not derived "
                                   "from %tid.x were taken as not splitting the block's threads",
                                   Basis.ASSUMPTION))

    def threads(self, i: int) -> frozenset | None:
        s = self.stmts[i]
        p = self.pop[self.block_of[i]]
        if p is not None and s.guard:
            f = self.value(s.guard)
            if f is None:
                return None if not s.opcode.startswith("bra") else p
            p = frozenset(t for t in p if bool(f(t)) != s.negated)
        return p


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
    if k.used_elect:
        roles.append(Item("roles", "elect.sync is taken as electing one lane per warp (lane 0 when all are active)",
                          Basis.ASSUMPTION))

    def site(i: int, address: str = "") -> Site:
        s = stmts[i]
        p = k.threads(i)
        return Site(s.line, s.opcode, role_name.get(k.role[k.block_of[i]], "?"), len(p) if p is not None else None,
                    address)

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
    bars: dict[str, dict] = {}

    def bar_of(op: str) -> str:
        sym, off = k.address(op)
        if sym is None:
            name = op.strip("[] ")
            k.notes.append(Item("handoff.barrier", f"address {name} does not resolve to a .shared symbol: kept as "
                                "written", Basis.ASSUMPTION))
            return name
        return _local(sym) + ("" if off == 0 else f"+{off}" if off is not None else "[+?]")

    def rec(name: str) -> dict:
        name = re.split(r"\+|\[", name)[0]
        return bars.setdefault(name, {"inits": [], "arr": [], "wait": [], "inval": []})

    fences: list[Item] = []
    for i, s in enumerate(stmts):
        o = s.opcode
        if o.startswith("mbarrier.init"):
            c = k.value(s.operands[1]) if len(s.operands) > 1 else None
            rec(addr := bar_of(s.operands[0]))["inits"].append((site(i, addr), c(0) if c else None))
        elif o.startswith(_ARRIVE):
            kind = "arrive.expect_tx" if "expect_tx" in o else "arrive"
            p = k.threads(i)
            rec(addr := bar_of(s.operands[1]))["arr"].append(Arrive(site(i, addr), kind, len(p) if p is not None else None,
                                                            s.operands[2] if kind != "arrive" and len(s.operands) > 2
                                                            else None))
        elif o.startswith("cp.async.bulk") and "mbarrier::complete_tx" in o:
            rec(addr := bar_of(s.operands[-1]))["arr"].append(Arrive(site(i, addr), "complete_tx", 0, s.operands[2]
                                                             if len(s.operands) > 3 else None))
        elif o.startswith("tcgen05.commit") and "mbarrier" in o:
            p = k.threads(i)
            rec(addr := bar_of(s.operands[0]))["arr"].append(Arrive(site(i, addr), "tcgen05.commit", len(p) if p is not None
                                                            else None, None))
        elif o.startswith("cp.async.mbarrier.arrive"):
            p = k.threads(i)
            n = 0 if ".noinc" not in o else (len(p) if p is not None else None)
            rec(addr := bar_of(s.operands[0]))["arr"].append(Arrive(site(i, addr), "cp.async.mbarrier.arrive", n, None))
        elif o.startswith(_WAIT):
            par = s.operands[2] if ".parity" in o and len(s.operands) > 2 else None
            rec(addr := bar_of(s.operands[1]))["wait"].append(Wait(site(i, addr), par))
        elif o.startswith("mbarrier.inval"):
            rec(addr := bar_of(s.operands[0]))["inval"].append(site(i, addr))
        elif o.startswith(("fence.proxy.async", "fence.mbarrier_init")) or _BAR0.match(o):
            st = site(i)
            who = f"{st.threads} thread(s)" if st.threads is not None else "threads not derived"
            fences.append(Item("handoff.fence", f"line {st.line}: {o} {' '.join(s.operands)} ({st.role}, {who})",
                               Basis.EVIDENCE))
    barriers = tuple(Barrier(n, tuple(r["inits"]), tuple(r["arr"]), tuple(r["wait"]), tuple(r["inval"]))
                     for n, r in bars.items())
    for b in barriers:
        if b.invals:
            lifetime.append(Item("lifetime", f"{b.name}: invalidated at line(s) "
                                 f"{', '.join(str(s.line) for s in b.invals)}", Basis.EVIDENCE))

    flags += _flag_init_in_role(k, stmts)
    flags += _flag_counts(k, barriers, e)
    flags += _flag_cta_barrier(k, stmts, site)
    flags += _flag_proxy_fence(k, stmts)
    return KernelSheet(e.name, source, e.target, k.n, tuple(roles), tuple(storage), barriers, tuple(fences),
                       tuple(lifetime), tuple(k.notes), tuple(flags))


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
        sym = k.address(s.operands[0])[0]
        after = {b for b in cta_blocks if b in k.reach(bi, set())}
        for j, w in enumerate(stmts):
            if not w.opcode.startswith(_WAIT) or k.address(w.operands[1])[0] != sym:
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


def _flag_counts(k: _Kernel, barriers: tuple[Barrier, ...], e: Entry) -> list[Flag]:
    out = []
    by_sym: dict[str, list[Barrier]] = {}
    for b in barriers:
        by_sym.setdefault(b.name, []).append(b)
    for sym, bs in by_sym.items():
        inits = [(st, c) for b in bs for st, c in b.inits]
        arr = [a for b in bs for a in b.arrivers]
        counts = {c for _, c in inits}
        if not inits or not arr or None in counts:
            continue
        dynamic = any(a.site.address.endswith("[+?]") for a in arr)
        pops: dict[tuple, int | None] = {}
        for a in arr:
            if a.arrivals == 0:
                continue
            pops[(a.site.role, a.site.threads, a.kind == "tcgen05.commit")] = a.arrivals
        if not pops:
            continue
        slots = [d for d in e.shared if _local(d.name) == sym]
        multi = len(inits) > 1 or (slots and (slots[0].size or 0) > 8)
        if (dynamic or multi) and len(pops) > 1:
            k.notes.append(Item("handoff.count", f"{sym}: several barriers with arrivals from {len(pops)} roles at "
                                "addresses not known statically: counts not checked", Basis.ASSUMPTION))
            continue
        if len(counts) > 1:
            k.notes.append(Item("handoff.count", f"{sym}: init counts {sorted(counts)} differ between its barriers: "
                                "counts not checked", Basis.ASSUMPTION))
            continue
        if any(v is None for v in pops.values()):
            continue
        total = sum(v for v in pops.values() if v)
        count = counts.pop()
        if total != count:
            who = "; ".join(f"{a.kind} by {a.site.role}, {a.site.threads} thread(s) (line {a.site.line})"
                            for a in arr if a.arrivals)
            basis = Basis.ASSUMPTION if k.used_elect else Basis.EVIDENCE
            out.append(Flag(2, FLAG_NAMES[2], f"{sym}: mbarrier.init count {count} (line {inits[0][0].line}) but "
                            f"{total} arrival(s) per phase ({who}): a phase "
                            + ("never completes (deadlock)" if total < count else "completes early")
                            + f"; init with {total}", basis, inits[0][0].line))
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
