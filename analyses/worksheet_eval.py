"""Who executes what, read from PTX without running it (analyses/worksheet.py): each
register derived from %tid.x is evaluated for every thread of the block, branches on such
predicates split the control-flow graph into thread populations, and shared addresses
are evaluated to a symbol plus the byte offsets they can take (the module docstring of
analyses/worksheet.py says how)."""

from __future__ import annotations

import re
from fractions import Fraction

from wsperf.analyses.correctness import Basis, Item
from wsperf.analyses.worksheet_model import _MAX_VALUES, _WAIT, Fn, Val, _local
from wsperf.collectors.ptx import Entry, Stmt


_CYCLE = object()  # a value that depends on itself: a loop's update


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
        self._tables: dict[str, dict[int, int]] | None = None  # constant tables in shared memory
        self._table_lines: dict[str, set[int]] = {}
        self._table_later: dict[str, set[int]] = {}
        self._table_version: dict[str, dict[int, int]] | None = None  # a later version, while a dispatch reads it
        self.table_reads: set[int] = set()
        self.rank: int | None = None  # %cluster_ctarank while worksheet._rank_mask_arrivals reads a mask
        self._rank_branches: list[tuple[int, int, int]] | None = None
        # the index registers of barrier addresses that run past the barriers initialized (the
        # sites flag 13 names): what other flags read through them is a consequence
        self.runaway: set[str] = set()
        # shared slots whose only store writes another slot's value plus a constant
        # (worksheet_flags._slot_links): slot -> (that slot, the constant)
        self.slot_copies: dict[tuple[str | None, int], tuple[tuple[str | None, int], int]] | None = None
        self._blocks()
        self._populations()

    def reads_rank(self, op: str) -> bool:
        """`op` is computed, at any depth, from the CTA's place in its cluster
        (%cluster_ctarank, %cluster_ctaid): it may differ between the CTAs of one cluster."""
        return self.derives_from(op, lambda r: r.startswith(("%cluster_ctarank", "%cluster_ctaid")))

    def derives_from(self, op: str, hit, depth: int = 0, seen: set[str] | None = None) -> bool:  # type: ignore[no-untyped-def]
        """`op` is, or is computed at any depth from, a register for which `hit` holds."""
        op = op.strip().lstrip("!").strip("[]").split("+")[0].strip()
        if hit(op):
            return True
        seen = set() if seen is None else seen
        if depth > 40 or op in seen or not op.startswith("%"):
            return False
        seen.add(op)
        return any(self.derives_from(o2, hit, depth + 1, seen) for d in self.defs.get(op, ())
                   for o in d.operands[1:] for o2 in re.findall(r"%[\w.]+", o))

    def rank_guarded(self, i: int) -> bool:
        """Whether statement i runs on one side only of a branch that depends on the CTA's
        rank in its cluster (a leader-only commit): the CTAs of one cluster may differ in
        whether they run it. A rank branch whose two sides both reach it again (a join
        before it, a loop around both) does not guard it."""
        if self._rank_branches is None:
            self._rank_branches = [(b, tb, fb) for b, st, tb, fb in self.cond_branches
                                   if st.guard and self.reads_rank(st.guard)]
        at = self.block_of[i]
        return any((at in self.reach(tb, {b})) != (at in self.reach(fb, {b})) for b, tb, fb in self._rank_branches)

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
        if op == "%cluster_ctarank" and self.rank is not None:  # set while a rank's mask is read
            r = self.rank
            return lambda t: r
        if op == "%ntid.x" and self.n:
            n = self.n
            return lambda t: n
        if op in ("%tid.y", "%tid.z") and self.n:
            return lambda t: 0  # a 1-D block
        if op in ("%ntid.y", "%ntid.z") and self.n:
            return lambda t: 1
        ds = self.defs.get(op)
        if depth > 24 or not ds:
            return None
        if len(ds) != 1:
            # several definitions in one block (an elected lane written into a flag:
            # `mov r, 0; @p mov r, 1`): the value after the last of them
            blocks = {self.block_of[self.index[id(d)]] for d in ds}
            return self._value_at(op, self.index[id(ds[-1])] + 1, depth + 1) if len(blocks) == 1 else None
        return self._value_of(ds[0], depth)

    def _value_at(self, op: str, j: int, depth: int) -> Fn | None:
        """t -> the value of `op` just before statement j, from its definitions earlier in
        j's block (a guarded one keeps the earlier value where its guard is false)."""
        if depth > 24:
            return None
        b = self.block_of[j - 1] if j > 0 else 0
        here = [self.index[id(d)] for d in self.defs.get(op, ()) if self.block_of[self.index[id(d)]] == b
                and self.index[id(d)] < j]
        if not here:
            ds = self.defs.get(op, ())
            if len(ds) == 1 and self.index[id(ds[0])] < j:
                return self.value(op, depth + 1)
            only = self._reaching(op, j)
            return self._value_of(only, depth + 1, at=self.index[id(only)]) if only is not None and not only.guard \
                else None
        d = self.stmts[here[-1]]
        new = self._value_of(d, depth + 1, at=here[-1])
        if new is None or not d.guard:
            return new
        g, old = self.value(d.guard, depth + 1), self._value_at(op, here[-1], depth + 1)
        if g is None or old is None:
            return None
        neg = d.negated
        return lambda t: None if (c := g(t)) is None else new(t) if bool(c) != neg else old(t)

    def _reaching(self, op: str, j: int) -> Stmt | None:
        """The one definition of `op` that reaches statement j from another block: it lies
        before j in a block that dominates j's, and every other definition either lies
        before it on that path or after j with no loop that brings it back to j without
        passing it (TIRx's elect flag started from `mov %r713, 0`, a wait's spin loop in
        between, and %r713 written again by the elect.sync block after the copy). None
        otherwise."""
        ds = self.defs.get(op, ())
        if len(ds) < 2:
            return None
        dom = self.dominators()
        bj = self.block_of[j]
        self.loop_line(j)
        before = [d for d in ds if self.index[id(d)] < j and self.block_of[self.index[id(d)]] in dom[bj]]
        if not before:
            return None
        d = max(before, key=lambda x: self.index[id(x)])
        x = self.index[id(d)]
        for o in ds:
            y = self.index[id(o)]
            if o is d or (y < x and self.block_of[y] in dom[self.block_of[x]]):
                continue
            # a later write comes back to j only around a loop that holds both; when d lies in
            # that loop too, it dominates j there and writes again first
            if y < j or any(bj in body and self.block_of[y] in body and self.block_of[x] not in body
                            for body in self.loop_bodies.values()):
                return None
        return d

    def _value_of(self, s: Stmt, depth: int, at: int | None = None) -> Fn | None:
        """t -> what statement s writes; its operands read where s is when `at` is its index."""
        if at is not None:
            def arg(o: str) -> Fn | None:
                if len(self.defs.get(o, ())) > 1:
                    return self._value_at(o, at, depth + 1)
                return self.value(o, depth + 1)
        else:
            def arg(o: str) -> Fn | None:
                return self.value(o, depth + 1)
        base = s.opcode.split(".")[0]
        if base == "elect":
            mask = s.operands[1] if len(s.operands) > 1 else ""
            m = self.value(mask, depth + 1) if mask else None  # a register holding -1 is a full mask too
            self.elect[s.line] = mask.lower() in ("0xffffffff", "-1", "4294967295") or (
                m is not None and (c := m(0)) is not None and c & 0xFFFFFFFF == 0xFFFFFFFF)
            return lambda t: int(t % 32 == 0)
        if base == "shfl" and ".idx" in s.opcode and len(s.operands) >= 3:
            # a lane's value broadcast to its warp: warp-uniform values (the warp index) pass
            src, lane = arg(s.operands[1]), arg(s.operands[2])
            if lane is None and len(self.defs.get(s.operands[2].strip(), ())) > 1:
                # the lane written again later (CUTLASS's lane 0 for the warp-index shuffle, a
                # register an inline-asm block then reuses): read where the shuffle stands
                lane = self._value_at(s.operands[2].strip(), self.index[id(s)], depth + 1)
            if src is None or lane is None or (c := lane(0)) is None:
                return None
            return lambda t: src((t // 32) * 32 + (c & 31))
        if base == "ld" and ".shared" in s.opcode:
            return self._table_load(s, depth)
        args = [arg(a) for a in s.operands[1:]]
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
            b = args[1]
            # both read, each maybe undecided in some threads (a uniform part inside): a false
            # side decides an `and`, a true side an `or` (CUTLASS's `rank_even && warp == 2 &&
            # elected`: lanes not elected are decided out whatever the rank)
            if base == "and":
                return lambda t: 0 if (x := a(t)) == 0 or (y := b(t)) == 0 else None if x is None or y is None \
                    else int(bool(x) and bool(y))
            return lambda t: 1 if (x := a(t)) or (y := b(t)) else None if x is None or y is None else 0
        if base == "setp" and len(args) == 2 and not all(args) and s.opcode.split(".")[1] in ("eq", "ne"):
            # `(rank | lane | warp & 3) != 0`: an or of values, some not derived from %tid.x,
            # against 0: a thread whose derived part is nonzero is decided, the others not
            zero = [i for i, o in enumerate(s.operands[1:]) if o.strip() in ("0", "0x0")]
            nz = self._nonzero(s.operands[2 - zero[0]].strip(), depth + 1) if len(zero) == 1 else None
            if nz is not None:
                hit = int(s.opcode.split(".")[1] == "ne")
                return lambda t: hit if nz(t) else None
        if base == "setp" and len(args) == 2 and all(args):
            cmp = s.opcode.split(".")[1]
            a, b = _compared(s.opcode, args[0], args[1])
            f = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
                 "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
                 "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y,
                 "hs": lambda x, y: x >= y}.get(cmp)
            if f is None:
                return None
            return lambda t: None if (x := a(t)) is None or (y := b(t)) is None else int(f(x, y))
        if s.opcode.startswith("mad.lo") and len(args) == 3 and all(args):
            a, b, c = args
            return lambda t: None if (x := a(t)) is None or (y := b(t)) is None or (z := c(t)) is None else x * y + z
        ops2 = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "shr": lambda x, y: x >> y,
                "shl": lambda x, y: x << y, "and": lambda x, y: x & y, "or": lambda x, y: x | y,
                "div": lambda x, y: x // y if y else 0, "rem": lambda x, y: x % y if y else 0,
                "xor": lambda x, y: x ^ y, "max": max, "min": min}
        if s.opcode.startswith("mul.lo") or s.opcode in ("mul.s32", "mul.u32"):
            ops2["mul"] = lambda x, y: x * y
        if base in ops2 and len(args) == 2 and all(args):
            a, b = args
            g = ops2[base]
            return lambda t: None if (x := a(t)) is None or (y := b(t)) is None else g(x, y)
        return None

    def _nonzero(self, op: str, depth: int) -> Fn | None:
        """t -> True where an integer `or` of several values is surely nonzero in thread t
        (one of its operands derived from %tid.x is nonzero there), else None (undecided).
        None when no operand of the `or` is derived."""
        ds = self.defs.get(op)
        if depth > 24 or not ds or len(ds) != 1 or ds[0].opcode.split(".")[0] != "or" or \
                ds[0].opcode.endswith("pred") or len(ds[0].operands) != 3:
            return None
        parts = []
        for o in ds[0].operands[1:]:
            f = self.value(o, depth + 1) or self._nonzero(o.strip(), depth + 1)
            if f is not None:
                parts.append(f)
            elif not self._invariant(o.strip(), depth + 1):
                return None  # a loop counter's part (`i & 1`): the guard differs by trip
        if not parts:
            return None
        return lambda t: True if any(f(t) for f in parts) else None

    def _invariant(self, op: str, depth: int = 0) -> bool:
        """`op` is the same on every trip of every loop: computed from constants, kernel
        parameters and the CTA's place (%ctaid, %cluster_ctarank, %clusterid) alone."""
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op) or op.startswith(
                ("%ctaid", "%nctaid", "%cluster_ctarank", "%cluster_nctarank", "%clusterid", "%nclusterid")):
            return True
        ds = self.defs.get(op)
        if depth > 16 or not ds or len(ds) != 1 or ds[0].guard:
            return False
        d = ds[0]
        if d.opcode.startswith("ld.param"):
            return True
        if d.opcode.split(".")[0] not in ("mov", "cvt", "and", "or", "xor", "shl", "shr", "add", "sub", "mul", "not"):
            return False
        return all(self._invariant(o.strip(), depth + 1) for o in d.operands[1:])

    def _table_load(self, s: Stmt, depth: int) -> Fn | None:
        """t -> what a thread loads from a table of constants in shared memory, indexed by
        a value derived from %tid.x: the partition table of a Triton warp_specialize
        (warps store {0, 0x01010101} at the table, and each worker warp reads its own byte
        to pick its partition). The table is what the first constant store of each byte
        wrote; a jump table's dispatch also reads every later version of it
        (`_split_by_table`): a kernel with two specialized regions stores a second table
        (Triton's two warp_specialize loops), and Triton's exit value for every entry ends
        the dispatch. The notes say so."""
        m = re.search(r"\.[bsu](8|16|32|64)$", s.opcode)
        addr = self._shared_fn(s.operands[1], depth + 1) if m and len(s.operands) >= 2 else None
        if addr is None:
            return None
        sym, off = addr
        if not self._const_tables().get(sym):
            return None
        size = int(m.group(1)) // 8  # type: ignore[union-attr]

        def f(t: int) -> int | None:
            o = off(t)
            table = (self._table_version or self._tables or {}).get(sym)  # read when called: a version may be set
            if o is None or not table:
                return None
            got = [table.get(o + i) for i in range(size)]
            return None if None in got else int.from_bytes(bytes(got), "little")  # type: ignore[arg-type]

        if s.line not in self.table_reads:
            self.table_reads.add(s.line)
            lines = sorted(self._table_lines.get(sym, ()))
            later = sorted(self._table_later.get(sym, ()))
            self.notes.append(Item("roles", f"line {s.line}: each thread's branch is decided by a table of constants "
                                   f"in shared memory ({sym}, stored at line(s) {', '.join(map(str, lines))}), indexed "
                                   "by its warp" + (f"; line(s) {', '.join(map(str, later))} store it again: a jump "
                                   "table's dispatch reads each version (another specialized region, or the exit "
                                   "value that ends the dispatch), a plain branch the first" if later else ""),
                                   Basis.ASSUMPTION))
        return f

    def stmt_of(self, site) -> int | None:  # type: ignore[no-untyped-def]
        """The index of the statement a worksheet Site names (its PTX line and instruction)."""
        if getattr(self, "_at", None) is None:
            self._at: dict[tuple[int, str], int] = {}
            for i, st in enumerate(self.stmts):
                self._at.setdefault((st.line, st.opcode), i)
        return self._at.get((site.line, site.instruction))

    def dispatch_table_lines(self) -> tuple[int, ...]:
        """The PTX lines that read a table which decided a branch, and every store of it."""
        if not self.table_reads:
            return ()
        stores = set().union(*self._table_lines.values(), *self._table_later.values())
        return tuple(sorted(self.table_reads | stores))

    def _shared_fn(self, op: str, depth: int) -> tuple[str, Fn] | None:
        """(symbol, t -> offset) of a shared address: a symbol plus values derived from
        %tid.x and constants."""
        op = op.strip()
        if op.startswith("[") and op.endswith("]"):
            op = op[1:-1].strip()
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        if m:
            inner, c = self._shared_fn(m.group(1), depth + 1), int(m.group(2))
            return None if inner is None else (inner[0], lambda t, g=inner[1]: None if (x := g(t)) is None else x + c)
        at = self.shared_at(op)
        if at is not None:
            return at[0], lambda t: at[1]
        ds = self.defs.get(op)
        if depth > 24 or not ds or len(ds) != 1 or ds[0].opcode.split(".")[0] != "add" or len(ds[0].operands) != 3:
            return None
        a, b = ds[0].operands[1], ds[0].operands[2]
        for x, y in ((a, b), (b, a)):
            sx, fy = self._shared_fn(x, depth + 1), self.value(y, depth + 1)
            if sx is not None and fy is not None:
                return sx[0], lambda t, g=sx[1]: None if (p := g(t)) is None or (q := fy(t)) is None else p + q
        return None

    def _const_tables(self) -> dict[str, dict[int, int]]:
        """symbol -> {byte offset: value} from st.shared of immediates at constant addresses,
        the first store of each byte in program order (`_table_load`). Each later store that
        changes bytes makes a version of the tables (`_versions`): the previous one with
        those bytes written."""
        if self._tables is not None:
            return self._tables
        self._tables, self._table_lines, self._table_later = {}, {}, {}
        self._versions: list[dict[str, dict[int, int]]] = []
        current: dict[str, dict[int, int]] = {}
        for s in self.stmts:
            m = re.fullmatch(r"st\.shared(?:::cta)?(?:\.v(\d))?\.[bsu](8|16|32|64)", s.opcode)
            if not m or len(s.operands) != 2 or s.guard:
                continue
            where = self.shared_at(s.operands[0])
            if where is None:
                continue
            items = [x.strip() for x in s.operands[1].strip("{}").split(",")]
            if len(items) != int(m.group(1) or 1) or not all(re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", x)
                                                                 for x in items):
                continue
            width = int(m.group(2)) // 8
            sym, at = where
            table = self._tables.setdefault(sym, {})
            first, changed = False, False
            for n, x in enumerate(items):
                for i, byte in enumerate((int(x, 0) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")):
                    o = at + n * width + i
                    if o not in table:
                        table[o] = byte
                        first = True
                    elif current.get(sym, {}).get(o) != byte:
                        changed = True
                    current.setdefault(sym, {})[o] = byte
            if changed:
                self._versions.append({k: dict(v) for k, v in current.items()})
            (self._table_lines if first else self._table_later).setdefault(sym, set()).add(s.line)
        return self._tables

    def shared_at(self, op: str) -> tuple[str, int] | None:
        """(symbol, byte offset) of a shared address that `vals` resolves to one place."""
        v = self.vals(op)
        if v is None or v[0] is None or v[1] is None or len(v[1]) != 1:
            return None
        return v[0], next(iter(v[1]))

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
            wraps = [w for s in ds if s.opcode.startswith("selp") and len(s.operands) == 4
                     and (w := self._wrapped(op, s, depth)) is not None]
            if wraps:
                self._vals[op] = (None, wraps[0])
                return self._vals[op]
            loop = [s for s in ds if op in s.operands[1:]]
            known = set(self._vals)
            init = [self._val_def(s, depth + 1) for s in ds if s not in loop]
            res = _union(init) if init else None
            if res is not None and loop:
                ind = self._induction(op, res, loop, depth) if res[1] is not None else None
                if ind is None and res[0] is None and res[1] is not None:
                    ind = self._toggle(op, res[1], loop, depth)
                res = ind if ind is not None else (res[0], None) if res[0] else None
            if res is None and not loop and len(ds) > 1:
                for key in set(self._vals) - known:  # values read while `op` was busy: not final
                    del self._vals[key]
                res = self._closure(op, ds, depth)
        finally:
            self._busy.discard(op)
        self._vals[op] = res
        return res

    def vals_at(self, op: str, j: int) -> Val:
        """`vals` of `op` where statement j reads it, for a register written several times in
        j's block before j (an inline-asm block's scoped register: `mov a, smem; mad a, i,
        8, a; add a, a, 163920; mbarrier.arrive [a]`): each write evaluated in turn with the
        register holding what the one before wrote. Other operands: `vals`."""
        text = op.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1].strip()
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", text)
        reg, shift = (m.group(1).strip(), int(m.group(2))) if m else (text, 0)
        ds = self.defs.get(reg, [])
        idx = sorted(self.index[id(d)] for d in ds)
        b = self.block_of[j]
        if len(idx) < 2 or not all(self.block_of[x] == b and x < j for x in idx) or any(
                self.stmts[x].guard for x in idx):
            return self.vals(op)
        had, old = reg in self._vals, self._vals.get(reg)
        prev: Val = None
        try:
            for x in idx:
                known = set(self._vals)
                if prev is not None:
                    self._vals[reg] = prev
                else:
                    self._vals.pop(reg, None)
                busy, self._busy = self._busy, set(self._busy) | ({reg} if prev is None else set())
                try:
                    res = self._val_def(self.stmts[x], 1)
                finally:
                    self._busy = busy
                for key in set(self._vals) - known:  # computed from an assumed `reg`: dropped
                    del self._vals[key]
                prev = res
        finally:
            if had:
                self._vals[reg] = old
            else:
                self._vals.pop(reg, None)
        return _shift(prev, shift) if shift else prev

    def linear_vals(self, op: str) -> Val:
        """(symbol, values) of an address read as a linear form over its leaf registers, so
        that a leaf used twice counts once: Triton's sm_90 K-loop reaches `smem + 8 * s`
        through `s * 16376 + (s << 14) - s * 32760`, which `vals` (each operand a set of its
        own) widens to 76 offsets over every barrier. A leaf is a register whose `vals` is a
        few plain integers (a ring index `k & 3`). None when the form is not linear in them."""
        form = self._linear(op.strip().strip("[]").strip(), 0)
        if form is None:
            return None
        sym, coeffs, const = form
        values = self._spread(const, [(r, c) for r, c in coeffs.items() if c])
        return None if values is None else (sym, values)

    def _spread(self, const: int, leaves: list[tuple[str, int]]) -> frozenset | None:
        """const + sum(c * leaf) over every value `vals` gives each leaf (a few plain
        integers each); None when a leaf has no such values or the set passes 4 x _MAX_VALUES."""
        values = frozenset({const})
        for r, c in leaves:
            v = self.vals(r)
            if v is None or v[0] is not None or v[1] is None or len(v[1]) > _MAX_VALUES:
                return None
            values = frozenset(x + c * y for x in values for y in v[1])
            if len(values) > 4 * _MAX_VALUES:
                return None
        return values

    def thread_vals(self, op: str, threads: frozenset) -> Val:
        """(symbol, values) of an address that threads `threads` compute: read as a linear
        form (`linear_vals`) whose leaves are either the same for every thread (a ring index
        `s` with a few values) or a value of %tid.x (`value`: `warp << 7 | lane << 2`),
        evaluated per thread. A consumer's `ld.shared [smem + (s << 8 | lane << 2) + 8784]`
        and a producer's `st.shared [smem + (warp - 1) * 128 + lane * 4 + (s << 8) + 8784]`
        are compared so. None when a leaf is neither, or the set grows past 4 x _MAX_VALUES."""
        form = self._linear(op.strip().strip("[]").strip(), 0)
        if form is None or not threads:
            return None
        sym, coeffs, const = form
        per_thread: list[tuple[Fn, int]] = []
        rest: list[tuple[str, int]] = []
        for r, c in coeffs.items():
            f = self.value(r) if c else None
            if f is not None and all(isinstance(f(t), int) for t in threads):
                per_thread.append((f, c))
            elif c:
                rest.append((r, c))
        uniform = self._spread(const, rest)
        if uniform is None:
            return None
        own = {sum(c * f(t) for f, c in per_thread) for t in threads}  # type: ignore[misc]
        out = frozenset(x + y for x in uniform for y in own)
        return None if len(out) > 4 * _MAX_VALUES else (sym, out)

    def _linear(self, op: str, depth: int) -> tuple[str | None, dict[str, int], int] | None:
        """(symbol, {leaf register: coefficient}, constant) of `op` (linear_vals). An index
        whose own form has a leaf of unknown values but that takes a few values itself
        (C's `i % 2` of a loop counter, `i - ((i + (i >>> 31)) & -2)`) is a leaf."""
        f = self._linear_form(op, depth)
        if f is None or f[0] is not None or op not in self.defs:
            return f
        if any(c and not self._few(r) for r, c in f[1].items()) and self._few(op):
            return None, {op: 1}, 0
        return f

    def _few(self, r: str) -> bool:
        """Whether `vals` gives r a few plain integers."""
        v = self.vals(r)
        return v is not None and v[0] is None and v[1] is not None and len(v[1]) <= _MAX_VALUES

    def _linear_form(self, op: str, depth: int) -> tuple[str | None, dict[str, int], int] | None:
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        if m:
            f = self._linear(m.group(1).strip(), depth + 1)
            return None if f is None else (f[0], f[1], f[2] + int(m.group(2)))
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            return None, {}, int(op, 0)
        if op not in self.defs:
            if op.startswith("%") or not re.fullmatch(r"[A-Za-z_$][\w$.]*", op) or re.search(r"\$[sc]\d", op):
                return None
            return op, {}, 0
        ds = self.defs[op]
        leaf = (None, {op: 1}, 0)
        if depth > 24 or len(ds) != 1 or ds[0].guard:
            return leaf
        d = ds[0]
        base, ops = d.opcode.split(".")[0], d.operands[1:]
        if base in ("mov", "cvt", "cvta") and len(ops) == 1:
            return self._linear(ops[0], depth + 1)
        if base == "shfl" and ".idx" in d.opcode and ops:
            v = self.vals(ops[0])
            return self._linear(ops[0], depth + 1) if v is not None and v[0] is not None else leaf
        parts = [self._linear(x, depth + 1) for x in ops]
        if any(p is None for p in parts):
            return leaf
        if base in ("add", "sub") and len(parts) == 2:
            (sa, ca, ka), (sb, cb, kb) = parts  # type: ignore[misc]
            sign = 1 if base == "add" else -1
            if sb is not None and (base == "sub" or sa is not None):
                return leaf
            coeffs = dict(ca)
            for r, c in cb.items():
                coeffs[r] = coeffs.get(r, 0) + sign * c
            return sa or sb, coeffs, ka + sign * kb
        if base in ("mul", "shl") and len(parts) == 2 and ".hi" not in d.opcode and ".wide" not in d.opcode:
            (sa, ca, ka), (sb, cb, kb) = parts  # type: ignore[misc]
            if sa is None and sb is None and not cb:
                k = kb if base == "mul" else (1 << kb if 0 <= kb < 32 else None)
                return None if k is None else (None, {r: c * k for r, c in ca.items()}, ka * k)
            if base == "mul" and sa is None and sb is None and not ca:
                return None, {r: c * ka for r, c in cb.items()}, kb * ka
            return leaf
        if base == "mad" and len(parts) == 3 and ".lo" in d.opcode:
            (sa, ca, ka), (sb, cb, kb), (sc, cc, kc) = parts  # type: ignore[misc]
            if sa is None and sb is None and (not ca or not cb):
                k, (cx, kx) = (ka, (cb, kb)) if not ca else (kb, (ca, ka))
                coeffs = {r: c * k for r, c in cx.items()}
                for r, c in cc.items():
                    coeffs[r] = coeffs.get(r, 0) + c
                return sc, coeffs, kx * k + kc
            return leaf
        return leaf

    def _toggle(self, op: str, start: frozenset, loop: list[Stmt], depth: int) -> Val:
        """The values of an integer a loop updates from itself without stepping it: Triton's
        phase `p ^= (s + 1 == STAGES)` and its stage kept or replaced by its wrap (`s = pred ?
        (s + 1 == 2 ? 0 : s + 1) : s`): from its starts, the updates applied with `op` taken as
        the values found so far, until they give nothing new."""
        try:
            return self._fixpoint(op, start, loop, depth)
        finally:
            self._vals.pop(op, None)

    def _closure(self, op: str, ds: list[Stmt], depth: int) -> Val:
        """The values of a stage index that the loop steps through other registers (nvcc's
        2x-unrolled ring: `s1 = s0 + 1 == 4 ? 0 : s0 + 1; s0 = s1 + 1 == 4 ? 0 : s1 + 1`):
        from its constant starts, the loop's update applied until it gives nothing new."""
        starts = [v for d in ds if d.opcode.split(".")[0] == "mov" and (v := self._val_def(d, depth + 1))
                  is not None and v[0] is None and v[1] is not None]
        updates = [d for d in ds if d.opcode.split(".")[0] != "mov"]
        if not starts or not updates or len(starts) + len(updates) != len(ds):
            return None
        return self._fixpoint(op, frozenset().union(*(v[1] for v in starts)), updates, depth)  # type: ignore[index]

    def _fixpoint(self, op: str, cur: frozenset, updates: list[Stmt], depth: int) -> Val:
        """The values `op` takes from `cur` when `updates` define it from itself: each round
        evaluates them with `op` assumed to hold the values found so far, until they give
        nothing new (None when one is not a plain set of integers, or too many)."""
        busy, self._busy = self._busy, {op}
        done: set[int] = set()
        try:
            for _ in range(_MAX_VALUES):
                # each value on its own: an update that steps `op` through several registers
                # (CuTe's unrolled `advance()` steps, `i + 2` with a wrap tested on `i`) keeps the
                # correlation between them, which the set as a whole would lose
                nxt = []
                for v in sorted(cur - done):
                    known = set(self._vals)
                    self._vals[op] = (None, frozenset({v}))
                    nxt += [self._val_def(d, depth + 1) for d in updates]
                    for key in set(self._vals) - known:  # computed from an assumed `op`: dropped
                        del self._vals[key]
                done |= cur
                if any(v is None or v[0] is not None or v[1] is None for v in nxt):
                    return None
                new = cur.union(*(v[1] for v in nxt))  # type: ignore[index]
                if new == cur:
                    return None, cur
                if len(new) > _MAX_VALUES:
                    return None
                cur = new
            return None
        finally:
            self._busy = busy

    def trip_vals(self, op: str, i: int) -> Val:
        """(symbol, values) of address `op` at statement i over the trips of the counted loop
        holding i (`trip_count`), when its one loop-carried index starts from a constant
        before the loop and is updated once a trip from itself: CuTe's prologue that releases
        3 stages of a ring of 4 (`s = s + 1 == 4 ? 0 : s + 1`, 3 trips) reaches stages 0-2,
        where `vals` gives all four. None when the PTX does not give it so."""
        trips = self.trip_count(i)
        form = self._linear(op.strip().strip("[]").strip(), 0)
        if trips is None or form is None or trips > _MAX_VALUES:
            return None
        sym, coeffs, const = form
        body = self.loop_blocks(i)
        carried = [r for r, c in coeffs.items() if c and any(self.block_of[self.index[id(d)]] in body
                                                                for d in self.defs.get(r, ()))]
        if len(carried) != 1:
            return None
        r = carried[0]
        ds = self.defs.get(r, ())
        inside = [d for d in ds if self.block_of[self.index[id(d)]] in body]
        outside = [d for d in ds if d not in inside]
        start = self.first_value(r)
        if len(inside) != 1 or not outside or start is None:
            return None
        rest = self._spread(const, [(x, c) for x, c in coeffs.items() if c and x != r])
        if rest is None:
            return None
        cur, seen = start, [start]
        busy, self._busy = self._busy, {r}
        try:
            for _ in range(trips - 1):
                known = set(self._vals)
                self._vals[r] = (None, frozenset({cur}))
                v = self._decided_def(inside[0])
                for key in set(self._vals) - known:
                    del self._vals[key]
                self._vals.pop(r, None)
                if v is None or v[0] is not None or v[1] is None or len(v[1]) != 1:
                    return None
                cur = next(iter(v[1]))
                seen.append(cur)
        finally:
            self._busy = busy
            self._vals.pop(r, None)
        return sym, frozenset(x + coeffs[r] * y for x in rest for y in seen)

    def _decided_def(self, d: Stmt) -> Val:
        """`_val_def` of d, with a `selp` whose predicate compares two single values decided
        (the wrap `selp s, 0, n, (n == N)` at one value of n picks one arm, not both)."""
        if d.opcode.startswith("selp") and len(d.operands) == 4:
            flag = self.defs.get(d.operands[3], [])
            if len(flag) == 1 and not flag[0].guard and len(flag[0].operands) == 3 and flag[0].opcode.startswith("setp"):
                x, y = (self.vals(o) for o in flag[0].operands[1:])
                cmp = {"eq": lambda p, q: p == q, "ne": lambda p, q: p != q, "lt": lambda p, q: p < q,
                       "ge": lambda p, q: p >= q, "gt": lambda p, q: p > q, "le": lambda p, q: p <= q}.get(
                    flag[0].opcode.split(".")[1])
                if cmp and x and y and x[0] is None and y[0] is None and x[1] and y[1] and len(x[1]) == 1 \
                        and len(y[1]) == 1:
                    return self.vals(d.operands[1 if cmp(next(iter(x[1])), next(iter(y[1]))) else 2])
        return self._val_def(d, 1)

    def _local_def(self, reg: str, s: Stmt) -> Stmt | None:
        """The definition of `reg` that statement s reads when `reg` is written several
        times and the last write before s lies in s's own block (unguarded); else None."""
        ds = self.defs.get(reg)
        if not ds or len(ds) < 2 or id(s) not in self.index:
            return None
        j = self.index[id(s)]
        b = self.block_of[j]
        here = [d for d in ds if self.block_of[self.index[id(d)]] == b and self.index[id(d)] < j]
        if not here:
            return None
        d = max(here, key=lambda d: self.index[id(d)])
        return None if d.guard else d

    def _val_def(self, s: Stmt, depth: int) -> Val:
        base = s.opcode.split(".")[0]
        ops = s.operands[1:]
        if base in ("mov", "cvt", "cvta") and len(ops) == 1:
            # a copy of a register a loop writes again, taken before the loop right after its
            # start value (`mov %r741, 0; mov %r744, %r741`, then `add %r741, %r741, 1` in the
            # loop): the value it copies is that start
            here = self._local_def(ops[0].strip(), s)
            return self._val_def(here, depth + 1) if here is not None and depth < 32 else self.vals(ops[0], depth)
        if base == "shfl" and ".idx" in s.opcode and ops:
            # one lane's value broadcast to its warp: CuTe makes the shared base warp-uniform
            # this way (`shfl.sync.idx.b32 %r1, %r9, 0, 31, -1` of `mov %r9, smem`). A
            # symbol's address is the same in every lane; a set of values still holds the
            # one broadcast
            return self.vals(ops[0], depth)
        if base == "selp" and len(ops) == 3:
            held = self._decided_pred(ops[2], depth)
            if held is not None:  # the predicate is decided: only its arm is taken
                return self._chosen(ops, held, depth)
            arms = [self._chosen(ops, pick, depth) for pick in (True, False)]
            return _union([a for a in arms if a is None or a[1] != frozenset()]) or None
        if base in ("neg", "not") and len(ops) == 1:
            v = self.vals(ops[0], depth)
            if v is None or v[0] is not None or v[1] is None:
                return None
            return None, frozenset((-x if base == "neg" else ~x) for x in v[1])
        if base == "mad" and len(ops) == 3 and ".hi" not in s.opcode:
            # a * b + c with a and b plain integers (Triton's `mad.wide.u16 p, stage, 8, smem`
            # for a ring of two: the stage a selp of 0 and 1): the products plus c
            a, b, c = (self.vals(x, depth) for x in ops)
            if a and b and a[0] is None and b[0] is None and c is not None:
                prod = _combine(None, a[1], b[1], lambda x, y: x * y)
                if prod is not None and prod[1] is not None:
                    return _combine(c[0], prod[1], c[1], lambda x, y: x + y)
            return None
        if len(ops) != 2:
            return None
        if base == "sub" and (m := self._signed_rem(ops[0], ops[1])) is not None:
            # C's `i % 2^k` of a value that never goes negative: `i & (2^k - 1)`, read as one
            # expression (its two operands as independent sets would give -2^k+1 .. 2^k-1)
            x = self.vals(ops[0], depth)
            return None, (frozenset(v & (m - 1) for v in x[1]) if x and x[0] is None and x[1] else frozenset(range(m)))
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
            # x & MASK with x unknown: a submask of MASK (few bits: a ring index), or, for a
            # counter that starts at known values and steps by a constant, what it takes
            # below MASK's top bit (a consumer taking every other stage: `i = 1; i += 2`,
            # `i & 3` is 1 or 3)
            (sym, c) = a or b  # type: ignore[misc]
            if sym is None and c is not None and len(c) == 1 and (m := next(iter(c))) >= 0 and bin(m).count("1") <= 8:
                prog = self._progression(ops[0] if a is None else ops[1], depth)
                if prog is not None and m.bit_length() <= 8:
                    starts, step = prog
                    period = 1 << m.bit_length()
                    return None, frozenset((x + step * n) & m for x in starts for n in range(period))
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

    def _progression(self, op: str, depth: int) -> tuple[frozenset, int] | None:
        """(start values, step) of a register a loop steps by a constant from plain integer
        starts (`mov i, 1` before the loop, `add i, i, 2` in it), however many trips."""
        op = op.strip()
        ds = self.defs.get(op, [])
        loop = [s for s in ds if op in s.operands[1:]]
        if not loop or any(s.guard for s in ds):
            return None
        step = _step(op, loop, self)
        init = _union([self._val_def(s, depth + 1) for s in ds if s not in loop]) if len(loop) < len(ds) else None
        if step is None or init is None or init[0] is not None or init[1] is None:
            return None
        return init[1], step

    def _decided_pred(self, p: str, depth: int) -> bool | None:
        """True or False where `setp.<cmp> p, a, b` gives one answer for every pair of the
        values a and b can take (plain integers, not addresses); None otherwise."""
        flag = self.defs.get(p.strip(), [])
        if len(flag) != 1 or flag[0].guard or len(flag[0].operands) != 3 or not flag[0].opcode.startswith("setp."):
            return None
        cmp = flag[0].opcode.split(".")[1]
        f = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
             "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}.get(cmp)
        if f is None:
            return None
        a, b = (self.vals(x, depth + 1) for x in flag[0].operands[1:])
        if not a or not b or a[0] is not None or b[0] is not None or a[1] is None or b[1] is None or \
                len(a[1]) * len(b[1]) > 64 or (cmp not in ("eq", "ne") and min(a[1] | b[1]) < 0):
            return None
        got = {f(x, y) for x in a[1] for y in b[1]}
        return got.pop() if len(got) == 1 else None

    def _chosen(self, ops: list[str], pick: bool, depth: int) -> Val:
        """The values `selp a, b, p` takes from a (`pick`) or b. When p compares the other
        operand with a constant (`p = n == N; selp 0, n, p`: a stage counter's wrap), b is
        chosen only where n != N, so N is not among them."""
        v = self.vals(ops[0 if pick else 1], depth)
        flag = self.defs.get(ops[2], [])
        if v is None or v[0] is not None or v[1] is None or len(flag) != 1 or len(flag[0].operands) != 3 or \
                flag[0].guard or flag[0].opcode.split(".")[:2] not in (["setp", "eq"], ["setp", "ne"]):
            return v
        x, y = flag[0].operands[1:]
        mine = ops[0 if pick else 1]
        other = y if x == mine else x if y == mine else None
        c = self.vals(other, depth) if other is not None else None
        if c is None or c[0] is not None or c[1] is None or len(c[1]) != 1:
            return v
        # chosen when p holds (pick) under eq, or when it fails under ne: there mine == N
        if pick == (flag[0].opcode.split(".")[1] == "eq"):
            return v[0], v[1] & c[1]
        return v[0], v[1] - c[1]

    def _wrapped(self, op: str, s: Stmt, depth: int) -> frozenset | None:
        """The values of a stage counter that wraps: `n = op + c; op = (n == N) ? 0 : n`
        (`setp.eq p, n, N; selp op, 0, n, p`, as CuTe DSL and nvcc step a ring's stage), with
        every other definition of `op` a constant: its start, start + c, ... below N, and
        the value it wraps to. The test may be an order (`setp.gt p, n, N - 1`, Triton's
        persistent `flatten=True` loop); a start outside the ring (Triton's -1, stepped
        before its first use) counts only where every read of `op` follows the wrap."""
        ops = s.operands[1:]
        flag = self.defs.get(ops[2], [])
        if len(flag) != 1 or not flag[0].opcode.startswith("setp.") or len(flag[0].operands) != 3:
            return None
        cmp, (x, y) = flag[0].opcode.split(".")[1], flag[0].operands[1:]
        # the value chosen when the counter reaches N, and the one chosen otherwise; for an
        # order, `n REL L` normalized with n on the left, and N the first value wrapped
        past = 0
        if cmp in ("eq", "ne"):
            reset, nxt = (ops[0], ops[1]) if cmp == "eq" else (ops[1], ops[0])
        elif cmp in ("gt", "ge", "lt", "le") and y in (ops[0], ops[1]) and x not in (ops[0], ops[1]):
            rel = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}[cmp]  # `L REL' n`: n on the right
            x, y = y, x
            reset, nxt = (ops[0], ops[1]) if rel in ("gt", "ge") else (ops[1], ops[0])
            past = 1 if rel in ("gt", "le") else 0
        elif cmp in ("gt", "ge", "lt", "le"):
            reset, nxt = (ops[0], ops[1]) if cmp in ("gt", "ge") else (ops[1], ops[0])
            past = 1 if cmp in ("gt", "le") else 0
        else:
            return None
        if nxt not in (x, y):
            return None
        limit = _shift(self.vals(y if nxt == x else x, depth + 1), past)
        back = self.vals(reset, depth + 1)  # type: ignore[arg-type]
        step_def = self.defs.get(nxt, [])
        if len(step_def) != 1 or step_def[0].opcode.split(".")[0] != "add" or op not in step_def[0].operands[1:]:
            return None
        c = self.vals(next((o for o in step_def[0].operands[1:] if o != op), op), depth + 1)
        starts = [self._start(d, s, depth) for d in self.defs.get(op, []) if d is not s
                  and d.opcode.split(".")[0] == "mov" and len(d.operands) == 2]
        if len(starts) + 1 != len(self.defs.get(op, [])):
            return None
        known = [limit, back, c]
        if any(v is None or v[0] is not None or v[1] is None or len(v[1]) != 1 for v in known):
            return None
        # a start may take a few values (CuTe's ping-pong consumers start their ring at their
        # warpgroup's stage: `selp 1, 0, gid == 1`)
        if any(v is None or v[0] is not None or not v[1] or len(v[1]) > _MAX_VALUES for v in starts):
            return None
        n, r, step = (next(iter(v[1])) for v in (limit, back, c))  # type: ignore[index]
        if step <= 0 or not 0 < n <= _MAX_VALUES:
            return None
        # from each start up to N, and from the reset value on once it has wrapped (Triton
        # starts its stage at STAGES - 1, so the first step wraps it to 0)
        out = set(range(r, n, step)) if 0 <= r < n else {r}
        for v in starts:
            for first in v[1]:  # type: ignore[union-attr]
                if not 0 <= first < n and self._read_after(op, s, step_def[0]):
                    first += step  # never read before its first step
                    if not 0 <= first < n:
                        continue  # the step wraps it: the reset value, already in
                out |= set(range(first, n, step))
        return frozenset(out) if all(0 <= x < n for x in out) else None

    def _read_after(self, op: str, wrap: Stmt, step: Stmt) -> bool:
        """Every statement that reads `op`, but the step that computes its next value, reads
        the value the wrap `wrap` wrote: in its own block (`_local_def`) or as the one
        definition that reaches it from a block the wrap dominates (`_reaching`)."""
        readers = [u for u in self.stmts if u is not step and u is not wrap
                   and any(re.search(rf"{re.escape(op)}(?![\w$])", o) for o in u.operands[1:])]
        return bool(readers) and all((d := self._local_def(op, u)) is wrap or
                                     d is None and self._reaching(op, self.index[id(u)]) is wrap for u in readers)

    def _start(self, d: Stmt, wrap: Stmt, depth: int) -> Val:
        """What `mov op, src` before a loop gives `op` (the wrap `wrap` is its update): a
        constant, or a counter's first value when the copy runs before the loop (the loop
        cannot come back to it) and before the counter is ever stepped (CuTe DSL starts the
        stage at the phase counter's 0: `mov %r104, %r103`)."""
        src = d.operands[1]
        v = self.vals(src, depth + 1)
        if v is not None and v[0] is None and v[1] is not None:
            return v
        at = self.block_of[self.index[id(d)]]
        if at in self.reach(self.block_of[self.index[id(wrap)]], set()):
            return None
        if any(at in self.reach(self.block_of[self.index[id(u)]], set()) for u in self.defs.get(src, ())
               if src in u.operands[1:]):
            return None
        first = self.first_value(src)
        return None if first is None else (None, frozenset({first}))

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

    def ring_base(self, op: str) -> tuple[str, int, int] | None:
        """(symbol, C, step) when `op` is the symbol plus C plus a stage offset that a loop
        steps by `step` bytes each trip and wraps, where `vals` cannot follow it (the
        pointer `p += 8` each trip, wrapped by `mad.lo q, i / STAGES, -8 * STAGES, p`, as
        Triton and Gluon emit). Every definition of a register must agree; an index read
        from data, or one with no loop step, gives None."""
        base, steps, _, _ = self._ring_walk(op)
        if base is None or len(steps) > 1:
            return None
        steps = set(steps)
        step = steps.pop() if steps else 8  # an index added to the base: one barrier (8 bytes) a stage
        return (base[0], base[1], step) if step > 0 and step % 8 == 0 else None

    def ring_span(self, op: str) -> int | None:
        """The largest byte offset the stage index of `op` (a `ring_base` address) can add to
        its base, when the PTX bounds it: `(i & 1) << 3` is at most 8, `(i % 4) * 8` at most
        24. Two barrier arrays of the same stride can lie back to back (Gluon's 2-stage
        `out_ready` then `out_empty`); the bound keeps a ring from running into the next
        array. None when an index is not bounded (a pointer stepped each trip)."""
        base, _, _, spans = self._ring_walk(op)
        if base is None or not spans or None in spans:
            return None
        return max(s for s in spans if s is not None)

    def _ring_walk(self, op: str) -> tuple[tuple[str, int] | None, tuple[int, ...], tuple[int, ...],
                                           tuple[int | None, ...]]:
        """`_ring_base` of `op` walked once: (base, the loop steps, the statements that step
        it, the bounds of its indices), for ring_base, ring_span and initial_offset alike."""
        memo = self.__dict__.setdefault("_ring_memo", {})
        if op not in memo:
            steps: set[int] = set()
            updates: list[int] = []
            spans: list[int | None] = []
            wraps: list[int] = []
            base = self._ring_base(op, 0, frozenset(), steps, updates, spans, wraps)
            if wraps and base is not None:
                # a pointer stepped each trip and wrapped by `- (i / STAGES) * RING` reaches
                # RING - 8 bytes past its start at most (the last barrier of the ring)
                spans = [s for s in spans if s is not None] + [min(wraps) - 8]
            memo[op] = (base, tuple(steps), tuple(updates), tuple(spans))
        return memo[op]

    def _scale(self, op: str) -> int | None:
        """c when register `op` is an index times the constant c (`shl x, 4` is 16, `mul x,
        48`): the bytes a wrap subtracts per turn of the ring."""
        ds = self.defs.get(op.strip())
        if not ds or len(ds) != 1:
            return None
        base, ops = ds[0].opcode.split(".")[0], ds[0].operands[1:]
        if len(ops) != 2 or not re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", ops[1].strip()):
            return None
        c = int(ops[1].strip(), 0)
        return (1 << c if c < 32 else None) if base == "shl" else c if base == "mul" and ".hi" not in ds[0].opcode \
            and ".wide" not in ds[0].opcode else None

    def index_max(self, op: str, depth: int = 0) -> int | None:
        """An upper bound on a non-negative index register computed from a loop counter:
        `and` with a constant mask, `rem` by a constant, shifts and products by constants,
        sums, `selp` and moves of such. None when nothing bounds it."""
        op = op.strip()
        if re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", op):
            return int(op, 0)
        defs = self.defs.get(op)
        if not defs or depth > 24:
            return None
        for d in defs:  # a wrapping counter: its bound checks its other definitions itself
            if d.opcode.split(".")[0] == "selp" and len(d.operands) == 4 and \
                    (w := self._wrap_bound(op, [x.strip() for x in d.operands[1:]])) is not None:
                return w
        out = 0
        for d in defs:
            base, ops = d.opcode.split(".")[0], [x.strip() for x in d.operands[1:]]
            const = [int(x, 0) for x in ops if re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", x)]
            unsigned = ".u" in d.opcode or ".b" in d.opcode
            if base == "and" and len(ops) == 2 and const and const[0] >= 0:
                m = const[0]
            elif base == "rem" and len(ops) == 2 and ops[1] in [str(c) for c in const] and const[-1] > 0 \
                    and (unsigned or self.index_max(ops[0], depth + 1) is not None):
                m = const[-1] - 1
            elif base == "sub" and len(ops) == 2 and (k := self._signed_rem(ops[0], ops[1])) is not None:
                m = k - 1
            elif base in ("shl", "mul") and len(ops) == 2 and re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", ops[1]):
                x = self.index_max(ops[0], depth + 1)
                if x is None:
                    return None
                m = x << const[0] if base == "shl" else x * const[0]
            elif base == "add" and len(ops) == 2:
                xs = [self.index_max(x, depth + 1) for x in ops]
                if None in xs:
                    return None
                m = xs[0] + xs[1]  # type: ignore[operator]
            elif base == "selp" and len(ops) == 3:
                xs = [self.index_max(x, depth + 1) for x in ops[:2]]
                if None in xs:
                    return None
                m = max(xs)  # type: ignore[type-var]
            elif base in ("mov", "cvt") and len(ops) == 1:
                x = self.index_max(ops[0], depth + 1)
                if x is None:
                    return None
                m = x
            else:
                return None
            out = max(out, m)
        return out

    def _signed_rem(self, x: str, y: str) -> int | None:
        """2^k when `x - y` is C's signed `x % 2^k` (`_rem_shape`) and x never goes negative
        (`_never_negative`): then it is `x & (2^k - 1)`. None otherwise."""
        k = self._rem_shape(x, y)
        return k if k is not None and self._never_negative(x.strip()) else None

    def _rem_shape(self, x: str, y: str) -> int | None:
        """2^k when `x - y` is C's signed `x % 2^k`: y is
        `(x + (x >>> 31)) & -2` for k = 1, `(x + ((x >> 31) >>> (32 - k))) & -2^k` otherwise
        (what nvcc and CuTe DSL emit for `i % STAGES` on an int). None otherwise."""
        num = r"-?\d+|0[xX][0-9a-fA-F]+"
        ad = self.defs.get(y.strip(), ())
        if len(ad) != 1 or ad[0].opcode.split(".")[0] != "and" or len(ad[0].operands) != 3 or \
                not re.fullmatch(num, mask := ad[0].operands[2].strip()):
            return None
        # -2^k as a 32-bit mask, written signed or unsigned; or narrowed to the bits the
        # compiler knows x to have, 2^n - 2^k (CuTe DSL's `n % 2` on a tile counter below 2^17:
        # `& 131070`)
        m = int(mask, 0) & 0xFFFFFFFF
        k2 = m & -m
        if k2 < 2 or (m + k2) & (m + k2 - 1):
            return None
        sd = self.defs.get(ad[0].operands[1].strip(), ())
        if len(sd) != 1 or sd[0].opcode.split(".")[0] != "add" or len(sd[0].operands) != 3:
            return None
        a, b = (o.strip() for o in sd[0].operands[1:])
        t = b if a == x.strip() else a if b == x.strip() else None
        td = self.defs.get(t, ()) if t else ()
        if len(td) != 1 or not td[0].opcode.startswith("shr.u") or len(td[0].operands) != 3:
            return None
        src, sh = (o.strip() for o in td[0].operands[1:])
        if not re.fullmatch(r"\d+", sh):
            return None
        if src != x.strip():  # (x >> 31) >>> (32 - k): the sign, spread over the low k bits
            sd2 = self.defs.get(src, ())
            if len(sd2) != 1 or not sd2[0].opcode.startswith("shr.s") or \
                    [o.strip() for o in sd2[0].operands[1:]] != [x.strip(), "31"] or int(sh) != 32 - k2.bit_length() + 1:
                return None
        elif int(sh) != 31 or k2 != 2:
            return None
        return k2

    def _never_negative(self, x: str) -> bool:
        """Whether x never goes negative, read from every definition of it and of what it is
        made of: non-negative constants, copies, sums, shifts right, `selp`, `xor` and `or` of
        such values, `and` with a non-negative mask, a floor division's `selp -1, 0, x < 0`
        for x such a value, and C's signed remainder of such a value (`_signed_rem`). Cycles
        (a counter's own update) are taken as holding, which is an induction: every
        definition keeps the value non-negative if its inputs are."""
        num = r"\d+|0[xX][0-9a-fA-F]+"
        seen, todo = {x}, [x]

        def need(o: str) -> bool:
            if re.fullmatch(num, o):
                return True
            if not o.startswith("%"):
                return False
            if o not in seen:
                seen.add(o)
                todo.append(o)
            return True

        while todo:
            r = todo.pop()
            for d in self.defs.get(r, ()):
                base, ops = d.opcode.split(".")[0], [o.strip() for o in d.operands[1:]]
                if base == "mov" and len(ops) == 1 and need(ops[0]):
                    continue
                if base == "add" and len(ops) == 2 and all(need(o) for o in ops):
                    continue
                if base == "selp" and len(ops) == 3 and need(ops[1]) and (
                        need(ops[0]) if not re.fullmatch(r"-\d+", ops[0]) else
                        (v := self._false_if_nonneg(ops[2])) is not None and need(v)):
                    # `selp -1, 0, x < 0 && ...`: a floor division's correction, 0 for x >= 0
                    continue
                if base == "shr" and len(ops) == 2 and re.fullmatch(num, ops[1]) and need(ops[0]):
                    continue
                if base in ("xor", "or") and len(ops) == 2 and "pred" not in d.opcode and all(need(o) for o in ops):
                    continue
                if base == "and" and len(ops) == 2 and any(re.fullmatch(num, o) for o in ops):
                    continue
                if base == "sub" and len(ops) == 2 and self._rem_shape(ops[0], ops[1]) is not None and need(ops[0]):
                    continue
                return False
        return True

    def _false_if_nonneg(self, p: str) -> str | None:
        """v when predicate p is false whenever v >= 0: `setp.lt.s* p, v, 0`, or an `and.pred`
        with such a side (the sign test of C's division and remainder). None otherwise."""
        ds = self.defs.get(p.strip(), ())
        if len(ds) != 1:
            return None
        d = ds[0]
        ops = [o.strip() for o in d.operands[1:]]
        if d.opcode.startswith("setp.lt.s") and len(ops) == 2 and ops[1] == "0":
            return ops[0]
        if d.opcode == "and.pred" and len(ops) == 2:
            return next((v for o in ops if (v := self._false_if_nonneg(o)) is not None), None)
        return None

    def _wrap_bound(self, d: str, ops: list[str]) -> int | None:
        """The bound of a counter that wraps: `x = d + 1; p = x == C; d = selp 0, x, p` (Gluon's
        and CuTe's `index = index + 1 == STAGES ? 0 : index + 1`; also `x < C` with the sides
        swapped, `x >= C`): d is at most C - 1 when its other definitions are constants below
        C. None for any other `selp`."""
        num = r"\d+|0[xX][0-9a-fA-F]+"
        pd = self.defs.get(ops[2], ())
        if len(pd) != 1 or not pd[0].opcode.startswith("setp.") or len(pd[0].operands) != 3:
            return None
        cmp_ = pd[0].opcode.split(".")[1]
        x, c = pd[0].operands[1].strip(), pd[0].operands[2].strip()
        if not re.fullmatch(num, c):
            return None
        c_ = int(c, 0)
        if cmp_ in ("eq", "ge") and re.fullmatch(num, ops[0]) and ops[1] == x:
            low = int(ops[0], 0)
        elif cmp_ in ("ne", "lt") and re.fullmatch(num, ops[1]) and ops[0] == x:
            low = int(ops[1], 0)
        else:
            return None
        xd = self.defs.get(x, ())
        if len(xd) != 1 or xd[0].opcode.split(".")[0] != "add" or len(xd[0].operands) != 3 or \
                {xd[0].operands[1].strip(), xd[0].operands[2].strip()} != {d, "1"}:
            return None
        for o in self.defs.get(d, ()):
            if o.opcode.split(".")[0] == "selp" and o.operands[1:] and [y.strip() for y in o.operands[1:]] == ops:
                continue
            if o.opcode.split(".")[0] != "mov" or len(o.operands) != 2:
                return None
            y = o.operands[1].strip()
            starts = [int(y, 0)] if re.fullmatch(num, y) else self._reaching_consts(y, self.index[id(o)])
            if starts is None or any(v < 0 or v >= c_ for v in starts):
                return None
        return max(low, c_ - 1)

    def _reaching_consts(self, y: str, j: int) -> list[int] | None:
        """The constants register y may hold where statement j reads it, when every definition
        of y that can reach j is a `mov` of a constant (a counter's start copied before its
        loop: `mov i, 0` ... `mov idx, i`, the loop's `add i, i, 1` not reaching back). None
        otherwise."""
        out = []
        at = sorted(self.index[id(o)] for o in self.defs.get(y, ()))
        for x in at:
            if self._def_reaches(x, j, at):
                o = self.stmts[x]
                v = o.operands[1].strip() if o.opcode.split(".")[0] == "mov" and len(o.operands) == 2 else ""
                if not re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", v):
                    return None
                out.append(int(v, 0))
        return out or None

    def _def_reaches(self, x: int, j: int, defs: list[int]) -> bool:
        """Whether the definition at statement x reaches statement j along some path on which
        no other of `defs` (the definitions of the same register) comes between."""
        bx, bj = self.block_of[x], self.block_of[j]
        if bx == bj and x < j:
            return not any(x < d < j for d in defs)
        if any(d > x and self.block_of[d] == bx for d in defs):
            return False  # killed later in its own block
        seen: set[int] = set()
        todo = list(self.succ[bx])
        while todo:
            b = todo.pop()
            if b in seen:
                continue
            seen.add(b)
            here = [d for d in defs if self.block_of[d] == b]
            if b == bj and not any(d < j for d in here):
                return True
            if here:
                continue
            todo += self.succ[b]
        return False

    def initial_offset(self, op: str, i: int) -> tuple[str, int] | None:
        """(symbol, C) that `op` holds at statement i when it is a pointer a loop steps
        (`ring_base`) but statement i runs before any step can have happened: no block that
        steps it reaches i's block (nvcc reuses the loop's pointer register for the inits
        before the loop)."""
        base, _, updates, _ = self._ring_walk(op)
        if base is None:
            return None
        b = self.block_of[i]
        if any(b in self.reach(self.block_of[u], set()) for u in updates):
            return None
        return base

    def _computed(self, op: str, seen: set[str] | None = None, depth: int = 0) -> bool:
        """Whether `op` is computed from constants, counters, the thread index and kernel
        arguments only: no value loaded from global, shared or local memory (a stage
        index read from data can be any stage)."""
        seen = set() if seen is None else seen
        if op in seen or not op.startswith("%"):
            return True
        seen.add(op)
        if depth > 40:
            return False
        for d in self.defs.get(op, ()):
            base = d.opcode.split(".")[0]
            if base in ("atom", "red", "tcgen05", "wgmma") or (base == "ld" and ".param" not in d.opcode) or \
                    (base == "ld" and ".param" in d.opcode and "[" in d.operands[-1] and "%" in d.operands[-1]):
                return False
            if not all(self._computed(x.strip(), seen, depth + 1) for x in d.operands[1:]):
                return False
        return True

    def _ring_base(self, op: str, depth: int, busy: frozenset, steps: set[int],
                   updates: list[int] | None = None, spans: list[int | None] | None = None,
                   wraps: list[int] | None = None) -> tuple[str, int] | None:
        op = op.strip()
        if op.startswith("[") and op.endswith("]"):
            op = op[1:-1].strip()
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        if m:
            r = self._ring_base(m.group(1), depth + 1, busy, steps, updates, spans, wraps)
            return None if r is None else (r[0], r[1] + int(m.group(2)))
        if op not in self.defs:
            v = self.vals(op)
            return (v[0], 0) if v is not None and v[0] is not None and v[1] == frozenset({0}) else None
        if op in busy or depth > 32:
            return None
        found: set[tuple[str, int]] = set()
        for d in self.defs[op]:
            base, ops = d.opcode.split(".")[0], d.operands[1:]
            consts = [x for x in ops if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", x)]
            if base == "add" and len(ops) == 2 and op in ops and len(consts) == 1:
                steps.add(int(consts[0], 0))  # the loop's own step
                if spans is not None:
                    spans.append(None)  # a stepped pointer: no bound read from its index
                if updates is not None:
                    updates.append(self.index[id(d)])
                continue
            r = None
            if base in ("mov", "cvt", "cvta") and len(ops) == 1:
                src_steps = [x for x in self.defs.get(ops[0], []) if x.opcode.split(".")[0] == "add"
                             and ops[0] in x.operands[1:]]
                here = self.block_of[self.index[id(d)]]
                if src_steps and not any(here in self.loop_blocks(self.index[id(x)]) for x in src_steps):
                    # a copy taken before the loop that steps its source (Gluon's mmadef: the
                    # ring pointer copied from the shared base, which another loop then steps
                    # by a stage): the source's steps are not this pointer's
                    r = self._ring_base(ops[0], depth + 1, busy | {op}, set(), None, None)
                else:
                    r = self._ring_base(ops[0], depth + 1, busy | {op}, steps, updates, spans, wraps)
            elif base == "add" and len(ops) == 2 and len(consts) == 1:
                other = ops[0] if ops[1] in consts else ops[1]
                r = self._ring_base(other, depth + 1, busy | {op}, steps, updates, spans, wraps)
                r = None if r is None else (r[0], r[1] + int(consts[0], 0))
            elif base == "add" and len(ops) == 2 and not consts:
                rs = [self._ring_base(x, depth + 1, busy | {op}, steps, updates, spans, wraps) for x in ops]
                if (rs[0] is None) != (rs[1] is None):  # a base plus an index computed in the loop
                    index = ops[1] if rs[1] is None else ops[0]
                    r = (rs[0] or rs[1]) if self._computed(index) else None
                    if r is not None and spans is not None:
                        spans.append(self.index_max(index))
            elif base == "mad" and len(ops) == 3 and len(consts) == 1 and ops[1] in consts:
                r = self._ring_base(ops[2], depth + 1, busy | {op}, steps, updates, spans, wraps)  # the wrap: minus i/STAGES * ring
                if wraps is not None and int(consts[0], 0) < 0:
                    wraps.append(-int(consts[0], 0))
            elif base == "sub" and len(ops) == 2 and not consts and self._computed(ops[1]):
                # the wrap written as p - (i / STAGES) * ring (Gluon's ring of two: `shl` of i / 2 by 4)
                r = self._ring_base(ops[0], depth + 1, busy | {op}, steps, updates, spans, wraps)
                if wraps is not None and (w := self._scale(ops[1])) is not None:
                    wraps.append(w)
            if r is None:
                return None
            found.add(r)
        return found.pop() if len(found) == 1 else None

    def first_value(self, op: str, depth: int = 0, busy: frozenset = frozenset(), at: int | None = None) -> int | None:
        """The value `op` has the first time a loop's body runs, when it is the same in
        every thread and computed from constants: a loop counter's initial value (its own
        `i += c` is the next trip's), a phase `(i / STAGES) & 1`, `phase ^ 1`. None when a
        kernel argument, data or the thread decides it. With `at` (a statement), the value
        just before that statement on the first trip: the definitions met walking back from
        it along edges that are not a loop's back edge, so an update earlier in the same
        trip counts (Triton's phase flips at the top of its loop: `phase ^= (stage + 1 ==
        STAGES)` from stage STAGES - 1, before the wait)."""
        if at is not None:
            r = self._first_in(op.strip(), self.block_of[at], at, 0, frozenset())
            return None if r is _CYCLE else r
        r = self._first(op.strip(), depth, busy)
        return None if r is _CYCLE else r

    def _first_in(self, op: str, b: int, upto: int, depth: int, busy: frozenset):
        """`op` just before statement `upto` of block b, on the first trip (`first_value`)."""
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            return int(op, 0)
        if op not in self.defs or depth > 200:
            return None
        memo = self.__dict__.setdefault("_first_memo", {})
        if (op, b, upto) in memo:
            return memo[(op, b, upto)]
        r = None
        for x in range(upto - 1, self.starts[b] - 1, -1):
            d = self.stmts[x]
            if _dest(d) == op:
                if not d.guard:  # its operands where it stands: earlier in this block, or before it
                    r = self._first_of(d, depth + 1, busy, lambda a, x=x: self._first_in(
                        a.strip(), self.block_of[x], x, depth + 1, busy))
                break
        else:
            if (op, b) in busy:  # back in a block on the way here: a cycle of forward edges
                return None
            dom = self.dominators()
            preds = [p for p, ss in enumerate(self.succ) if b in ss and b not in dom[p]]  # no back edge
            got = {self._first_in(op, p, self.starts[p + 1] if p + 1 < len(self.starts) else len(self.stmts),
                                  depth + 1, busy | {(op, b)}) for p in preds}
            r = got.pop() if len(got) == 1 else None
        r = None if r is _CYCLE else r
        memo[(op, b, upto)] = r
        return r

    def _first(self, op: str, depth: int, busy: frozenset):
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            return int(op, 0)
        if op in busy:
            return _CYCLE
        ds = self.defs.get(op)
        if not ds or depth > 40:
            return None
        got = set()
        for d in ds:
            if d.guard:
                return None
            r = self._first_of(d, depth + 1, busy | {op})
            if r is _CYCLE:
                continue  # the loop's update of it: the next trip's value
            if r is None:
                return None
            got.add(r)
        return got.pop() if len(got) == 1 else _CYCLE if not got else None

    def _first_of(self, s: Stmt, depth: int, busy: frozenset, arg=None):  # type: ignore[no-untyped-def]
        """What statement s writes on the first trip; its operands from `arg` (default: each
        register's first value wherever it is defined)."""
        base = s.opcode.split(".")[0]
        width = 64 if re.search(r"\.[bsu]64$", s.opcode) else 32
        mask = (1 << width) - 1
        signed = bool(re.search(r"\.s\d+$", s.opcode))
        args = [arg(a) if arg else self._first(a.strip(), depth, busy) for a in s.operands[1:]]
        if _CYCLE in args:
            return _CYCLE
        if None in args:
            return None

        def sx(v: int) -> int:
            v &= mask
            return v - (1 << width) if signed and v >> (width - 1) else v

        if base in ("mov", "cvt") and len(args) == 1:
            return args[0] & mask
        if base == "setp" and len(args) == 2:
            a, b = sx(args[0]), sx(args[1])
            cmp = s.opcode.split(".")[1]
            f = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                 "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}.get(cmp)
            return None if f is None else int(f)
        if base == "selp" and len(args) == 3:
            return args[0] if args[2] else args[1]
        if base == "not" and len(args) == 1:
            return int(not args[0]) if s.opcode.endswith("pred") else ~args[0] & mask
        if base == "neg" and len(args) == 1:
            return -args[0] & mask
        if base == "bfe" and len(args) == 3:
            pos, ln = args[1] & 0xFF, args[2] & 0xFF
            return (sx(args[0]) >> pos) & ((1 << ln) - 1) if ln else 0
        if base == "mad" and ".lo" in s.opcode and len(args) == 3:
            return (args[0] * args[1] + args[2]) & mask
        if base == "mul" and ".hi" in s.opcode and len(args) == 2:
            return ((sx(args[0]) * sx(args[1])) >> width) & mask
        if len(args) != 2:
            return None
        a, b = args
        f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: sx(a) * sx(b), "and": lambda: a & b,
             "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b if b < width else 0,
             "shr": lambda: sx(a) >> b if b < width else 0,
             "div": lambda: int(sx(a) / sx(b)) if b else None, "rem": lambda: (abs(sx(a)) % abs(sx(b))) * (
                 -1 if sx(a) < 0 else 1) if b else None, "min": lambda: min(sx(a), sx(b)),
             "max": lambda: max(sx(a), sx(b))}.get(base)
        if f is None:
            return None
        v = f()
        return None if v is None else v & mask

    def preds(self) -> list[list[int]]:
        """For each block, the blocks with an edge to it."""
        if getattr(self, "_preds", None) is None:
            self._preds: list[list[int]] = [[] for _ in self.succ]
            for b, ss in enumerate(self.succ):
                for x in ss:
                    self._preds[x].append(b)
        return self._preds

    def dominators(self) -> list[set[int]]:
        """For each block, the blocks every path from the kernel's entry to it passes."""
        if getattr(self, "_dom", None) is not None:
            return self._dom
        nb = len(self.starts)
        preds = self.preds()
        everything = set(range(nb))
        dom = [everything.copy() for _ in range(nb)]
        dom[0] = {0}
        changed = True
        while changed:
            changed = False
            for b in range(1, nb):
                new = set.intersection(*(dom[p] for p in preds[b])) | {b} if preds[b] else {b}
                if new != dom[b]:
                    dom[b], changed = new, True
        self._dom = dom
        return dom

    def loop_line(self, i: int) -> int:
        """The PTX line where the innermost loop holding statement i begins (its header's
        first statement); 0 when no loop holds it. Loops are the natural loops of the
        back edges (an edge to a block that dominates its source)."""
        if getattr(self, "_loops", None) is None:
            dom = self.dominators()
            preds = self.preds()
            bodies: dict[int, set[int]] = {}
            for x, ss in enumerate(self.succ):
                for h in ss:
                    if h in dom[x]:
                        body = bodies.setdefault(h, {h})
                        todo = [x]
                        while todo:
                            y = todo.pop()
                            if y not in body:
                                body.add(y)
                                todo += preds[y]
            self._loops: list[int] = []
            self.loop_bodies = bodies  # header block -> the blocks of its natural loop
            for b in range(len(self.succ)):
                holding = [h for h, body in bodies.items() if b in body]
                self._loops.append(min(holding, key=lambda h: len(bodies[h])) if holding else -1)
        h = self._loops[self.block_of[i]]
        return self.stmts[self.starts[h]].line if h >= 0 else 0

    def trip_count(self, i: int, body: set[int] | None = None) -> int | None:
        """How many times the innermost loop holding statement i runs, when the PTX decides it:
        a counter set from a constant before the loop, stepped by a constant in it, and
        compared with a constant by the branch that closes it (`add c, c, 1; setp.ne c, 3;
        @p bra head`); or nvcc's two-trip form, a predicate true on entry and cleared in the
        loop (`mov.pred p, -1` ... `mov.pred p, 0`, the branch on its copy). None otherwise."""
        body = self.loop_blocks(i) if body is None else body
        if not body:
            return None
        head = min(body, key=lambda b: self.starts[b])
        got = set()
        for b in body:
            end = self.starts[b + 1] if b + 1 < len(self.starts) else len(self.stmts)
            br = self.stmts[end - 1] if end else None
            if br is None or not br.opcode.startswith("bra") or not br.guard or head not in self.succ[b]:
                continue
            got.add(self._trips(br.guard, br.negated, body))
        return got.pop() if len(got) == 1 else None

    def _trips(self, pred: str, negated: bool, body: set[int]) -> int | None:
        ds = self.defs.get(pred, [])
        if len(ds) != 1:
            return None
        d = ds[0]
        if d.opcode.startswith("mov.pred") and len(d.operands) == 2 and not negated:
            # the branch on a copy of p: p is -1 on entry and 0 once set in the loop -> 2 trips
            src = self.defs.get(d.operands[1], [])
            vals = {(self.block_of[self.index[id(x)]] in body, x.operands[1]) for x in src if len(x.operands) == 2}
            return 2 if vals == {(False, "-1"), (True, "0")} else None
        parts = d.opcode.split(".")
        if parts[0] != "setp" or len(d.operands) != 3 or parts[1] not in ("ne", "lt", "le", "gt", "ge"):
            return None
        c, bound = d.operands[1], d.operands[2]
        if not re.fullmatch(r"-?\d+", bound) or negated:
            return None
        start = step = None
        for x in self.defs.get(c, []):
            inside = self.block_of[self.index[id(x)]] in body
            base, ops = x.opcode.split(".")[0], x.operands[1:]
            if not inside and base == "mov" and len(ops) == 1 and re.fullmatch(r"-?\d+", ops[0]):
                start = int(ops[0]) if start is None else None
            elif not inside and base == "mov" and len(ops) == 1 and (src := self._local_def(ops[0].strip(), x)) \
                    is not None and src.opcode.startswith("mov") and len(src.operands) == 2 and \
                    re.fullmatch(r"-?\d+", src.operands[1].strip()):
                # a copy of a register set from a constant just before (`mov %r109, 0; mov %r110,
                # %r109`), which another loop then steps
                start = int(src.operands[1]) if start is None else None
            elif inside and base == "add" and len(ops) == 2 and c in ops and re.fullmatch(r"-?\d+", ops[1 - ops.index(c)]):
                step = int(ops[1 - ops.index(c)]) if step is None else None
            else:
                return None
        n = int(bound)
        if start is None or not step:
            return None
        if parts[1] == "ne":
            q, r = divmod(n - start, step)
            return q if r == 0 and q > 0 else None
        if parts[1] in ("lt", "gt") and (n - start) * step > 0:
            return -(-(n - start) // step)
        return None

    def skipped_first(self, i: int) -> bool:
        """Whether statement i, inside a loop, does not run on that loop's first trip: a branch
        of the loop on every path to it (a dominator) that the first trip's values decide
        (`first_value`: `@i < 1 bra skip` with i starting at 0) takes a side from which i
        cannot be reached without going round the loop (an attention kernel's correction
        wait, skipped on the first K/V block)."""
        body = self.work_loop(i)
        if not body:
            return False
        bi = self.block_of[i]
        for d in self.dominators()[bi]:
            if d == bi or d not in body or d not in self.cond_of:
                continue
            st, tb, fb = self.cond_of[d]
            end = self.starts[d + 1] - 1 if d + 1 < len(self.starts) else len(self.stmts) - 1
            v = self.first_value(st.guard, at=end) if st.guard else None
            if v is None:
                continue
            if bi not in self.forward_reach([tb if _holds(v, st.negated) else fb], body):
                return True
        return False

    def forward_reach(self, starts: list[int] | set[int], within: set[int] | None = None) -> set[int]:
        """The blocks reached from `starts` (themselves included) along edges that are no
        loop's back edge (an edge into a block that dominates its source), inside `within`
        when given."""
        dom = self.dominators()
        seen: set[int] = set()
        todo = list(starts)
        while todo:
            b = todo.pop()
            if b in seen or (within is not None and b not in within):
                continue
            seen.add(b)
            todo += [x for x in self.succ[b] if x not in dom[b]]
        return seen

    def work_loop(self, i: int) -> set[int]:
        """The blocks of the innermost loop holding statement i that is not a wait's own
        spin loop (empty: none)."""
        self.loop_line(i)
        b = self.block_of[i]
        held = sorted((body for body in self.loop_bodies.values() if b in body and not self._spin(body)), key=len)
        return held[0] if held else set()

    def _spin(self, body: set[int]) -> bool:
        """A wait's spin loop (a try-wait and the branches around it, nothing else), or
        Triton's dispatch loop (it reads the partition table: each pass runs another
        specialized region, not another trip of one). Decided once per loop."""
        memo = self.__dict__.setdefault("_spin_memo", {})
        key = id(body)  # the bodies are loop_bodies' own sets, kept for the kernel's life
        if key not in memo:
            stmts = [self.stmts[x] for x in range(len(self.stmts)) if self.block_of[x] in body]
            ops = [s.opcode for s in stmts]
            memo[key] = any(s.line in self.table_reads for s in stmts) or (
                any(o.startswith(_WAIT) for o in ops) and all(
                    o.startswith(_WAIT) or o.split(".")[0] in ("bra", "nanosleep", "setp", "selp", "mov") for o in ops))
        return memo[key]

    def loop_depth(self, i: int) -> int:
        """How many loops hold statement i (0: none; a K loop inside a tile loop: 2), a
        wait's own spin loop (`LAB_WAIT: try_wait p; @p bra DONE; bra LAB_WAIT`) not counted."""
        self.loop_line(i)
        b = self.block_of[i]
        return sum(1 for body in self.loop_bodies.values() if b in body and not self._spin(body))

    def loop_blocks(self, i: int) -> set[int]:
        """The blocks of the innermost loop holding statement i (empty: none)."""
        self.loop_line(i)
        h = self._loops[self.block_of[i]]
        return self.loop_bodies[h] if h >= 0 else set()

    def peer_address(self, op: str, threads: frozenset | None = None, at: int | None = None
                     ) -> tuple[str, str, bool] | None:
        """(the CTA-local address, the target rank as the PTX computes it, whether every CTA
        is the target of exactly one other) when `op` is `mapa.shared::cluster` of a local
        shared address: the barrier at the same offset in another CTA of the cluster (a
        remote arrive on a peer's `empty`). `%cluster_ctarank ^ C` (C != 0) pairs the CTAs
        up, so each CTA's barrier gets from its peer what this CTA sends; a constant rank
        or anything else sends every CTA's arrivals to one CTA, or to CTAs the PTX does
        not decide."""
        op = op.strip().strip("[]").strip()
        m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
        base, off = (m.group(1), int(m.group(2))) if m else (op, 0)
        ds = self.defs.get(base, ())
        for _ in range(4):  # a generic mapa's result narrowed back to 32 bits (TIRx: cvt.u32.u64 of mapa.u64)
            if len(ds) != 1 or ds[0].guard or ds[0].opcode.split(".")[0] not in ("cvt", "mov") or \
                    len(ds[0].operands) != 2 or not ds[0].operands[1].startswith("%"):
                break
            ds = self.defs.get(ds[0].operands[1], ())
        if len(ds) != 1 or not ds[0].opcode.startswith("mapa") or len(ds[0].operands) != 3:
            return None
        src, rank = ds[0].operands[1], ds[0].operands[2]
        local = f"{src}+{off}" if off else src
        what, pairs = self._rank_expr(rank, at=ds[0])
        if not pairs and what != "rank" and not what.startswith("CTA "):
            got = self._rank_targets(rank, threads, at)
            if got is not None:
                return local, got[0], got[1]  # type: ignore[return-value]
        return local, what, pairs

    def per_rank(self, op: str, threads: list[int]) -> tuple[int, list[list[int | None]]]:
        """(the cluster's size, for each rank of it the value of `op` in each of `threads`):
        %cluster_ctarank read as that rank. The cluster is .reqnctapercluster's, else a pair."""
        shape = self.e.cluster
        size = shape[0] * shape[1] * shape[2] if shape else 2
        out = []
        for r in range(size):
            self.rank = r
            try:
                f = self.value(op)
                out.append([f(t) if f else None for t in threads])
            finally:
                self.rank = None
        return size, out

    def _reaches(self, i: int, t: int) -> bool:
        """Whether thread t of the CTA whose rank `self.rank` holds reaches statement i, by
        the conditional branches of the blocks that dominate it: a branch on the CTA's rank
        (CUTLASS's scheduler warp runs in rank 0 only: `@(warp != 1 || rank != 0) bra`)
        decides per rank; a branch it cannot evaluate is taken as reaching."""
        bi = self.block_of[i]
        dom = self.dominators()
        for d in dom[bi]:
            if d == bi:
                continue
            end = self.starts[d + 1] - 1 if d + 1 < len(self.starts) else len(self.stmts) - 1
            br = self.stmts[end]
            if not br.opcode.startswith("bra") or not br.guard or len(self.succ[d]) != 2:
                continue
            fall = d + 1
            taken = next((x for x in self.succ[d] if x != fall), None)
            if taken is None:
                continue
            via_taken, via_fall = self._reach(taken, bi, d), self._reach(fall, bi, d)
            if via_taken == via_fall:
                continue
            g = self.value(br.guard)
            v = _holds(g(t), br.negated) if g is not None else None
            if v is not None and v != via_taken:
                return False
        return True

    def _reach(self, a: int, b: int, avoid: int) -> bool:
        """Whether block b can be reached from block a without passing block `avoid`."""
        memo = self.__dict__.setdefault("_reach_memo", {})
        key = (a, b, avoid)
        if key not in memo:
            seen, todo = {a}, [a]
            while todo and b not in seen:
                x = todo.pop()
                for y in self.succ[x]:
                    if y not in seen and y != avoid:
                        seen.add(y)
                        todo.append(y)
            memo[key] = b in seen
        return memo[key]

    def _rank_targets(self, op: str, threads: frozenset | None, at: int | None = None
                      ) -> tuple[str, Fraction] | None:
        """(the targets as text, how many times a receiving CTA gets what one CTA's threads
        send: a fraction where only some ranks send, CUTLASS's rank 0 lanes 0-1 to ranks 0-1) of a mapa rank computed from %cluster_ctarank, per sending thread (CuTe's 2-CTA
        epilogue releases the pair's leader, `(rank / 2) * 2`: the leader gets both CTAs'
        arrivals; a multicast release sends lane l to rank l % 2: each CTA gets one lane's
        share from each). The rank each thread of each CTA names, read for every rank of
        the cluster (.reqnctapercluster's, else a pair); None when a target is not decided
        or the CTAs that receive get different counts."""
        senders = sorted(threads) if threads else [0]
        size, per_rank = self.per_rank(op, senders)
        if at is not None:
            # the threads of each rank that reach the arrive at all (a branch on the rank)
            sent = []
            for r in range(size):
                self.rank = r
                try:
                    sent.append([x for t, x in zip(senders, per_rank[r]) if self._reaches(at, t)])
                finally:
                    self.rank = None
            per_rank = sent
        targets = [x for r in per_rank for x in r]
        shape = self.e.cluster
        if None in targets or any(not 0 <= t < size for t in targets):  # type: ignore[operator]
            return None
        pairs = any(".cta_group::2" in st.opcode for st in self.stmts)  # the kernel runs on CTA pairs
        if shape is None and not pairs and len(set(targets)) == 1:
            # every thread of every CTA names one rank, whatever its own (CUTLASS's scheduler
            # warp: lane 0 to rank 0): that CTA gets as many shares as the cluster has CTAs, a
            # launch attribute; named as a constant rank is (`CTA 0`: the CTA itself when
            # launched one CTA a cluster, which the notes say was assumed)
            return f"CTA {targets[0]}", 1
        got = {targets.count(q) for q in set(targets)}
        if not targets or len(got) != 1:
            return None
        n = got.pop()
        shown = sorted({(r, t) for r, t in zip((r for r in range(size) for _ in senders), targets)})
        return f"rank {', '.join(f'{r}->{t}' for r, t in shown)}" + (
            "" if shape else " (CTA pairs: .cta_group::2)" if pairs else " (a pair assumed)"), Fraction(n, len(senders))

    def _rank_expr(self, op: str, depth: int = 0, at: Stmt | None = None) -> tuple[str, bool]:
        """How a mapa's target rank is computed, and whether it is `rank ^ C` (C != 0). A
        register written several times is read where `at` (the mapa) stands when the write
        before it lies in its block (CUTLASS's `mov %r967, 0` then the mapa, %r967 written
        again later by an elect.sync block)."""
        op = op.strip()
        if op == "%cluster_ctarank":
            return "rank", False
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            return f"CTA {int(op, 0)}", False
        ds = self.defs.get(op, ())
        here = self._local_def(op, at) if at is not None else None
        if here is not None:
            ds = [here]
        if depth > 8 or len(ds) != 1:
            return op, False
        d = ds[0]
        base = d.opcode.split(".")[0]
        if base in ("mov", "cvt") and len(d.operands) == 2:
            return self._rank_expr(d.operands[1], depth + 1)
        if base == "xor" and len(d.operands) == 3:
            for x, c in ((d.operands[1], d.operands[2]), (d.operands[2], d.operands[1])):
                if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", c) and self._rank_expr(x, depth + 1)[0] == "rank":
                    return f"rank ^ {int(c, 0)}", int(c, 0) != 0
        return op, False

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
                if item.opcode.split(".")[0] in ("bra", "brx", "ret", "exit", "trap"):
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
        # (block, stmt, the block of each entry of its table): `brx.idx %r, table` jumps to entry %r
        self.jump_tables: list[tuple[int, Stmt, list[int | None]]] = []
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
            elif base == "brx" and len(last.operands) == 2 and last.operands[1] in self.e.branchtargets:
                tbs = []
                for name in self.e.branchtargets[last.operands[1]]:
                    tgt = self._resolve(labels, name, last.scope)
                    tbs.append(self.block_of[tgt] if tgt is not None and tgt < len(self.stmts) else None)
                self.succ[b] += sorted({t for t in tbs if t is not None})
                if last.guard and fall is not None:
                    self.succ[b].append(fall)
                elif None not in tbs:
                    self.jump_tables.append((b, last, tbs))
            elif base == "brx":
                self.notes.append(Item("unparsed", f"line {last.line}: jump table {last.operands[1:]} not found: "
                                       "the threads' paths past it are not derived", Basis.ASSUMPTION))
            elif base in ("ret", "exit", "trap") and not last.guard:
                pass
            elif fall is not None:
                self.succ[b].append(fall)
        self.cond_of = {b: (st, tb, fb) for b, st, tb, fb in self.cond_branches}  # block -> its branch

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
        sides: dict[int, tuple[frozenset, frozenset]] = {}  # block -> the threads its branch sends each way
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
            sides[b] = (yes, no)
            rt, rf = self.reach(tb, {b}), self.reach(fb, {b})
            for region, keep, side in ((rt - rf, yes, not st.negated), (rf - rt, no, st.negated)):
                warps = frozenset(t // 32 for t in keep)
                warp_level = all((t // 32 in warps) == (t in keep) for t in all_t)
                if not warp_level:  # `warp % 4 == 0 && elected`: the role is the warp part's
                    part = self.warp_part(st.guard, side)
                    warps, warp_level = (part, True) if part is not None else (warps, False)
                for x in region:
                    self.pop[x] = self.pop[x] & keep if self.pop[x] is not None else None
                    if warp_level and self.role[x] is not None:
                        self.role[x] = self.role[x] & warps
        for b, st, tbs in self.jump_tables:
            self._split_by_table(b, st, tbs, all_t)
        self._widen_joins(all_t, sides)
        if self.uniform_branches:
            self.notes.append(Item("roles", f"{self.uniform_branches} conditional branch(es) on values not derived "
                                   "from %tid.x (kernel arguments, loop counters, data) were taken as not splitting "
                                   "the block's threads", Basis.ASSUMPTION))

    def _widen_joins(self, all_t: frozenset | None, sides: dict[int, tuple[frozenset, frozenset]]) -> None:
        """A block that a branch's one side reaches is given that side's threads above; when
        other threads reach it by another path that never meets that branch (CuTe's dispatch
        `@warp==6 bra L; @warp==5 bra M; @warp!=4 bra N; L:` puts warps 4 and 6 in one
        block), they were lost. A forward pass over the edges (each conditional edge carrying
        the threads its predicate lets through, a thread whose predicate is not derived going
        both ways; a jump table's targets their own populations) finds every thread that can
        reach each block, and those missing are added back, with their warps. `sides`: the
        threads each decided branch sends each way (`_populations`)."""
        if all_t is None or not self.starts:
            return
        nb = len(self.starts)
        tables = {b: tbs for b, _, tbs in self.jump_tables}
        reach: list[frozenset] = [frozenset()] * nb
        reach[0] = all_t
        todo = [0]
        while todo:
            b = todo.pop()
            here = reach[b]
            out: list[tuple[int, frozenset]] = []
            if b in self.cond_of:
                _, tb, fb = self.cond_of[b]
                yes, no = sides.get(b, (all_t, all_t))
                out = [(tb, here & yes), (fb, here & no)]
            elif b in tables:
                out = [(t, here & (self.pop[t] if self.pop[t] is not None else all_t)) for t in tables[b] if t is not None]
            else:
                out = [(t, here) for t in self.succ[b]]
            for t, ts in out:
                if ts and not ts <= reach[t]:
                    reach[t] = reach[t] | ts
                    todo.append(t)
        for x in range(nb):
            p = self.pop[x]
            if p is None or not reach[x] or reach[x] <= p:
                continue
            extra = reach[x] - p
            self.pop[x] = p | extra
            if self.role[x] is not None:
                self.role[x] = self.role[x] | frozenset(t // 32 for t in extra)

    def warp_part(self, op: str, want: bool, depth: int = 0) -> frozenset | None:
        """The warps outside which predicate `op` cannot be `want`, when one of its
        conjuncts is a whole-warp condition: CUTLASS's `warp_idx % 4 == 0 && elect_one_sync()`,
        which nvcc folds into one `and.pred` (its negation through `not.pred` / `or.pred`
        too). None when no conjunct selects whole warps."""
        ds = self.defs.get(op, ())
        if len(ds) == 1 and depth < 8 and ds[0].opcode.endswith("pred") and not ds[0].guard:
            d, base = ds[0], ds[0].opcode.split(".")[0]
            if base == "not" and len(d.operands) == 2:
                return self.warp_part(d.operands[1], not want, depth + 1)
            if base in ("and", "or") and len(d.operands) == 3 and (base == "and") == want:
                known = [w for x in d.operands[1:] if (w := self.warp_part(x, want, depth + 1)) is not None]
                return frozenset.intersection(*known) if known else None
        f = self.value(op)
        if f is None or not self.n:
            return None
        keep = {t for t in range(self.n) if (v := f(t)) is None or bool(v) == want}
        warps = frozenset(t // 32 for t in keep)
        return warps if all((t // 32 in warps) == (t in keep) for t in range(self.n)) else None

    def _split_by_table(self, b: int, st: Stmt, tbs: list[int | None], all_t: frozenset | None) -> None:
        """`brx.idx %r, table`: thread t runs entry %r(t) of the table (Triton's dispatch of
        its warp_specialize partitions); a value not derived leaves every entry possible."""
        f = self.value(st.operands[0])
        if f is None or all_t is None:
            self.uniform_branches += 1
            return
        here = self.pop[b] if self.pop[b] is not None else all_t
        picked = {t: {f(t)} for t in here}
        if self.table_reads:  # a later version of the table sends a thread to another entry too
            for version in getattr(self, "_versions", ()):
                self._table_version = version
                try:
                    for t in here:
                        picked[t].add(f(t))
                finally:
                    self._table_version = None
        reached = [self.reach(tb, {b}) for tb in tbs]  # type: ignore[arg-type]
        for j, tb in enumerate(tbs):
            keep = frozenset(t for t, v in picked.items() if None in v or j in v)
            others = set().union(*(r for k, r in enumerate(reached) if tbs[k] != tb))
            warps = frozenset(t // 32 for t in keep)
            warp_level = all((t // 32 in warps) == (t in keep) for t in here)
            for x in reached[j] - others:
                self.pop[x] = self.pop[x] & keep if self.pop[x] is not None else None
                if warp_level and self.role[x] is not None:
                    self.role[x] = self.role[x] & warps

    def threads(self, i: int) -> frozenset | None:
        s = self.stmts[i]
        p = self.pop[self.block_of[i]]
        if p is not None and s.guard:
            f = self.value(s.guard)
            if f is None:
                return None if not s.opcode.startswith("bra") else p
            p = frozenset(t for t in p if _holds(f(t), s.negated) is not False)
        return p


def _compared(opcode: str, a: Fn, b: Fn) -> tuple[Fn, Fn]:
    """The two sides of a `setp` as its type reads them: an unsigned compare of a value
    that went negative (`warp - 1 > 3` as .u32, CuTe's range test of a warp index) sees it
    wrapped modulo 2^width."""
    m = re.search(r"\.u(8|16|32|64)$", opcode)
    if not m:
        return a, b
    mask = (1 << int(m.group(1))) - 1
    return (lambda t: None if (x := a(t)) is None else x & mask), (lambda t: None if (y := b(t)) is None else y & mask)


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
    if base in ("st", "bra", "brx", "bar", "barrier", "fence", "mbarrier", "cp", "ret", "exit", "tcgen05", "wgmma",
                "membar", "red", "call", "trap", "prefetch", "griddepcontrol", "cvta", "setmaxnreg"):
        return None if base != "cvta" else s.operands[0] if s.operands else None
    if base == "elect" and s.operands:
        return s.operands[0].split("|")[-1]
    if base == "shfl" and s.operands and "|" in s.operands[0]:
        return s.operands[0].split("|")[0].strip()  # `%r|%p`: the value, and whether its lane was in range
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
