"""The mistakes a worksheet flags statically (codes 1-15, `FLAG_NAMES`): an mbarrier
initialized inside a role, arrival counts that do not match the init count, a CTA
barrier inside one role's branch (ids in registers resolved), tensor memory not freed, a
generic-proxy store read by the async proxy without fence.proxy.async (on the storing
thread's path or through an mbarrier handoff, where the addresses can overlap), tensor
memory freed twice (in worksheet.py, beside the lifetime items), a deadlock in the order
of phases, expected bytes that the copies do not deliver, an init that peer CTAs of a
cluster signal before a cluster barrier has made it visible to them, a first wait that
passes on a fresh barrier before reading what its arrivers produce (10, with flag 7's
play-out), tensor memory freed while other roles may still use it (11, `_flag_tmem_freed_early`)."""

from __future__ import annotations

import re

from wsperf.analyses.correctness import Basis, Item
from wsperf.analyses.worksheet_eval import _holds, _Kernel, _warps
from wsperf.analyses.worksheet_model import (_ARRIVE, _BAR0, _WAIT, FLAG_NAMES, Barrier, Flag, _local, _where,
                                             phase_arrivals)
from wsperf.collectors.ptx import Stmt

# generic-proxy stores into shared memory: st.shared, and stmatrix (a wgmma accumulator's
# fragments written as 8x8 matrices, each lane one row's address: Gluon's sm_90 epilogue)
_SMEM_STORE = ("st.shared", "stmatrix")


def _bar_operands(k: _Kernel | None, s: Stmt, i: int | None = None) -> tuple[int | None, int | None] | None:
    """(id, thread count) of a bar/barrier sync or arrive, registers resolved to the constants
    the PTX decides (TIRx: `mov.b32 %r1664, 0; mov.b32 %r1665, 128; bar.sync %r1664, %r1665`);
    None for another instruction; an id or count the PTX does not decide is None (a count
    left out is -1)."""
    if not _BAR0.match(s.opcode) or ".red" in s.opcode or not s.operands or \
            s.opcode.startswith(("barrier.cluster", "bar.warp")):
        return None
    p = k.threads(i) if k is not None and i is not None else None

    def val(op: str) -> int | None:
        op = op.strip()
        if re.fullmatch(r"\d+", op):
            return int(op)
        return _const(k, op, p) if k is not None else None
    return val(s.operands[0]), (val(s.operands[1]) if len(s.operands) > 1 else -1)


def _is_cta_barrier(s: Stmt, k: _Kernel | None = None, i: int | None = None) -> bool:
    """bar.sync 0 / barrier.sync 0 (/ .aligned), without a thread count: __syncthreads. With
    the kernel, an id held in a register that the PTX sets to 0 counts too."""
    if ".arrive" in s.opcode:
        return False
    ops = _bar_operands(k, s, i)
    return ops is not None and ops[0] == 0 and ops[1] == -1


def _everyone(k: _Kernel, i: int) -> bool:
    p = k.pop[k.block_of[i]]
    return p is not None and len(p) == k.n


def _cluster_waits(k: _Kernel, stmts: list[Stmt], after: int | None = None) -> set[int]:
    """Blocks of a `barrier.cluster.wait` that every thread of the CTA reaches, whose
    arrive releases what came before it: `barrier.cluster.arrive` (release by default), or
    `.relaxed` after a `fence.mbarrier_init` (which orders the inits before a relaxed
    arrive; CuTe DSL and CUTLASS pair them). Past one, every thread of the cluster has
    arrived, so the inits before its arrive are visible cluster-wide. With `after` (a
    statement: an init), only the waits whose arrive that statement's block reaches after
    it: a cluster barrier before an init makes nothing of it visible."""
    out = set()
    for i, s in enumerate(stmts):
        if not s.opcode.startswith("barrier.cluster.wait") or not _everyone(k, i):
            continue
        arrive = next((j for j in range(i - 1, -1, -1) if stmts[j].opcode.startswith("barrier.cluster.arrive")), None)
        if arrive is None or after is not None and not (
                after < arrive and k.block_of[arrive] in k.reach(k.block_of[after], set())):
            continue
        if ".relaxed" not in stmts[arrive].opcode or any(x.opcode.startswith("fence.mbarrier_init")
                                                          for x in stmts[:arrive]):
            out.add(k.block_of[i])
    return out


_RENDEZVOUS = re.compile(r"^(bar|barrier)(\.cta)?(\.aligned)?\.sync(\.aligned)?$")


def _rendezvous(k: _Kernel, s: Stmt, i: int | None = None) -> str | None:
    """The id of a named barrier that every thread of the CTA must reach before any passes:
    `barrier.sync N` / `bar.sync N` with no thread count, or with the block's own count
    (registers holding constants resolved)."""
    if not _RENDEZVOUS.match(s.opcode):
        return None
    ops = _bar_operands(k, s, i)
    if ops is None or ops[0] is None:
        return None
    if ops[1] == -1 or (k.n and ops[1] == k.n):
        return str(ops[0])
    return None


def _ancestors(b: int, preds: list[list[int]]) -> set[int]:
    """The blocks on some path to block b (b itself only through a loop)."""
    out, todo = set(), [b]
    while todo:
        x = todo.pop()
        for p in preds[x]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return out


def _rendezvous_after(k: _Kernel, stmts: list[Stmt], i: int, preds: list[list[int]]) -> set[int]:
    """Blocks holding a whole-CTA named barrier of an id that the thread of statement i
    (an init) reaches after it and meets nowhere before it. That thread's first arrival
    at the id comes after the init, and no thread passes the id's first generation before
    every thread has arrived: a waiter past any copy of it sees the init, wherever its
    own copy sits (Triton's default warps run `barrier.sync 1` after the inits in their
    branch; its worker warps meet it before their dispatch)."""
    bi = k.block_of[i]
    pre = _ancestors(bi, preds)  # the blocks on some path to the init
    found = [(j, n) for j, s in enumerate(stmts) if (n := _rendezvous(k, s, j)) is not None]
    met = {n for j, n in found if k.block_of[j] in pre or (k.block_of[j] == bi and j < i)}
    ahead = k.reach(bi, set())
    ids = {n for j, n in found if n not in met and k.block_of[j] in ahead and (k.block_of[j] != bi or j > i)}
    return {k.block_of[j] for j, n in found if n in ids}


