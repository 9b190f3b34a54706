"""Perfetto protobuf traces (.perfetto-trace, .pftrace, .perfetto; gzip of them too) as
timeline rows: what in-kernel profilers that write Perfetto's own format emit (CuTe DSL's
IKET `run-iket`, TVM TIRx's profiler, FlashInfer's intra-kernel profiler through
tg4perfetto). Decoded with the official schema the `perfetto` package ships
(perfetto/protos/perfetto/trace/perfetto_trace_pb2.py, read by `protobuf`), imported only
when such a file is read.

What is read, per TracePacket:
- TrackDescriptor: uuid, parent_uuid, name (else static_name, the thread's or process's
  name), its ProcessDescriptor (pid, process_name) or ThreadDescriptor (pid, tid,
  thread_name). A thread track without a parent belongs to the process track of its pid.
- TrackEvent of TYPE_SLICE_BEGIN, TYPE_SLICE_END (closes the track's innermost open slice)
  and TYPE_INSTANT, on `track_uuid`, else the sequence's track_event_defaults.track_uuid.
  Counters, legacy events and every other packet are skipped.
- Names given as `name` or interned (`name_iid` -> interned_data.event_names); debug
  annotations (args) by name or interned name, with int, uint, double, bool, string or
  interned-string values. Interned data and TracePacketDefaults belong to their
  trusted_packet_sequence_id and are dropped when a packet's sequence_flags say
  SEQ_INCREMENTAL_STATE_CLEARED.
- Times: `timestamp` in the packet's timestamp_clock_id (else the sequence's default,
  else the trace's clock), brought onto one clock through ClockSnapshot packets, with
  sequence-scoped (64-127), incremental and unit_multiplier_ns clocks as the SDK writes them.

Each slice is then placed as a Chrome track is (collectors/trace_tracks.py): the track's
name is the thread name, the names of its parent tracks (nearest first) the process name,
the nearest process pid stands in for the CTA and the thread tid, else 'warp N' in the
nearest parent's name that has one, else the track's place among its parent's children,
for the warp. A track's events are taken in time order (ties in file order), as Perfetto's
own importer sorts them.

Tracks above the CTAs (the parents of a track that names a CTA) hold no warp's events: their
slices are the launch, and are skipped. CuTe DSL's IKET (`run-iket`, nvidia-cutlass-dsl
4.8.1) writes such a tree: Root / `Grid1` (one slice, `kernel:<name>, gridId: <n>`, the
launch: the kernel's name is read from it) / `GPC1` / `TPC4|VSM124` (the SM) /
`CTA(x, y, z)` / `Warp03` (one slice, `Warp Life Time`) / `StackedRanges` (the warp's
ranges; one that ended on the tick it began is named `<name> [duration=0]`, read as
`<name>`) and `Marker` (its marks, instants).
A trace of several launches (several `kernel:` slices above the CTAs) is refused: their
CTAs and warps would be taken for one launch's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wsperf.collectors.errors import InputError
from wsperf.collectors.trace_tracks import EventColumns, names_cta, num, text

PERFETTO_SUFFIXES = tuple(s + gz for s in (".perfetto-trace", ".pftrace", ".perfetto") for gz in ("", ".gz"))
_BOOTTIME = 6  # BuiltinClock.BOOTTIME: a trace's clock unless a ClockSnapshot names another
_SCOPED = range(64, 128)  # clock ids that belong to one packet sequence
_SLICE_BEGIN, _SLICE_END, _INSTANT = 1, 2, 3  # TrackEvent.Type
_CLEARED = 1  # TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
# IKET appends this to a range that ended on the tick it began (its timer ticks every 32 ns):
# the range keeps its own name, so that its label is that of its longer namesakes.
_ZERO_LENGTH = " [duration=0]"


def looks_like_perfetto(data: bytes) -> bool:
    """A protobuf Trace starts with field 1 (a TracePacket), length-delimited: byte 0x0a,
    which is also a newline, so JSON after a blank line is not one."""
    return data[:1] == b"\x0a" and data.lstrip()[:1] not in (b"{", b"[")


def _schema():
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
        from google.protobuf.message import DecodeError
    except ImportError as e:
        raise InputError(f"Perfetto protobuf traces need the Python packages perfetto and protobuf ({e}); "
                         "install them (`pip install perfetto`) or reinstall wsperf") from None
    return perfetto_trace_pb2, DecodeError


@dataclass
class _Track:
    name: str
    parent: int | None
    pid: int | None
    tid: int | None
    order: int  # the track's place among its parent's children, in descriptor order


@dataclass
class _Sequence:
    """The incremental state of one trusted_packet_sequence_id."""

    names: dict[int, str] = field(default_factory=dict)  # event_names
    arg_names: dict[int, str] = field(default_factory=dict)  # debug_annotation_names
    strings: dict[int, str] = field(default_factory=dict)  # debug_annotation_string_values
    track: int | None = None  # track_event_defaults.track_uuid
    clock: int | None = None  # timestamp_clock_id of TracePacketDefaults


class _Clocks:
    """Packet times onto one clock, in ns. The first ClockSnapshot's primary_trace_clock
    (BOOTTIME when it names none) is the reference; each snapshot relates every clock it
    lists to it. A trace that never snapshots runs on one clock, taken as ns."""

    def __init__(self) -> None:
        self.ref: tuple[int, int] | None = None
        self.offset: dict[tuple[int, int], int] = {}  # ns to add to a clock's ns
        self.unit: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], int] = {}  # incremental clocks: last raw value
        self.used: set[tuple[int, int]] = set()

    @staticmethod
    def key(sid: int, clock: int) -> tuple[int, int]:
        return (sid if clock in _SCOPED else 0, clock)

    def snapshot(self, sid: int, snap: Any) -> None:
        primary = snap.primary_trace_clock if snap.HasField("primary_trace_clock") else _BOOTTIME
        ns: dict[tuple[int, int], int] = {}
        for c in snap.clocks:
            k = self.key(sid, c.clock_id)
            self.unit[k] = c.unit_multiplier_ns or 1
            if c.is_incremental:
                self.last[k] = c.timestamp
            else:
                self.last.pop(k, None)
            ns[k] = c.timestamp * self.unit[k]
        if not ns:
            return
        if self.ref is None:
            self.ref = (0, primary) if (0, primary) in ns else next(iter(ns))
            self.offset[self.ref] = 0
        known = [k for k in ns if k in self.offset]
        if not known:
            return  # relates no clock already placed
        base = ns[known[0]] + self.offset[known[0]]
        for k, v in ns.items():
            self.offset[k] = base - v

    def ns(self, sid: int, clock: int, ts: int) -> int:
        k = self.key(sid, clock)
        if k in self.last:  # an incremental clock: the packet holds the delta from the last
            ts = self.last[k] = self.last[k] + ts
        self.used.add(k)
        return ts * self.unit.get(k, 1) + self.offset.get(k, 0)

    def unrelated(self) -> list[int]:
        """Clocks the events used that no snapshot relates to the others (empty while the
        trace runs on one clock)."""
        return sorted({k[1] for k in self.used if k not in self.offset}) if len(self.used) > 1 else []


def _args(te: Any, seq: _Sequence) -> dict[str, Any]:
    """A TrackEvent's debug annotations with plain values, as a Chrome event's args."""
    out: dict[str, Any] = {}
    for a in te.debug_annotations:
        key = a.name if a.HasField("name") else seq.arg_names.get(a.name_iid)
        kind = a.WhichOneof("value")
        if key is None or kind is None:
            continue
        if kind == "string_value_iid":
            value: Any = seq.strings.get(a.string_value_iid)
        elif kind in ("int_value", "uint_value", "double_value", "bool_value", "string_value"):
            value = getattr(a, kind)
        else:
            continue  # nested, pointer, proto and JSON values name no CTA, warp or role
        out[text(key)] = value
    return out


def _intern(seq: _Sequence, interned: Any) -> None:
    seq.names.update((e.iid, text(e.name)) for e in interned.event_names)
    seq.arg_names.update((e.iid, text(e.name)) for e in interned.debug_annotation_names)
    seq.strings.update((e.iid, e.str.decode("utf-8", "replace")) for e in interned.debug_annotation_string_values)


def _track(td: Any, siblings: dict[int | None, int]) -> _Track:
    proc = td.process if td.HasField("process") else None
    thread = td.thread if td.HasField("thread") else None
    name = (td.name or td.static_name or (thread.thread_name if thread else "")
            or (proc.process_name if proc else ""))
    parent = td.parent_uuid if td.HasField("parent_uuid") else None
    order = siblings.get(parent, 0)
    siblings[parent] = order + 1
    pid = proc.pid if proc and proc.HasField("pid") else (thread.pid if thread and thread.HasField("pid") else None)
    return _Track(text(name), parent, pid, thread.tid if thread and thread.HasField("tid") else None, order)


def _parents(uuid: int, tracks: dict[int, _Track], by_pid: dict[int, int]) -> list[int]:
    """A track's parents, nearest first (a thread track's parent is the process track of its
    pid); `by_pid`: each process track's uuid by its pid."""
    out: list[int] = []
    cur = tracks.get(uuid)
    seen = {uuid}
    while cur is not None:
        up = cur.parent if cur.parent is not None else (by_pid.get(cur.pid) if cur.tid is not None else None)
        if up is None or up in seen or up not in tracks:
            break
        seen.add(up)
        out.append(up)
        cur = tracks[up]
    return out


