"""How a role releases a ring stage it read, from the SASS alone: for a repro built with
`code=sm_90a` only (no PTX to fill a worksheet from), the racecheck question of
analyses/handoffs.py (`releases`) asked of `cuobjdump -sass`.

In a kernel's SASS, a role's wait is `SYNCS.PHASECHK`; a plain arrive of one thread is
`SYNCS.ARRIVE.TRANS64.A1T0` (arrive once, no transaction bytes); the stage's reads are
`LDS`/`LDSM` (and `HGMMA` from shared memory). For each such arrive that follows the
role's wait with stage reads between them, in the order the SASS lists the code:

- an arrive without a guard predicate: every thread of the role that reaches it arrives
  (per-thread release);
- a guarded arrive (`@!P0 SYNCS.ARRIVE...`: one lane) with a `WARPSYNC` or `BAR` between
  the last read and it: warp-synced;
- a guarded arrive with nothing but a `NOP` there: what nvcc 13.0 made of a converged
  `__syncwarp()` (fixtures/src/ws_stream.cu built `code=sm_90a` with and without it: NOP
  at 0x5220 before `@!P0 SYNCS.ARRIVE` at 0x5300, and no NOP in the build without it).
  The SASS cannot tell that NOP from scheduling padding, so the class says so
  (`single-lane-release-unsure`) and is never accepted by `--accept-race`;
- a guarded arrive with neither: unsynced.

Which barrier the arrive addresses and which lane the guard keeps are not read (the
operand is a register; the predicate's origin is not traced): the row names the arrive's
SASS offset. Reads after the arrive are not judged (the listing's order is not the
control flow's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_READ = re.compile(r"^(LDS|LDSM|HGMMA)\b")
_SYNC = re.compile(r"^(WARPSYNC|BAR\.(SYNC|ARV|RED))\b")


@dataclass(frozen=True)
class SassRelease:
    function: str  # the mangled name cuobjdump lists
    offset: int  # the arrive's SASS offset
    release: str  # a handoffs.Release value, or "single-lane-release-unsure"
    evidence: str


def sass_releases(text: str, named: Callable[[str], bool]) -> list[SassRelease]:
    """The release class of each one-thread arrive after a wait and stage reads, in the
    functions of the `cuobjdump -sass` listing `text` that racecheck named (`named`, on
    the mangled name: the same match the PTX worksheets get)."""
    from wsperf.collectors.cudagdb import CudaGdbOutputError, parse_cuobjdump_sass

    try:
        listing = parse_cuobjdump_sass(text)
    except CudaGdbOutputError:
        return []
    out: list[SassRelease] = []
    for name, by_offset in listing.items():
        if not named(name):
            continue
        insns = [(i.offset, i.guard, i.opcode) for _, i in sorted(by_offset.items())]
        waited = False
        reads_at: int | None = None  # index of the last stage read since the wait
        for i, (off, guard, op) in enumerate(insns):
            if op.startswith("SYNCS.PHASECHK"):
                waited, reads_at = True, None
            elif _READ.match(op) and waited:
                reads_at = i
            elif op.startswith("SYNCS.ARRIVE.TRANS64.A1T0") and waited and reads_at is not None:
                between = [o for _, _, o in insns[reads_at + 1:i]]
                where = f"{name} SASS {off:#06x}"
                if guard is None:
                    out.append(SassRelease(name, off, "per-thread-release",
                                           f"{where}: SYNCS.ARRIVE with no guard after the role's wait and its LDS "
                                           "reads: every thread of the role that reaches it arrives (from the SASS; "
                                           "no PTX)"))
                elif any(_SYNC.match(o) for o in between):
                    sync = next(o for o in between if _SYNC.match(o))
                    out.append(SassRelease(name, off, "warp-synced-single-lane-release",
                                           f"{where}: {sync} between the last LDS and a guarded ({guard.strip()}) "
                                           "SYNCS.ARRIVE (from the SASS; no PTX)"))
                elif "NOP" in between:
                    out.append(SassRelease(name, off, "single-lane-release-unsure",
                                           f"{where}: a guarded ({guard.strip()}) SYNCS.ARRIVE after the role's LDS "
                                           "reads with only a NOP between them: nvcc makes a converged __syncwarp() a "
                                           "NOP, and so can scheduling; the SASS does not say which (no PTX)"))
                else:
                    out.append(SassRelease(name, off, "unsynced-single-lane-release",
                                           f"{where}: a guarded ({guard.strip()}) SYNCS.ARRIVE right after the role's "
                                           "LDS reads, with no WARPSYNC, BAR or NOP between (from the SASS; no PTX)"))
                reads_at = None
    return out
