"""The handoff worksheet's model (analyses/worksheet.py fills it): the sites, arrivals,
waits, barriers and flags a sheet lists, and how it names them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from wsperf.analyses.correctness import Basis, Item

Fn = Callable[[int], "int | None"]
# (symbol or None for a plain number, the byte offsets / values it can take or None when
# the index is not derived); None: nothing known
Val = "tuple[str | None, frozenset[int] | None] | None"
_MAX_VALUES = 256

_BAR0 = re.compile(r"^(bar|barrier)\.(sync|cta\.sync|aligned\.sync|cta\.aligned\.sync)?")
# mbarrier.expect_tx alone (CUTLASS's producer_expect_transaction) raises the bytes a phase
# waits for and adds no arrival: collected with the arrives, its kind `expect_tx`
_ARRIVE = ("mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.expect_tx")
_WAIT = ("mbarrier.try_wait", "mbarrier.test_wait")
FLAG_NAMES = {1: "init-in-role", 2: "init-count", 3: "cta-barrier-in-role", 4: "tmem-not-freed",
              5: "missing-proxy-fence", 6: "tmem-freed-twice", 7: "phase-deadlock",
              8: "tx-bytes", 9: "init-not-cluster-visible", 10: "premature-pass", 11: "tmem-freed-early",
              12: "parity-never-flips", 13: "barrier-not-initialized", 14: "released-before-use",
              15: "arrived-never-waited"}


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
    # arrive | arrive.expect_tx | expect_tx | complete_tx | tcgen05.commit | cp.async.mbarrier.arrive, or
    # `remote <kind>` on a peer CTA's barrier through mapa
    kind: str
    arrivals: int | None  # arrivals it adds per phase (threads x 1; 0 for complete_tx)
    tx_bytes: str | None
    loop: int = 0  # the PTX line where the innermost loop holding it begins (0: in no loop)
    # warp groups of its role that take turns at it (ping-pong consumers ordered by a named
    # barrier, `bar.arrive N` in one and `bar.sync N` in the other): each phase gets the
    # arrivals of one group, arrivals / turns
    turns: int = 1
    again: bool = False  # a second arrive of one thread on this barrier in the same trip: it adds
    # the line of a loop that repeats it on this barrier while its waiters wait outside the
    # loop: a phase gets one arrival a trip (0: not so)
    per_trip: int = 0
    # the byte offsets it may address, where the PTX decides them (not a ring taken as an
    # assumption): a site that reaches only some barriers of its group ((): not decided)
    slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class Wait:
    site: Site
    parity: str | None
    slots: tuple[int, ...] = ()  # the barriers it may wait on, where the PTX decides them (Arrive.slots)


@dataclass(frozen=True)
class Barrier:
    name: str  # symbol (all of its barriers), symbol+offset / symbol+{offsets}, or the address expression
    inits: tuple[tuple[Site, int | None], ...]  # (site, count)
    arrivers: tuple[Arrive, ...]
    waiters: tuple[Wait, ...]
    invals: tuple[Site, ...]
    slots: tuple[int, ...] = ()  # byte offsets of the barriers in this group, from the symbol
    decided: bool = True  # False: some operation's slot is not decided by the PTX
    uninitialized: tuple[int, ...] = ()  # slots of the group no mbarrier.init covers (an index past its ring)


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
    # PTX lines that store or read a table of constants in shared memory which decides the
    # roles (Triton's warp_specialize partition table; worksheet_eval._table_load)
    dispatch_table: tuple[int, ...] = ()
    # What the sheet could not check, one phrase each (an address not resolved, counts of
    # barriers it cannot tell apart, phases whose parity is not derived): a sheet with
    # "flags: none" and items here did not check everything (worksheet.analyse)
    unchecked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Worksheet:
    kernels: tuple[KernelSheet, ...]


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


def phase_arrivals(b: Barrier) -> dict[tuple, int | None]:
    """The arrivals one phase of `b` gets, per arrival pattern (role, threads, whether a
    tcgen05.commit, whether from a peer CTA): the sites of one role on one barrier (an
    unrolled copy and the loop it came from, the slots of a ring) count once per executing
    thread per phase. A role's tcgen05.commit and its plain arrive are two arrivals a
    phase only where one loop runs both (the same innermost loop, or both in none);
    otherwise they take turns, one pattern (Triton's MMA partition commits each tile's
    accumulator in its tile loop and arrives once after it, for the epilogue's last
    handoff). complete_tx adds none; None: not derived."""
    def who(a: Arrive) -> tuple:
        return a.site.role, a.site.threads, a.kind.startswith("remote ")

    loops: dict[tuple, tuple[set, set]] = {}  # pattern -> (loops of its commits, of its plain arrives)
    for a in b.arrivers:
        if a.arrivals != 0:
            loops.setdefault(who(a), (set(), set()))[a.kind.removeprefix("remote ") != "tcgen05.commit"].add(a.loop)
    pops: dict[tuple, int | None] = {}
    chain: dict[tuple, int | None] = {}  # the arrivals of the latest site and its repeats in the same trip
    for a in b.arrivers:
        if a.arrivals == 0:
            continue
        commits, plain = loops[who(a)]
        if commits - plain:
            # commits also in a loop the plain arrive is not in: those beside the arrive are the
            # loop's peeled first trips (Triton's prologue), not a second arrival of one phase
            commits = commits - plain
        apart = a.kind.removeprefix("remote ") == "tcgen05.commit" and bool(commits & plain)
        role, threads, remote = who(a)
        n = a.arrivals // a.turns if a.arrivals is not None and a.turns > 1 and a.arrivals % a.turns == 0 \
            else a.arrivals
        if a.per_trip:
            n = None  # once per trip of a loop whose trip count the PTX does not give (worksheet flags it)
        key = (role, threads, apart, remote)
        if a.again and key in chain:  # the same thread arrives once more in the same trip
            chain[key] = None if chain[key] is None or n is None else chain[key] + n  # type: ignore[operator]
        else:
            chain[key] = n
        pops[key] = None if chain[key] is None else max(chain[key], pops.get(key) or 0)  # type: ignore[type-var]
    return pops
