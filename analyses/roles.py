"""Warp-specialization roles from SASS: which instructions belong to the producer, which
to the consumer, and where each role waits.

A warp-specialized kernel dispatches on the warp (or warpgroup) index into disjoint code
paths: the producer path issues copies (TMA `UTMALDG`, bulk `UBLKCP`, `LDGSTS`, or
LDG+STS by hand) and waits on "empty" mbarriers; the consumer path does the math
(`HGMMA`, `UTC*MMA`, `HMMA`, FFMA/FMUL/...) and waits on "full" mbarriers. This module recovers
those paths from the SASS alone, without source:

1. basic blocks and edges from the branch targets in the SASS text;
2. seeds: blocks that issue copies into shared memory (producer) or do matrix/FMA work
   (consumer);
3. a block belongs to a role when everything it can reach holds seeds of that role only
   (the role's loop, its barrier-retry stubs), or when it reaches no seed and all its
   predecessors are of that role (the role's epilogue); blocks reaching both are common
   (prologue, or the single loop of a kernel that is not specialized);
4. the kernel is warp-specialized when both roles have executed blocks; in static SASS
   (`wsperf inspect`, nothing executed) when the code holds both paths (the
   `warp_specialization` view, basis 'static').

Beside the role, every instruction gets the warp partition that runs it, read from the
warp-index dispatch (analyses/partitions.py: its warps, job and register budget). The role
keys stay what the hypotheses were calibrated on, except where this split by code finds no
producer or no consumer path but the dispatch does (a producer path that falls through into
the consumers' warp test, as CuTe DSL emits it): there the roles come from the partitions.

Wait sites are the mbarrier phase checks (`SYNCS.PHASECHK*`), the guarded branch that
consumes their predicate (where PC sampling piles the waiting warps up), and the small
retry stubs the compiler moves out of line. The result is written to DuckDB tables
`role_pcs` and `roles` so the hypotheses are plain SQL over them.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

import duckdb

from wsperf.analyses.partitions import Partitions, _parse, constant_move, recover
from wsperf.collectors.store import transaction

_TARGET = re.compile(r"(0x[0-9a-fA-F]+)\s*;?\s*$")
# Opcodes that end a basic block; `BRA`/`JMP` without a guard do not fall through.
_BRANCHES = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BPT", "KILL"}
_NO_FALLTHROUGH = {"RET", "EXIT", "KILL", "BRX", "JMX"}
_PRODUCER_COPY = re.compile(r"^(UTMALDG|UBLKCP\.S\.G|UBLKCP|LDGSTS)")
_CONSUMER_MMA = re.compile(r"^([HQIB]GMMA|UTC[A-Z]*MMA|[HID]MMA)")
# A stub this short that holds a phase check is a barrier-retry loop, all of it waiting.
_MAX_STUB = 8
# Floating-point math instructions (FFMA, FMUL, HFMA2, DFMA, ...) in one block at or
# above this count mark the block as math (consumer) work.
_MATH = re.compile(r"^(FFMA|FMUL|FADD|HFMA2|HMUL2|HADD2|DFMA|DMUL|DADD)")
# `HFMA2.MMA Rd, -RZ, RZ, a, b` computes -0*0 + (a, b): the compiler's way to move a
# constant into a register, common in copy loops (ring_pcsamp's LDG/STS producer has one).
# Any FMA with a zero multiplicand is such a move (`partitions.constant_move`).
_MIN_MATH = 4


@dataclass(frozen=True)
class Instr:
    pc: int
    opcode: str
    opcode_full: str
    guard: str | None
    text: str


@dataclass
class Block:
    start: int
    instrs: list[Instr]
    succ: set[int]
    seeds: set[str]
    role: str = "common"


def _target(ins: Instr) -> int | None:
    m = _TARGET.search(ins.text or "")
    return int(m.group(1), 16) if m else None


def build_blocks(instrs: list[Instr]) -> dict[int, Block]:
    """Basic blocks keyed by start PC, with successor edges and role seeds."""
    if not instrs:
        return {}
    pcs = {i.pc for i in instrs}
    leaders = {instrs[0].pc}
    for k, ins in enumerate(instrs):
        if ins.opcode in _BRANCHES or ins.opcode == "BSYNC":
            t = _target(ins) if ins.opcode in ("BRA", "JMP", "CALL") else None
            if t in pcs:
                leaders.add(t)
            if k + 1 < len(instrs):
                leaders.add(instrs[k + 1].pc)
    blocks: dict[int, Block] = {}
    cur: Block | None = None
    for ins in instrs:
        if ins.pc in leaders:
            cur = Block(ins.pc, [], set(), set())
            blocks[ins.pc] = cur
        cur.instrs.append(ins)
    starts = sorted(blocks)
    nxt = {s: starts[i + 1] for i, s in enumerate(starts[:-1])}
    for b in blocks.values():
        last = b.instrs[-1]
        t = _target(last) if last.opcode in ("BRA", "JMP", "CALL") else None
        if t in blocks:
            b.succ.add(t)
        # A guarded EXIT or RET ends only the lanes whose guard holds: the others go on
        # (`@P0 EXIT` after `if (threadIdx.x == 0)` is no separate code path).
        ends = last.opcode in _NO_FALLTHROUGH and (last.guard is None or last.opcode in ("BRX", "JMX"))
        unconditional = ends or (
            last.opcode in ("BRA", "JMP") and last.guard is None and last.opcode_full in ("BRA", "JMP")
        )
        if not unconditional and b.start in nxt:
            b.succ.add(nxt[b.start])
        ops = [i.opcode_full for i in b.instrs]
        math = sum(bool(_MATH.match(i.opcode_full)) and not constant_move(_parse(i.pc, i.text)) for i in b.instrs)
        if any(_PRODUCER_COPY.match(o) for o in ops) or (
            any(o.startswith("LDG") for o in ops) and any(o.startswith("STS") for o in ops) and not math
        ):
            b.seeds.add("producer")
        if any(_CONSUMER_MMA.match(o) for o in ops) or math >= _MIN_MATH:
            b.seeds.add("consumer")
    return blocks


def assign_roles(blocks: dict[int, Block]) -> None:
    """Set `Block.role` to producer, consumer or common (see the module docstring)."""
    reach: dict[int, set[str]] = {s: set(b.seeds) for s, b in blocks.items()}
    changed = True
    while changed:  # forward closure of seed roles; small graphs, a fixpoint is cheap
        changed = False
        for s, b in blocks.items():
            before = len(reach[s])
            for t in b.succ:
                reach[s] |= reach[t]
            changed |= len(reach[s]) != before
    preds: dict[int, set[int]] = {s: set() for s in blocks}
    for s, b in blocks.items():
        for t in b.succ:
            preds[t].add(s)
    for s, b in blocks.items():
        r = reach[s]
        b.role = next(iter(r)) if len(r) == 1 else ("common" if r else "none")
    changed = True
    while changed:  # seedless blocks (epilogues) inherit a single role from predecessors
        changed = False
        for s, b in blocks.items():
            if b.role != "none":
                continue
            roles = {blocks[p].role for p in preds[s]} - {"none"}
            if len(roles) == 1 and roles <= {"producer", "consumer"}:
                b.role = roles.pop()
                changed = True
    for b in blocks.values():
        if b.role == "none":
            b.role = "common"


def wait_pcs(blocks: dict[int, Block]) -> set[int]:
    """PCs where a warp waits on an mbarrier phase (see the module docstring)."""
    waits: set[int] = set()
    for b in blocks.values():
        checks = [k for k, i in enumerate(b.instrs) if i.opcode_full.startswith("SYNCS.PHASECHK")]
        if not checks:
            continue
        if len(b.instrs) <= _MAX_STUB:
            waits.update(i.pc for i in b.instrs)
            continue
        for k in checks:
            waits.add(b.instrs[k].pc)
            # The predicate is consumed by the next guarded branch; samples of the waiting
            # warps land there (long_scoreboard on the SYNCS result).
            for j in range(k + 1, min(k + 4, len(b.instrs))):
                if b.instrs[j].opcode == "BRA" and b.instrs[j].guard:
                    waits.add(b.instrs[j].pc)
                    break
            # ptxas may hoist the check far above the branch that reads its predicate (Gluon's
            # wait for a free output stage, issued ~90 instructions before the branch, with the
            # math in between): the first branch guarded by that predicate, unless it is set again.
            pred = _dest(b.instrs[k])
            for later in b.instrs[k + 1:]:
                if later.opcode == "BRA" and later.guard in (f"@{pred}", f"@!{pred}"):
                    waits.add(later.pc)
                    break
                if pred is None or _dest(later) == pred:
                    break
    return waits


def _dest(ins: Instr) -> str | None:
    """The first operand an instruction writes (`SYNCS.PHASECHK... P1, [...]` -> 'P1')."""
    args = _parse(ins.pc, ins.text).args
    return args[0] if args else None


def loop_pcs(instrs: list[Instr]) -> set[int]:
    """PCs inside the span of a backward branch (target <= branch PC): loop bodies."""
    spans = []
    for ins in instrs:
        if ins.opcode in ("BRA", "JMP"):
            t = _target(ins)
            if t is not None and t <= ins.pc:
                spans.append((t, ins.pc))
    # The union of the spans as disjoint sorted intervals, then one bisect per PC: a
    # kernel has ~100 backward branches and ~2,000 PCs (testing every span per PC cost
    # ~0.1 s of each analyze).
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    inside = set()
    for i in instrs:
        k = bisect_right(starts, i.pc) - 1
        if k >= 0 and i.pc <= ends[k]:
            inside.add(i.pc)
    return inside


def build_roles(con: duckdb.DuckDBPyConnection, launch_ids: list[int] | None = None) -> None:
    """(Re)compute `role_pcs` for the given launches (default: every launch that has
    SASS rows but no role rows yet). Launches without SASS rows get no role rows: their
    roles are unknown, and the views say so with NULLs."""
    if launch_ids is None:
        launch_ids = [r[0] for r in con.execute(
            """SELECT DISTINCT launch_id FROM sass
               WHERE launch_id NOT IN (SELECT DISTINCT launch_id FROM role_pcs)""").fetchall()]
    if not launch_ids:
        return
    rows: list[tuple] = []
    warps = dict(con.execute(
        """SELECT launch_id, (block_x * coalesce(block_y, 1) * coalesce(block_z, 1) + 31) // 32 FROM launches
           WHERE list_contains(?, launch_id) AND block_x IS NOT NULL""", [launch_ids]).fetchall())
    seen: dict[tuple, tuple] = {}  # launches of one kernel and CTA size: the same SASS, read once
    for lid in launch_ids:
        instrs = [Instr(*r) for r in con.execute(
            "SELECT pc, opcode, opcode_full, guard, sass FROM sass WHERE launch_id = ? ORDER BY pc", [lid]).fetchall()]
        key = (warps.get(lid), tuple((i.pc, i.text) for i in instrs))
        if key not in seen:
            blocks = build_blocks(instrs)
            assign_roles(blocks)
            seen[key] = (blocks, wait_pcs(blocks), loop_pcs(instrs), recover(instrs, blocks, warps.get(lid)))
        blocks, waits, loops, parts = seen[key]
        role = _roles_of(blocks, parts)
        for b in blocks.values():
            p = _partition_row(parts, b.start)
            for i in b.instrs:
                rows.append((lid, i.pc, b.start, role[b.start], i.pc in waits, bool(b.seeds), i.pc in loops, *p))
    names = ("l", "p", "b", "r", "w", "s", "i", "pn", "pj", "pr", "pb")
    cols = list(zip(*rows)) if rows else [()] * len(names)
    with transaction(con, "instruction roles"):
        con.execute("DELETE FROM role_pcs WHERE list_contains(?, launch_id)", [launch_ids])
        # Columns as list parameters, unnested side by side: no Arrow table, whose
        # construction from Python lists imports pandas (~0.3 s of every analyze).
        con.execute("INSERT INTO role_pcs SELECT " + ", ".join(f"unnest(${n})" for n in names),
                    {n: list(c) for n, c in zip(names, cols)})


def _roles_of(blocks: dict[int, Block], parts: Partitions | None) -> dict[int, str]:
    """The role key of each block: the split by code, or the partitions' where only they
    find both a producer and a consumer path (see the module docstring)."""
    by_code = {s: b.role for s, b in blocks.items()}
    if parts is None or {"producer", "consumer"} <= set(by_code.values()):
        return by_code
    by_warps = {s: parts.block_role.get(s, "common") for s in blocks}
    return by_warps if {"producer", "consumer"} <= set(by_warps.values()) else by_code


def _partition_row(parts: Partitions | None, block: int) -> tuple:
    """(partition, job, registers, basis) of a block; NULLs without partitions."""
    if parts is None:
        return (None, None, None, None)
    label = parts.block_label[block]
    p = next((p for p in parts.parts if p.label == label), None)
    return (label, p.job if p else None, p.registers if p else None, parts.basis)