def _lineage(uuid: int, tracks: dict[int, _Track], by_pid: dict[int, int]) -> tuple[str, int | None, int | None]:
    """The names of a track's parents joined nearest first (its 'process name'), the
    nearest pid, and the warp stand-in (tid, else 'warp N' in the nearest parent naming
    one, else the track's place among its siblings)."""
    own = tracks.get(uuid)
    if own is None:
        return "", None, None
    ups = [tracks[u] for u in _parents(uuid, tracks, by_pid)]
    pid = next((t.pid for t in [own, *ups] if t.pid is not None), None)
    warp = own.tid if own.tid is not None else next(
        (w for t in ups if (w := num(t.name, "warp")) is not None), own.order)
    return " / ".join(t.name for t in ups), pid, warp


def _launch_name(name: str) -> str:
    """The kernel of IKET's launch slice, `kernel:<name>, gridId: <n>`."""
    return name.removeprefix("kernel:").split(", gridId:")[0].strip()


def parse_perfetto_trace(data: bytes, source: str) -> tuple[str | None, dict[str, list]]:
    """The kernel name (a debug annotation `kernel` on any slice, if one has it) and the
    track events of a Perfetto protobuf trace, as columns (COLUMNS of
    collectors/trace_tracks.py); t_ns still absolute."""
    pb, DecodeError = _schema()
    if data.lstrip()[:1] in (b"{", b"["):
        raise InputError(f"{source}: is JSON, not a Perfetto protobuf trace; name a Chrome-trace / Perfetto JSON "
                         "file .json")
    try:
        trace = pb.Trace.FromString(data)
    except (DecodeError, RecursionError, ValueError) as e:
        raise InputError(f"{source}: not a Perfetto protobuf trace, or cut short ({text(e)[:120]}); give the whole "
                         ".perfetto-trace / .pftrace file the profiler wrote") from None
    tracks: dict[int, _Track] = {}
    siblings: dict[int | None, int] = {}
    seqs: dict[int, _Sequence] = {}
    clocks = _Clocks()
    # per track: (t_ns, file order, type, name, args)
    events: dict[int, list[tuple[int, int, int, str, dict]]] = {}
    kernel = None
    try:
        for i, pkt in enumerate(trace.packet):
            sid = pkt.trusted_packet_sequence_id
            if pkt.sequence_flags & _CLEARED or sid not in seqs:
                seqs[sid] = _Sequence()
            seq = seqs[sid]
            if pkt.HasField("trace_packet_defaults"):
                d = pkt.trace_packet_defaults
                seq.clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
                ted = d.track_event_defaults if d.HasField("track_event_defaults") else None
                seq.track = ted.track_uuid if ted is not None and ted.HasField("track_uuid") else None
            if pkt.HasField("interned_data"):
                _intern(seq, pkt.interned_data)
            if pkt.HasField("clock_snapshot"):
                clocks.snapshot(sid, pkt.clock_snapshot)
            if pkt.HasField("track_descriptor"):
                td = pkt.track_descriptor
                if td.HasField("uuid") and td.uuid not in tracks:
                    tracks[td.uuid] = _track(td, siblings)
            if not pkt.HasField("track_event"):
                continue
            te = pkt.track_event
            if te.type not in (_SLICE_BEGIN, _SLICE_END, _INSTANT):
                continue
            clock = pkt.timestamp_clock_id if pkt.HasField("timestamp_clock_id") else seq.clock
            t = clocks.ns(sid, _BOOTTIME if clock is None else clock, pkt.timestamp)
            uuid = te.track_uuid if te.HasField("track_uuid") else (seq.track or 0)
            if te.HasField("name"):
                name = text(te.name).removesuffix(_ZERO_LENGTH)
            elif te.HasField("name_iid"):
                name = seq.names.get(te.name_iid, f"event{te.name_iid}")  # as the wsperf trace names an unknown event
            else:
                name = ""
            args = _args(te, seq)
            if kernel is None and isinstance(args.get("kernel"), str):
                kernel = args["kernel"]
            events.setdefault(uuid, []).append((t, i, te.type, name, args))
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to be a Perfetto trace") from None
    if not events:
        raise InputError(f"{source}: holds {len(trace.packet):,} packets but no track events (slices or instants); "
                         "was the profiler's buffer written out?")
    if loose := clocks.unrelated():
        raise InputError(f"{source}: its events use clocks {loose} that no ClockSnapshot relates to each other; "
                         "times on them cannot be compared")
    rows = EventColumns()
    by_pid = {t.pid: u for u, t in tracks.items() if t.tid is None and t.pid is not None}
    # the parents of a CTA's track that are inside no CTA themselves
    above = {p for u, t in tracks.items() if names_cta(t.name) for p in _parents(u, tracks, by_pid)
             if not any(names_cta(tracks[q].name) for q in (p, *_parents(p, tracks, by_pid)))}
    launches = [name for u in above for _, _, kind, name, _ in events.get(u, ())
                if kind == _SLICE_BEGIN and name.startswith("kernel:")]
    if len(launches) > 1:
        raise InputError(f"{source}: holds {len(launches)} kernel launches ({text(launches[0])[:80]!r}, ...); wsperf "
                         "reads one launch a trace: trace a program that launches the kernel once")
    if launches and kernel is None:
        kernel = _launch_name(launches[0])
    for uuid, evs in events.items():
        if uuid in above:
            continue  # the launch, a GPC, a TPC: no warp's events
        proc, pid, warp = _lineage(uuid, tracks, by_pid)
        thread = tracks[uuid].name if uuid in tracks else ""
        open_slices: list[tuple[int, str, dict]] = []
        evs.sort(key=lambda e: (e[0], e[1]))
        try:
            for t, _, kind, name, args in evs:
                if kind == _SLICE_BEGIN:
                    open_slices.append((rows.add(t, "begin", name, args, proc, thread, pid, warp), name, args))
                elif kind == _SLICE_END:
                    if open_slices:  # an end with no open slice on its track closes nothing
                        seq_no, name, args = open_slices.pop()
                        rows.add(t, "end", name, args, proc, thread, pid, warp, seq_no)
                else:
                    rows.add(t, "instant", name, args, proc, thread, pid, warp)
        except ValueError:
            raise InputError(f"{source}: an event on track {text(thread or uuid)[:80]!r} lies past 2^62 ns on the "
                             "trace's clock (a timestamp or clock unit no GPU timer gives)") from None
    return (text(kernel) if kernel else None), rows.columns()