def _flag_init_in_role(k: _Kernel, stmts: list[Stmt], barriers: tuple[Barrier, ...] = ()) -> list[Flag]:
    """Flag 1: a wait on a barrier that no init of that barrier is ordered before. An init
    outside the role branches (thread 0 of the CTA) is taken as ordered; one inside a role
    orders the waits past a CTA-wide barrier after it (or a named barrier every thread
    reaches, `_rendezvous_after`), and its own role's. A barrier is the worksheet's group
    (symbol and offsets), so a wait on another barrier of the same buffer is not taken for
    one on this (TIRx keeps every barrier in one dynamic buffer); where the PTX does not
    decide the offsets, every barrier of the symbol is one. A barrier initialized again
    (after `mbarrier.inval`: Triton's second specialized region) is checked against its
    first init, and the notes say the later ones were not."""
    cta_blocks = {k.block_of[i] for i, s in enumerate(stmts) if _is_cta_barrier(s, k, i) and _everyone(k, i)}
    cta_blocks |= _cluster_waits(k, stmts)
    preds = k.preds()
    all_w = frozenset(range((k.n + 31) // 32)) if k.n else None
    inits = [i for i, s in enumerate(stmts) if s.opcode.startswith("mbarrier.init")]
    waits = [j for j, w in enumerate(stmts) if w.opcode.startswith(_WAIT)]
    # the groups: (inits, waits) of one barrier group, else of one symbol
    groups: list[tuple[str | None, list[int], list[int]]] = []
    grouped: set[int] = set()
    for b in barriers:
        if not b.decided:
            continue
        ii = sorted({x for s, _ in b.inits if (x := k.stmt_of(s)) is not None})
        ww = sorted({x for w in b.waiters if (x := k.stmt_of(w.site)) is not None})
        if ii:
            groups.append((b.name, ii, ww))
            grouped.update(ii)
    by_sym: dict[str | None, tuple[list[int], list[int]]] = {}
    for i in inits:
        if i not in grouped:
            by_sym.setdefault(k.sym_of(stmts[i].operands[0]), ([], []))[0].append(i)
    for sym, (ii, ww) in by_sym.items():
        ww += [j for j in waits if k.sym_of(stmts[j].operands[1]) == sym]
        groups.append((sym, ii, ww))
    after_of: dict[int, set[int]] = {}

    def orders(i: int, j: int) -> bool:
        """Init i is seen by wait j."""
        role = k.role[k.block_of[i]]
        if role is None or role == all_w:
            return True  # thread 0 / lane 0 of the whole CTA before the roles: the usual
        wr = k.role[k.block_of[j]]
        if wr is None or wr <= role:
            return True
        if i not in after_of:
            bi = k.block_of[i]
            after_of[i] = {b for b in cta_blocks if b in k.reach(bi, set())} | _rendezvous_after(k, stmts, i, preds)
        return k.block_of[j] not in k.reach(0, after_of[i])

    hits: dict[str | None, list] = {}  # symbol -> [first init, its wait, its group's name]
    flagged: set[tuple[int, ...]] = set()
    for name, ii, ww in groups:
        in_role = [i for i in ii if (r := k.role[k.block_of[i]]) is not None and r != all_w]
        if not in_role or tuple(ii) in flagged:
            continue
        first = min(ii)
        for j in ww:
            if any(orders(i, j) for i in ii if i == first or not any(stmts[x].opcode.startswith("mbarrier.inval")
                                                                      for x in range(first, i))):
                continue
            flagged.add(tuple(ii))
            hits.setdefault(k.sym_of(stmts[min(in_role)].operands[0]), [min(in_role), j, name, 0])
            break
        reinit = [stmts[i].line for i in ii if i != first and any(stmts[x].opcode.startswith("mbarrier.inval")
                                                                   for x in range(first, i))]
        if reinit and tuple(ii) not in flagged:
            k.notes.append(Item("handoff.init", f"{name}: initialized again at line(s) "
                                f"{', '.join(map(str, reinit[:6]))} after mbarrier.inval: its waits were checked "
                                "against its first init; the order of the later init(s) is not checked",
                                Basis.ASSUMPTION))
    out: list[Flag] = []
    for sym, (i, j, name, _) in hits.items():
        n = sum(1 for x in inits if k.sym_of(stmts[x].operands[0]) == sym
                and (r := k.role[k.block_of[x]]) is not None and r != all_w)
        role, wr = k.role[k.block_of[i]], k.role[k.block_of[j]]
        s, w = stmts[i], stmts[j]
        # one flag a symbol (one mistake: its inits in a role branch), naming the first barrier
        # whose waits no init orders; the others are counted
        out.append(Flag(1, FLAG_NAMES[1], f"mbarrier.init of {name} (line {s.line}) sits inside the branch of "
                        f"{_warps(role)}, and {_warps(wr - role)} wait on it (line {w.line}) with no CTA-wide "
                        "barrier after the init: initialize before the role branch (thread 0), then "
                        "fence.mbarrier_init + __syncthreads()" + (f" ({n - 1} more init(s) of it there)"
                                                                    if n > 1 else ""), Basis.EVIDENCE, s.line))
    return out


def _flag_counts(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 2: per barrier (group), the arrivals one phase gets against the init count.
    Each role's arrival pattern is counted once per phase: the sites of one role on one
    barrier (an unrolled copy and the loop it came from, the slots of a ring) are taken
    as one arrival per executing thread per phase."""
    out = []
    partial_elect = not all(k.elect.values())
    # an arrive whose address does not resolve may land on any barrier: too few arrivals
    # is then what the sheet could see, not what the barrier gets
    stray = [a for b in barriers if not b.inits and not b.slots for a in b.arrivers if a.arrivals]
    for b in barriers:
        counts = {c for _, c in b.inits}
        if b.inits and not b.arrivers and b.waiters and b.decided and None not in counts:
            # waited on, never arrived on: only a wait that passes on a fresh barrier (parity 1)
            # ever returns; the first wait for parity 0 blocks for good
            sym = b.name.split("+")[0].split(" ")[0]
            rings = any(n.aspect == "handoff.barrier" and "stage index the PTX computes in a loop" in n.text
                        and f" is {sym}+" in n.text for n in k.notes)
            if stray or rings:
                # an arrive elsewhere may land on it: an unresolved address, or a ring taken as an
                # assumption (a peeled loop's pointer starts a stage in, and its ring is cut there)
                k.notes.append(Item("handoff.count", f"{b.name}: no arrival on it was seen, but "
                                    + ("arrives on addresses that do not resolve" if stray else
                                       "arrives through rings taken as an assumption") + " may land on it: its count "
                                    "is not checked", Basis.ASSUMPTION))
            else:
                w = b.waiters[0]
                out.append(Flag(2, FLAG_NAMES[2], f"{b.name}: mbarrier.init count {sorted(counts)[0]} (line "
                                f"{b.inits[0][0].line}) but nothing ever arrives on it, while {w.site.role} waits on it "
                                f"({_where(w.site)}): a phase never completes (deadlock), every wait for it after the "
                                "first trip hangs; the arrive that releases it is missing", Basis.EVIDENCE,
                                b.inits[0][0].line))
            continue
        if not b.inits or not b.arrivers or None in counts:
            continue
        pops = phase_arrivals(b)
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
            if not any(a.per_trip for a in b.arrivers):  # (an arrive per loop trip is flag 2 already)
                who = sorted({f"line {a.site.line}" for a in b.arrivers if a.arrivals is None})
                k.notes.append(Item("handoff.count", f"{b.name}: how many threads arrive a phase is not derived "
                                    f"({', '.join(who[:6]) or 'a role that takes turns'}: a guard or count the PTX "
                                    "does not decide): its count is not checked", Basis.ASSUMPTION))
            continue
        total = sum(v for v in pops.values() if v)
        count = counts.pop()
        pair = _pair_turns(barriers, b, pops)
        if pair is not None:
            total, (r1, r2, o1, o2) = pair
            k.notes.append(Item("handoff.turns", f"{b.name}: {r1} and {r2} arrive on it and hand each other the turn "
                                f"through mbarriers ({r1} arrives on {o1}, which {r2} waits on; {r2} on {o2}, which "
                                f"{r1} waits on): taken as taking turns, each phase released by one of them",
                                Basis.ASSUMPTION))
        # (per barrier, the arrivals of roles taking turns are not summed: one role's a phase)
        both = _slot_arrivals(b, pops) if total != count and pair is None else None
        if both is not None and all(n == count for n in both[0].values()):
            # every site's barriers are decided and each barrier gets `count`: the group's sum
            # added arrivals that land on different barriers (MMA warp c commits acc_ready[c])
            continue
        if both is not None and not any(a.turns > 1 for a in b.arrivers):
            # every site's barriers are decided: name the barriers whose own arrivals differ
            # (a state that wraps past its ring lands on the next array: h4_attn_kstages's
            # MMA commits k_empty[2], which is v_full[0])
            bad: dict[int, list[int]] = {}
            for o, n in sorted(both[0].items()):
                if n != count:
                    bad.setdefault(n, []).append(o)
            if {o for offs in bad.values() for o in offs} == set(b.slots):
                bad = {}  # every barrier of the group is off: the group's own flag below says it
            for n, offs in bad.items():
                sym = b.name.split("+")[0]
                name = f"{sym}+{offs[0]}" if len(offs) == 1 else f"{sym}+{{{','.join(map(str, offs))}}}"
                whose = [a for a in b.arrivers if a.arrivals and set(a.slots) & set(offs)]
                who = "; ".join(sorted({f"{a.kind} by {a.site.role}, {a.site.threads} thread(s) at "
                                        f"{_where(a.site)} (on +{{{','.join(map(str, a.slots))}}})" for a in whose}))
                out.append(Flag(2, FLAG_NAMES[2], f"{name}: mbarrier.init count {count} (line {b.inits[0][0].line}) "
                                f"but {n} arrival(s) per phase ({who}): a phase "
                                + ("never completes (deadlock)" if n < count else "completes early")
                                + (f"; init with {n}" if len({a.site.role for a in whose}) < 2 or n < count else
                                   "; an arrive lands on a barrier of another array: check the stage index's wrap"),
                                Basis.ASSUMPTION if partial_elect or (stray and n < count) or any(
                                    ".multicast" in a.site.instruction for a in whose) else Basis.EVIDENCE,
                                b.inits[0][0].line))
            if bad:
                continue
        if total == count and pair is None and (short := _short_slot(b, pops, count)) is not None:
            out.append(Flag(2, FLAG_NAMES[2], short, Basis.EVIDENCE, b.inits[0][0].line))
            continue
        if total != count:
            who = "; ".join(sorted({f"{a.kind} by {a.site.role}, {a.site.threads} thread(s)" for a in b.arrivers
                                    if a.arrivals}))
            lines = ", ".join(sorted({_where(a.site) for a in b.arrivers if a.arrivals})[:6])
            # a multicast commit's arrivals rest on the cluster shape when the PTX does not declare it
            # (when the count is exceeded and no branch on the CTA's rank guards the commit, every
            # CTA of a constant mask runs it: the mask's CTAs are the fewest arrivals a larger
            # cluster could give, so the excess is evidence whatever the cluster's shape)
            multicast = k.e.cluster is None and any(".multicast" in a.site.instruction and a.arrivals
                                                    for a in b.arrivers)
            least = multicast and total > count and all(
                _constant_mask(k, a) for a in b.arrivers if ".multicast" in a.site.instruction and a.arrivals)
            multicast = multicast and not least
            # a pattern that arrives once, outside every loop, beside patterns that arrive in a
            # loop: a one-time handoff (Triton's arrive after the specialized region) that may
            # take a phase of its own rather than add to the loop's
            loops = {p_: {a.loop for a in b.arrivers if a.arrivals and (a.site.role, a.site.threads) == p_[:2]}
                     for p_ in pops}
            once = total > count and len(pops) > 1 and any(ls == {0} for ls in loops.values()) \
                and any(0 not in ls for ls in loops.values())
            # a count that rests on warp groups taking turns (the notes say why) is an assumption
            turns = any(a.turns > 1 for a in b.arrivers)
            basis = Basis.ASSUMPTION if partial_elect or (stray and total < count) or multicast or once or turns \
                else Basis.EVIDENCE
            out.append(Flag(2, FLAG_NAMES[2], f"{b.name}: mbarrier.init count {count} (line {b.inits[0][0].line}) but "
                            + ("at least " if least else "") + f"{total} arrival(s) per phase ({who}; {lines}"
                            + ("; the CTAs of its constant mask, each of which runs it: a larger cluster adds more"
                               if least else "") + "): a phase "
                            + ("never completes (deadlock)" if total < count else "completes early")
                            + f"; init with {total}", basis, b.inits[0][0].line))
    return out


def _constant_mask(k: _Kernel, a: Arrive) -> bool:
    """A multicast tcgen05.commit of one CTA group whose ctaMask is a constant, which every
    CTA runs (no branch on the CTA's rank in its cluster decides it)."""
    i = next((j for j, x in enumerate(k.stmts) if x.line == a.site.line and x.via == a.site.via
              and x.opcode.startswith("tcgen05.commit")), None)
    if i is None or ".cta_group::2" in k.stmts[i].opcode or len(k.stmts[i].operands) < 2:
        return False
    c = k.value(k.stmts[i].operands[1])
    return c is not None and c(0) is not None and not k.reads_rank(k.stmts[i].operands[1]) and not k.rank_guarded(i)


def _slot_arrivals(b: Barrier, pops: dict) -> tuple[dict[int, int], dict[tuple, set[int]]] | None:
    """The arrivals each barrier of a group gets a phase, where every arriving site's
    barriers are decided (Arrive.slots) and each barrier is initialized once here: a role's
    arrivals count on the barriers its sites reach. With them, the barriers each arrival
    pattern (role, threads) reaches. None otherwise."""
    if len(b.slots) < 2 or len(b.inits) != len(b.slots):
        return None
    reach: dict[tuple, set[int]] = {}
    for a in b.arrivers:
        if not a.arrivals:
            continue
        if not a.slots:
            return None
        reach.setdefault((a.site.role, a.site.threads), set()).update(a.slots)
    per: dict[tuple, int] = {}
    for key, n in pops.items():
        if n:
            per[key[:2]] = per.get(key[:2], 0) + n
    if set(per) != set(reach):
        return None
    return {o: sum(n for who, n in per.items() if o in reach[who]) for o in b.slots}, reach


def _pair_turns(barriers: tuple[Barrier, ...], b: Barrier, pops: dict) -> tuple[int, tuple] | None:
    """Two roles that arrive on b with the same arrivals a phase and hand each other the turn
    through a pair of mbarriers (role 1 arrives on one the other waits on, and back: Gluon's
    ping-pong consumers, each its own partition, taking alternate tiles of one ring): each
    phase of b gets one role's arrivals. (those arrivals, (role 1, role 2, barrier 1,
    barrier 2)), or None."""
    per: dict[str, int] = {}
    for key, n in pops.items():
        if n:
            per[key[0]] = per.get(key[0], 0) + n
    if len(per) != 2 or len(set(per.values())) != 1:
        return None
    r1, r2 = sorted(per)
    kinds = [{a.kind for a in b.arrivers if a.site.role == r and a.arrivals} for r in (r1, r2)]
    if kinds[0] != kinds[1] or any("expect_tx" in x for x in kinds[0]):
        return None  # a producer and a consumer (a ring merged with its other half) do not take turns
    if not any(o is not b and {r1, r2} <= {w.site.role for w in o.waiters} for o in barriers):
        return None  # consumers taking turns both wait on the ring they consume

    def hands(x: str, y: str) -> str | None:
        for o in barriers:
            if o is not b and any(a.site.role == x and a.arrivals for a in o.arrivers) and \
                    any(w.site.role == y for w in o.waiters) and not any(w.site.role == x for w in o.waiters) and \
                    not any(a.site.role == y and a.arrivals for a in o.arrivers):
                return o.name
        return None
    o1, o2 = hands(r1, r2), hands(r2, r1)
    if o1 is None or o2 is None:
        return None
    return next(iter(per.values())), (r1, r2, o1, o2)


def _short_slot(b: Barrier, pops: dict, count: int) -> str | None:
    """Where a group's count holds for the group but not for one of its barriers: a role
    whose arrives reach, by addresses the PTX decides, only some barriers of the ring (its
    stage counter wraps one early: 4 of CuTe's 5 ab_empty barriers), so the others get
    fewer arrivals a phase. None when every site's barriers are decided and each barrier
    gets `count`, or when a site's are not decided."""
    both = _slot_arrivals(b, pops)
    if both is None:
        return None
    got, reach = both
    bad = sorted(o for o, n in got.items() if n != count)
    if not bad:
        return None
    missing = sorted({f"{who[0]}, {who[1]} thread(s)" for who in reach if not set(bad) <= reach[who]})
    sym = b.name.split("+", 1)[0]
    return (f"{b.name}: mbarrier.init count {count} (line {b.inits[0][0].line}), and the group gets {count} arrival(s) "
            f"a phase, but {', '.join(f'{sym}+{o}' for o in bad)} get(s) {got[bad[0]]}: the arrives of "
            f"{'; '.join(missing)} reach only " + "; ".join(
                f"+{{{','.join(map(str, sorted(reach[w])))}}}" for w in reach if not set(bad) <= reach[w])
            + f" of the ring's {len(b.slots)} barriers (a stage counter that wraps early: the roles' stage counts "
            "differ), so a phase of those barriers " + ("never completes (deadlock)" if got[bad[0]] < count else
                                                      "completes early")
            + "; wrap every role's stage index at the number of barriers initialized")


def _flag_cta_barrier(k: _Kernel, stmts: list[Stmt], site) -> list[Flag]:  # type: ignore[no-untyped-def]
    """Flag 3: a barrier that waits for the whole CTA inside one role's branch: `bar.sync 0`
    with no thread count (__syncthreads) run by fewer than the CTA's threads, or a named
    barrier id that the CTA also uses whole (no count, or the block's count) synced inside
    a role with a smaller count (TIRx's epilogue `bar.sync 0, 128` beside the CTA's
    `bar.sync 0`: one hardware barrier, two counts). Register operands are resolved to the
    constants the PTX sets; an id it does not decide is said in the notes."""
    out = []
    ops = {i: o for i, s in enumerate(stmts) if (o := _bar_operands(k, s, i)) is not None}
    whole = {o[0] for i, o in ops.items() if o[0] is not None and ".arrive" not in stmts[i].opcode
             and (o[1] == -1 or (k.n and o[1] == k.n)) and _everyone(k, i)}
    undecided = [stmts[i].line for i, o in ops.items() if o[0] is None]
    mixed: dict[int, int] = {}  # id -> further role sites after the first, flagged once
    for i, (bid, cnt) in ops.items():
        s = stmts[i]
        p = k.threads(i)
        if p is None or not k.n or len(p) >= k.n or bid is None:
            continue
        shown = f"{s.opcode} {', '.join(s.operands)}" + (
            f" (= {bid}" + (f", {cnt}" if cnt != -1 else "") + ")" if any(o.startswith("%") for o in s.operands) else "")
        st = site(i)
        if bid == 0 and cnt == -1 and ".arrive" not in s.opcode:
            out.append(Flag(3, FLAG_NAMES[3], f"line {s.line}: {shown} (CTA-wide, "
                            f"__syncthreads) inside a role branch ({st.role}, {len(p)} of {k.n} threads): every "
                            "thread must reach the same barrier instruction; move it after the branches join, or "
                            "use a named barrier with a thread count", Basis.EVIDENCE, s.line))
        elif bid in whole and cnt is not None and cnt != -1 and cnt != k.n:
            if bid in mixed:
                mixed[bid] += 1
                continue
            mixed[bid] = 0
            cta = min(stmts[j].line for j, o in ops.items() if o[0] == bid and (o[1] == -1 or o[1] == k.n)
                      and _everyone(k, j))
            out.append(Flag(3, FLAG_NAMES[3], f"line {s.line}: {shown} inside a role branch ({st.role}, {len(p)} "
                            f"of {k.n} threads) uses barrier {bid} with {cnt} threads, while the whole CTA syncs on "
                            f"barrier {bid} (line {cta}): one hardware barrier, two thread counts (a role's "
                            "arrivals count toward the CTA's phase); give the role's barrier an id of its own",
                            Basis.EVIDENCE, s.line))
    for n, f in enumerate(out):
        m = re.search(r"uses barrier (\d+) with", f.text)
        if m and mixed.get(int(m.group(1))):
            out[n] = Flag(f.code, f.name, f.text + f" ({mixed[int(m.group(1))]} more site(s) of it in roles)",
                          f.basis, f.line)
    if undecided:
        k.notes.append(Item("barrier", f"barrier id not decided by the PTX at line(s) "
                            f"{', '.join(map(str, undecided[:6]))}: whether it is the CTA's barrier (flag 3) is not "
                            "checked there", Basis.ASSUMPTION))
    return out


def _tensormap_staging(k: _Kernel, stmts: list[Stmt]) -> set[tuple[str, int]]:
    """(symbol, offset) of each tensor map a kernel builds in shared memory: the operand of
    tensormap.replace (a descriptor made on the device: Triton's tl.make_tensor_descriptor).
    Its generic stores (the zero fill before the fields are replaced) are published by
    tensormap.cp_fenceproxy, and no wgmma or bulk copy reads them as data."""
    return {at for s in stmts if s.opcode.startswith("tensormap.replace") and s.operands
            and (at := k.shared_at(s.operands[0])) is not None}


_ARRIVE_OPS = ("mbarrier.arrive", "mbarrier.arrive_drop")  # a release: expect_tx alone releases nothing
# (a shared-to-cluster bulk copy reads its CTA's shared memory through the async proxy too)
_ASYNC_SMEM_READ = re.compile(r"^(cp\.async\.bulk(\.tensor\.\w+)?\.(global|shared::cluster)\.shared|cp\.reduce\.async\.bulk|"
                              r"wgmma\.mma_async|tcgen05\.mma|tcgen05\.cp)")


def _const(k: _Kernel, op: str, threads: frozenset | None = None) -> int | None:
    """The value of `op` when the PTX decides it as one constant (a literal, or a register
    `mov`ed from constants and %tid-derived values that agree in every thread of `threads`)."""
    op = op.strip()
    if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
        return int(op, 0)
    f = k.value(op)
    if f is None:
        return None
    ts = sorted(threads) if threads else ([0] if not k.n else range(0, k.n, 32))
    vs = {f(t) for t in ts}
    return vs.pop() if len(vs) == 1 and None not in vs else None


_INT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "and": lambda a, b: a & b,
            "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}


def _tfn(k: _Kernel, op: str, depth: int = 0):  # type: ignore[no-untyped-def]
    """t -> the value of `op` in thread t, as `_Kernel.value`, also through the 16-bit
    arithmetic and widening products (`mul.wide.s16`) CuTe DSL computes smem offsets with;
    each step is checked against its register width, a value that leaves it gives None."""
    f = k.value(op)
    if f is not None or depth > 24:
        return f
    ds = k.defs.get(op.strip())
    if not ds or len(ds) != 1:
        return None
    d = ds[0]
    parts = d.opcode.split(".")
    name = parts[0]
    if name in ("mov", "cvt") and len(d.operands) == 2:
        src = _tfn(k, d.operands[1], depth + 1)
        m = re.fullmatch(r"([su])(8|16|32)", parts[-1]) if name == "cvt" else None
        if src is None or m is None:
            return src
        lo, hi = (-(1 << (int(m.group(2)) - 1)), 1 << (int(m.group(2)) - 1)) if m.group(1) == "s" else \
            (0, 1 << int(m.group(2)))
        # a value outside the source type's range would wrap or be sign-extended: not followed
        return lambda t: v if (v := src(t)) is not None and lo <= v < hi else None
    if name not in _INT_OPS or len(d.operands) != 3 or (name == "mul" and not ({"lo", "wide"} & set(parts))):
        return None
    a, b = _tfn(k, d.operands[1], depth + 1), _tfn(k, d.operands[2], depth + 1)
    if a is None or b is None:
        return None
    bits = 16 if any(x in ("s16", "u16", "b16") for x in parts) and "wide" not in parts else 64

    def g(t: int) -> int | None:
        x, y = a(t), b(t)
        if x is None or y is None:
            return None
        v = _INT_OPS[name](x, y)
        return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None
    return g


def _addr(k: _Kernel, op: str, threads: frozenset | None, depth: int = 0) -> tuple[str, frozenset | None]:
    """A shared address as (root, byte offsets from it): the root a symbol where `vals`
    resolves it, else the register the address is built on (through add / mov / cvta,
    adding constants and %tid-derived terms evaluated in `threads`); offsets None when not
    derived."""
    op = op.strip().strip("[]").strip()
    m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
    base, c = (m.group(1).strip(), int(m.group(2))) if m else (op, 0)
    if not base.startswith("%"):
        return base, frozenset({c})
    v = k.vals(base)
    if v is not None and v[0] is not None and v[1]:
        return v[0], frozenset(o + c for o in v[1])
    ds = k.defs.get(base)
    if depth < 8 and ds and len(ds) == 1:
        d = ds[0]
        name = d.opcode.split(".")[0]
        if name in ("mov", "cvta") and len(d.operands) == 2:
            r, offs = _addr(k, d.operands[1], threads, depth + 1)
            return r, None if offs is None else frozenset(o + c for o in offs)
        if name == "add" and len(d.operands) == 3:
            for x, y in ((d.operands[1], d.operands[2]), (d.operands[2], d.operands[1])):
                f = _tfn(k, y)
                if f is None:
                    continue
                ts = sorted(threads) if threads else None
                vs = {f(t) for t in ts} if ts else None
                if vs is None or None in vs:
                    break
                r, offs = _addr(k, x, threads, depth + 1)
                return r, None if offs is None else frozenset(o + c + w for o in offs for w in vs)  # type: ignore[operator]
        if name == "xor" and len(d.operands) == 3:
            sw = _swizzled(k, d.operands[1], d.operands[2], threads, depth)
            if sw is not None:
                return sw[0], frozenset(o + c for o in sw[1])
    if base in ("%r", ""):
        return base, None
    return base, frozenset({c})


def _swizzled(k: _Kernel, a: str, b: str, threads: frozenset | None, depth: int) -> tuple[str, frozenset] | None:
    """CuTe's swizzle of a shared address, `x ^ ((x >> s) & m)` (`shr`, `and`, `xor`), where x
    is a symbol plus offsets: the symbol's declared alignment (`.align 1024`) leaves the bits
    the swizzle reads and flips to the offset alone, so each offset o becomes
    o ^ ((o >> s) & m). None for any other shape, or a symbol not aligned enough."""
    for x, y in ((a, b), (b, a)):
        ds = k.defs.get(y.strip())
        if not ds or len(ds) != 1 or ds[0].opcode.split(".")[0] != "and" or len(ds[0].operands) != 3:
            continue
        m = _const(k, ds[0].operands[2])
        sh = k.defs.get(ds[0].operands[1].strip())
        if m is None or m < 0 or not sh or len(sh) != 1 or sh[0].opcode.split(".")[0] != "shr" or \
                len(sh[0].operands) != 3 or sh[0].operands[1].strip() != x.strip():
            continue
        s_ = _const(k, sh[0].operands[2])
        r, offs = _addr(k, x, threads, depth + 1)
        align = next((dcl.align for dcl in k.e.shared if dcl.name == r), None)
        if s_ is None or offs is None or not align or (m << s_) >= align or m >= align:
            return None
        return r, frozenset(o ^ ((o >> s_) & m) for o in offs)
    return None


def _ring_extent(k: _Kernel, op: str) -> tuple[str, int, int] | None:
    """(symbol, lo, hi): the bytes a stage address of a wrapped ring can point into, for an
    address `ring_base` reads (base C, step S) whose wrap the PTX writes as a product by a
    constant multiple W of S (`mul.lo q, i / STAGES, W; sub p, p, q`, `mad.lo q, i / STAGES,
    -W, p` or `shl q, i / STAGES, log2 W; sub p, p, q`, as Triton and Gluon emit): [C, C + W)."""
    rb = k.ring_base(op)
    if rb is None:
        return None
    sym, base, step = rb
    seen: set[str] = set()
    todo = [op.strip()]
    while todo and len(seen) < 32:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        for d in k.defs.get(r, []):
            name = d.opcode.split(".")[0]
            if name in ("mul", "mad", "shl") and len(d.operands) >= 3:
                w = _const(k, d.operands[2])
                if name == "shl":  # Gluon's ring of two: `(i / 2) << 14` for two 8192-byte stages
                    w = 1 << w if w is not None and 0 <= w < 32 else None
                if w is not None and abs(w) >= step and abs(w) % step == 0 and abs(w) > 0:
                    return sym, base, base + abs(w)
            todo += [o for o in d.operands[1:] if o.startswith("%")]
    return None


def _desc_address(k: _Kernel, op: str) -> str | None:
    """The shared address register a matrix descriptor (wgmma / tcgen05.mma) is built from:
    its start-address field is `(addr >> 4) & 0x3fff` (`bfe.u32 d, addr, 4, 14`, or
    `shr.u32 d, addr, 4`), widened (`cvt.u64.u32`) and or-ed / added with the constant high
    fields."""
    r = op.strip()
    for _ in range(10):
        ds = k.defs.get(r)
        if not ds or len(ds) != 1:
            return None
        d = ds[0]
        name = d.opcode.split(".")[0]
        if name == "bfe" and len(d.operands) == 4 and _const(k, d.operands[2]) == 4:
            return d.operands[1]
        if name == "shr" and len(d.operands) == 3 and _const(k, d.operands[2]) == 4:
            return d.operands[1]
        if name == "mov" and len(d.operands) >= 2 and d.operands[1].strip().startswith("{"):
            # `mov.b64 %rd, {lo, hi}` (CuTe): the start address is in the low word
            r = d.operands[1].strip().lstrip("{").split(",")[0].strip()
            continue
        if name in ("mov", "cvt") and len(d.operands) == 2:
            r = d.operands[1]
            continue
        if name in ("or", "add", "and") and len(d.operands) == 3:
            regs = [o for o in d.operands[1:] if o.strip().startswith("%") and _const(k, o) is None]
            if len(regs) != 1:
                return None
            r = regs[0]
            continue
        return None
    return None


def _async_reads(k: _Kernel, s: Stmt) -> list[tuple[str, frozenset | None, int | None]] | None:
    """What an async-proxy reader of shared memory reads: (root, start offsets, end offset
    bound or None), one per shared operand (`%?` for one not derived); None when none is."""
    o, a = s.opcode, s.operands
    out: list[tuple[str, frozenset | None, int | None]] = []
    if o.startswith("cp.async.bulk") or o.startswith("cp.reduce.async.bulk"):
        # [dst], [src] ...: the shared source is the second operand
        ops = [a[1]] if len(a) > 1 else []
    elif o.startswith(("wgmma.mma_async", "tcgen05.mma")):
        # descriptors: wgmma's A (when not registers) and B; tcgen05.mma's a-desc and b-desc
        ops = [x for x in (a[1:3] if o.startswith("tcgen05.mma") else a[1:3]) if x.strip().startswith("%rd")]
        ops = [_desc_address(k, x) or "?" for x in ops]
    elif o.startswith("tcgen05.cp") and len(a) > 1:
        ops = [_desc_address(k, a[1]) or "?"]
    else:
        return None
    if not ops:
        return None
    if all(x == "?" for x in ops):
        return None
    for x in ops:
        if x == "?":
            # one descriptor not derived (a stage offset added to the descriptor itself): the
            # others still say what is surely read
            out.append(("%?", None, None))
            continue
        ext = _ring_extent(k, x.strip().strip("[]").split("+")[0].strip())
        if ext is not None:
            m = re.search(r"\+\s*(-?\d+)\s*\]?$", x)
            c = int(m.group(1)) if m else 0
            out.append((ext[0], frozenset({ext[1] + c}), ext[2] + c))
            continue
        root, offs = _addr(k, x, None)
        out.append((root, offs, None))
    return out


def _overlap(store: tuple[str, frozenset | None], reads: list | None) -> bool | None:
    """Whether stored bytes can be among those an async reader reads: False when decided
    apart (another symbol, or outside a range the PTX bounds), True when a stored address
    is one the reader starts at (or inside its bounded range), None when not decided."""
    if reads is None:
        return None
    root, offs = store
    verdicts = []
    for r_root, starts, end in reads:
        if r_root != root:
            both_symbols = not r_root.startswith("%") and not root.startswith("%")
            verdicts.append(False if both_symbols else None)
            continue
        if offs is None or starts is None:
            verdicts.append(None)
            continue
        if end is not None:
            verdicts.append(any(min(starts) <= x < end for x in offs))
            continue
        verdicts.append(True if offs & starts else None)  # a start elsewhere: the extent is not known
    if any(v is True for v in verdicts):
        return True
    if all(v is False for v in verdicts):
        return False
    return None


def _bar_offsets(k: _Kernel, op: str) -> tuple[str | None, frozenset | None] | None:
    """The offsets an mbarrier operand may address, the narrowest the PTX decides: `vals`,
    its linear form (a leaf used twice counts once), or a stepped pointer's ring (base,
    step, bounded span: Gluon's `p += 8` wrapped by `- (i / 2) << 4`)."""
    m = re.fullmatch(r"(.+?)\s*\+\s*(-?\d+)", op)
    base, c = (m.group(1).strip(), int(m.group(2))) if m else (op, 0)
    v = k.vals(base)
    lv = k.linear_vals(base) if base.startswith("%") else None
    if lv is not None and lv[1] is not None and (v is None or v[1] is None or len(lv[1]) < len(v[1])):
        v = lv
    if (v is None or v[1] is None) and base.startswith("%"):
        rb, span = k.ring_base(base), k.ring_span(base)
        if rb is not None and span is not None:
            v = (rb[0], frozenset(range(rb[1], rb[1] + span + 1, rb[2])))
    if v is None or v[1] is None or not c:
        return v
    return v[0], frozenset(o + c for o in v[1])


def _same_barrier(k: _Kernel, x: str, y: str) -> bool:
    """Whether two mbarrier operands may address the same barrier (same register, or
    addresses `vals` resolves into one symbol with a common offset; undecided: may)."""
    x, y = x.strip().strip("[]").strip(), y.strip().strip("[]").strip()
    if x == y:
        return True
    vx, vy = _bar_offsets(k, x), _bar_offsets(k, y)
    if vx is None or vy is None or vx[0] is None or vy[0] is None:
        return True
    if vx[0] != vy[0]:
        return False
    return vx[1] is None or vy[1] is None or bool(vx[1] & vy[1])


def _flag_proxy_fence(k: _Kernel, stmts: list[Stmt]) -> list[Flag]:
    """Flag 5: st.shared whose bytes an async-proxy operation reads with no
    fence.proxy.async by the storing thread in between: on some path of the storing thread
    itself, or through a handoff (the store, then an mbarrier arrive on B, another role's
    wait on B, then its async reader: CuTe's epilogue warps write sC and arrive, a TMA warp
    waits and stores it). Only a reader whose shared operand can overlap the stored bytes
    counts: where both addresses are derived and apart (Triton's slot holding the TMEM
    base at global_smem+98304 beside rings at +0..98303 read by tcgen05.mma) nothing is
    flagged; a stored address the reader starts at is evidence; a reader's range not
    derived is flagged as an assumption. A store whose lowest address is a tensor map being
    built in shared memory is that map's, not data (`_tensormap_staging`), and Triton's
    partition table is read by ld.shared only."""
    maps = _tensormap_staging(k, stmts)
    table = set(k.dispatch_table_lines())
    n = len(stmts)
    ends = [k.starts[b + 1] if b + 1 < len(k.starts) else n for b in range(len(k.starts))]
    walk_memo: dict[int, tuple[list[int], list[int]]] = {}

    def walk(j0: int) -> tuple[list[int], list[int]]:
        """(async readers, arrives) the thread at statement j0 reaches before a fence.proxy.async."""
        if j0 in walk_memo:
            return walk_memo[j0]
        readers: list[int] = []
        arrives: list[int] = []
        seen: set[int] = set()
        todo = [(j0, k.block_of[j0] if j0 < n else None)]
        while todo:
            j, b = todo.pop()
            if b is None:
                continue
            stop = False
            for x in range(j, ends[b]):
                o = stmts[x].opcode
                if o.startswith("fence.proxy.async"):
                    stop = True
                    break
                if _ASYNC_SMEM_READ.match(o):
                    readers.append(x)
                elif o.startswith(_ARRIVE_OPS) and len(stmts[x].operands) > 1:
                    arrives.append(x)
            if stop:
                continue
            for nb in k.succ[b]:
                if nb not in seen:
                    seen.add(nb)
                    todo.append((k.starts[nb], nb))
        walk_memo[j0] = (readers, arrives)
        return readers, arrives

    waits = [j for j, w in enumerate(stmts) if w.opcode.startswith(_WAIT) and len(w.operands) > 1]
    reads_memo: dict[int, object] = {}

    def reads(x: int):  # type: ignore[no-untyped-def]
        if x not in reads_memo:
            reads_memo[x] = _async_reads(k, stmts[x])
        return reads_memo[x]

    best: tuple[int, Flag] | None = None
    undecided: dict[int, int] = {}  # store line -> a reader line (through a handoff) not placed
    for i, s in enumerate(stmts):
        if not s.opcode.startswith(_SMEM_STORE) or s.line in table or not s.operands:
            continue
        if maps:
            v = k.vals(s.operands[0])
            if v is not None and v[0] is not None and v[1] and (v[0], min(v[1])) in maps:
                continue
        p = k.threads(i)
        store = _addr(k, s.operands[0], p)
        readers, arrives = walk(i + 1)
        # (the walk follows the control flow, through a dispatch loop's back edge into other
        # roles' code too: a reader or an arrive counts only where threads that ran the step
        # before it run it)
        hits = [(x, None) for x in readers if _runs_with(k, x, p)]
        for a in arrives:
            if not _runs_with(k, a, p):
                continue
            for j in waits:
                q = k.threads(j)
                if p is not None and q is not None and q <= p:
                    continue  # the storing threads' own wait: the forward walk covers them
                if not _same_barrier(k, stmts[a].operands[1], stmts[j].operands[1]):
                    continue
                hits += [(x, (a, j)) for x in walk(j + 1)[0] if _runs_with(k, x, q)]
        for x, via in hits:
            ov = _overlap(store, reads(x))
            if ov is False:
                continue
            if ov is None and via is not None:
                # through a handoff, a store and a reader the PTX does not place: flagged only
                # where the store's displacement is the reader's start in the same buffer
                # (CuTe's sC: `[%r59+132096]` stored, `[%r1+132096]` read), else noted
                if not _same_displacement(k, s.operands[0], reads(x)):
                    if not _variable_slot(k, store):
                        undecided.setdefault(s.line, stmts[x].line)
                    continue
            r = stmts[x]
            how = "" if via is None else (f", through mbarrier.arrive (line {stmts[via[0]].line}) and the wait "
                                          f"on it at line {stmts[via[1]].line} by other threads")
            text = (f"{s.opcode} (line {s.line}, generic proxy) is followed by {r.opcode} (line {r.line}, async "
                    f"proxy reading shared memory{how}) with no fence.proxy.async.shared::cta on the storing "
                    "thread's path: add the fence after the stores (before the barrier that publishes them)")
            if ov is None:
                text += (" (whether the bytes it reads include the stored ones is not derived from the PTX: "
                         f"store at {_show_addr(store)}, reader's operand not resolved to the same place)")
            runaway = bool(k.runaway) and any(k.derives_from(o, k.runaway.__contains__) for o in r.operands)
            if runaway:
                text += (" (the reader's address is computed from a stage index that runs past the barriers "
                         "initialized, flag 13: the overlap may be that bug's, not a missing fence)")
            f = Flag(5, FLAG_NAMES[5], text, Basis.EVIDENCE if ov and not runaway else Basis.ASSUMPTION, s.line)
            if ov:
                return [f]
            if best is None:
                best = (i, f)
    if best is None and undecided:
        st, rd = next(iter(undecided.items()))
        k.notes.append(Item("handoff.fence", f"{len(undecided)} shared-memory store(s) (first line {st}) published through an "
                            f"mbarrier to another role's async-proxy reader (line {rd}) with no fence.proxy.async: "
                            "whether the reader's bytes include the stored ones is not derived from the PTX: the "
                            "proxy fence is not checked there", Basis.ASSUMPTION))
    return [best[1]] if best else []


def _runs_with(k: _Kernel, x: int, threads: frozenset | None) -> bool:
    """Some of `threads` run statement x (where both are derived; else it may)."""
    q = k.threads(x)
    return q is None or threads is None or bool(q & threads)


def _variable_slot(k: _Kernel, store: tuple[str, frozenset | None]) -> bool:
    """A store to one decided word that an ld.shared reads back at that same word: a
    variable handed over in shared memory (the tensor-memory base tcgen05.alloc returned, a
    partition table), not a tile staged for an async-proxy reader."""
    root, offs = store
    if root.startswith("%") or not offs or len(offs) != 1:
        return False
    loads = k.__dict__.setdefault("_ld_shared_words", {
        v for s in k.stmts if s.opcode.startswith("ld.shared") and s.operands[1:]
        and (v := k.vals(s.operands[1])) is not None and v[0] is not None and v[1] is not None and len(v[1]) == 1})
    return (root, next(iter(offs))) in {(sym, next(iter(o))) for sym, o in loads}


def _same_displacement(k: _Kernel, op: str, reads) -> bool:  # type: ignore[no-untyped-def]
    """A store `[reg+C]` into a buffer whose async reader starts at C of the same symbol."""
    m = re.fullmatch(r"\[?\s*(%\w+)\s*\+\s*(-?\d+)\s*\]?", op.strip())
    if not m or not reads:
        return False
    sym, c = k.sym_of(m.group(1)), int(m.group(2))
    return sym is not None and any(r == sym and starts is not None and c in starts for r, starts, _ in reads)


def _show_addr(a: tuple[str, frozenset | None]) -> str:
    root, offs = a
    if offs is None:
        return f"{root}+?"
    o = sorted(offs)
    return f"{root}+{o[0]}" + (f"..{o[-1]}" if len(o) > 1 else "")


def _first_parity(k: _Kernel, w, i: int) -> int | None:
    """The parity wait `w` (statement i) asks for on its first trip: read where the wait
    stands (Triton flips its phase just before it), else from the value's definitions."""
    v = k.first_value(w.parity, at=i)
    if v is not None:
        return v
    # from the definitions: a loop's first trip. A wait after a loop (no loop of its own) may
    # read what the loop left, which no first trip decides (the trip count's parity)
    return k.first_value(w.parity) if k.work_loop(i) else None


def _flag_phase_order(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 7: the first trip of every role, played out. A fresh mbarrier is in phase 0:
    a wait for parity 1 passes at once, a wait for parity 0 passes once the phase has its
    arrivals. Each warp's first wait on each barrier (array) is taken with the parity its
    PTX computes for the first trip (`_Kernel.first_value`); an arrival happens unless a
    wait that has not passed lies on every path to it (a dominating wait of one of its
    warps). Waits that still cannot pass when nothing else can move are a deadlock: the
    producer's first wait on the stage it fills first must be for parity 1 (`phase ^ 1`).
    A count that no arrivals could meet is flag 2's; here a phase needs at most the
    arrivals its barrier gets. Waits whose parity is not derived are not checked."""
    if not k.n:
        return []
    dom = k.dominators()

    def before(j: int, i: int) -> bool:  # statement j lies on every path to statement i
        bj, bi = k.block_of[j], k.block_of[i]
        return bj in dom[bi] and (bj != bi or j < i)

    waits: list[tuple[int, int, frozenset, int | None, object]] = []  # (barrier, stmt, warps, parity, Wait)
    arrivals: list[tuple[int, int, frozenset, int]] = []  # (barrier, stmt, warps, arrivals)
    need: dict[int, int] = {}
    unchecked = 0
    for n, b in enumerate(barriers):
        counts = {c for _, c in b.inits}
        pops = phase_arrivals(b)
        if not b.inits or len(counts) != 1 or None in counts or None in pops.values():
            continue
        need[n] = min(counts.pop(), sum(v for v in pops.values() if v))  # type: ignore[arg-type]
        mine: dict[int, list[tuple]] = {}  # warp -> its waits on this barrier
        for w in b.waiters:
            i = k.stmt_of(w.site)
            p = k.threads(i) if i is not None else None
            if i is None or p is None or not w.parity:
                unchecked += 1
                continue
            for warp in {t // 32 for t in p}:
                mine.setdefault(warp, []).append((i, w))
        # a warp's first wait (the earliest), and the others no wait of it on this barrier
        # dominates, where their first-trip parity is derived: the remainder loop's, which
        # runs first when nvcc's unrolled loop is skipped
        first: dict[int, dict[int, object]] = {}
        for warp, ws in mine.items():
            first[warp] = {i: w for i, w in ws if i == min(ws, key=lambda x: x[0])[0] or (
                not any(before(j, i) for j, _ in ws if j != i) and _first_parity(k, w, i) is not None)}
        for i, w in {i: w for f in first.values() for i, w in f.items()}.items():
            if k.skipped_first(i):
                continue  # the first trip does not run it: it cannot hold the first trip up
            warps = frozenset(warp for warp, f in first.items() if i in f)
            waits.append((n, i, warps, _first_parity(k, w, i), w))  # type: ignore[attr-defined]
        for a in b.arrivers:
            i = k.stmt_of(a.site)
            p = k.threads(i) if i is not None else None
            if i is not None and p is not None and a.arrivals:
                arrivals.append((n, i, frozenset(t // 32 for t in p), a.arrivals))
    blocked = {x[1] for x in waits if x[3] == 0}  # parity 0 on a fresh barrier: waits for phase 0
    unchecked += sum(1 for x in waits if x[3] is None)

    reach_memo: dict[int, set[int]] = {}

    def reaches(i: int, j: int) -> bool:  # a path from statement i to statement j
        bi, bj = k.block_of[i], k.block_of[j]
        if bi == bj and i < j:
            return True
        if bi not in reach_memo:
            reach_memo[bi] = set().union(*(k.reach(x, set()) for x in k.succ[bi])) if k.succ[bi] else set()
        return bj in reach_memo[bi]

    def dominated(w: tuple, a: tuple) -> bool:
        bw, ba = k.block_of[w[1]], k.block_of[a[1]]
        if bool(w[2] & a[2]) and bw in dom[ba] and (bw != ba or w[1] < a[1]):
            return True
        # the waiting warps' own arrival after the loop the wait sits in (a store warp's last
        # release after its tile loop): it never comes back to the wait, so on a first trip
        # that runs the loop it follows the wait, though a loop run zero times skips the wait
        return a[2] <= w[2] and reaches(w[1], a[1]) and not reaches(a[1], w[1])

    # where a wait and every arrival on its barrier name the barriers they reach (decided
    # addresses), phase 0 must complete on each barrier of the ring the wait walks: consumers
    # that release 3 of 4 stages ahead leave the producer's fourth wait blocked
    slot_of = {i: w.slots for n_, i, _, _, w in waits}  # type: ignore[attr-defined]
    arr_slots = {i: b_a.slots for b in barriers for b_a in b.arrivers if (i := k.stmt_of(b_a.site)) is not None}
    changed = True
    while changed:
        changed = False
        fired: dict[int, int] = {}
        per_slot: dict[int, dict[int, int] | None] = {}
        for a in arrivals:
            if not any(w[1] in blocked and dominated(w, a) for w in waits):
                fired[a[0]] = fired.get(a[0], 0) + a[3]
                got = arr_slots.get(a[1])
                if not got or per_slot.get(a[0], {}) is None:
                    per_slot[a[0]] = None
                else:
                    d = per_slot.setdefault(a[0], {})
                    for o in got:
                        d[o] = d.get(o, 0) + a[3]  # type: ignore[index]
        for w in waits:
            if w[1] in blocked and fired.get(w[0], 0) >= need.get(w[0], 1 << 62):
                ps, ws_ = per_slot.get(w[0]), slot_of.get(w[1])
                # a slot only the waiter's own later arrivals reach (a state that wraps past its
                # ring onto another array) is not one its first trip waits on: a later trip's
                ws_ = tuple(o for o in ws_ or () if not (feeds := [
                    a for a in arrivals if a[0] == w[0] and o in (arr_slots.get(a[1]) or ())]) or not all(
                    a[2] <= w[2] and dominated(w, a) for a in feeds)) if ws_ and len(ws_) > 1 else ws_
                if ps is not None and ws_ and len(ws_) > 1 and all(
                        arr_slots.get(a[1]) for a in arrivals if a[0] == w[0]) and any(
                        ps.get(o, 0) < need[w[0]] for o in ws_):
                    continue
                blocked.discard(w[1])
                changed = True
    stuck = [w for w in waits if w[1] in blocked and any(a[0] == w[0] for a in arrivals)]
    flags10 = _flag_premature_pass(k, barriers, waits)
    flags10 += _flag_turns_both_open(barriers, waits, {f.line for f in flags10})
    if unchecked:
        k.notes.append(Item("handoff.phase", f"{unchecked} wait(s) whose first-trip parity or threads are not "
                            "derived (a kernel argument, data or an unresolved address decides them): the order of "
                            "phases is not checked there", Basis.ASSUMPTION))
    if not stuck:
        return flags10
    stuck.sort(key=lambda w: w[1])
    parts = []
    for n, i, _, _, w in stuck:
        b = barriers[n]
        feeders = sorted({f"{a.site.role} at line {a.site.line}" for a in b.arrivers if a.arrivals})
        parts.append(f"{w.site.role} waits on {b.name} for parity 0 on its first trip (line {w.site.line}, "  # type: ignore[attr-defined]
                     f"parity {w.parity}), whose phase 0 needs {need[n]} arrival(s) from {', '.join(feeders[:3])}")  # type: ignore[attr-defined]
    first = barriers[stuck[0][0]]
    return [Flag(7, FLAG_NAMES[7], "; ".join(parts) + ": each of those arrivals comes after one of these waits, so no "
                 "role can move (deadlock on the first trip). The role that fills a stage first waits on its "
                 "'empty' barrier with parity 1 on the first pass (phase ^ 1): check the first wait's parity",
                 Basis.EVIDENCE, stuck[0][4].site.line)] + flags10  # type: ignore[attr-defined]


def _flag_turns_both_open(barriers: tuple[Barrier, ...], waits: list, flagged: set[int]) -> list[Flag]:
    """Flag 10 on a turn: two roles hand each other a token through a pair of barriers that
    carry no data (plain arrives: X arrives on B1, which Y waits on; Y on B2, which X waits
    on: ping-pong consumers ordered by mbarriers). Exactly one side may start: its first
    wait asks for parity 1 and passes on the fresh barrier, the other's for parity 0. When
    both first waits ask for parity 1 (derived), both pass at once and run their first turn
    together: the order the token keeps is lost from the first trip (a race, no hang).
    Each barrier of the pair is one barrier (not a ring)."""
    firsts: dict[int, dict[str, set]] = {}
    for n, _, _, parity, w in waits:
        firsts.setdefault(n, {}).setdefault(w.site.role, set()).add(parity)
    out: list[Flag] = []

    def token(b: Barrier) -> tuple[str, str] | None:
        arr = {a.site.role for a in b.arrivers if a.arrivals}
        wt = {w.site.role for w in b.waiters}
        # (one barrier each way: a ring's empty barriers, whose roles swap in another region of
        # the kernel, are stages, not a token)
        if len(arr) != 1 or len(wt) != 1 or arr == wt or len(b.slots) > 1 or \
                any(a.kind != "arrive" for a in b.arrivers if a.arrivals):
            return None
        return next(iter(arr)), next(iter(wt))

    tokens = {n: t for n, b in enumerate(barriers) if (t := token(b)) is not None}
    for n1, (x, y) in tokens.items():
        for n2, (y2, x2) in tokens.items():
            if n2 <= n1 or (y2, x2) != (y, x):
                continue
            px, py = firsts.get(n2, {}).get(x), firsts.get(n1, {}).get(y)
            if px != {1} or py != {1}:
                continue
            wx = next(w for n, _, _, _, w in waits if n == n2 and w.site.role == x)
            wy = next(w for n, _, _, _, w in waits if n == n1 and w.site.role == y)
            if wx.site.line in flagged or wy.site.line in flagged:
                continue
            out.append(Flag(10, FLAG_NAMES[10], f"{x} and {y} hand each other a turn through {barriers[n1].name} "
                            f"({x} arrives, {y} waits) and {barriers[n2].name} ({y} arrives, {x} waits), but both "
                            f"first waits ask for parity 1 ({x} at line {wx.site.line}, {y} at line {wy.site.line}): "
                            "on the fresh barriers both pass at once and run their first turn together, so the order "
                            "the token keeps is lost (a race, no hang). The side that goes second waits for parity 0 "
                            "first", Basis.EVIDENCE, wy.site.line))
    return out


# what a role reads after a wait: shared-memory data (matrix descriptors, generic loads, a TMA
# store's source, tcgen05.cp) and tensor memory (tcgen05.ld)
_READS_SMEM = re.compile(r"^(tcgen05\.mma|wgmma\.mma_async|ld\.shared|ldmatrix|tcgen05\.cp|"
                         r"cp\.async\.bulk(\.tensor\.\w+)?\.global\.shared|cp\.reduce\.async\.bulk)")
_READS_TMEM = re.compile(r"^tcgen05\.ld")


def _flag_premature_pass(k: _Kernel, barriers: tuple[Barrier, ...], waits: list) -> list[Flag]:
    """Flag 10: a role's first wait on a barrier asks for parity 1, so it passes on the fresh
    barrier (phase 0 still pending), and before its next wait the role reads what the
    barrier's arrivers produce: a stage that copies complete bytes on (TMA / bulk / cp.async
    loads into shared memory), read by tcgen05.mma, wgmma, ld.shared, ldmatrix or a TMA
    store; or an accumulator a tcgen05.commit publishes, read by tcgen05.ld. It reads data
    not yet written (a race, no hang). A producer's first wait on `empty` (it then writes
    the stage) and an MMA warp's first wait on `acc_empty` (its arrivers produce nothing it
    reads) pass legitimately. `waits` are flag 7's first trips (barrier index, statement,
    warps, first-trip parity, Wait). Evidence: the parity and the read are both decided."""
    stmts = k.stmts
    out: list[Flag] = []
    done: set[int] = set()
    # shared addresses a plain store writes, each one decided value: variables, not stages
    scalars = {v for s in stmts if s.opcode.startswith("st.shared") and s.operands
               and (v := k.vals(s.operands[0])) is not None and v[1] is not None and len(v[1]) == 1}
    for bn, i, warps, parity, w in waits:
        if parity != 1 or bn in done:
            continue
        b = barriers[bn]
        # in a group the PTX does not tell apart, a wait whose barrier is decided is fed by the
        # arrivers that reach that barrier (or whose barriers are not decided), not the group's
        mine = [a for a in b.arrivers if b.decided or not w.slots or not a.slots or set(a.slots) & set(w.slots)]
        kinds = {a.kind.removeprefix("remote ") for a in mine}
        smem = any(kd in ("complete_tx", "cp.async.mbarrier.arrive") for kd in kinds)
        tmem = "tcgen05.commit" in kinds
        p = k.threads(i)
        # a stage its arrivers store with st.shared before they arrive (PipelineAsync): read
        # there only where the addresses read and stored are decided and meet
        stored = _stage_stores(k, b) if not smem and not tmem and p is not None else None
        # tensor memory its plain arrivers write (tcgen05.st) before they arrive: attention's
        # correction rescales O in place, then lets the MMA warp accumulate into it
        tstored = _tmem_stores(k, b) if not smem and not tmem else set()
        if not smem and not tmem and not stored and not tstored:
            continue

        def reads(x: int) -> bool:
            o = stmts[x].opcode
            if stmts[x].line in k.table_reads:  # Triton's partition table, not a stage
                return False
            if o.startswith("ld.shared") and stmts[x].operands and (v := k.vals(stmts[x].operands[-1])) is not None \
                    and v[1] is not None and len(v[1]) == 1 and v in scalars:
                return False  # a value stored at that one address (Triton's captured arguments), not a stage
            if smem and _READS_SMEM.match(o) or tmem and _READS_TMEM.match(o):
                return True
            if tstored and o.startswith(("tcgen05.mma", "tcgen05.ld", "tcgen05.st", "tcgen05.cp")) and \
                    stmts[x].operands and _tmem_slots(k, _tmem_operand(stmts[x])) & tstored:
                return True
            if not stored or not o.startswith(("ld.shared", "ldmatrix")) or not stmts[x].operands:
                return False
            v = k.thread_vals(stmts[x].operands[-1], k.threads(x) & p)  # type: ignore[operator]
            return v is not None and v[1] is not None and any(
                sym == v[0] and offs & v[1] for sym, offs in stored)
        # the waiting thread's code up to its next wait (on any barrier, by any thread)
        # (past the waits on barriers that nothing the arrivers signal can reach: a tensor-memory
        # store's race runs on through the MMA warp's wait for its next K/V stage)
        past = _unordered_waits(k, barriers, b, waits) if tstored else set()
        read = next((x for x in _after(k, i, p, any_wait=True, past=past) if reads(x)), None)
        if read is None:
            continue
        done.add(bn)
        r = stmts[read]
        what = "the stage its copies fill" if smem and _READS_SMEM.match(r.opcode) else \
            "the accumulator its tcgen05.commit publishes" if tmem and _READS_TMEM.match(r.opcode) else \
            "tensor memory its arrivers write with tcgen05.st before they arrive (the same tensor-memory " \
            "address, loaded from one shared slot)" if tstored and r.opcode.startswith("tcgen05") else \
            "shared memory its arrivers store before they arrive (the addresses meet)"
        feeders = sorted({f"{a.kind} by {a.site.role} at line {a.site.line}" for a in b.arrivers})[:3]
        stray_slot = bool(set(w.slots) & set(b.uninitialized))
        out.append(Flag(10, FLAG_NAMES[10], f"{w.site.role} waits on {b.name} for parity 1 on its first trip "
                        f"(line {w.site.line}, parity {w.parity}): a fresh barrier is in phase 0, so the wait "
                        f"passes at once, and it then reads {what} ({r.opcode}, line {r.line}) before any "
                        f"arrival ({'; '.join(feeders)}) has completed the phase: "
                        + ("a race with that write. " if what.startswith("tensor memory") else "a race on unwritten data. ")
                        + "The role that consumes a barrier's phase waits for parity 0 first (phase starts at 0); "
                        "only the role that fills a stage first waits with phase ^ 1"
                        + (" (the wait may address a barrier no init covers, flag 13: its phase is undefined)"
                           if stray_slot else ""),
                        Basis.EVIDENCE if k.threads(read) is not None and not stray_slot else Basis.ASSUMPTION,
                        w.site.line))
    return out


_BULK_STORE = re.compile(r"^cp\.(reduce\.)?async\.bulk(\.tensor\.\w+)?\.global\.shared")


def _back_to_wait(k: _Kernel, i: int, p, stop: tuple[str, ...] = ()):
    """The statements threads p run before statement i in this trip of its work loop,
    latest first, back to their last mbarrier wait (or an opcode that starts with one of stop).
    Outside a loop (a fully unrolled store warp), those of the blocks every path to i runs."""
    body = k.work_loop(i)
    dom = None if body else k.dominators()[k.block_of[i]]
    for x in range(i - 1, -1, -1):
        if dom is not None:
            if k.block_of[x] not in dom:
                continue
        elif k.block_of[x] not in body:
            return
        q = k.threads(x)
        if q is not None and not q & p:
            continue
        if k.stmts[x].opcode.startswith(_WAIT + stop):
            return
        yield x


def _store_released_early(k: _Kernel, b: Barrier) -> list[Flag]:
    """Flag 14 on a TMA store's stage: a role issues a bulk store from shared memory, then
    releases b, whose waiters write shared memory with st.shared after their wait (the stage
    ring of a store warp), and no `cp.async.bulk.wait_group.read` lies between the store and
    the release on any path: the bulk store may still be reading the stage its waiters
    rewrite. The commit group only starts the store; `wait_group.read N` is what says its
    reads of shared memory are done."""
    stmts = k.stmts
    writes = any(stmts[x].opcode.startswith(_SMEM_STORE) for w in b.waiters
                 if (i := k.stmt_of(w.site)) is not None and (p := k.threads(i)) is not None
                 for x in _after(k, i, p))
    if not writes:
        return []
    for a in b.arrivers:
        if a.kind != "arrive":
            continue
        i = k.stmt_of(a.site)
        p = k.threads(i) if i is not None else None
        if i is None or p is None:
            continue
        for x in _back_to_wait(k, i, p, ("cp.async.bulk.wait_group",)):
            st = stmts[x]
            if _BULK_STORE.match(st.opcode):
                return [Flag(14, FLAG_NAMES[14], f"{a.site.role} issues a bulk store from shared memory "
                             f"({st.opcode}, line {st.line}) and then releases {b.name} ({a.kind}, {_where(a.site)}) "
                             "with no cp.async.bulk.wait_group.read between: its waiters rewrite shared memory "
                             "(st.shared) while the store may still be reading the stage (a race, no hang). Wait "
                             "for the store's reads (cp.async.bulk.wait_group.read N, N the groups still allowed "
                             "in flight) before releasing its stage", Basis.EVIDENCE, a.site.line)]
    return []


_NAMED_BAR = ("bar.sync", "barrier.sync", "barrier.cta.sync", "bar.red", "barrier.red", "barrier.cta.red")


def _feasible_succ(k: _Kernel, bb: int, p: frozenset) -> tuple[list[int], bool]:
    """The blocks threads p may go to from block bb: a guarded branch's side none of them
    takes is left out (a branch around an elected thread's wait); and whether that was
    decided (False: a guard not derived, both sides kept)."""
    end = k.starts[bb + 1] - 1 if bb + 1 < len(k.starts) else len(k.stmts) - 1
    br = k.stmts[end]
    if not br.opcode.startswith("bra") or not br.guard or len(k.succ[bb]) != 2:
        return list(k.succ[bb]), True
    g = k.value(br.guard)
    took = {_holds(g(t), br.negated) for t in p} if g is not None else {None}
    if None in took:
        return list(k.succ[bb]), False
    fall = bb + 1
    return [x for x in k.succ[bb] if (x == fall and took != {True}) or (x != fall and took != {False})], True


def _flag_store_source_rewritten(k: _Kernel, flagged: list[Flag]) -> list[Flag]:
    """Flag 14 through a named barrier: a thread issues a bulk store from a shared buffer,
    reaches a named barrier (bar.sync) with no cp.async.bulk.wait_group(.read) on its way,
    and after that barrier threads write the same buffer with st.shared (the next tile's
    results into the staging buffer of a cooperative epilogue). The barrier orders the
    threads, not the bulk store's reads: the writes may land while the store still reads
    the buffer. The buffer is the same where a write's address is the store's source
    symbol plus the source's offset as its displacement (base + each thread's offset)."""
    stmts = k.stmts
    seen_lines = {f.line for f in flagged if f.code == 14}
    ends = [k.starts[b + 1] if b + 1 < len(k.starts) else len(stmts) for b in range(len(k.starts))]
    for i, st in enumerate(stmts):
        if not _BULK_STORE.match(st.opcode) or len(st.operands) < 2 or not (p := k.threads(i)):
            continue
        src = k.vals(st.operands[1])
        if src is None or src[0] is None or not src[1]:
            # a buffer per warpgroup: its base from the storing thread's warp
            src = k.thread_vals(st.operands[1], p)
        if src is None or src[0] is None or not src[1]:
            continue
        # the named barriers its thread reaches with the store's reads not waited (the first and
        # those after it: Gluon rewrites a double buffer two barriers later), and whether every
        # branch on the way was decided for it
        bars: list[tuple[int, bool]] = []
        todo, seen = [(i + 1, k.block_of[i], True)], set()
        while todo:
            j, bb, sure = todo.pop()
            stop = False
            for x in range(j, ends[bb]):
                q = k.threads(x)
                if q is not None and not q & p:
                    continue
                op = stmts[x].opcode
                if op.startswith("cp.async.bulk.wait_group") or op.startswith(("ret", "exit")):
                    stop = True
                    break
                if op.startswith(_NAMED_BAR):  # and on: the later barriers too, until a wait
                    bars.append((x, sure))
            if not stop:
                nexts, decided = _feasible_succ(k, bb, p)
                for nb in nexts:
                    if nb not in seen:
                        seen.add(nb)
                        todo.append((k.starts[nb], nb, sure and decided))
        # a branch not decided for the thread matters only where a path to a barrier waits for
        # the store (not the wait_group 0 before the kernel's exit)
        def to_bar(x: int) -> list[int]:  # the statements from x on every path, up to a named barrier
            out: list[int] = []
            todo, seen = ([(x, k.block_of[x])] if x < len(stmts) else []), set()
            while todo:
                j, bb = todo.pop()
                for y in range(j, ends[bb]):
                    out.append(y)
                    if stmts[y].opcode.startswith(_NAMED_BAR):
                        break
                else:
                    todo += [(k.starts[nb], nb) for nb in k.succ[bb] if nb not in seen and not seen.add(nb)]
            return out

        waited = any(stmts[x].opcode.startswith("cp.async.bulk.wait_group") and
                     any(stmts[y].opcode.startswith(_NAMED_BAR) for y in to_bar(x + 1)) for x in to_bar(i + 1))
        for bar, sure in bars:
            sure = sure or not waited
            for x in _after(k, bar, None, stop_at_wait=False):
                w = stmts[x]
                if w.opcode.startswith(_NAMED_BAR):
                    break
                if not w.opcode.startswith(_SMEM_STORE) or not w.operands:
                    continue
                m = re.fullmatch(r"\[?\s*(%\w+)\s*(?:\+\s*(-?\d+))?\s*\]?", w.operands[0].strip())
                v = k.vals(m.group(1)) if m else None
                if v is None or v[0] != src[0]:
                    continue
                disp = int(m.group(2) or 0)  # type: ignore[union-attr]
                if not ({o + disp for o in v[1]} & src[1] if v[1] is not None else disp in src[1]):
                    continue
                if w.line in seen_lines or bar in seen_lines:
                    return []
                b = stmts[bar]
                return [Flag(14, FLAG_NAMES[14], f"a bulk store reads {src[0]}+{min(src[1])} ({st.opcode}, line "
                             f"{st.line}) and its thread reaches {b.opcode} {', '.join(b.operands)} (line {b.line}) "
                             "with no cp.async.bulk.wait_group.read between; after that barrier threads write the "
                             f"same buffer ({w.opcode}, line {w.line}): the barrier orders the threads, not the "
                             "store's reads of shared memory, so the writes may change what the store still reads "
                             "(a race, no hang). Wait for the store's reads (cp.async.bulk.wait_group.read 0) "
                             "before the barrier that lets the buffer be written again"
                             + ("" if sure else " (a branch on the way is not decided for the storing thread: it "
                                "may take a path through a wait_group this sheet did not follow)"),
                             Basis.EVIDENCE if sure else Basis.ASSUMPTION, b.line)]
    return []


def _roles_before(barriers: tuple[Barrier, ...], waits_of: dict[str, set[int]], me: str | None = None
                  ) -> dict[int, set[str]]:
    """For each barrier (by position), the roles whose work may precede the completion of
    its phases: its arrivers, and, to a fixed point, the roles that complete the barriers
    those arrivers wait on (`waits_of`: role -> the barriers it waits on). Arrivals by role
    `me` are left out of the chains."""
    before = {n: {a.site.role for a in x.arrivers if a.site.role != me} for n, x in enumerate(barriers)}
    changed = True
    while changed:
        changed = False
        for n, x in enumerate(barriers):
            for a in x.arrivers:
                if a.site.role == me:
                    continue
                for m in waits_of.get(a.site.role, ()):
                    if not before[m] <= before[n]:
                        before[n] |= before[m]
                        changed = True
    return before


def _waits_unordered_with(k: _Kernel, barriers: tuple[Barrier, ...], roles: set[str], me: str) -> set[int]:
    """The statements of role `me`'s waits on barriers whose phases nothing `roles` do can
    complete: no arriver of theirs is one of `roles`, nor waits (at any depth) on a barrier
    one of them arrives on. `me`'s own arrivals are left out of the chains: what they
    complete it did before the wait, in its own order. Such a wait (an epilogue's wait for
    its store ring's next free slot) orders nothing against what `roles` do next (the MMA
    that overwrites a released accumulator)."""
    waits_of: dict[str, set[int]] = {}
    for n, x in enumerate(barriers):
        for w in x.waiters:
            waits_of.setdefault(w.site.role, set()).add(n)
    before = _roles_before(barriers, waits_of, me)
    return {j for n, x in enumerate(barriers) if not before[n] & roles
            for w in x.waiters if w.site.role == me and (j := k.stmt_of(w.site)) is not None}


def _tmem_released_early(k: _Kernel, b: Barrier, barriers: tuple[Barrier, ...] = ()) -> list[Flag]:
    """Flag 14 on tensor memory: a role releases b, whose waiters then issue tcgen05.mma, in a
    loop trip in which it read an accumulator (tcgen05.ld) before the release and reads the
    same one after it, before its next wait: the MMA may overwrite columns still to be read
    (an epilogue that releases acc_empty after its first slice). "The same one": both loads'
    addresses come from one shared slot (the accumulator's address kept there)."""
    stmts = k.stmts
    mma = _mma_slots(k, b)
    for a in b.arrivers:
        if a.kind != "arrive":
            continue
        i = k.stmt_of(a.site)
        p = k.threads(i) if i is not None else None
        if i is None or p is None or not k.work_loop(i):
            continue
        before = set()
        for x in _back_to_wait(k, i, p):
            st = stmts[x]
            if st.opcode.startswith("tcgen05.ld") and st.operands:
                before |= _tmem_slots(k, _tmem_operand(st))
        if not before and not mma:
            continue
        # waits the MMA's progress cannot complete (the store ring's) order nothing against it
        past = _waits_unordered_with(k, barriers, {w.site.role for w in b.waiters}, a.site.role)
        walls = [x for x in _after(k, i, p, stop_at_wait=False, trip=True)
                 if stmts[x].opcode.startswith(_WAIT) and x not in past]
        for x in _after(k, i, p, trip=True, past=past):
            if any(_forward(k, w, x) for w in walls):
                continue
            st = stmts[x]
            if not st.opcode.startswith("tcgen05.ld") or not st.operands:
                continue
            slots = _tmem_slots(k, _tmem_operand(st))
            if before and slots & before:
                how = "again after it (tcgen05.ld, line {}; it read it before the release, the address from the " \
                      "same shared slot)".format(st.line)
            elif not before and slots & mma and _same_index(k, _mbar_operand(stmts[i]), _tmem_operand(st)):
                how = "only after it (tcgen05.ld, line {}, its first read of the trip: the address from the shared " \
                      "slot the MMA writes through, indexed as the barrier is)".format(st.line)
            else:
                continue
            return [Flag(14, FLAG_NAMES[14], f"{a.site.role} releases {b.name} ({a.kind}, {_where(a.site)}), "
                         f"whose waiters then issue tcgen05.mma into tensor memory, and reads the same accumulator {how} "
                         "with no wait between that the MMA must complete (a wait on its store ring orders nothing "
                         "against it): the MMA may overwrite columns still to be read (a race, no hang). "
                         "Release the accumulator after its last tcgen05.ld and tcgen05.wait::ld",
                         Basis.EVIDENCE, a.site.line)]
    return []


def _mma_slots(k: _Kernel, b: Barrier) -> set[tuple[str | None, int]]:
    """The shared slots of the tensor-memory addresses the waiters of b write with
    tcgen05.mma (anywhere in their threads' code: an MMA warp waits acc_empty, then its
    K loop's stages)."""
    threads = [p for w in b.waiters if (i := k.stmt_of(w.site)) is not None and (p := k.threads(i)) is not None]
    return {slot for st in k.stmts if st.opcode.startswith("tcgen05.mma") and st.operands
            and (q := k.threads(k.index[id(st)])) is not None and any(q & p for p in threads)
            for slot in _tmem_slots(k, _tmem_operand(st))}


def _mbar_operand(s: Stmt) -> str:
    """The register or symbol of an mbarrier instruction's address (`[%r65]`, `[%r5+8]`)."""
    ops = [o for o in s.operands if o.strip().startswith("[")]
    return ops[0].strip("[] ").split("+")[0].strip() if ops else ""


def _same_index(k: _Kernel, bar: str, tmem: str) -> bool:
    """The barrier address and the tensor-memory address are indexed by the same registers:
    every register the barrier's linear form varies with (acc_empty[b]: b) is one the
    tensor-memory address varies with too (acc[b]). A release of the previous buffer
    (acc_empty[(t - 1) & 1]) before a read of this one varies with another register."""
    fb = k._linear(bar, 0) if bar else None
    ft = k._linear(tmem, 0) if tmem else None
    if fb is None or ft is None:
        return False
    vb = {r for r, c in fb[1].items() if c}
    vt = {r for r, c in ft[1].items() if c}
    return vb <= vt


_TMEM_WIDTH = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}


def _tmem_published_early(k: _Kernel, b: Barrier) -> list[Flag]:
    """Flag 14, the writer's side: a role arrives on b and only then writes tensor memory
    (tcgen05.st, before its next wait) at columns that b's waiters read (tcgen05.mma's A
    operand in tensor memory, tcgen05.ld, after their wait on b and before their next wait):
    attention's softmax publishing P before storing it. The waiter's MMA may read P before it is written (a race, no hang). Columns are
    compared as a shared slot (the tensor-memory address kept there, through the copies the
    default partition makes for its workers) plus a constant; the write's width is its
    shape times its repeat; lanes (the address's high half) are not compared. Where the
    write is indexed (a buffer b), the barrier must be indexed by the same register."""
    stmts = k.stmts
    readers = []
    # what the waiters read after their wait on b, up to their next wait
    after = sorted({x for w in b.waiters if (j := k.stmt_of(w.site)) is not None and (q := k.threads(j)) is not None
                    for x in _after(k, j, q)})
    for x in after:
        st = stmts[x]
        o = st.opcode
        if not o.startswith(("tcgen05.mma", "tcgen05.ld")) or not st.operands:
            continue
        ops = [st.operands[1]] if o.startswith("tcgen05.mma") and len(st.operands) > 1 and \
            st.operands[1].strip().startswith("[") else [st.operands[-1]] if o.startswith("tcgen05.ld") else []
        readers += [(x, c) for op in ops if (c := _tmem_cols(k, op.strip("[] "))) is not None]
    if not readers:
        return []
    for a in b.arrivers:
        if a.kind != "arrive":
            continue
        i = k.stmt_of(a.site)
        p = k.threads(i) if i is not None else None
        if i is None or p is None or not k.work_loop(i):
            continue
        walls = [x for x in _after(k, i, p, stop_at_wait=False, trip=True) if stmts[x].opcode.startswith(_WAIT)]
        for x in _after(k, i, p, trip=True):
            st = stmts[x]
            if not st.opcode.startswith("tcgen05.st") or not st.operands or any(_forward(k, w, x) for w in walls):
                continue
            m = re.search(r"\.(\d+x\d+b(?:x2)?)\.x(\d+)", st.opcode)
            w = _tmem_cols(k, _tmem_operand(st))
            if m is None or w is None or m.group(1) not in _TMEM_WIDTH:
                continue
            slot, lo, leaves = w
            if leaves and not _same_index(k, _mbar_operand(stmts[i]), _tmem_operand(st)):
                continue
            hi = lo + _TMEM_WIDTH[m.group(1)] * int(m.group(2))
            hit = next((r for r, (s2, c2, _) in readers if s2 == slot and lo <= c2 < hi), None)
            if hit is None:
                continue
            r = stmts[hit]
            return [Flag(14, FLAG_NAMES[14], f"{a.site.role} arrives on {b.name} ({_where(a.site)}) and only then "
                         f"writes tensor memory ({st.opcode}, line {st.line}, columns {lo}-{hi - 1} from the address "
                         f"kept at {_fmt_slot(slot)}) that its waiters read ({r.opcode}, line {r.line}): the waiter "
                         "may read the columns before they are written (a race, no hang). Write, then "
                         "tcgen05.wait::st, then arrive", Basis.EVIDENCE, a.site.line)]
    return []


def _fmt_slot(slot: tuple[str | None, int]) -> str:
    return f"{slot[0]}+{slot[1]}" if slot[1] else str(slot[0])


def _tmem_cols(k: _Kernel, op: str) -> tuple[tuple[str | None, int], int, frozenset] | None:
    """A tensor-memory address as (the shared slot its base is loaded from, the constant
    column offset from that base, the other registers its column varies with): its linear
    form, with a slot that holds the base plus a constant (`st.shared [S], base + 128`, the
    address Gluon's default partition hands its workers) followed to that base, and terms
    that only set lanes (the address's high half: `warp & 3` shifted by 21) left out. None
    where no single slot is its base."""
    f = k._linear(op, 0) if op else None
    if f is None or f[0] is not None:
        return None
    slot = None
    col = f[2]
    leaves = set()
    for r, c in f[1].items():
        if not c:
            continue
        src = _slot_source(k, r)
        if src is not None and c == 1:
            if slot is not None:
                return None
            slot, col = src[0], col + src[1]
            continue
        v = k.vals(r)
        if v is not None and v[0] is None and v[1] and all((x * c) % 65536 == 0 for x in v[1]):
            continue  # lanes only
        ds = k.defs.get(r, [])
        if len(ds) == 1 and ds[0].opcode.startswith("and") and len(ds[0].operands) == 3 and \
                (m := _const(k, ds[0].operands[2])) is not None and (m * c) % 65536 == 0:
            continue  # a mask of high bits: lanes only
        leaves.add(r)
    return None if slot is None else (slot, col, frozenset(leaves))


def _slot_source(k: _Kernel, r: str) -> tuple[tuple[str | None, int], int] | None:
    """(base slot, offset) when register r is loaded from a shared slot: the slot itself,
    or, where the slot's only store wrote another slot's value plus a constant, that slot
    and the constant (followed through `_slot_links`)."""
    slot = _loaded_slot(k, r)
    if slot is None:
        return None
    off, seen = 0, {slot}
    while (link := _slot_links(k).get(slot)) is not None and link[0] not in seen:
        slot, off = link[0], off + link[1]
        seen.add(slot)
    return slot, off


def _loaded_slot(k: _Kernel, r: str) -> tuple[str | None, int] | None:
    """The shared slot register r is loaded from (its one definition an ld.shared of one
    decided word), or None."""
    ds = k.defs.get(r, [])
    if len(ds) != 1 or not ds[0].opcode.startswith("ld.shared") or not ds[0].operands:
        return None
    return _one_word(k, ds[0].operands[-1])


def _one_word(k: _Kernel, op: str) -> tuple[str | None, int] | None:
    v = k.vals(op)
    return (v[0], next(iter(v[1]))) if v is not None and v[1] is not None and len(v[1]) == 1 else None


def _tmem_operand(s: Stmt) -> str:
    """The tensor-memory address a tcgen05 instruction names: the destination of an MMA or a
    store (`[%r + 0]` first), the source of a load (its last operand)."""
    ops = [o for o in s.operands if o.strip().startswith("[")]
    if not ops:
        return ""
    return (ops[-1] if s.opcode.startswith("tcgen05.ld") else ops[0]).strip("[] ").split("+")[0].strip()


def _tmem_slots(k: _Kernel, op: str, depth: int = 0) -> set[tuple[str | None, int]]:
    """The shared slots (symbol, offset) a tensor-memory address is loaded from, followed back
    through mov / add / or / and (Gluon keeps each tensor-memory buffer's address in a shared
    slot: O's, S's; a lane's row is added to it). Empty when none is found."""
    op = op.strip()
    ds = k.defs.get(op)
    if depth > 12 or not ds or len(ds) != 1:
        return set()
    d = ds[0]
    if d.opcode.startswith("ld.shared") and d.operands:
        slot = _one_word(k, d.operands[-1])
        return set() if slot is None else {_copied_from(k, slot)}
    if d.opcode.split(".")[0] in ("mov", "add", "or", "and", "cvt") and len(d.operands) >= 2:
        out: set[tuple[str | None, int]] = set()
        for o in d.operands[1:]:
            if o.strip().startswith("%"):
                out |= _tmem_slots(k, o, depth + 1)
        return out
    return set()


def _copied_from(k: _Kernel, slot: tuple[str | None, int]) -> tuple[str | None, int]:
    """The slot that `slot` copies (its only store writes what a ld.shared read from another
    slot: Gluon's default partition keeps the tensor-memory base at global_smem+0 and copies
    it to another word for its workers), followed through copies without an offset; a slot
    stored more than once is its own."""
    seen = {slot}
    while (link := _slot_links(k).get(slot)) is not None and link[1] == 0 and link[0] not in seen:
        slot = link[0]
        seen.add(slot)
    return slot


def _slot_links(k: _Kernel) -> dict[tuple[str | None, int], tuple[tuple[str | None, int], int]]:
    """S -> (T, c) for each shared slot S whose only store writes the value loaded from slot
    T plus a constant c (a copy where c is 0; the address of a buffer past the base, `base +
    128`, the one Gluon's default partition hands its workers, otherwise). Read once a kernel."""
    if k.slot_copies is not None:
        return k.slot_copies
    stores: dict[tuple[str | None, int], list[Stmt]] = {}
    for st in k.stmts:
        if st.opcode.startswith("st.shared") and len(st.operands) == 2 and (slot := _one_word(k, st.operands[0])):
            stores.setdefault(slot, []).append(st)
    links: dict[tuple[str | None, int], tuple[tuple[str | None, int], int]] = {}
    for slot, sts in stores.items():
        f = k._linear(sts[0].operands[1].strip(), 0) if len(sts) == 1 else None
        if f is None or f[0] is not None:
            continue
        leaves = [(x, c) for x, c in f[1].items() if c]
        if len(leaves) == 1 and leaves[0][1] == 1 and (src := _loaded_slot(k, leaves[0][0])) is not None \
                and src != slot:
            links[slot] = (src, f[2])
    k.slot_copies = links
    return links


def _tmem_stores(k: _Kernel, b: Barrier) -> set[tuple[str | None, int]]:
    """The shared slots of the tensor-memory addresses the plain arrivers of `b` write with
    tcgen05.st before they arrive: each arrive's own threads, back from it along every path
    of the control flow (a loop's body may be laid out after its head) to their wait before it."""
    out: set[tuple[str | None, int]] = set()
    ends = [k.starts[x + 1] if x + 1 < len(k.starts) else len(k.stmts) for x in range(len(k.starts))]
    preds = k.preds()
    for a in b.arrivers:
        if a.kind != "arrive":
            continue
        i = k.stmt_of(a.site)
        if i is None:
            continue
        p = k.threads(i)
        seen: set[int] = set()
        todo = [(i - 1, k.block_of[i])]
        while todo:
            x, bb = todo.pop()
            stop = False
            while x >= k.starts[bb]:
                st = k.stmts[x]
                q = k.threads(x)
                if q is None or p is None or q & p:
                    if st.opcode.startswith(_WAIT):
                        stop = True
                        break
                    if st.opcode.startswith("tcgen05.st") and st.operands:
                        out |= _tmem_slots(k, _tmem_operand(st))
                x -= 1
            if stop:
                continue
            for pb in preds[bb]:
                if pb not in seen:
                    seen.add(pb)
                    todo.append((ends[pb] - 1, pb))
    return out


def _unordered_waits(k: _Kernel, barriers: tuple[Barrier, ...], b: Barrier, waits: list) -> set[int]:
    """The statements of waits on barriers whose first phase nothing the arrivers of `b` do can
    precede: no arriver of theirs is one of b's roles, nor waits, on its first trip, for a phase
    (parity 0; a wait for parity 1 passes on the fresh barrier and orders nothing) of a
    barrier that (at any depth) one of b's roles arrives on. Such a wait orders nothing
    against b's arrivers' first-trip work. `waits`: flag 7's first trips."""
    roles = {a.site.role for a in b.arrivers}
    # the roles whose work may precede the first phase of each barrier, to a fixed point; a
    # first-trip parity not decided counts as a wait that blocks
    free = {(bn, i) for bn, i, _, parity, _ in waits if parity == 1}
    waits_of: dict[str, set[int]] = {}
    for n, x in enumerate(barriers):
        for w in x.waiters:
            if (n, k.stmt_of(w.site)) not in free:
                waits_of.setdefault(w.site.role, set()).add(n)
    before = _roles_before(barriers, waits_of)
    out: set[int] = set()
    for n, x in enumerate(barriers):
        if x is b or before[n] & roles:
            continue
        for w in x.waiters:
            j = k.stmt_of(w.site)
            if j is not None:
                out.add(j)
    return out


def _stage_stores(k: _Kernel, b: Barrier) -> list[tuple[str | None, frozenset]]:
    """(symbol, addresses) of what the plain arrivers of `b` store to shared memory before
    they arrive: each arrive's own threads, back from it to their wait before it (or the
    start of the arrive's loop), st.shared only. Empty when a store's addresses are not
    decided (`_Kernel.thread_vals`): then nothing is claimed."""
    out: list[tuple[str | None, frozenset]] = []
    for a in b.arrivers:
        if a.kind != "arrive":
            continue
        i = k.stmt_of(a.site)
        p = k.threads(i) if i is not None else None
        if i is None or p is None:
            continue
        for x in range(i - 1, -1, -1):
            s = k.stmts[x]
            if a.loop and s.line < a.loop:
                break
            q = k.threads(x)
            if q is not None and not (q & p):
                continue
            if s.opcode.startswith(_WAIT):
                break
            if s.opcode.startswith(_SMEM_STORE) and s.operands:
                v = k.thread_vals(s.operands[0], (q or p) & p)
                if v is None or v[1] is None:
                    return []
                out.append(v)
    return out


def _param_of(k: _Kernel, op: str, depth: int = 0) -> int | None:
    """N when register `op` holds the address of the kernel's parameter N (`mov.b64 %rd,
    kernel_param_N`, `cvta.param`): a tensor map passed by value."""
    op = op.strip()
    m = re.fullmatch(r"[\w$.]+_param_(\d+)", op)
    if m:
        return int(m.group(1))
    ds = k.defs.get(op)
    if depth > 8 or not ds or len(ds) != 1 or ds[0].opcode.split(".")[0] not in ("mov", "cvta") or \
            len(ds[0].operands) != 2:
        return None
    return _param_of(k, ds[0].operands[1], depth + 1)


def _tensor_map_param(k: _Kernel, s: Stmt) -> int | None:
    """The kernel parameter holding the tensor map a bulk tensor copy names: `[map, {coords}]`,
    the source of a load into shared memory, the destination of a store from it."""
    if not s.opcode.startswith("cp.async.bulk.tensor") or len(s.operands) < 2:
        return None
    operand = s.operands[0 if ".global.shared" in s.opcode else 1]
    return _param_of(k, operand.strip("[]").split(",")[0])


# bytes of an element by tensormap.replace's .elemtype code (the PTX encoding, which Triton's
# driver maps to CUDA's CUtensorMapDataType: 8 .f32.ftz, 9 .f64, 10 .bf16); packed sub-byte
# types (13 on) are not read
_ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 4, 9: 8, 10: 2, 11: 4, 12: 4}


