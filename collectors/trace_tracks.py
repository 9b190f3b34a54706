"""How a trace of named tracks becomes timeline rows: the CTA, warp, SM, role and event of
each slice. One set of rules for the Chrome-trace JSON importer (collectors/timeline.py) and
the Perfetto protobuf importer (collectors/perfetto_trace.py), so that the same kernel
traced by either writer lands in `timeline_events` the same way.

A slice's CTA is args.cta, else the number after 'CTA' (or 'block', FlashInfer's 'blk') in
its process / parent track names, then in its own track name, else a CTA given by block
coordinates, `CTA(x, y, z)` (CuTe DSL's IKET), else the process id. A trace names no grid
size beside its coordinates, so the distinct (x, y, z) are numbered in (z, y, x) order: the
linear block index x + X (y + Y z) wherever every CTA of the grid was traced, a dense
numbering of the traced ones otherwise. The warp is args.warp, else 'warp N' in the track
name, else FlashInfer's group ('blk3_g1': group 1), else the thread id; the SM args.sm, else
'Core N' / 'SM N' ('SM_005', IKET's 'VSM124') in the process / parent names.

The role is args.role, else a role word (producer, consumer, epilogue) in the track, parent
or event name, else 'other'; then per warp: a warp whose events name one role (and 'other'
besides) has it on every event, so a range `producer_acquire` makes its warp's `tma_load`
and lifetime the producer's. A warp whose events name no role takes it from what it does:
copies and no compute, the producer; computes and no copy, a consumer; epilogue work and
neither, the epilogue; else (copies and computes, as Proton's staged warps) 'other'. An
event name holding wait/acquire, copy/load/tma, compute/mma, epilogue/store, release,
kernel or warp life time is that event (the name kept in `label`); others stay as named.
Standard library only: nothing here slows start-up."""

from __future__ import annotations

import re
from typing import Any

COLUMNS = ("t_ns", "clk", "sm", "cta", "warp", "role", "event", "label", "phase", "stage", "seq")
# Event-name words -> wsperf event kinds, first match wins (Proton scopes such as
# 'tma_loads_issue' or 'wgmma_wait' name what they time).
# 'acquire' is a wait for a free slot (CUTLASS's producer_acquire); IKET names each warp's
# lifetime (its entry to its exit) 'Warp Life Time'.
_EVENT_WORDS = (("wait", "wait"), ("acquire", "wait"), ("epilogue", "epilogue"), ("store", "epilogue"),
                ("copy", "copy"), ("load", "copy"), ("tma", "copy"), ("compute", "compute"), ("mma", "compute"),
                ("release", "release"), ("kernel", "kernel"), ("life time", "kernel"), ("lifetime", "kernel"))
_ROLE_WORDS = ("producer", "consumer", "epilogue")
_NUM_AFTER = {k: re.compile(rf"{k}\s*[#:_ ]?\s*(\d+)", re.I) for k in ("cta", "warp", "core", "sm", "block", "blk")}
# FlashInfer's intra-kernel profiler names a track blk<block>_g<group> (flashinfer/profiler)
_NUM_AFTER["group"] = re.compile(r"\bblk\d+_g(\d+)\b", re.I)
# CuTe DSL's IKET names a CTA by its block coordinates: 'CTA(1, 0, 0)'
_CTA_XYZ = re.compile(r"\bCTA\s*\(\s*(\d{1,9})\s*,\s*(\d{1,9})\s*,\s*(\d{1,9})\s*\)", re.I)
MAX_NS = float(1 << 62)  # a time in ns a trace's BIGINT columns hold with room for spans


