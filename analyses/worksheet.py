"""The handoff worksheet from PTX, without a GPU (`wsperf worksheet`).

Per kernel (`.entry`): roles (branches on %tid.x-derived warp/warpgroup/lane conditions
and elect.sync, named by what they contain), storage (.shared buffers, tensor memory),
handoffs (every mbarrier: init count, who arrives, who waits, fences) and lifetimes, and
the known mistakes visible statically (`Flag`, codes 1-15, `FLAG_NAMES`). Items reuse the correctness
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

import dataclasses
import json
import re
from pathlib import Path

from wsperf.analyses.correctness import Basis, Item
from wsperf.analyses.partitions import SOFTMAX_EX2
from wsperf.analyses.sql import check_kernel_regex, matching
from wsperf.analyses.worksheet_eval import _dest, _Kernel, _warps
from wsperf.analyses.worksheet_flags import (_flag_cluster_init, _flag_counts, _flag_cta_barrier,
                                             _flag_init_in_role, _flag_phase_order, _flag_proxy_fence,
                                             _flag_not_initialized, _flag_parity_never_flips, _flag_unrolled_parity,
                                             _flag_never_waited, _flag_released_before_use, _flag_store_source_rewritten, _flag_tmem_freed_early,
                                             _flag_tx_bytes)
from wsperf.analyses.worksheet_model import (_ARRIVE, _BAR0, _WAIT, FLAG_NAMES, Arrive, Barrier, Flag, KernelSheet,
                                             Site, Wait, Worksheet, _fmt, _local)
from wsperf.collectors.errors import InputError
from wsperf.collectors.ptx import Entry, parse, read_ptx

# The model's types are imported from here by callers (`from wsperf.analyses.worksheet import KernelSheet`).
__all__ = ["Arrive", "Barrier", "Flag", "FLAG_NAMES", "KernelSheet", "Site", "Wait", "Worksheet", "analyse",
           "worksheet"]


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
            meta = compiler_metadata(p)
            sheets += [analyse(e, label, meta.get(e.name)) for e in entries if e.name in wanted]
    if not sheets:
        raise InputError(f"no kernel matches --kernel {kernel!r}" if kernel else "no kernel found")
    return Worksheet(tuple(sheets))


_PRODUCER = re.compile(r"^(cp\.async\.bulk(\.tensor\.\w+)?\.shared::\w+\.global|cp\.async\.(ca|cg)|ld\.global)")
# what an epilogue issues: global stores, a TMA store from shared memory, tensor-memory loads
_EPILOGUE = re.compile(r"^(st\.global|red\.global|cp\.async\.bulk(\.tensor\.\w+)?\.global\.shared|tcgen05\.ld)")
# what a warp with no job runs: register budgets, barriers, branches, moves and compares
_IDLE = re.compile(r"^(setmaxnreg|bar\.|barrier\.|bra|ret|exit|mov|setp|selp|not|add|sub|and|or|shr|shl|cvt|"
                   r"ld\.param)")
_CONSUMER = re.compile(r"^(wgmma\.mma_async|tcgen05\.mma|mma\.sync|fma\.|mul\.(rn\.)?f|mad\.(rn\.)?f)")


# A role's job, read from what it issues: opcode prefix pattern -> job, the first match of
# each in this order (a multicast load is not also listed as a plain one)
_BULK_LOAD = r"cp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global"
_JOBS = tuple((re.compile(p), job) for p, job in (
    (_BULK_LOAD + r".*\.multicast", "TMA load (multicast)"), (_BULK_LOAD, "TMA load"),
    (r"clusterlaunchcontrol\.try_cancel", "CLC work fetch"),
    (r"cp\.async\.bulk\.shared::\w+\.global", "bulk copy load"), (r"cp\.async\.(ca|cg)", "cp.async load"),
    (r"ld\.global", "global loads"), (r"wgmma\.mma_async", "MMA issue (wgmma)"),
    (r"tcgen05\.mma", "MMA issue (tcgen05)"), (r"mma\.sync", "MMA (mma.sync)"),
    (r"(fma|mad)\.(rn\.)?f|mul\.(rn\.)?f", "FMA math"), (r"tcgen05\.ld", "tensor-memory load"),
    (r"cp\.(reduce\.)?async\.bulk(\.tensor\.\w+)?\.global\.shared", "TMA store"),
    (r"(st|red)\.global", "global stores"), (r"atom\.global\.(?!.*\.(add|inc|dec|cas|exch)\.[usb]\d)", "global atomics")))


def _stores_out(o: str) -> bool:
    """A store to global memory, a TMA store from shared memory, or an atomic that writes a
    result there (a column maximum, a split-K sum: `atom.global.max.s32`, `red.global.add.f32`);
    an integer fetch-and-add, exchange or compare-and-swap is a counter or a lock (a tile
    scheduler's), not a result."""
    return o.startswith("st.global") or (o.startswith("cp.async.bulk") and ".global.shared" in o) or (
        o.startswith(("atom.global", "red.global")) and not re.search(r"\.(add|inc|dec|cas|exch)\.[usb]\d+", o))


_REGS = re.compile(r"%[\w.]+")


def _rescales_tmem(stmts: list) -> bool:
    """The role reads tensor memory, multiplies what it read and writes the products back
    (attention's correction: O times alpha, in place), traced through the registers. A
    tcgen05.st of values that no tcgen05.ld gave (Triton's epilogue zeroing its accumulator
    before the MMAs) is not a rescale."""
    loaded: set[str] = set()
    scaled: set[str] = set()
    for s in stmts:
        if not s.operands:
            continue
        if s.opcode.startswith("tcgen05.ld"):
            loaded.update(_REGS.findall(s.operands[0]))
        elif s.opcode.startswith("mul.") and ".f32" in s.opcode and len(s.operands) >= 3 and \
                any(r in loaded for o in s.operands[1:] for r in _REGS.findall(o)):
            scaled.add(s.operands[0].strip())
        elif s.opcode.startswith("tcgen05.st") and any(r in scaled for r in _REGS.findall(s.operands[-1])):
            return True
    return False


def _jobs(ops: list[str]) -> list[str]:
    out: list[str] = []
    for rx, job in _JOBS:
        if any(rx.match(o) for o in ops) and not (job == "TMA load" and "TMA load (multicast)" in out):
            out.append(job)
    return out


def compiler_metadata(ptx: Path) -> dict[str, list[int]]:
    """kernel name -> the bytes of each tensor descriptor's box, in the kernel's parameter
    order, from the metadata Triton writes beside a kernel's PTX (`<name>.json`,
    `tensordesc_meta`: block_size and elem_size); {} when there is none."""
    f = Path(ptx).with_suffix(".json")
    try:
        if not f.is_file() or f.stat().st_size > (1 << 20):
            return {}
        doc = json.loads(f.read_text(encoding="utf-8", errors="replace"))
        boxes = []
        for d in doc.get("tensordesc_meta") or []:
            n = int(d["elem_size"])
            for x in d["block_size"]:
                n *= int(x)
            boxes.append(n)
        return {str(doc["name"]): boxes} if boxes and isinstance(doc.get("name"), str) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def analyse(e: Entry, source: str, boxes: list[int] | None = None) -> KernelSheet:
    k = _Kernel(e)
    stmts = k.stmts
    all_warps = frozenset(range((k.n + 31) // 32)) if k.n else None

    # ---- roles ----
    groups: dict[frozenset | None, list[int]] = {}
    for i in range(len(stmts)):
        groups.setdefault(k.role[k.block_of[i]], []).append(i)
    role_name: dict[frozenset | None, str] = {}
    roles: list[Item] = []
    kinds: dict[frozenset, tuple[str, int]] = {}  # a role's warps -> (its kind, its item in roles)
    # where tcgen05.alloc writes the tensor-memory address it allocated (read back by every warp)
    tmem_slots = {at for s in stmts if s.opcode.startswith("tcgen05.alloc") and s.operands
                  and (at := k.shared_at(s.operands[0])) is not None}
    # shared loads of a Cluster Launch Control response (`ld.shared.b128 r, [resp]` read by
    # clusterlaunchcontrol.query_cancel): the next tile's coordinates, not a stage's data
    clc_regs = {o.strip() for s in stmts if s.opcode.startswith("clusterlaunchcontrol.query_cancel")
                for o in s.operands[1:]}
    clc_reads = {s.line for s in stmts if s.opcode.startswith("ld.shared") and s.operands
                 and s.operands[0].strip() in clc_regs}
    for ws, idx in groups.items():
        if ws is None or ws == all_warps:
            role_name[ws] = "all" if ws is not None else "?"
            continue
        ops = [stmts[i].opcode for i in idx]
        if all(o.split(".")[0] in ("setp", "bra") for o in ops) or (
                any(stmts[i].line in k.table_reads for i in idx)
                and not any(_PRODUCER.match(o) or _CONSUMER.match(o) or o.startswith("st.") for o in ops)):
            role_name[ws] = f"dispatch ({_warps(ws)})"  # only the branch to the next role (or the table read)
            continue
        if not ws:  # no thread gets here by the table's first values (a partition table's exit path)
            role_name[ws] = "none"
            continue
        # global loads stored to shared memory produce, unless the role issues tensor-core MMAs:
        # then its st.shared stages the epilogue (CUTLASS's consumers load alpha, beta and flags)
        mma = any(o.startswith(("wgmma.mma_async", "tcgen05.mma", "mma.sync")) for o in ops)
        prod = any(_PRODUCER.match(o) for o in ops) and (
            any(o.startswith("cp.async") and _PRODUCER.match(o) for o in ops)  # not a TMA store's commit / wait
            or any(o.startswith("st.shared") for o in ops) and not mma)
        # a consumer computes with tensor cores or FMAs, or takes stages from a ring: waits, reads
        # shared memory (not the partition table's byte, nor the tensor-memory address that
        # tcgen05.alloc wrote there) and releases them (a plain arrive)
        cons = any(_CONSUMER.match(o) for o in ops) or (
            any(o.startswith(_WAIT) for o in ops) and any(o.startswith("mbarrier.arrive.") and "expect_tx" not in o
                                                         for o in ops)
            and any(stmts[i].opcode.startswith("ld.shared") and stmts[i].line not in k.table_reads
                    and stmts[i].line not in clc_reads
                    and (not stmts[i].operands or k.shared_at(stmts[i].operands[-1]) not in tmem_slots) for i in idx))
        # Attention's partitions without MMA (Triton's sm_100 lowering): the softmax computes an
        # exp2 per score; the correction rescales the tensor-memory accumulator (tcgen05.ld, a
        # multiply, tcgen05.st) with one exp2 per row
        ex2 = sum(o.startswith("ex2.") for o in ops)
        tmem_rw = any(o.startswith("tcgen05.ld") for o in ops) and any(o.startswith("tcgen05.st") for o in ops)
        # an epilogue's stores: a correction keeps its result in tensor memory. One thread of the
        # role may store for it (CUTLASS's epilogue warps 4-7, thread 128's TMA store): a
        # sub-branch of these warps that stores counts
        to_global = any(_stores_out(stmts[i].opcode) for i in idx) or any(
            w2 and w2 < ws and any(_stores_out(stmts[i].opcode) for i in ix) for w2, ix in groups.items())
        # (a correction may also store the final O / l at the end: its in-place rescale decides)
        attn = None if mma else "softmax" if ex2 >= SOFTMAX_EX2 else \
            "correction" if tmem_rw and (_rescales_tmem([stmts[i] for i in idx]) or not to_global and any(
                o.startswith(("mul.f32", "mul.rn.f32", "mul.ftz.f32")) for o in ops)) else None
        # what stores a result out (to global memory, or by TMA from shared) after reading the
        # accumulator, with no MMA, is the epilogue, whatever else it reads or computes on the
        # way: a bias (ld.global, Triton's cp.async prefetch of it), an activation (the exp2 of
        # a sigmoid or GELU). A TMA load of its own (a residual tile, Triton's persistent
        # `flatten=True` default partition) leaves it the epilogue where it reads the
        # accumulator from tensor memory; on Hopper, with no tcgen05.ld, it is a producer's
        reads_acc = any(o.startswith("tcgen05.ld") for o in ops)
        epilogue = attn != "correction" and not mma and to_global and (reads_acc or any(
            o.startswith("cp.async.bulk") and ".global.shared" in o for o in ops) and not any(
            o.startswith("cp.async.bulk") and _PRODUCER.match(o) for o in ops))
        # Cluster Launch Control: the warp that asks for the next tile (try_cancel) and hands
        # it to the others, with no copies or math of its own
        sched = any(o.startswith("clusterlaunchcontrol.try_cancel") for o in ops) and not mma and not prod
        # a softmax that also stores the final output (attention's default warps: P to shared
        # memory each block, O / l out at the end) is the softmax: its row maxima tell it from
        # an epilogue's activation (SiLU, GELU: exp2 but no maximum; ReLU: a maximum, no exp2)
        # (CuTe writes the maximum as a compare and a select: setp.le.f32 + selp.f32)
        # A score activation without maxima (sigmoid attention) hands P to the next MMA in
        # tensor memory (tcgen05.st of computed values); an epilogue's tcgen05.st only zeroes
        # the accumulator (one register repeated)
        if attn == "softmax" and epilogue:
            maxima = sum(o.startswith(("max.f32", "max.ftz.f32", "max.NaN.f32")) for o in ops) + min(
                sum(o.startswith(("setp.le.f32", "setp.lt.f32", "setp.ge.f32", "setp.gt.f32")) for o in ops),
                sum(o.startswith("selp.f32") for o in ops))
            hands_p = any(stmts[i].opcode.startswith("tcgen05.st") and len(stmts[i].operands) > 1 and
                          len(set(re.findall(r"%\w+", stmts[i].operands[1]))) > 1 for i in idx)
            epilogue = maxima < 4 and not hands_p
        kind = "scheduler" if sched else "epilogue" if epilogue else attn if attn else \
            "producer+consumer" if prod and cons else "producer" if prod else "consumer" if cons else \
            "epilogue" if any(_EPILOGUE.match(o) for o in ops) else \
            "tensor-memory owner" if any(o.startswith(("tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish"))
                                         for o in ops) else \
            "idle" if all(_IDLE.match(o) for o in ops) else "other"
        # a warpgroup's branch that only sets its register budget before its one warp's role
        # (CUTLASS's producer warpgroup: warp 0 loads, warps 1-3 wait): the others are idle
        inner = frozenset().union(*(g for g in groups if g is not None and g < ws))
        if kind == "idle" and inner == ws and sum(1 for g in groups if g is not None and g < ws and
                                                   _joined(k, idx, groups[g])) >= 2:
            # code that roles of their own run in common, on their way in or out of it (CuTe's
            # `if warp == 4 or warp == 6:` before each producer's own branch; TIRx's shared tail):
            # no idle warp among them. An idle partition of another region (Triton's dispatch
            # loop runs it after those warps' roles) stays idle
            kind = "shared"
        role_name[ws] = f"{kind} ({_warps(ws - inner if kind == 'idle' and ws - inner else ws)})"
        jobs = _jobs(ops)
        what = sorted({o.split(".")[0] + ("." + o.split(".")[1] if o.split(".")[0] in ("cp", "tcgen05", "wgmma",
                                                                                        "mma", "ld", "st") else "")
                       for o in ops if _PRODUCER.match(o) or _CONSUMER.match(o) or o.startswith("st.shared")})
        # Roles split by a table in shared memory rest on reading it as its constant stores give it.
        kinds[ws] = (kind, len(roles))
        roles.append(Item("roles", f"{role_name[ws]}: " + (f"{', '.join(jobs)}; " if jobs else "")
                          + f"{len(idx)} statements" + (f"; {', '.join(what)}" if what else ""),
                          Basis.ASSUMPTION if k.table_reads else Basis.EVIDENCE))
    _fold_sub_roles(kinds, role_name, roles)
    if not roles:
        roles.append(Item("roles", "no branch on a warp/warpgroup index derived from %tid.x: not warp-specialized "
                          "(or its roles are not readable statically)", Basis.ASSUMPTION))
    elif all_warps and not k.table_reads:
        # warps that no role branch admits (CuTe's warps 1-3 beside a producer warp 0 and an
        # MMA warpgroup 4-7) run only what every warp runs
        spare = all_warps - frozenset().union(*(ws for ws in groups if ws is not None and ws != all_warps
                                                 and not role_name.get(ws, "").startswith("dispatch")))
        shared = [stmts[i].opcode for i in groups.get(all_warps, ())]
        if spare and any(_PRODUCER.match(o) or _CONSUMER.match(o) or _EPILOGUE.match(o) for o in shared):
            roles.append(Item("roles", f"no role of their own ({_warps(spare)}): they run only the code every warp "
                              "runs, which does work", Basis.EVIDENCE))
        elif spare:
            roles.append(Item("roles", f"idle ({_warps(spare)}): no code of their own, and the code every warp runs "
                              "does no copies or math", Basis.EVIDENCE))
    full = sorted(ln for ln, f in k.elect.items() if f)
    if full:
        more = f" and {len(full) - 6} more" if len(full) > 6 else ""
        roles.append(Item("roles", f"elect.sync with membermask 0xffffffff (line(s) {', '.join(map(str, full[:6]))}"
                          f"{more}): "
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
                                f"{', columns ' + _shown(k, stmts[i].operands[-1]) if name != 'tcgen05.relinquish_alloc_permit' else ''})",
                                Basis.EVIDENCE))
    if allocs and not deallocs:
        flags.append(Flag(4, FLAG_NAMES[4], f"tensor memory is allocated (tcgen05.alloc, line {stmts[allocs[0]].line}) "
                          "but never deallocated: add tcgen05.dealloc of the same columns before the CTA exits",
                          Basis.EVIDENCE, stmts[allocs[0]].line))
    if allocs and not relinq:
        flags.append(Flag(4, FLAG_NAMES[4], "tcgen05.alloc without tcgen05.relinquish_alloc_permit: other CTAs on "
                          "the SM may block in their allocation", Basis.EVIDENCE, stmts[allocs[0]].line))
    freeing = {i: k.threads(i) for i in deallocs}
    if len(deallocs) > 0 and all(p is not None for p in freeing.values()):
        warps = sorted({t // 32 for p in freeing.values() for t in p})  # type: ignore[union-attr]
        if len(warps) > 1:
            where = "; ".join(f"line {stmts[i].line} by {site(i).role}" for i in deallocs)
            flags.append(Flag(6, FLAG_NAMES[6], f"tensor memory is freed by {len(warps)} warps ({_warps(frozenset(warps))}:"
                              f" {where}): tcgen05.dealloc is a warp-wide instruction, so each of them frees the "
                              "columns; free them from the one warp that allocated them, once, after the last "
                              "tcgen05.ld / tcgen05.mma that uses them", Basis.EVIDENCE, stmts[deallocs[-1]].line))
    elif deallocs:
        k.notes.append(Item("lifetime", "the threads that run tcgen05.dealloc are not derived: who frees tensor "
                            "memory, and how often, is not checked", Basis.ASSUMPTION))
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
        elif o.startswith("mbarrier.expect_tx") and a:
            ops.append(("arrive", i, a[0]))  # [addr], txCount
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
        elif o.startswith("clusterlaunchcontrol.try_cancel") and "mbarrier::complete_tx" in o and len(a) > 1:
            ops.append(("arrive", i, a[1]))  # [response], [mbar]: the 16-byte response completes tx
        elif o.startswith("cp.async.mbarrier.arrive") and a:
            ops.append(("arrive", i, a[0]))
        elif o.startswith(_WAIT) and len(a) > 1:
            ops.append(("wait", i, a[1]))
        elif o.startswith("mbarrier.inval") and a:
            ops.append(("inval", i, a[0]))
        elif o.startswith(("fence.proxy.async", "fence.mbarrier_init", "tcgen05.fence", "tcgen05.wait")) \
                or _BAR0.match(o):
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

    k.runaway = _runaway_indices(k, barriers)
    flags += _flag_init_in_role(k, stmts, barriers)
    flags += _flag_per_trip(barriers)
    flags += _flag_counts(k, barriers)
    flags += _flag_cta_barrier(k, stmts, site)
    flags += _flag_proxy_fence(k, stmts)
    flags += _flag_phase_order(k, barriers)
    flags += _flag_tx_bytes(k, barriers, boxes)
    flags += _flag_cluster_init(k, stmts, barriers)
    flags += _flag_tmem_freed_early(k, stmts, barriers)
    flags += _flag_parity_never_flips(k, barriers)
    flags += _flag_unrolled_parity(k, barriers, flags)
    flags += _flag_not_initialized(barriers)
    flags += _flag_released_before_use(k, barriers)
    flags += _flag_store_source_rewritten(k, flags)
    flags += _flag_never_waited(k, barriers)
    return KernelSheet(e.name, source, e.target, k.n, tuple(roles), tuple(storage), barriers, tuple(fences),
                       tuple(lifetime), _merged_notes(k.notes), tuple(flags), k.dispatch_table_lines(),
                       _unchecked(k, barriers))


def _merged_notes(notes: list[Item]) -> tuple[Item, ...]:
    """The notes, those that say the same thing of several lines said once (Triton's
    dispatch reads its partition table at every entry of a loop: 49 notes, one per line,
    become one that names the lines)."""
    groups: dict[tuple, list[int]] = {}
    first: dict[tuple, int] = {}
    for i, n in enumerate(notes):
        m = re.match(r"line (\d+): ", n.text)
        key = (n.aspect, n.basis, n.text[m.end():] if m else n.text, bool(m))
        groups.setdefault(key, []).append(int(m.group(1)) if m else i)
        first.setdefault(key, i)
    out: list[Item] = []
    for key in sorted(groups, key=first.__getitem__):
        aspect, basis, text, lined = key
        if not lined or len(groups[key]) == 1:
            out += [notes[first[key]]] if not lined else [Item(aspect, f"line {groups[key][0]}: {text}", basis)]
            if not lined:
                out += [notes[i] for i in groups[key][1:]]  # the same note twice: kept as it came
            continue
        out.append(Item(aspect, f"lines {_line_runs(sorted(set(groups[key])))}: {text}", basis))
    return tuple(out)


def _line_runs(lines: list[int]) -> str:
    """1, 2, 3, 7 -> '1-3, 7' (consecutive lines as a run)."""
    runs: list[list[int]] = []
    for x in lines:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _unchecked(k: _Kernel, barriers: tuple[Barrier, ...]) -> tuple[str, ...]:
    """What the flags could not look at, read from what the sheet resolved and its notes."""
    out: list[str] = []
    if k.n is None:
        out.append("thread counts are not derived (no 1-D .reqntid/.maxntid): arrivals, roles and phases not "
                   "checked")
    for b in barriers:
        if b.name.startswith("%") or "[" in b.name and not b.inits:
            out.append(f"barrier at {b.name}: its address does not resolve to an initialized barrier: its count, "
                       "arrivals and phases not checked")
        elif b.inits and any(c is None for _, c in b.inits):
            out.append(f"{b.name}: init count not derived: arrivals not checked against it")
        elif (b.arrivers or b.waiters) and not b.inits:
            out.append(f"{b.name}: no mbarrier.init seen: its count is not checked")
        elif not b.decided:
            out.append(f"{b.name}: which of its barriers an operation addresses is not decided by the PTX: their "
                       "counts and phases are checked as one group at most")
    for n in k.notes:
        if n.aspect in ("handoff.count", "handoff.phase", "handoff.tx", "handoff.fence", "calls") or (
                n.aspect == "lifetime" and "not checked" in n.text):
            out.append(n.text)
    unparsed = sum(1 for n in k.notes if n.aspect == "unparsed")
    if unparsed:
        out.append(f"{unparsed} PTX line(s) not read (listed under assumptions): what they do is not checked")
    return tuple(dict.fromkeys(out))


def _barriers(k: _Kernel, ops: list[tuple[str, int, str]], site) -> tuple[Barrier, ...]:
    """Every mbarrier operation grouped by the barrier(s) it may address. A barrier is a
    (symbol, byte offset) that some mbarrier.init initializes; an operation whose address
    takes several values (`full[s]` in a ring) may address each of them, so those
    barriers form one group; an address with an index the PTX does not decide groups all
    of its symbol's barriers (`decided` False). Groups of one symbol that look alike
    (same counts, same arrivers and waiters, arrived on in the same loops) are shown as
    one: two rings of one design in two regions (CuTe's fullA and emptyB, both warp 0 to
    warps 1-2) stay apart, so each has its own first wait."""
    stmts = k.stmts
    resolved: list[tuple[str, int, str, str | None, frozenset | None, tuple | None]] = []
    assumed: set[int] = set()  # operations whose barrier is a ring taken as an assumption
    bounded: set[int] = set()  # of those, the ones whose stage index the PTX wraps (ring_span)
    inits: dict[str, set[int]] = {}  # the offsets of every init whose address is decided
    early: dict[int, tuple[str, frozenset]] = {}  # inits through a loop's pointer before the loop runs
    for kind, i, op in ops:
        v = k.vals(op) if kind == "init" else None
        if kind == "init" and (v is None or v[0] is None or v[1] is None) and (at := k.initial_offset(op, i)):
            v = early[i] = (at[0], frozenset({at[1]}))
        if v is not None and v[0] is not None and v[1] is not None:
            inits.setdefault(v[0], set()).update(v[1])
    # where each ring an operation steps through starts: a ring ends before another's start
    # (only addresses `vals` does not decide: a decided one is a barrier, not a ring's start)
    bases = {(b[0], b[1]) for kind, i, op in ops if kind != "init" and ((v := k.vals(op)) is None or v[1] is None)
             and (b := k.ring_base(op)) is not None}
    # a ring an operation addresses through a decided index (`bars + 8 * (i % 2)`) starts at its
    # lowest barrier too: another ring's walk stops there (Gluon's acc_ready[2] before acc_empty[2])
    bases |= {(v[0], min(v[1])) for kind, i, op in ops if kind != "init" and (v := k.vals_at(op, i)) is not None
              and v[0] is not None and v[1] is not None and len(v[1]) > 1}
    own: list[int] = []  # lines of a mapa to CTA 0 in a cluster of one CTA: this CTA's own barrier
    self_rank: list[int] = []  # lines of a mapa to the CTA's own rank: its own barrier
    shape = k.e.cluster
    for kind, i, op in ops:
        peer = k.peer_address(op, k.threads(i), i) if kind != "init" else None
        if peer is not None and peer[1] == "rank":
            # `mapa` to %cluster_ctarank itself is this CTA's own barrier, whatever the cluster
            # (CUTLASS's PipelineAsync: dst_blockid defaults to block_rank_in_cluster())
            self_rank.append(stmts[i].line)
            op, peer = peer[0], None
        if peer is not None and peer[1] == "CTA 0" and (shape is None or shape == (1, 1, 1)):
            # CUTLASS's consumer_release: `mapa` to dst_blockid_ = 0, which is the CTA itself
            # when the cluster is one CTA; counted as a local arrive
            own.append(stmts[i].line)
            op, peer = peer[0], None
        if peer is not None:
            # the barrier at the same offset in a peer CTA: read as the local one it maps
            op = peer[0]
            if not peer[2]:
                k.notes.append(Item("handoff.count", f"line {stmts[i].line}: remote operation through mapa on "
                                    f"{peer[1]}: which CTAs' barriers get its arrivals is not derived from the PTX: "
                                    "counts not checked there", Basis.ASSUMPTION))
        v = early.get(i) or k.vals_at(op, i)
        if (v is None or v[1] is None) and kind != "init" and (ts := k.threads(i)) and \
                (tv := k.thread_vals(op, ts)) is not None and tv[0] is not None and tv[1] and \
                set(tv[1]) <= set(inits.get(tv[0], ())):
            # an index that differs by thread, the same every trip (CuTe's ping-pong: each
            # warpgroup waits order[gid]): the barriers its threads address, evaluated per
            # thread, where each is an initialized barrier
            v = tv
        ring = _ring(k, op, inits, bases) if v is None or v[0] is None or v[1] is None else None
        # a symbol known but its slot not: the ring only when it is part of the symbol's barriers
        if ring is not None and (v is None or v[0] is None or ring[1] != frozenset(inits.get(ring[0], ()))):
            v = ring
            assumed.add(i)
            if k.ring_span(op) is not None:
                bounded.add(i)
            k.notes.append(Item("handoff.barrier", f"line {stmts[i].line}: address {op.strip('[] ')} is "
                                f"{_fmt(v[0], frozenset({min(v[1])}))} plus a stage index the PTX computes in a "
                                f"loop: taken as the ring of the {len(v[1])} barrier(s) initialized from there "
                                f"({_fmt(v[0], v[1])}, the loop's step apart)", Basis.ASSUMPTION))
        if v is None or v[0] is None:
            name = op.strip("[] ")
            k.notes.append(Item("handoff.barrier", f"line {stmts[i].line}: address {name} does not resolve to a "
                                ".shared symbol: kept as written", Basis.ASSUMPTION))
            resolved.append((kind, i, op, None, None, peer))
        else:
            resolved.append((kind, i, op, v[0], v[1], peer))
    keys: dict[str, set[int]] = {}
    opaque: set[str] = set()  # a symbol with an init whose offset is not decided: one group for all of it
    for kind, _, _, sym, offs, _ in resolved:
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
    for kind, i, op, sym, offs, _ in resolved:
        if sym is None:
            c = [("raw", op.strip("[] "))]
        elif offs is None or sym in opaque:
            undecided.setdefault(sym, []).append(stmts[i].line)
            c = [(sym, None)] + [(sym, o) for o in sorted(keys.get(sym, ()))]
        elif (hit := [o for o in offs if o in keys.get(sym, ())]) and len(hit) < len(offs):
            # some of the values are barriers and some are not: the value set is wider than
            # what the address takes (one index used twice, `s * 16376 + ... - s * 32760`,
            # combined as if independent). Read as a linear form of its index it may be decided
            lin = k.linear_vals(op)
            if lin is not None and lin[0] == sym and lin[1] and lin[1] <= keys.get(sym, set()):
                c = [(sym, o) for o in sorted(lin[1])]
            elif lin is not None and lin[0] == sym and lin[1] == offs and sym not in opaque and \
                    _one_past(k, op, sorted(hit), sorted(set(offs) - set(hit))):
                # one index, read as a linear form, walks the initialized ring and then one
                # step past its end: a stage counter that wraps at STAGES + 1 lands on the
                # word after the ring (flag 13 names it)
                c = [(sym, o) for o in sorted(lin[1])]
            else:
                undecided.setdefault(sym, []).append(stmts[i].line)
                k.notes.append(Item("handoff.barrier", f"line {stmts[i].line}: address {op.strip('[] ')} takes "
                                    f"{len(offs)} value(s) as read, {len(hit)} of them initialized barriers: which "
                                    "barrier it addresses is not decided", Basis.ASSUMPTION))
                c = [(sym, None)] + [(sym, o) for o in sorted(keys.get(sym, ()))]
        else:
            c = [(sym, o) for o in sorted(offs) if o in keys.get(sym, ())] or [(sym, o) for o in sorted(offs)]
        for x in c[1:]:
            parent[find(x)] = find(c[0])
        find(c[0])
        cands.append(c)
    groups: dict[tuple, dict] = {}
    loop_arrives: list = []  # (statement, address, Arrive) of arrives a loop repeats on one barrier
    for (kind, i, op, sym, offs, peer), c in zip(resolved, cands):
        g = groups.setdefault(find(c[0]), {"sym": sym, "slots": set(), "inits": [], "arr": [], "wait": [],
                                           "inval": []})
        g["slots"].update(x[1] for x in c if x[0] != "raw" and x[1] is not None)
        addr = (_fmt(sym, offs) if sym else op.strip("[] ")) + (f" in CTA {peer[1]} (mapa)" if peer else "") + (
            " in CTA 0 (mapa: this CTA)" if stmts[i].line in own else " (mapa to its own rank)" if stmts[i].line in self_rank
            else "")
        s = stmts[i]
        # the barriers it reaches, where its address decides them (not a ring taken as an
        # assumption, not a peer's): Wait.slots / Arrive.slots
        # (a ring taken from its base and step counts where the PTX's own wrap bounds its
        # index: `i - (i / STAGES) * RING` walks every barrier up to RING)
        reach = {x[1] for x in c} if sym is not None and (i not in assumed or i in bounded) and peer is None and all(
            x[1] is not None for x in c) else set()
        if ".multicast" in s.opcode:
            addr += " in every CTA of its mask (multicast)"
        if kind == "init":
            cnt = k.value(s.operands[1]) if len(s.operands) > 1 else None
            g["inits"].append((site(i, addr), cnt(0) if cnt else None))
        elif kind == "wait":
            g["wait"].append(Wait(site(i, addr), _shown(k, s.operands[2]) if ".parity" in s.opcode
                                  and len(s.operands) > 2 else None, tuple(sorted(reach))))
        elif kind == "inval":
            g["inval"].append(site(i, addr))
        else:
            a = _arrive(k, i, site(i, addr))
            if reach:
                # a counted loop's trips may reach fewer barriers than the index can name
                tv = k.trip_vals(op, i) if a.loop and len(reach) > 1 else None
                if tv is not None and tv[0] == sym and tv[1] and tv[1] < reach:
                    reach = set(tv[1])
                a = dataclasses.replace(a, slots=tuple(sorted(reach)))
            if a.arrivals and _again(k, i, op):
                a = dataclasses.replace(a, again=True)
            if a.arrivals and a.loop and _loop_invariant(k, i, op):
                loop_arrives.append((i, op, a))
            if peer is not None:
                # what this CTA's role sends a peer is, CTAs paired by rank ^ C, what each
                # CTA's barrier gets from its peer's same role
                got = a.arrivals * peer[2] if peer[2] and a.arrivals is not None else None
                a = Arrive(a.site, f"remote {a.kind}", int(got) if got is not None and got == int(got) else None,
                           a.tx_bytes, a.loop)
            g["arr"].append(a)
    _split_lifetimes(k, groups)
    _per_trip(k, groups, loop_arrives)
    # one entry per look-alike group of a symbol (the bytes a phase expects tell two rings
    # apart: flag 8 compares them ring by ring)
    merged: dict[tuple, dict] = {}
    for g in groups.values():
        sig = (g["sym"] if g["sym"] is not None else id(g), tuple(sorted({str(c) for _, c in g["inits"]})),
               frozenset((a.kind, a.site.role, a.site.threads, a.arrivals, a.tx_bytes) for a in g["arr"]),
               frozenset((w.site.role, w.site.threads) for w in g["wait"]), g.get("life"),
               frozenset(_copy_source(k, a) for a in g["arr"] if a.kind == "complete_tx"),
               frozenset(a.loop for a in g["arr"]))
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
        if g.get("life"):
            name += f" (from line {g['life']}: initialized again)"
        decided = sym is None or sym not in undecided
        sites = [s for s, _ in g["inits"]] + [a.site for a in g["arr"]] + [w.site for w in g["wait"]] + g["inval"]
        first = min(s.line for s in sites)
        # the barriers of an initialized group that no init covers (only an address whose
        # values are read exactly puts one there: flag 13)
        stray = tuple(sorted(slots - keys.get(sym, set()))) if sym is not None and g["inits"] and decided and \
            sym not in opaque else ()
        out.append((first, Barrier(name, tuple(g["inits"]), tuple(g["arr"]), tuple(g["wait"]), tuple(g["inval"]),
                                   tuple(sorted(slots)), decided, stray)))
    if self_rank:
        k.notes.append(Item("handoff.cluster", f"line(s) {', '.join(map(str, self_rank[:6]))}: arrive through mapa "
                            "on %cluster_ctarank, the CTA's own rank: counted as an arrive on its own barrier",
                            Basis.EVIDENCE))
    if own:
        k.notes.append(Item("handoff.cluster", f"line(s) {', '.join(map(str, own[:6]))}: arrive through mapa on CTA 0, "
                            + ("and the kernel declares a cluster of one CTA (.reqnctapercluster 1, 1, 1)"
                               if shape else "and the kernel declares no cluster shape (.reqnctapercluster): taken "
                               "as launched one CTA a cluster")
                            + ", where CTA 0 is the CTA itself: counted as an arrive on its own barrier",
                            Basis.EVIDENCE if shape else Basis.ASSUMPTION))
    for sym, lines in undecided.items():
        n = len(keys.get(sym, ()))
        k.notes.append(Item("handoff.barrier", f"{_local(sym)}: the barrier addressed at line(s) "
                            f"{', '.join(map(str, sorted(set(lines))[:6]))} is not decided by the PTX (its index is "
                            "not computed from constants): "
                            + (f"taken as any of the {n} barrier(s) of {_local(sym)}" if n and sym not in opaque else
                               f"all barriers of {_local(sym)} are taken as one"), Basis.ASSUMPTION))
    return tuple(b for _, b in sorted(out, key=lambda x: x[0]))


def _ring(k: _Kernel, op: str, inits: dict[str, set[int]],
          bases: set[tuple[str, int]] | frozenset = frozenset()) -> tuple[str, frozenset] | None:
    """(symbol, offsets) of the ring an address steps through: its base is symbol + C and
    a loop steps it by `step` bytes (`_Kernel.ring_base`), C is an initialized barrier, and
    the ring is the barriers initialized at C, C+step, C+2*step, ... up to the first gap
    (the stage count the inits give), before the first barrier another ring starts at, and
    up to the largest offset the stage index can take where the PTX bounds it
    (`_Kernel.ring_span`)."""
    base = k.ring_base(op)
    if base is None or base[1] not in inits.get(base[0], ()):
        return None
    sym, c, step = base
    span = k.ring_span(op)
    run = [c]
    while run[-1] + step in inits[sym] and (sym, run[-1] + step) not in bases \
            and (span is None or run[-1] + step - c <= span):
        run.append(run[-1] + step)
    return sym, frozenset(run)


def _arrive(k: _Kernel, i: int, st: Site) -> Arrive:
    """What one arriving statement adds to its barrier's pending count, per phase."""
    s = k.stmts[i]
    o = s.opcode
    p = k.threads(i)
    n = len(p) if p is not None else None
    loop = k.loop_line(i)
    if o.startswith("clusterlaunchcontrol.try_cancel"):
        # Cluster Launch Control: the scheduler's request writes a 16-byte response and
        # completes 16 tx bytes on the barrier, no arrival
        return Arrive(st, "complete_tx", 0, "16", loop)
    if o.startswith("cp.async.bulk"):
        return Arrive(st, "complete_tx", 0, _shown(k, s.operands[2]) if ".tensor" not in o and len(s.operands) > 3
                      else None, loop)
    if o.startswith("tcgen05.commit"):
        # .mbarrier::arrive::one: one arrive-on per issuing thread, once its tcgen05 ops complete
        if ".multicast" in o:
            return Arrive(st, "tcgen05.commit", _multicast_arrivals(k, i, n), None, loop)
        return Arrive(st, "tcgen05.commit", n, None, loop)
    if o.startswith("cp.async.mbarrier.arrive"):
        return Arrive(st, "cp.async.mbarrier.arrive", n if ".noinc" in o else 0, None, loop)
    if o.startswith("mbarrier.expect_tx"):
        return Arrive(st, "expect_tx", 0, _shown(k, s.operands[1]) if len(s.operands) > 1 else None, loop)
    if "expect_tx" in o:
        return Arrive(st, "arrive.expect_tx", n, _shown(k, s.operands[2]) if len(s.operands) > 2 else None, loop)
    count = 1
    if len(s.operands) > 2:  # mbarrier.arrive ... state, [addr], count
        c = k.value(s.operands[2])
        count = c(0) if c else None  # type: ignore[assignment]
    return Arrive(st, "arrive", n * count if n is not None and count is not None else None, None, loop,
                  _turns(k, i))


def _joined(k: _Kernel, mine: list[int], theirs: list[int]) -> bool:
    """Whether statements `mine` and `theirs` lie on one forward path: a block of one reaches a
    block of the other along edges that are no loop's back edge."""
    a, b = {k.block_of[i] for i in mine}, {k.block_of[i] for i in theirs}
    return bool((k.forward_reach(a) - a) & b) or bool((k.forward_reach(b) - b) & a)


def _copy_source(k: _Kernel, a: Arrive) -> str:
    """The tensor map (or source address) a copy reads: two rings fed from different maps
    (a SwiGLU kernel's A+W1 ring and its W3 ring) are not look-alikes."""
    i = k.stmt_of(a.site)
    if i is None or len(k.stmts[i].operands) < 2:
        return ""
    src = k.stmts[i].operands[1].strip()
    m = re.match(r"\[\s*([^,\]\s]+)", src)
    return m.group(1) if m else src


def _fold_sub_roles(kinds: dict[frozenset, tuple[str, int]], role_name: dict, roles: list[Item]) -> None:
    """A branch inside a role taken by some of its warps that does no job of its own (an
    elected warp's init or arrive, one warpgroup's `bar.sync` that orders it after the
    other: TIRx and CuTe's ping-pong) is that role's code, not a role: it takes the name of
    the smallest role around it whose kind is a job, and its item is dropped."""
    jobless = ("idle", "other")
    drop = []
    for ws, (kind, at) in kinds.items():
        if kind not in jobless:
            continue
        around = [w for w, (kd, _) in kinds.items() if ws < w and kd not in jobless + ("dispatch", "none")]
        if around:
            role_name[ws] = role_name[min(around, key=len)]
            drop.append(at)
    # One warp of the consumers that only issues their tile's TMA store (CuTe's elected lane
    # of warp 4 storing sC for every consumer) is the consumers' epilogue, not a role: its
    # job is added to theirs
    for ws, (kind, at) in kinds.items():
        store_only = roles[at].text.startswith(f"{role_name[ws]}: TMA store; ")
        around = [w for w, (kd, _) in kinds.items() if ws < w and kd == "consumer"]
        if kind == "epilogue" and store_only and around:
            w = min(around, key=len)
            role_name[ws] = role_name[w]
            head, _, rest = roles[kinds[w][1]].text.partition("; ")
            if rest and not head.endswith("TMA store"):
                roles[kinds[w][1]] = dataclasses.replace(roles[kinds[w][1]], text=f"{head}, TMA store; {rest}")
            drop.append(at)
    for at in sorted(drop, reverse=True):
        del roles[at]


def _one_past(k: _Kernel, op: str, hit: list[int], extra: list[int]) -> bool:
    """The address is one index times a stride plus a base, its values that are barriers a
    run of that stride, and the one value that is not the next step after the run's end."""
    form = k._linear(op.strip().strip("[]").strip(), 0)
    if form is None or len([c for c in form[1].values() if c]) != 1 or len(extra) != 1 or len(hit) < 2:
        return False
    step = abs(next(c for c in form[1].values() if c))
    return all(b - a == step for a, b in zip(hit, hit[1:])) and extra[0] == hit[-1] + step


def _runaway_indices(k: _Kernel, barriers: tuple[Barrier, ...]) -> set[str]:
    """The leaf registers (a stage counter) of the addresses that reach a barrier no init
    covers, beside ones it does (Barrier.uninitialized): an index that runs past its ring."""
    out: set[str] = set()
    for b in barriers:
        if not b.uninitialized:
            continue
        for site, slots in [(a.site, a.slots) for a in b.arrivers] + [(w.site, w.slots) for w in b.waiters]:
            i = k.stmt_of(site)
            if i is None or not set(slots) & set(b.uninitialized):
                continue
            addr = next((o for o in k.stmts[i].operands if o.strip().startswith("[")), None)
            form = k._linear(addr.strip().strip("[]").strip(), 0) if addr else None
            if form is not None:
                out |= {r for r, c in form[1].items() if c}
    return out


def _flag_per_trip(barriers: tuple[Barrier, ...]) -> list[Flag]:
    """Flag 2 for an arrive its inner loop repeats on the barrier of the outer trip
    (`Arrive.per_trip`): a phase gets an arrival every inner trip, more than the init count
    whenever the loop runs more than count / arrivals times."""
    out = []
    for b in barriers:
        counts = {c for _, c in b.inits}
        for a in b.arrivers:
            if not a.per_trip or len(counts) != 1 or None in counts or not a.arrivals:
                continue
            (count,) = counts
            out.append(Flag(2, FLAG_NAMES[2], f"{b.name}: mbarrier.init count {count} but {a.kind} by {a.site.role} "
                            f"(line {a.site.line}) arrives on it every trip of the loop at line {a.per_trip}, whose "
                            "address does not change in that loop while the loop around it steps the barrier: "
                            f"{a.arrivals} arrival(s) a trip, so a phase completes before the loop ends whenever it "
                            f"runs more than {max(count // a.arrivals, 1)} time(s) (move it after the loop, or guard "
                            "it with the loop's last trip); the loop's trip count is set at run time, not in the PTX",
                            Basis.EVIDENCE if a.arrivals >= count else Basis.ASSUMPTION, a.site.line))
            break
    return out


def _loop_invariant(k: _Kernel, i: int, op: str) -> bool:
    """Statement i arrives on one barrier every trip of its innermost loop, while the loop
    around that one steps its address (no register of the address written in the inner
    loop, one written in the outer; the guard not decided in the inner loop, except an
    elected lane): an arrive per inner trip on the barrier of the outer trip."""
    body = k.loop_blocks(i)
    if not body:
        return False
    outer = [b for b in getattr(k, "loop_bodies", {}).values() if body < b]
    if not outer:
        return False
    around = min(outer, key=len)
    regs = set(re.findall(r"%[\w$.]+", op))
    s = k.stmts[i]
    if s.guard:
        gd = k.defs.get(s.guard, [])
        if any(k.block_of[k.index[id(d)]] in body and not d.opcode.startswith("elect") for d in gd):
            return False
    defs = [k.block_of[k.index[id(d)]] for r in regs for d in k.defs.get(r, ())]
    return not any(b in body for b in defs) and any(b in around for b in defs)


def _per_trip(k: _Kernel, groups: dict[tuple, dict], loop_arrives: list) -> None:
    """An arrive that its loop repeats on one barrier whose waiters wait outside that loop,
    in fewer loops than it (a Gluon MMA warp's commit to the accumulator's barrier left
    inside its K loop, the epilogue waiting once a tile) gives a phase one arrival per
    trip: the Arrive is marked with the loop (`per_trip`), so the count is taken as the
    trips' and flag 2 says so. Waiters as deep in loops as the arrive (a ring unrolled by
    its stage count: the MMA commits to empty[0], [1], [2] once a trip, and the loader
    waits on each once a trip of its own loop) meet it trip for trip."""
    for g in groups.values():
        for j, a in enumerate(g["arr"]):
            hit = next(((i, op) for i, op, x in loop_arrives if x is a), None)
            if hit is None:
                continue
            body = k.loop_blocks(hit[0])
            waits = [x for w in g["wait"] if (x := k.stmt_of(w.site)) is not None]
            depth = k.loop_depth(hit[0])
            if waits and not any(k.block_of[x] in body for x in waits) and all(k.loop_depth(x) < depth
                                                                             for x in waits):
                trips = k.trip_count(hit[0])
                if trips is not None:  # a loop the PTX counts: its arrivals, all of them, every phase
                    g["arr"][j] = dataclasses.replace(a, arrivals=a.arrivals * trips)
                    k.notes.append(Item("handoff.trips", f"line {a.site.line}: arrives on its barrier every trip of "
                                        f"the loop at line {a.loop}, which runs {trips} times: {a.arrivals * trips} "
                                        "arrival(s) a phase", Basis.EVIDENCE))
                else:
                    g["arr"][j] = dataclasses.replace(a, per_trip=a.loop)


def _split_lifetimes(k: _Kernel, groups: dict[tuple, dict]) -> None:
    """A barrier invalidated and initialized again (Gluon reuses a ring's barrier for a
    bias load after the region: `mbarrier.inval`, then `mbarrier.init` with another count)
    has two lifetimes: the operations the re-init dominates are the second one's, a group
    of their own (`name (from line N)`), so neither lifetime's count adds the other's
    arrivals."""
    dom = k.dominators()

    def after(x: int, r: int) -> bool:
        bx, br = k.block_of[x], k.block_of[r]
        return x > r if bx == br else br in dom[bx]

    for key, g in list(groups.items()):
        if not g["inval"] or len(g["inits"]) < 2:
            continue
        invals = [x for s in g["inval"] if (x := k.stmt_of(s)) is not None]
        inits = [(x, s, c) for s, c in g["inits"] if (x := k.stmt_of(s)) is not None]
        re_inits = [(x, s, c) for x, s, c in inits if any(after(x, v) for v in invals)]
        if not re_inits or len(re_inits) == len(inits):
            continue
        r = min(x for x, _, _ in re_inits)
        second = {"sym": g["sym"], "slots": set(g["slots"]), "inval": [], "life": k.stmts[r].line,
                  "inits": [(s, c) for x, s, c in re_inits],
                  "arr": [a for a in g["arr"] if (x := k.stmt_of(a.site)) is not None and after(x, r)],
                  "wait": [w for w in g["wait"] if (x := k.stmt_of(w.site)) is not None and after(x, r)]}
        rest_arr = [a for a in g["arr"] if a not in second["arr"]]
        rest_wait = [w for w in g["wait"] if w not in second["wait"]]
        if not (second["arr"] and second["wait"] and rest_arr and rest_wait):
            # the second lifetime's operations are not all under the re-init (another role's,
            # reached through a dispatch: Triton's second region): the lifetimes stay one group
            continue
        g["inits"] = [(s, c) for x, s, c in inits if (x, s, c) not in re_inits]
        g["arr"], g["wait"] = rest_arr, rest_wait
        groups[(key, "life", r)] = second


def _again(k: _Kernel, i: int, op: str) -> bool:
    """Statement i arrives on the barrier an earlier statement of its block arrived on, the
    same opcode on the same address with no register of it written between: one thread
    arrives twice on one barrier in one trip (a Gluon loader's two `expect_tx`, one per
    copy, on a barrier initialized with 2). Unrolled copies of a loop address another
    slot, through another register, and do not count."""
    s = k.stmts[i]
    regs = set(re.findall(r"%[\w$.]+", op))
    b = k.block_of[i]
    for j in range(i - 1, -1, -1):
        if k.block_of[j] != b:
            return False
        t = k.stmts[j]
        if t.opcode == s.opcode and t.guard == s.guard and t.negated == s.negated and op in t.operands:
            return True
        if (d := _dest(t)) and d in regs:
            return False
    return False


def _turns(k: _Kernel, i: int) -> int:
    """2 when the warps running statement i fall in two groups that a named barrier orders
    one after the other: one group runs `bar.arrive N` and the other `bar.sync N`, no warp
    both (CuTe's ping-pong consumers: the second warpgroup starts its mainloop when the
    first has ended it). They take turns at the ring they share, each phase released by one
    group; said in the notes as an assumption. 1 otherwise."""
    p = k.threads(i)
    if not p:
        return 1
    warps = {t // 32 for t in p}
    if getattr(k, "_named_sides", None) is None:
        sides: dict[int, tuple[set, set]] = {}
        for j, st in enumerate(k.stmts):
            parts = st.opcode.split(".")
            if parts[0] not in ("bar", "barrier") or len(parts) < 2 or parts[1] not in ("arrive", "sync") \
                    or not st.operands:
                continue
            f, tj = k.value(st.operands[0]), k.threads(j)
            if f is None or not tj:
                continue
            # the id read per thread: CuTe's ping-pong warpgroups sync on one id each and arrive
            # on the other's (`bar.sync %r20, 256` with %r20 by warpgroup)
            for t in tj:
                if (ident := f(t)):
                    sides.setdefault(ident, (set(), set()))[parts[1] == "sync"].add(t // 32)
        k._named_sides = sides  # type: ignore[attr-defined]
    for ident, (arrive, sync) in k._named_sides.items():  # type: ignore[attr-defined]
        if arrive and sync and not arrive & sync and warps <= arrive | sync and warps & arrive and warps & sync:
            line = k.stmts[i].line
            k.notes.append(Item("handoff.turns", f"line {line}: its warps are two groups ordered by named barrier "
                                f"{ident} ({_warps(frozenset(arrive))} run bar.arrive, {_warps(frozenset(sync))} "
                                "bar.sync): taken as taking turns at the ring, each phase released by one group",
                                Basis.ASSUMPTION))
            return 2
    groups = sorted({w // 4 for w in warps})
    if len(groups) == 2:
        # warpgroups that each wait on a barrier of their own (CUTLASS's OrderedSequenceBarrier:
        # warpgroup g waits on order[g] and arrives on the other's) hand each other the turn
        for j, st in enumerate(k.stmts):
            if not st.opcode.startswith(_WAIT) or len(st.operands) < 2:
                continue
            q = k.threads(j)
            if not q or not ({t // 32 for t in q} & warps):
                continue
            f = k._shared_fn(st.operands[1], 0)
            if f is None:
                continue
            by_group = {g: {f[1](t) for t in q if t // 128 == g} for g in groups}
            if all(len(v) == 1 and None not in v for v in by_group.values()) and \
                    len({next(iter(v)) for v in by_group.values()}) == 2:
                k.notes.append(Item("handoff.turns", f"line {k.stmts[i].line}: its warps are two warpgroups that wait "
                                    f"on barriers of their own (line {st.line}: {_warps(frozenset(warps))} by "
                                    "warpgroup): taken as taking turns, each phase released by one warpgroup",
                                    Basis.ASSUMPTION))
                return 2
    return 1


def _rank_mask_arrivals(k: _Kernel, s) -> int | None:  # type: ignore[no-untyped-def]
    """Arrive-ons each barrier gets a phase from a multicast commit whose ctaMask is computed
    from the CTA's rank (`1 << (rank % 2)`: each CTA releases its own; `(1 << (rank ^ 1)) |
    (1 << rank)`: both): the mask of every rank of the cluster, and for each CTA how many
    ranks' masks hold it. The cluster is .reqnctapercluster's, else taken as a pair (said
    in the notes). None when a mask is not decided or the CTAs get different counts."""
    shape = k.e.cluster
    size, per_rank = k.per_rank(s.operands[1], [0])
    masks = [m for (m,) in per_rank]
    if None in masks or any(m <= 0 or m >> size for m in masks):  # type: ignore[operator]
        return None
    per = {sum(1 for m in masks if m >> q & 1) for q in range(size)}  # type: ignore[operator]
    if len(per) != 1:
        return None
    got = per.pop()
    k.notes.append(Item("handoff.cluster", f"line {s.line}: multicast tcgen05.commit with a ctaMask computed from "
                        f"the CTA's rank ({', '.join(f'{m:#x}' for m in masks)} for ranks 0-{size - 1}): each CTA's "
                        f"barrier gets {got} arrive-on(s) a phase" + ("" if shape else "; the cluster is taken as "
                        "a pair (its shape is not in the PTX: a launch attribute)"),
                        Basis.EVIDENCE if shape else Basis.ASSUMPTION))
    return got


def _multicast_arrivals(k: _Kernel, i: int, n: int | None) -> int | None:
    """Arrivals a phase of one barrier gets from a `tcgen05.commit ... .multicast::cluster`
    [bar], ctaMask: it arrives on the barrier at this offset in every CTA of the mask, and
    every CTA runs this same PTX, so each barrier of the mask gets one arrive-on from each
    CTA whose mask holds it: with a constant mask, the mask's CTA count per issuing thread
    (CUTLASS / CuTe / TIRx: the MMA of each CTA of a multicast pair releases `empty` in
    both). That every CTA of the mask runs the role with the same mask, and that no CTA
    outside it sends to it, rests on the cluster shape: evidence when .reqnctapercluster
    gives as many CTAs as the mask names, else an assumption (said in the notes). None when
    the mask is not a constant."""
    s = k.stmts[i]
    c = k.value(s.operands[1]) if len(s.operands) > 1 else None
    mask = c(0) if c else None
    if n is not None and mask is None and len(s.operands) > 1 and ".cta_group::2" not in s.opcode:
        got = _rank_mask_arrivals(k, s)
        if got is not None:
            return n * got
    if n is None or mask is None or mask <= 0:
        k.notes.append(Item("handoff.count", f"line {s.line}: multicast tcgen05.commit with a ctaMask the PTX does "
                            "not decide: how many CTAs arrive on each barrier is not derived, counts not checked "
                            "there", Basis.ASSUMPTION))
        return None
    ctas = bin(mask).count("1")
    if ".cta_group::2" in s.opcode:
        # a pair's MMA is issued by its leader CTA alone: its commit is the one arrival each
        # CTA of the mask gets a phase (the peer's warp issues none)
        k.notes.append(Item("handoff.cluster", f"line {s.line}: tcgen05.commit.cta_group::2 multicast to ctaMask "
                            f"{mask:#x}: counted as one arrive-on a phase on each barrier of the mask, from the "
                            "pair's leader CTA, taken as the only CTA that issues it", Basis.ASSUMPTION))
        return n
    shape = k.e.cluster
    size = shape[0] * shape[1] * shape[2] if shape else None
    text = (f"multicast tcgen05.commit to ctaMask {mask:#x} ({ctas} CTA(s)): counted as {ctas} arrive-on(s) a "
            "phase on each barrier of the mask, one from each CTA of it, which runs this same commit"
            + (f" (the cluster is {size} CTA(s), .reqnctapercluster)" if size == ctas else
               "; assumes the cluster is the CTAs of the mask (its shape is not in the PTX: a launch attribute)"
               if size is None else f"; the cluster is {size} CTA(s): the CTAs outside the mask are assumed not "
               "to send to it"))
    basis = Basis.EVIDENCE if size == ctas else Basis.ASSUMPTION
    # one note for all the commits of one mask: `line(s) A, B: ...`
    for j, x in enumerate(k.notes):
        if x.aspect == "handoff.cluster" and x.text.endswith(": " + text) and x.text.startswith("line(s) "):
            k.notes[j] = Item(x.aspect, f"{x.text.split(':')[0]}, {s.line}: {text}", basis)
            break
    else:
        k.notes.append(Item("handoff.cluster", f"line(s) {s.line}: {text}", basis))
    return n * ctas


def _shown(k: _Kernel, op: str) -> str:
    """An operand as the sheet shows it: its value when constant, else as written (without
    the scope / call tags the parser adds to register names)."""
    v = k.vals(op)
    if v and v[0] is None and v[1] is not None and len(v[1]) == 1:
        return str(next(iter(v[1])))
    return re.sub(r"\$[sc]\d+", "", op)