def _map_root(k: _Kernel, op: str) -> str:
    """The register a tensor-map address is copied from (through mov and cvta), `[r + 0]` read as r."""
    r = re.sub(r"\s*\+\s*0$", "", op.strip().strip("[]").strip())
    for _ in range(8):
        ds = k.defs.get(r)
        if not ds or len(ds) != 1 or ds[0].opcode.split(".")[0] not in ("mov", "cvta") or len(ds[0].operands) != 2:
            break
        r = ds[0].operands[1].strip()
    return r


def _device_boxes(k: _Kernel, stmts: list[Stmt]) -> dict[str, tuple[int, str] | None]:
    """A tensor map built on the device (Triton's tl.make_tensor_descriptor): its fields are
    written into a shared-memory staging copy with tensormap.replace, then published to
    global memory by tensormap.cp_fenceproxy. Returns the global map's register (`_map_root`)
    -> the bytes of its box (the box dims up to its rank times the element's bytes) and how
    the sheet shows it; None where a field is not a constant or two publications of one
    address disagree."""
    staged: dict[str, dict[str, object]] = {}
    out: dict[str, tuple[int, str] | None] = {}
    for s in stmts:
        o, a = s.opcode, s.operands
        if o.startswith("tensormap.replace.tile.") and len(a) >= 2:
            f = staged.setdefault(_map_root(k, a[0]), {"dims": {}})
            field = o.split(".")[3]
            v = k.value(a[-1])
            val = v(0) if v else None
            if field == "box_dim" and len(a) == 3:
                i = k.value(a[1])
                f["dims"][i(0) if i else None] = val  # type: ignore[index]
            elif field in ("rank", "elemtype"):
                f[field] = val
        elif o.startswith("tensormap.cp_fenceproxy") and len(a) >= 2:
            f = staged.get(_map_root(k, a[1]), {"dims": {}})
            dims, rank, elem = f["dims"], f.get("rank"), _ELEM_BYTES.get(f.get("elemtype"))  # type: ignore[arg-type]
            box = None
            if isinstance(rank, int) and elem and all(isinstance(dims.get(i), int) for i in range(rank + 1)):  # type: ignore[union-attr]
                n = elem
                for i in range(rank + 1):
                    n *= dims[i]  # type: ignore[index]
                # box_dim 0 is the innermost: shown outermost first, as the block is written
                box = (n, f"a {'x'.join(str(dims[i]) for i in range(rank, -1, -1))} box of {elem}-byte "  # type: ignore[index]
                          f"elements, the tensor map published at line {s.line}")
            dst = _map_root(k, a[0])
            out[dst] = box if dst not in out or out[dst] == box else None
    return out