def small_int(v: Any) -> bool:
    """An int a trace's INTEGER / BIGINT columns hold (not a bool, not 1e30)."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31)


def text(v: Any) -> str:
    """A value from the trace as text that can be stored: lone surrogates (`\\ud800`) replaced."""
    return str(v).encode("utf-8", "replace").decode("utf-8")


def num(name: Any, key: str) -> int | None:
    """The number after `key` ('CTA 3', 'SM_005') in a track name; an int is itself."""
    if isinstance(name, int) and not isinstance(name, bool):
        return name if small_int(name) else None
    m = _NUM_AFTER[key].search(str(name)) if name is not None else None
    return int(m.group(1)) if m and len(m.group(1)) < 10 else None


def cta_xyz(*names: Any) -> tuple[int, int, int] | None:
    """The block coordinates of the first name that gives them ('CTA(1, 0, 0)')."""
    for name in names:
        if isinstance(name, str) and (m := _CTA_XYZ.search(name)):
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def names_cta(name: Any) -> bool:
    """Whether a track name names a CTA ('CTA 3', 'blk6_g1', 'CTA(1, 0, 0)')."""
    return isinstance(name, str) and (cta_xyz(name) is not None
                                      or any(num(name, k) is not None for k in ("cta", "block", "blk")))


def event_kind(name: str) -> str:
    low = name.lower()
    for word, kind in _EVENT_WORDS:
        if word in low:
            return kind
    return name


def role(*texts: Any) -> str:
    for t in texts:
        low = str(t or "").lower()
        for r in _ROLE_WORDS:
            if r in low:
                return r
    return "other"


def _first(names: tuple[Any, ...], *keys: str) -> int | None:
    """The first number any of `keys` finds, trying each key over every name in turn; a
    Chrome pid / tid that is a number stands for itself in the first name only."""
    for key in keys:
        for i, name in enumerate(names):
            if (i == 0 or isinstance(name, str)) and (n := num(name, key)) is not None:
                return n
    return None


class EventColumns:
    """Timeline rows as COLUMNS lists, placed by the rules above; `seq` of a begin or an
    instant is args.seq, else its ordinal among its warp's events of that kind. `columns()`
    gives them once every row is in (block coordinates numbered, roles set per warp)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in COLUMNS}
        self._seqs: dict[tuple, int] = {}

    def add(self, t_ns: float, phase: str, name: Any, args: dict, proc: Any, thread: Any, pid: Any = None,
            tid: Any = None, seq: int | None = None) -> int:
        """One row; `proc` and `thread` are the track's process (or parent) name and its own
        name; `pid` / `tid` stand in for a CTA / warp no name gives. Returns the row's seq (an
        end passes its begin's). A ValueError for a time no BIGINT ns column holds."""
        if not abs(t_ns) < MAX_NS:  # NaN and inf fail too; an int past 2^1024 compares without overflow
            raise ValueError("a time past what a trace can hold")
        cta = args.get("cta") if small_int(args.get("cta")) else _first((proc, thread), "cta", "block", "blk")
        if cta is None:  # block coordinates stay a tuple until columns() numbers them
            cta = cta_xyz(proc, thread) or (pid if small_int(pid) else 0)
        warp = args.get("warp") if small_int(args.get("warp")) else _first((thread,), "warp", "group")
        if warp is None:
            warp = tid if small_int(tid) else 0
        sm = args.get("sm") if small_int(args.get("sm")) else _first((proc,), "core", "sm")
        name = text(name)
        kind = event_kind(name)
        who = text(args["role"]) if isinstance(args.get("role"), str) else role(thread, proc, name)
        if seq is None:
            key = (cta, warp, kind)
            seq = args.get("seq") if small_int(args.get("seq")) else self._seqs.get(key, 0)
            self._seqs[key] = seq + 1
        c = self.cols
        c["t_ns"].append(round(t_ns))
        c["clk"].append(None)
        c["sm"].append(sm)
        c["cta"].append(cta)
        c["warp"].append(warp)
        c["role"].append(who)
        c["event"].append(kind)
        c["label"].append(None if kind == name else name)
        c["phase"].append(phase)
        c["stage"].append(args.get("stage") if small_int(args.get("stage")) else None)
        c["seq"].append(seq)
        return seq

    def columns(self) -> dict[str, list]:
        """The rows, with CTAs given as block coordinates numbered in (z, y, x) order and the
        role of each warp set from all its events (the rules above)."""
        c = self.cols
        xyz = sorted({k for k in c["cta"] if isinstance(k, tuple)}, key=lambda k: (k[2], k[1], k[0]))
        if xyz:
            ids = {k: i for i, k in enumerate(xyz)}
            c["cta"] = [ids[k] if isinstance(k, tuple) else k for k in c["cta"]]
        named: dict[tuple, set[str]] = {}
        kinds: dict[tuple, set[str]] = {}
        for cta, warp, who, kind in zip(c["cta"], c["warp"], c["role"], c["event"]):
            named.setdefault((cta, warp), set()).add(who)
            kinds.setdefault((cta, warp), set()).add(kind)
        fill: dict[tuple, str] = {}
        for key, roles in named.items():
            own = roles - {"other"}
            if len(own) == 1 and "other" in roles:
                fill[key] = next(iter(own))
            elif not own:
                does = kinds[key]
                if "copy" in does and "compute" not in does:
                    fill[key] = "producer"
                elif "compute" in does and "copy" not in does:
                    fill[key] = "consumer"
                elif "epilogue" in does and not does & {"copy", "compute"}:
                    fill[key] = "epilogue"
        if fill:
            c["role"] = [fill.get((cta, warp), who) for cta, warp, who in zip(c["cta"], c["warp"], c["role"])]
        return c