def _flag_tx_bytes(k: _Kernel, barriers: tuple[Barrier, ...], boxes: list[int] | None) -> list[Flag]:
    """Flag 8: per barrier and role, the bytes one phase expects (`expect_tx`) against the
    bytes its copies deliver: a plain bulk copy's size operand, a tensor copy's box from the
    compiler's metadata (`boxes`, the tensor maps in parameter order). Fewer bytes delivered
    than expected: the phase never completes (a hang); more: it completes before its data
    lands. A tensor map built on the device gives its box in the PTX (`_device_boxes`).
    Checked only where every site's threads are derived and every amount is known (or both
    sides are the same register); else said in the notes."""
    stmts = k.stmts
    maps = sorted({p for s in stmts if (p := _tensor_map_param(k, s)) is not None})
    # the metadata lists every descriptor argument, used or not: matched to the parameters
    # declared as tensor maps, in order (an unused one makes the used maps fewer)
    declared = k.e.tensor_map_params
    box_of = dict(zip(declared, boxes)) if boxes and len(boxes) == len(declared) and set(maps) <= set(declared) \
        else dict(zip(maps, boxes)) if boxes and len(boxes) == len(maps) else {}
    device = _device_boxes(k, stmts)
    out: list[Flag] = []
    unknown = 0
    for b in barriers:
        by_role: dict[str, tuple[list, list]] = {}
        for a in b.arrivers:
            if a.kind.removeprefix("remote ") in ("arrive.expect_tx", "expect_tx", "complete_tx"):
                by_role.setdefault(a.site.role, ([], []))[a.kind.endswith("complete_tx")].append(a)
        if by_role and not any(e for e, _ in by_role.values()) and b.inits and not any(
                "expect_tx" in a.kind for a in b.arrivers):
            # copies complete bytes on a barrier no expect_tx ever announces them to: each
            # phase completes on its arrivals alone, and the bytes land in the next one, whose
            # tx-count goes below zero (measured on the H200: -8192 pending after two copies
            # of 4096, fixtures/evidence/bulk_missing_tx)
            copies = [a for _, c in by_role.values() for a in c]
            lines = ", ".join(sorted({_where(a.site) for a in copies})[:6])
            out.append(Flag(8, FLAG_NAMES[8], f"{b.name}: copies complete their bytes on it ({lines}) but nothing "
                            "announces them (no mbarrier.expect_tx / arrive.expect_tx on this barrier): a phase "
                            "completes on its arrivals before the data lands, and the bytes then count against the "
                            "next phase, which never completes (deadlock); arrive with expect_tx of the copies' bytes",
                            Basis.EVIDENCE, copies[0].site.line))
            continue
        for role, (expects, copies) in by_role.items():
            if not expects or not copies:
                continue
            amounts: list[list] = [[], []]
            shown: list[str] = []  # the boxes of device-built maps, as the flag names them
            for side, sites in enumerate((expects, copies)):
                for a in sites:
                    i = k.stmt_of(a.site)
                    if i is None or k.threads(i) is None or not isinstance(a.site.threads, int):
                        amounts[side].append(None)
                        continue
                    s = stmts[i]
                    if ".multicast" in s.opcode or a.kind.startswith("remote "):
                        # bytes land in, and expectations go to, other CTAs too: not summed here
                        amounts[side].append(None)
                        continue
                    if side == 1 and ".tensor" in s.opcode:
                        # tile::gather4 (scatter4) moves 4 rows of the box's width, each row
                        # named by its own coordinate: 4 boxes of one row's bytes a copy
                        rows = 4 if re.search(r"\.tile::(gather4|scatter4)", s.opcode) else 1
                        p = _tensor_map_param(k, s)
                        if p is not None:
                            bx = box_of.get(p)
                            amounts[side].append(bx * rows if bx is not None else None)
                            continue
                        dev = device.get(_map_root(k, s.operands[1].strip("[]").split(",")[0]))
                        amounts[side].append(dev[0] * rows if dev else None)
                        if dev:
                            shown.append(f"line {s.line}: one copy of {dev[1]}")
                        continue
                    at_op = 1 if a.kind.removeprefix("remote ") == "expect_tx" else 2  # [addr], txCount
                    op = s.operands[at_op] if len(s.operands) > at_op else None
                    f = k.value(op) if op else None
                    v = f(0) if f else None
                    amounts[side].append(v if v is not None else ("reg", op.strip()) if op else None)
            # a copy in a loop the expect_tx is not in delivers once a trip (CuTe's non-tensor bulk
            # copies of one stage, 4 of 2048 bytes in a counted loop): its trip count where the
            # PTX decides it, else its bytes are not known
            at = [k.stmt_of(e.site) for e in expects]
            for n, a in enumerate(copies):
                i = k.stmt_of(a.site)
                loop = k.loop_blocks(i) if i is not None else set()
                if not loop or not at or any(x is None or k.block_of[x] in loop for x in at):
                    continue
                trips = k.trip_count(i)  # type: ignore[arg-type]
                x = amounts[1][n]
                amounts[1][n] = x * trips if isinstance(x, int) and trips else None
            # Each thread that runs a site issues its own copy or expect_tx: Triton's sm_90 loader
            # partition elects one lane in each of two warps, each copying its half of a block
            # (fixtures/src/triton_tma: right on the H200). A site's thread count can be too high
            # where an elected lane's predicate is combined with one the sheet does not decide,
            # so a phase is flagged only when the bytes differ under both readings: per thread
            # and per site.
            threads = [[a.site.threads for a in expects], [a.site.threads for a in copies]]
            if any(t != 1 for side in threads for t in side):
                if any(not isinstance(x, int) for x in amounts[0] + amounts[1]):
                    unknown += 1
                    continue
                per_thread = [sum(x * t for x, t in zip(amounts[side], threads[side])) for side in (0, 1)]
                if per_thread[0] == per_thread[1]:
                    continue
            if any(x is None for x in amounts[0] + amounts[1]):
                unknown += 1
                continue
            if all(isinstance(x, int) for x in amounts[0] + amounts[1]):
                want, got = sum(amounts[0]), sum(amounts[1])
            elif sorted(map(str, amounts[0])) == sorted(map(str, amounts[1])):
                continue  # the same registers on both sides: equal by construction
            else:
                unknown += 1
                continue
            if want != got:
                lines = ", ".join(sorted({_where(a.site) for a in expects + copies})[:6])
                # a block wider than one box is copied as several: expecting a whole multiple of
                # what arrives says some of them are not issued
                split = f"; the expected bytes are {want // got} times what arrives: a block copied as {want // got} " \
                    "boxes with only one of them issued (a copy split, its other part missing)" \
                    if got and want > got and want % got == 0 and shown else ""
                out.append(Flag(8, FLAG_NAMES[8], f"{b.name}: {role} expects {want} bytes a phase (expect_tx) but its "
                                f"copies deliver {got} ({lines}"
                                + (f"; {'; '.join(dict.fromkeys(shown))}" if shown else "") + "): "
                                + ("the phase never completes (deadlock)" if got < want else
                                   "the phase completes before all its data has landed")
                                + split + f"; expect_tx {got}", Basis.EVIDENCE, expects[0].site.line))
    if unknown:
        k.notes.append(Item("handoff.tx", f"{unknown} barrier role(s) whose copied bytes are not known (a tensor "
                            "copy's box is in its tensor map, not in the PTX; Triton's .json beside the PTX gives "
                            "it): expect_tx not checked there", Basis.ASSUMPTION))
    return out


def _from_peers(b: Barrier) -> bool:
    """Whether another CTA of the cluster signals `b`: a remote arrive on it (mapa), or a
    multicast copy, which completes on the barrier at its offset in every CTA of its mask."""
    return any(a.kind.startswith("remote ") or ".multicast" in a.site.instruction for a in b.arrivers)


def _flag_cluster_init(k: _Kernel, stmts: list[Stmt], barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 9: a barrier that peer CTAs signal (a remote arrive through mapa, a multicast
    copy completing on it) with no cluster barrier between its init and the peers' first
    signal. A CTA barrier orders the init for this CTA's threads only: the peer runs the
    same code and can reach its remote arrive or multicast before this CTA has run its
    init. Each CTA runs the PTX read here, so the peer's signal is this kernel's remote
    operation; it is safe only past a cluster wait (`_cluster_waits`). Evidence when
    nothing else can hold the peer back: no wait dominates the operation that on its
    first trip needs a phase signalled from another CTA (such a chain might order it; then
    the flag is an assumption)."""
    if not k.n:
        return []
    dom = k.dominators()
    peer_fed = [b for b in barriers if _from_peers(b)]
    hits: list[tuple[Barrier, object, bool]] = []  # (barrier, its remote op, ordered through a peer)
    for b in peer_fed:
        inits = [i for s, _ in b.inits if (i := k.stmt_of(s)) is not None]
        if not inits:
            continue
        # blocks a thread can reach with no cluster barrier behind it that follows the inits
        free = k.reach(0, set.intersection(*(_cluster_waits(k, stmts, i) for i in inits)))
        for a in b.arrivers:
            if not (a.kind.startswith("remote ") or ".multicast" in a.site.instruction):
                continue
            if a.site.instruction.startswith("clusterlaunchcontrol") and (
                    k.e.cluster is None or k.e.cluster == (1, 1, 1)):
                # a CLC response multicast to `cluster::all` reaches peers only when the launch
                # has a cluster; the PTX declares none: no peer is seen to signal
                continue
            i = k.stmt_of(a.site)
            if i is None or k.block_of[i] not in free:
                continue
            p = k.threads(i)
            warps = {t // 32 for t in p} if p is not None else set()
            chained = False
            for o in peer_fed:
                for w in o.waiters:
                    j = k.stmt_of(w.site)
                    q = k.threads(j) if j is not None else None
                    if j is None or q is None or not warps & {t // 32 for t in q}:
                        continue
                    if k.block_of[j] in dom[k.block_of[i]] and (k.block_of[j] != k.block_of[i] or j < i) and \
                            (not w.parity or k.first_value(w.parity, at=j) != 1):
                        chained = True
            hits.append((b, a, chained))
    if not hits:
        return []
    hits.sort(key=lambda h: (h[2], h[1].site.line))  # type: ignore[attr-defined]
    b, a, chained = hits[0]
    init = min(s.line for s, _ in b.inits)
    cta = sorted(s.line for i, s in enumerate(stmts) if _is_cta_barrier(s, k, i) and s.line > init)
    between = f"only a CTA barrier (line {cta[0]}) follows it" if cta else "no cluster barrier follows it"
    def what(x) -> str:  # a multicast tcgen05.commit arrives; a multicast copy completes bytes
        if ".multicast" not in x.site.instruction:
            return x.kind + " on"
        return "multicast tcgen05.commit on" if x.kind == "tcgen05.commit" else "multicast copy completing on"

    ops = "; ".join(f"{what(x)} "
                    f"{y.name} by {x.site.role} at line {x.site.line}" for y, x, _ in hits[:3])  # type: ignore
    return [Flag(9, FLAG_NAMES[9], f"{b.name}: mbarrier.init (line {init}) is signalled by the other CTAs of the "
                 f"cluster, but {between} before their first signal ({ops}): a peer CTA runs this code too and can "
                 "arrive on, or complete bytes on, a barrier this CTA has not initialized yet"
                 + (" (unless a wait before it, on a barrier fed by a peer, holds it back)" if chained else "")
                 + ". After the inits: fence.mbarrier_init.release.cluster, then barrier.cluster.arrive.relaxed + "
                 "barrier.cluster.wait in every thread, before the first remote arrive or multicast",
                 Basis.ASSUMPTION if chained else Basis.EVIDENCE, init)]


_TMEM_USE = re.compile(r"^tcgen05\.(mma|ld|st|cp)")


def _flag_tmem_freed_early(k: _Kernel, stmts: list[Stmt], barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 11: tensor memory freed (tcgen05.dealloc) by one role while other roles use it
    (tcgen05.mma / ld / st / cp) with nothing on the dealloc's path ordering it after their
    uses: no mbarrier wait (before the dealloc, in its threads) on a barrier those roles
    arrive on after a use, and no CTA / named barrier that its threads pass before the
    dealloc and those roles reach (same id) after a use. TIRx's allocating warp freeing
    right after the alloc barrier (`bar.sync 0`, which every role meets before its first
    use) is the mistake; the usual teardown (a CTA barrier all roles reach at the end, or
    the epilogue freeing after its wait on the accumulator) is not. What the PTX does not
    decide (threads, a barrier id) is said in the notes, not flagged."""
    deallocs = [i for i, s in enumerate(stmts) if s.opcode.startswith("tcgen05.dealloc")]
    if not deallocs or not k.n:
        return []
    uses = [i for i, s in enumerate(stmts) if _TMEM_USE.match(s.opcode)]
    if not uses:
        return []
    preds = k.preds()
    reach_memo: dict[int, set[int]] = {}

    def reach(b: int) -> set[int]:
        if b not in reach_memo:
            reach_memo[b] = k.reach(b, set())
        return reach_memo[b]

    def after(i: int, j: int) -> bool:
        """Statement j can run after statement i in one thread (later in its block, or a block i reaches)."""
        bi, bj = k.block_of[i], k.block_of[j]
        return (bi == bj and j > i) or any(bj in reach(s) for s in k.succ[bi])

    bars = {i: o for i, s in enumerate(stmts) if (o := _bar_operands(k, s, i)) is not None and ".arrive" not in s.opcode}
    wait_bar: dict[int, Barrier] = {}
    for b in barriers:
        for w in b.waiters:
            j = k.stmt_of(w.site)
            if j is not None:
                wait_bar[j] = b
    out: list[Flag] = []
    undecided: list[str] = []
    for d in deallocs:
        pd = k.threads(d)
        if pd is None:
            undecided.append(f"line {stmts[d].line}: the threads that free it are not derived")
            continue
        wd = {t // 32 for t in pd}
        # the statements the freeing threads pass on some path to the dealloc
        pre = _ancestors(k.block_of[d], preds)
        before = [j for j in range(len(stmts)) if (k.block_of[j] in pre or (k.block_of[j] == k.block_of[d] and j < d))
                  and (q := k.threads(j)) is not None and q & pd]
        roles: dict[frozenset, list[int]] = {}
        for u in uses:
            q = k.threads(u)
            if q is None:
                undecided.append(f"line {stmts[u].line}: the threads of a tensor-memory use are not derived")
                continue
            wu = frozenset(t // 32 for t in q)
            if wu <= wd or not q:
                continue
            roles.setdefault(wu, []).append(u)
        early: list[str] = []
        for wu, us in sorted(roles.items(), key=lambda x: min(x[1])):
            def ordered(u: int) -> bool | None:
                verdict: bool | None = False
                for j in before:
                    if stmts[j].opcode.startswith(_WAIT) and j in wait_bar:
                        for a in wait_bar[j].arrivers:
                            x = k.stmt_of(a.site)
                            q = k.threads(x) if x is not None else None
                            if x is not None and q is not None and {t // 32 for t in q} & wu and (x == u or after(u, x)):
                                return True
                    elif j in bars:
                        bid = bars[j][0]
                        if bid is None:
                            verdict = None
                            continue
                        qj = k.threads(j)
                        if qj is not None and {t // 32 for t in qj} & wu and after(j, u):
                            continue  # the users pass this very barrier before the use: an earlier generation
                        for x, o in bars.items():
                            q = k.threads(x)
                            if o[0] == bid and q is not None and {t // 32 for t in q} & wu and after(u, x):
                                return True
                return verdict
            verdicts = [ordered(u) for u in us]
            if all(v is True for v in verdicts):
                continue
            if any(v is None for v in verdicts):
                undecided.append(f"line {stmts[d].line}: a barrier id on its path is not decided")
                continue
            u = next(u for u, v in zip(us, verdicts) if v is False)
            early.append(f"{_warps(wu)}: {stmts[u].opcode.split('.')[0]}.{stmts[u].opcode.split('.')[1]} at line(s) "
                         + ", ".join(str(stmts[x].line) for x in sorted(us)[:4]))
        # a wait on its path that a peer CTA arrives on (mapa): the uses may be ordered through
        # the peer (CUTLASS's 2-SM teardown: the epilogue releases the leader's accumulator, the
        # leader's MMA warp then arrives on this CTA's dealloc barrier), which one CTA's PTX
        # cannot show
        peer = any(stmts[j].opcode.startswith(_WAIT) and j in wait_bar and any(
            a.kind.startswith("remote ") for a in wait_bar[j].arrivers) for j in before)
        if early:
            out.append(Flag(11, FLAG_NAMES[11], f"tensor memory is freed (tcgen05.dealloc, line {stmts[d].line}, "
                            f"{_warps(frozenset(wd))}) while other roles still use it ({'; '.join(early)}), and "
                            "nothing on the dealloc's path waits for those uses (no mbarrier wait on a barrier they "
                            "arrive on after a use, no CTA / named barrier they reach after it): the columns can be "
                            "freed, and handed to another CTA, while still in use; free them after a barrier every "
                            "user reaches after its last use (bar.sync at teardown, or a wait on the accumulator's "
                            "release)" + ("; its path waits on a barrier a peer CTA arrives on, which may order the "
                                          "uses through that CTA: not decided from this CTA's code" if peer else ""),
                            Basis.ASSUMPTION if peer else Basis.EVIDENCE, stmts[d].line))
    if undecided:
        k.notes.append(Item("lifetime", "whether tensor memory is freed after its last use is not checked: "
                            + "; ".join(dict.fromkeys(undecided[:4])), Basis.ASSUMPTION))
    return out


def _flag_parity_never_flips(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 12: a wait inside a loop (not its own spin loop) that asks for the same parity
    on every trip, on a barrier that loops arrive on and that the loop does not initialize
    again. Its phases alternate 0, 1, 0, ...: once the phase of that parity has completed,
    the next visit's wait for it passes at once, before the phase it needs (a ring's
    second turn, a persistent kernel's second tile), so the role reads or overwrites a stage
    out of turn. A loop the PTX counts to at most the barriers of the ring never comes
    back to one: not flagged. Evidence: the parity is one constant (a literal, or a
    register every definition of which gives it: `xor ph, ph, 0`)."""
    out: list[Flag] = []
    for b in barriers:
        if not b.inits or not any(a.arrivals and a.loop for a in b.arrivers):
            continue
        init_at = {x for s, _ in b.inits if (x := k.stmt_of(s)) is not None} | \
            {x for s in b.invals if (x := k.stmt_of(s)) is not None}
        # each loop's waits on this barrier, by the warps that run them: a loop unrolled over
        # the ring waits on one barrier twice a trip, parity 1 then 0 (a flip by unrolling)
        by_loop: dict[tuple, list[tuple[int, object, int | None]]] = {}
        for w in b.waiters:
            i = k.stmt_of(w.site)
            if i is None:
                continue
            body = k.work_loop(i)
            t = k.threads(i)
            if not body or t is None:
                continue
            v = k.vals(w.parity) if w.parity is not None else None
            one = next(iter(v[1])) & 1 if v is not None and v[0] is None and v[1] is not None and len(v[1]) == 1 \
                else None
            f = k.value(w.parity) if one is None and w.parity and w.parity.startswith("%") else None
            if f is not None and v is not None and v[0] is None and v[1] and all(f(x) is not None for x in t) and \
                    k.defs.get(w.parity) and not any(k.block_of[k.index[id(d)]] in body for d in k.defs[w.parity]) \
                    and _every_trip(k, i, body):
                # set once before the loop, per thread (CuTe's `selp 1, 0, warpgroup == 0` of a
                # PipelineOrder state not carried round the loop): constant every trip, in each
                # thread; -1 stands for "its own constant"
                one = -1
            by_loop.setdefault((frozenset(body), frozenset(x // 32 for x in t)), []).append((i, w, one))
        for (body, _), ws in by_loop.items():
            if any(k.block_of[x] in body for x in init_at) or any(one is None for _, _, one in ws) or \
                    len({one for _, _, one in ws}) != 1:
                continue
            i, w, p = min(ws, key=lambda x: x[0])
            trips = k.trip_count(i, set(body))
            if trips is not None and trips <= max(len(set(b.slots)), 1):
                continue
            if p == -1:  # its own constant per thread: named by the values it may take
                p = "/".join(str(x & 1) for x in sorted(k.vals(w.parity)[1]))  # type: ignore[attr-defined,index]
                p = f"{p} (set before the loop, one value per thread)"
            out.append(Flag(12, FLAG_NAMES[12], f"{w.site.role} waits on {b.name} for parity {p} on every trip of "  # type: ignore[attr-defined]
                            f"its loop ({_where(w.site)}, parity {w.parity}: the same value every trip), while "  # type: ignore[attr-defined]
                            "its phases alternate 0, 1, 0, ...: once the barrier has completed a phase of parity "
                            f"{p}, each later wait for it passes at once, before the phase it needs (the ring's "
                            "second turn, the next tile), and the role reads or overwrites a stage out of turn. Flip "
                            "the phase each time the stage index wraps (phase ^= 1 when the index returns to 0)",
                            Basis.EVIDENCE, w.site.line))  # type: ignore[attr-defined]
            break
    return out


def _flag_unrolled_parity(k: _Kernel, barriers: tuple[Barrier, ...], flagged: list[Flag]) -> list[Flag]:
    """Flag 12, unrolled: the same threads wait on one barrier at two sites, the first
    dominating the second, both for one constant parity, and between them those threads
    arrive on a barrier that the barrier's own arrivers wait on (they released the stage,
    so the second wait is for the barrier's next phase, of the other parity). A fully
    unrolled store warp of TIRx waits c_full[0] at parity 0 on every visit: the second
    visit passes on the first phase, before the stage is filled again. Waits of one phase
    twice (no release between) are not flagged."""
    out: list[Flag] = []
    done = {f.line for f in flagged if f.code == 12}
    dom = k.dominators()

    def stmt_threads(site) -> tuple[int, frozenset] | None:  # type: ignore[no-untyped-def]
        i = k.stmt_of(site)
        t = k.threads(i) if i is not None else None
        return (i, t) if t else None

    waiters_of: dict[int, set] = {}  # id(barrier) -> the threads that wait on it
    for e in barriers:
        for w in e.waiters:
            if (it := stmt_threads(w.site)) is not None:
                waiters_of.setdefault(id(e), set()).update(it[1])
    releases = [(it, e, a) for e in barriers for a in e.arrivers if a.arrivals and (it := stmt_threads(a.site))]

    def named(e: Barrier, slots: tuple[int, ...]) -> str:  # one barrier of a group, where decided
        return f"{e.name.split('+', 1)[0]}+{slots[0]}" if len(set(e.slots)) > 1 and len(set(slots)) == 1 else e.name

    def before(x: int, y: int) -> bool:  # statement x runs before y on every path to y
        return x < y and k.block_of[x] in dom[k.block_of[y]]

    def passes(a: int, b: int, j: int, t: frozenset) -> bool:
        """Whether threads t, going from statement a to b, run j on every path they may take
        (a release by lane 0 that the other lanes branch around: `@!p bra; arrive`)."""
        ba, bb, bj = k.block_of[a], k.block_of[b], k.block_of[j]
        if not a < j < b:
            return False
        if bj == bb or bj in dom[bb] or bj == ba:
            return True
        todo, seen = list(_feasible_succ(k, ba, t)[0]), {ba, bj}
        while todo:  # b reached without passing j, on a path threads t may take: not every path
            x = todo.pop()
            if x in seen:
                continue
            if x == bb:
                return False
            seen.add(x)
            todo += _feasible_succ(k, x, t)[0]
        return True

    for b in barriers:
        if not b.inits or any(w.site.line in done for w in b.waiters):
            continue
        fillers = set().union(*(it[1] for a in b.arrivers if (it := stmt_threads(a.site))))
        inits = [x for s in (*(s for s, _ in b.inits), *b.invals) if (x := k.stmt_of(s)) is not None]
        sites: dict[tuple, list[tuple[int, object, int]]] = {}
        for w in b.waiters:
            it = stmt_threads(w.site)
            v = k.vals_at(w.parity, it[0]) if it and w.parity else None
            if it is None or v is None or v[0] is not None or v[1] is None or len(v[1]) != 1 or \
                    (len(set(b.slots)) > 1 and len(set(w.slots)) != 1):
                continue
            sites.setdefault((it[1], w.slots if len(set(b.slots)) > 1 else ()), []).append(
                (it[0], w, next(iter(v[1])) & 1))
        for (threads, _), ws in sites.items():
            ws.sort(key=lambda x: x[0])
            for (i1, w1, p1), (i2, w2, p2) in zip(ws, ws[1:]):
                if p1 != p2 or not before(i1, i2) or any(i1 < x < i2 for x in inits):
                    continue
                freed = next(((e, a) for (j, t), e, a in releases if e is not b and t <= threads and before(i1, j)
                              and passes(i1, i2, j, t) and waiters_of.get(id(e), set()) & fillers), None)
                if freed is None:
                    continue
                out.append(Flag(12, FLAG_NAMES[12], f"{w2.site.role} waits on {named(b, w2.slots)} for parity {p2} at "  # type: ignore[attr-defined]
                                f"{_where(w2.site)} as it did at {_where(w1.site)}, and between the two it "  # type: ignore[attr-defined]
                                f"releases {named(freed[0], freed[1].slots)} ({_where(freed[1].site)}), which "
                                f"{b.name}'s arrivers wait on before they arrive: "
                                "the second wait is for the barrier's next phase, of the other parity, but a "
                                f"wait for parity {p2} passes at once on the phase already completed, so the "
                                "role reads or overwrites the stage before it is filled again. Unrolled waits "
                                "alternate the parity each time the stage index wraps",
                                Basis.EVIDENCE, w2.site.line))  # type: ignore[attr-defined]
                break
            if out and out[-1].line in {w.site.line for w in b.waiters}:
                break  # one flag a barrier group
    return out


def _by_symbol(barriers: tuple[Barrier, ...]) -> dict[str, list[Barrier]]:
    """The barriers of each shared symbol (`global_smem+{0,8}` and `global_smem+16` are
    both global_smem's), in the sheet's order."""
    out: dict[str, list[Barrier]] = {}
    for b in barriers:
        out.setdefault(b.name.split("+", 1)[0].split(" ", 1)[0], []).append(b)
    return out


def _every_trip(k: _Kernel, i: int, body: set[int]) -> bool:
    """Whether statement i runs on every trip of its loop `body`: its block dominates every
    block that goes back to the loop's head (a wait some trips skip may be a first-visit-only
    wait)."""
    dom = k.dominators()
    latches = [x for x in body if any(y in body and y in dom[x] for y in k.succ[x])]
    return bool(latches) and all(k.block_of[i] in dom[x] for x in latches)


def _flag_not_initialized(barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 13: an mbarrier address the PTX decides, that roles wait or arrive on, and that
    no mbarrier.init initializes, while every init of its symbol is decided (so none of
    them could be this one): an operation on an uninitialized barrier, undefined. The
    usual cause is a stage index that runs one past the ring (a counter that wraps at
    STAGES + 1), landing on the word after the last barrier."""
    out: list[Flag] = []
    for sym, bs in _by_symbol(barriers).items():
        inited = sorted({o for b in bs if b.inits for o in b.slots})
        if not inited or sym.startswith("%") or any(not b.decided or "[" in b.name for b in bs) or any(
                b.inits and (not b.slots or any(c is None for _, c in b.inits)) for b in bs):
            continue
        bare = [b for b in bs if not b.inits and b.slots and (b.arrivers or b.waiters) and not any(
            "mapa" in st.address for st in [a.site for a in b.arrivers] + [w.site for w in b.waiters])]
        # an initialized group whose decided slots run past what its inits cover: the sites
        # that reach those slots (Wait.slots / Arrive.slots)
        past = [(b, [st for st, sl in [(a.site, a.slots) for a in b.arrivers] + [(w.site, w.slots) for w in b.waiters]
                     if set(sl) & set(b.uninitialized)]) for b in bs if b.inits and b.uninitialized]
        past = [(b, sites) for b, sites in past if sites and not any("mapa" in st.address for st in sites)]
        if not bare and not past:
            continue
        sites = [st for b in bare for st in [a.site for a in b.arrivers] + [w.site for w in b.waiters]] + [
            st for _, ss in past for st in ss]
        names = [b.name for b in bare] + [_local(sym) + (f"+{b.uninitialized[0]}" if len(b.uninitialized) == 1 else
                                                        f"+{{{','.join(map(str, b.uninitialized))}}}") for b, _ in past]
        inited = sorted(set(inited) - {o for b, _ in past for o in b.uninitialized})
        near = ", ".join(f"+{o}" for o in inited[-6:])
        out.append(Flag(13, FLAG_NAMES[13], f"{', '.join(names)}: roles wait or arrive there ("
                        + ", ".join(sorted({f"{st.role} at {_where(st)}" for st in sites})[:4])
                        + f") but no mbarrier.init initializes it, while every barrier of {_local(sym)} the kernel "
                        f"initializes is at a decided offset ({near}): an operation on an uninitialized mbarrier is "
                        "undefined (a hang, or a wait that passes on garbage). A stage index that runs one past the "
                        "ring (wrapping at STAGES + 1) lands here: check the counter's wrap against the number of "
                        "barriers initialized", Basis.EVIDENCE, min(st.line for st in sites)))
    return out


_FILLS = re.compile(r"^(cp\.async\.bulk(\.tensor\.\w+)?\.shared::\w+\.global|cp\.async\.(ca|cg)\.shared)")


def _after(k: _Kernel, i: int, threads: frozenset | None, stop_at_wait: bool = True, trip: bool = False,
           any_wait: bool = False, past: set[int] | None = None) -> list[int]:
    """The statements the threads of statement i run after it (None: every thread's), up to
    their next mbarrier wait (on any barrier; with `any_wait`, a wait any thread runs),
    along every path, in the order a depth-first walk meets them; each block once. With
    `trip`, only the rest of the loop trip i is in: forward edges inside its loop (not
    around it to the next trip, where a stage fetched ahead, CUTLASS's try-wait token, is
    another stage). Waits in `past` do not end it (they order nothing against what is asked)."""
    stmts = k.stmts
    past = past or set()
    body = k.work_loop(i) if trip else set()
    ends = [k.starts[b + 1] if b + 1 < len(k.starts) else len(stmts) for b in range(len(k.starts))]
    out: list[int] = []
    seen: set[int] = set()
    todo = [(i + 1, k.block_of[i])]
    while todo:
        j, bb = todo.pop()
        stop = False
        for x in range(j, ends[bb]):
            if any_wait and stop_at_wait and stmts[x].opcode.startswith(_WAIT) and x not in past:
                stop = True
                break
            q = k.threads(x)
            if q is not None and threads is not None and not (q & threads):
                continue
            if stop_at_wait and stmts[x].opcode.startswith(_WAIT) and x not in past:
                stop = True
                break
            out.append(x)
        if stop:
            continue
        for nb in k.succ[bb]:
            if trip and (nb not in body or k.starts[nb] <= k.starts[bb]):
                continue
            if nb not in seen:
                seen.add(nb)
                todo.append((k.starts[nb], nb))
    return out


def _forward(k: _Kernel, a: int, b: int) -> bool:
    """Statement b follows statement a within one loop trip (forward edges only)."""
    ba, bb = k.block_of[a], k.block_of[b]
    if ba == bb:
        return a < b
    seen, todo = {ba}, [ba]
    while todo:
        x = todo.pop()
        for y in k.succ[x]:
            if y == bb:
                return True
            if y not in seen and k.starts[y] > k.starts[x]:
                seen.add(y)
                todo.append(y)
    return False


def _flag_released_before_use(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 14: a role releases a stage (arrives on the barrier whose waiters then fill it:
    copies into shared memory) and only then uses it, before its next wait: a
    `tcgen05.commit` onto `empty[s]` followed by the stage's `tcgen05.mma` (the commit
    tracks only MMAs issued before it), or an arrive followed by an `ld.shared` /
    `ldmatrix` at addresses inside the ring the fills write (their destinations a stage
    apart, each thread's address computed from %tid.x and the stage index). The filling
    role may overwrite what is still being read: a race, no hang. Evidence where the
    threads and, for loads, the addresses are decided."""
    stmts = k.stmts
    out: list[Flag] = []
    for b in barriers:
        # what the waiters of b fill after their wait: the destinations of their copies
        dsts: set[tuple] = set()
        fills = False  # the waiters copy into shared memory (the destinations decided or not)
        for w in b.waiters:
            i = k.stmt_of(w.site)
            p = k.threads(i) if i is not None else None
            if i is None or p is None:
                continue
            for x in _after(k, i, p):
                s = stmts[x]
                if _FILLS.match(s.opcode) and s.operands and (q := k.threads(x)) is not None:
                    fills = True
                    v = k.thread_vals(s.operands[0], q) or k.vals(s.operands[0])
                    if v is not None and v[1] is not None:
                        dsts |= {(v[0], o) for o in v[1]}
        # the waiters write tensor memory after their wait (an MMA warp on acc_empty)
        mma_after = any(stmts[x].opcode.startswith("tcgen05.mma") for w in b.waiters
                        if (i := k.stmt_of(w.site)) is not None and (p := k.threads(i)) is not None
                        for x in _after(k, i, p, stop_at_wait=False, trip=True))
        if mma_after:
            out += _tmem_released_early(k, b, barriers)
        out += _store_released_early(k, b)
        out += _tmem_published_early(k, b)
        if not fills:
            continue
        span: dict[str | None, tuple[int, int]] = {}
        for sym in {d[0] for d in dsts}:
            offs = sorted(o for s_, o in dsts if s_ == sym)
            if len(offs) >= 2:
                step = min(y - x for x, y in zip(offs, offs[1:]))
                span[sym] = (offs[0], offs[-1] + step)
        for a in b.arrivers:
            kind = a.kind.removeprefix("remote ")
            if kind not in ("arrive", "tcgen05.commit"):
                continue
            i = k.stmt_of(a.site)
            p = k.threads(i) if i is not None else None
            if i is None or p is None:
                continue
            used = None
            if not k.work_loop(i):
                continue  # a release outside any loop: the last trip's, or a one-time handoff
            # waits some path from the release meets: a use behind one of them may be another
            # stage's (Triton's wait skipped on one path, then the next GEMM's MMA)
            walls = [x for x in _after(k, i, p, stop_at_wait=False, trip=True) if stmts[x].opcode.startswith(_WAIT)]
            for x in _after(k, i, p, trip=True):
                if any(_forward(k, w, x) for w in walls):
                    continue
                s = stmts[x]
                if kind == "tcgen05.commit" and s.opcode.startswith("tcgen05.mma"):
                    used = (x, "the stage's tcgen05.mma, which the commit before it does not track")
                    break
                if kind == "arrive" and s.opcode.startswith(("ld.shared", "ldmatrix")) and s.operands and \
                        s.line not in k.table_reads and (q := k.threads(x)) is not None:
                    v = k.thread_vals(s.operands[-1], q & p)
                    if v is not None and v[1] and v[0] in span and all(
                            span[v[0]][0] <= o < span[v[0]][1] for o in v[1]):
                        used = (x, f"{s.opcode} of the ring its waiters fill")
                        break
            if used is None and kind == "arrive" and (got := _wgmma_in_flight(k, barriers, b, i)) is not None:
                x, ready = got
                out.append(Flag(14, FLAG_NAMES[14], f"{a.site.role} releases {b.name} ({a.kind}, {_where(a.site)}) "
                                f"for the stage it waited on at line {stmts[x].line} ({ready}), whose wgmma may "
                                "still be reading it: no wgmma.wait_group retires the group issued after that wait "
                                "before the release (none stands between, or it leaves N >= 1 groups in flight). "
                                f"The role waiting on {b.name} may "
                                "refill the stage under the wgmma (a race, no hang). Release the stage of the group "
                                "the wait_group retired (the previous step's), or wait_group 0 first",
                                Basis.EVIDENCE, a.site.line))
                break
            if used is None:
                continue
            x, what = used
            out.append(Flag(14, FLAG_NAMES[14], f"{a.site.role} releases {b.name} ({a.kind}, {_where(a.site)}) and "
                            f"then reads the stage ({what}, line {stmts[x].line}) before its next wait: the role "
                            f"waiting on {b.name} may refill the stage while it is still being read (a race, no "
                            "hang). Release a stage after the last use of it: arrive after the loads, commit after "
                            "the MMAs that read it", Basis.EVIDENCE, a.site.line))
            break
    return out


def _base_const(k: _Kernel, op: str) -> tuple[int, int] | None:
    """An mbarrier operand `[reg+c]`, or `[reg]` with reg defined once by `add reg, base, c`:
    (the index of the base register's one definition, c)."""
    op = op.strip().strip("[]").replace(" ", "")
    m = re.fullmatch(r"(%\w+)(?:\+(-?\d+))?", op)
    if m is None:
        return None
    reg, c = m.group(1), int(m.group(2) or 0)
    ds = k.defs.get(reg, ())
    if m.group(2) is None and len(ds) == 1 and ds[0].opcode.split(".")[0] == "add" and len(ds[0].operands) == 3 \
            and re.fullmatch(r"-?\d+", ds[0].operands[2]):
        reg, c = ds[0].operands[1], int(ds[0].operands[2])
        ds = k.defs.get(reg, ())
    if len(ds) != 1 or (x := k.index.get(id(ds[0]))) is None:
        return None
    return x, c


def _wgmma_in_flight(k: _Kernel, barriers: tuple[Barrier, ...], b: Barrier, i: int) -> tuple[int, str] | None:
    """A release (statement i, an arrive on b) of the very stage whose wgmma may still read it:
    going back in the loop trip, the last `wgmma.wait_group N` leaves N >= 1 groups in flight
    (or none stands between the commit and the release), the newest of which holds the
    wgmmas issued after this trip's wait on the stage's `ready`
    barrier; that wait's address and the release's are one register plus constants whose
    difference is the distance between the two rings (the same stage index). A release of
    the stage before (a lag of one, the index computed apart) is not this."""
    stmts = k.stmts
    body = k.work_loop(i)
    addr = next((o for o in stmts[i].operands if o.strip().startswith("[")), None)
    rel = _base_const(k, addr) if addr else None
    if not body or rel is None or not b.slots:
        return None
    state = "release"  # release -> waited (wait_group N>=1) -> committed -> issued -> the ready wait
    for x in range(i - 1, -1, -1):
        if k.block_of[x] not in body:
            return None
        s = stmts[x]
        op = s.opcode
        if op.startswith("wgmma.wait_group"):
            if state != "release":
                return None
            n = s.operands[0] if s.operands else ""
            if not re.fullmatch(r"\d+", n) or int(n) < 1:
                return None
            state = "waited"
        elif op.startswith("wgmma.commit_group"):
            if state not in ("waited", "release"):  # (no wait_group at all: every group in flight)
                return None
            state = "committed"
        elif op.startswith("wgmma.mma_async"):
            if state not in ("committed", "issued"):
                return None
            state = "issued"
        elif op.startswith(_WAIT) and s.operands:
            if state != "issued":
                return None
            ready = next((o for o in barriers if o is not b and o.slots and any(
                k.stmt_of(w.site) == x for w in o.waiters)), None)
            waddr = next((o for o in s.operands if o.strip().startswith("[")), None)
            got = _base_const(k, waddr) if waddr else None
            if ready is None or got is None or got[0] != rel[0] or len(set(ready.slots)) != len(set(b.slots)):
                return None
            if rel[1] - got[1] != min(b.slots) - min(ready.slots):
                return None
            return x, ready.name
    return None


def _flag_never_waited(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 15: a ring that a role releases every trip of its loop (`mbarrier.arrive` or
    `tcgen05.commit` on each of its barriers) and that no role ever waits on, while the role
    filling the stages (the one announcing their bytes with expect_tx) waits only on barriers
    it arrives on itself: it never waits for anyone's release, so it refills a stage still in
    use (a race, no hang). The usual cause is a wait on the ring's other barrier (`ready[s]`
    for `empty[s]`). Evidence where every wait and arrive on the symbol has a decided
    address and every call is followed; a single barrier is not flagged (a one-tile kernel's
    accumulator release may have no waiter by design)."""
    if any(n.aspect == "calls" for n in k.notes):
        return []
    out: list[Flag] = []
    for sym, bs in _by_symbol(barriers).items():
        if sym.startswith("%") or any(not b.decided or "[" in b.name for b in bs):
            continue
        # role -> the barriers it waits on, and the barriers it arrives on
        waits: dict[str, set[str]] = {}
        arrives: dict[str, set[str]] = {}
        for b in bs:
            for w in b.waiters:
                waits.setdefault(w.site.role, set()).add(b.name)
            for x in b.arrivers:
                arrives.setdefault(x.site.role, set()).add(b.name)
        for b in bs:
            remote = [x for x in b.arrivers if x.kind.startswith("remote") or "mapa" in x.site.address]
            if not b.waiters and b.inits and remote:
                # a signal from another CTA that no role of this one reads (a peer saying it is
                # done with this CTA's shared memory, which may then be reused or left)
                a = remote[0]
                out.append(Flag(15, FLAG_NAMES[15], f"{a.site.role} arrives on {b.name} in another CTA of the "
                                f"cluster ({a.kind}, {_where(a.site)}) but no role waits on it anywhere: the signal "
                                "never orders anything in the CTA that receives it, which may reuse or leave the "
                                "shared memory the signal says the peer is done with (a CTA that exits while a "
                                "peer's operation on its shared memory is in flight is undefined; a race, no "
                                f"hang). Wait on {b.name} where the signal is meant to be read (before reusing or "
                                "leaving the buffer)", Basis.EVIDENCE, a.site.line))
                continue
            if b.waiters or not b.inits or len(set(b.slots)) < 2 or remote:
                continue
            rel = [x for x in b.arrivers if x.kind in ("arrive", "tcgen05.commit") and x.arrivals and x.loop]
            if not rel:
                continue
            for o in bs:
                fillers = {x.site.role for x in o.arrivers if x.kind in ("arrive.expect_tx", "expect_tx")}
                selfish = sorted(r for r in fillers if o.name in waits.get(r, set()) and
                                 waits[r] <= arrives.get(r, set()) and r not in {x.site.role for x in rel})
                if o is b or len(set(o.slots)) != len(set(b.slots)) or not selfish:
                    continue
                a = rel[0]
                out.append(Flag(15, FLAG_NAMES[15], f"{a.site.role} releases {b.name} every trip of its loop "
                                f"({a.kind}, {_where(a.site)}) but no role waits on it, and {selfish[0]}, which "
                                f"fills the stages, waits only on barriers it arrives on itself ({o.name}, its own "
                                "expect_tx): it never waits for the release, so it may refill a stage still in use "
                                f"(a race, no hang). Its wait before refilling a stage belongs on {b.name}",
                                Basis.EVIDENCE, a.site.line))
                break
    out += _accumulator_never_waited(k, barriers)
    return out


def _accumulator_never_waited(k: _Kernel, barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 15 on tensor memory: an MMA role commits a barrier no role waits on, and another
    role reads (tcgen05.ld) the columns that role's tcgen05.mma writes while waiting on no
    barrier that role commits to (a K split over two MMA warps whose epilogue waits only the
    first one's `done`): the read may run before those MMAs complete (a race, no hang).
    Columns as `_tmem_cols` gives them (slot plus constant); an MMA's columns run from its
    start to the next start another MMA writes in that slot."""
    stmts = k.stmts
    mmas: list[tuple[int, tuple, int]] = []  # (statement, slot, start column)
    for x, st in enumerate(stmts):
        if st.opcode.startswith("tcgen05.mma") and st.operands and \
                (c := _tmem_cols(k, _tmem_operand(st))) is not None and not c[2]:
            mmas.append((x, c[0], c[1]))
    if not mmas:
        return []
    starts: dict[tuple, list[int]] = {}
    for _, slot, c in mmas:
        starts.setdefault(slot, []).append(c)
    out: list[Flag] = []
    for b in barriers:
        commits = [a for a in b.arrivers if a.kind == "tcgen05.commit" and a.arrivals]
        if b.waiters or not b.inits or not commits or len(commits) != len(b.arrivers):
            continue
        ci = [i for a in commits if (i := k.stmt_of(a.site)) is not None]
        mine = [k.threads(i) for i in ci]
        if not ci or any(p is None for p in mine):
            continue
        role = frozenset().union(*mine)  # type: ignore[arg-type]
        regions = set()
        for x, slot, c in mmas:
            q = k.threads(x)
            if q is not None and q <= role:
                nxt = min((o for o in starts[slot] if o > c), default=c + 512)
                regions.add((slot, c, nxt))
        if not regions:
            continue
        # the barriers this role commits to: a reader that waits on one of them is ordered
        committed = {o.name for o in barriers for a in o.arrivers if a.kind == "tcgen05.commit"
                     and (i := k.stmt_of(a.site)) is not None and (p := k.threads(i)) is not None and p <= role}
        for x, st in enumerate(stmts):
            if not st.opcode.startswith("tcgen05.ld") or not st.operands:
                continue
            q = k.threads(x)
            c = _tmem_cols(k, _tmem_operand(st))
            if q is None or q & role or c is None or c[2]:
                continue
            if not any(c[0] == slot and lo <= c[1] < hi for slot, lo, hi in regions):
                continue
            mine_waits = [w for o in barriers for w in o.waiters if (i := k.stmt_of(w.site)) is not None
                          and (p := k.threads(i)) is not None and p & q]
            if not mine_waits or any(w in o.waiters for o in barriers if o.name in committed for w in mine_waits):
                continue
            a = commits[0]
            out.append(Flag(15, FLAG_NAMES[15], f"{a.site.role} commits {b.name} ({_where(a.site)}) and no role waits "
                            f"on it, while {mine_waits[0].site.role} reads the columns its "
                            f"tcgen05.mma writes ({st.opcode}, line {st.line}, column {c[1]} from the address kept at "
                            f"{_fmt_slot(c[0])}) and waits on no barrier {a.site.role} commits to: the read may run "
                            "before those MMAs complete (a race, no hang). Wait on "
                            f"{b.name} before reading the accumulator", Basis.EVIDENCE, st.line))
            break
    return out

