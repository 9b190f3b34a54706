"""Role timelines into the store: the wsperf trace format (collectors/include/wsperf_trace.cuh,
layout in `wsperf.collectors.trace_format`), Chrome-trace / Perfetto JSON and Perfetto
protobuf traces (collectors/perfetto_trace.py) with per-warp or per-role tracks (Triton
Proton's intra-kernel traces among them). Tables and every column:
queries/timeline_schema.sql, applied on demand by `load_timeline`.

Chrome traces: 'X' events (ts, dur in microseconds) and 'B'/'E' pairs become a begin and
an end row, placed by the track rules of collectors/trace_tracks.py (shared with the
Perfetto importer): the CTA is args.cta, else the number after 'CTA' in the track's process
name (metadata 'M' events, or a string pid), else the numeric pid; the warp likewise from
args.warp, 'warp N' in the thread name, else tid; the SM from args.sm or 'Core N' / 'SM N'.
The role is args.role, else a role word (producer, consumer, epilogue) in the track or
event name, else what the warp's events say (one role named on any of them, else copies
alone: producer, computes alone: consumer), else 'other'. An event name that contains
wait/acquire, copy/load/tma, compute/mma, epilogue/store or kernel maps to that event (the
name is kept in `label`); others stay as named. Proton (pid '<kernel> Core<sm> CTA<cta>', tid 'warp <w> (line <n>)', cat the kernel)
writes cycles as if the clock ran at 1 GHz: its times are cycles, not ns.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from wsperf.collectors import trace_format as tf
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import read_input
from wsperf.collectors.perfetto_trace import PERFETTO_SUFFIXES, looks_like_perfetto, parse_perfetto_trace
from wsperf.collectors.store import transaction
from wsperf.collectors.trace_tracks import COLUMNS, EventColumns, num
from wsperf.collectors.trace_tracks import text as _text

SCHEMA = "timeline_schema.sql"
# A trace of a few thousand warps with a few hundred events each is a few tens of MB.
MAX_TRACE_BYTES = 1 << 30
WSPERF_SUFFIX = ".wsperf-trace"
CHROME_SUFFIXES = (".json", ".json.gz", ".chrome_trace", ".chrome_trace.gz", ".perfetto.json")
_KIND = "a wsperf trace (.wsperf-trace), a Chrome-trace / Perfetto JSON file or a Perfetto protobuf trace"


@dataclass(frozen=True)
class TimelineLoad:
    """What loading one trace did."""

    timeline_id: int
    path: Path
    format: str
    kernel: str | None
    launch_id: int
    events: int
    full_warps: int  # warps cut: they filled their slots before their kernel end (timeline_cut_warps)


def timeline_schema_sql() -> str:
    """The DDL of the timeline tables (idempotent)."""
    return (resources.files("wsperf.queries") / SCHEMA).read_text(encoding="utf-8")


def is_timeline_input(p: str | Path) -> bool:
    name = str(p).lower()
    return name.endswith(WSPERF_SUFFIX) or name.endswith(CHROME_SUFFIXES) or name.endswith(PERFETTO_SUFFIXES)


def _read(p: Path) -> bytes:
    data = read_input(p, kind=_KIND, limit=MAX_TRACE_BYTES)
    if not data:
        raise InputError(f"{p}: is empty (0 bytes), not a trace")
    if data[:2] == b"\x1f\x8b":
        try:
            # read no more than the cap out of it: a small file can expand to any size
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as z:
                data = z.read(MAX_TRACE_BYTES + 1)
        except (OSError, EOFError) as e:
            raise InputError(f"{p}: is gzip-compressed but damaged ({e}); give the trace again") from None
        if len(data) > MAX_TRACE_BYTES:
            raise InputError(f"{p}: expands past {MAX_TRACE_BYTES:,} bytes when decompressed, more than a trace "
                             "wsperf reads")
    return data


def parse_wsperf_trace(data: bytes, source: str) -> tuple[tf.TraceHeader, dict[str, list]]:
    """The header and the used records of a wsperf trace, as columns (see COLUMNS); t_ns
    still absolute."""
    nl = data.find(b"\n", 0, tf.MAX_HEADER_BYTES)
    if nl < 0 or not data.startswith(b"{"):
        raise InputError(f"{source}: not a wsperf trace (no JSON header line); write it with wsperf_trace_dump")
    try:
        doc = json.loads(data[:nl])
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{source}: the header line is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != tf.FORMAT:
        raise InputError(f"{source}: the header does not say format {tf.FORMAT!r}")
    if doc.get("version") != tf.VERSION or doc.get("record_bytes") != tf.RECORD_BYTES:
        raise InputError(f"{source}: trace version {doc.get('version')!r} with {doc.get('record_bytes')!r}-byte records; "
                         f"this wsperf reads version {tf.VERSION} ({tf.RECORD_BYTES}-byte records)")
    def count(key: str) -> int:
        """A count of the buffer shape: a whole number from 0 to 2^31 (1e400, 2^64-1 and -5
        are no shape a kernel wrote)."""
        v = doc[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (isinstance(v, int) or v.is_integer()) \
                or not 0 <= v <= (1 << 31):
            raise ValueError(f"{key} is {v!r}, not a count from 0 to 2^31")
        return int(v)

    def names(key: str) -> dict[int, str]:
        """A header's {id: name} map (roles, events); anything else is no map of names."""
        v = doc.get(key) or {}
        if not isinstance(v, dict):
            raise ValueError(f"{key} is not a map of ids to names")
        return {int(k): _text(n) for k, n in v.items() if str(k).isdigit() and len(str(k)) < 10}

    try:
        header = tf.TraceHeader(
            kernel=_text(doc.get("kernel") or ""), ctas=count("ctas"), cta_stride=count("cta_stride"),
            warps_per_cta=count("warps_per_cta"), slots_per_warp=count("slots_per_warp"),
            roles=names("roles"), events=names("events"))
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise InputError(f"{source}: the header lacks or garbles the buffer shape ({_text(str(e))[:160]})") from None
    body = memoryview(data)[nl + 1:]
    want = tf.trace_bytes(header.ctas, header.warps_per_cta, header.slots_per_warp, max(header.cta_stride, 1))
    if header.cta_stride < 1 or len(body) != want:
        raise InputError(f"{source}: holds {len(body):,} bytes of records; the header's buffer shape needs {want:,} "
                         "(truncated or not written by wsperf_trace_dump)")
    roles = {**tf.ROLES, **header.roles}
    events = {**tf.EVENTS, **header.events}
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for t, clk, sm, cta, warp, role, phase, event, stage, seq in tf.RECORD.iter_unpack(body):
        if t == 0:  # an unused slot
            continue
        cols["t_ns"].append(t)
        cols["clk"].append(clk)
        cols["sm"].append(sm)
        cols["cta"].append(cta)
        cols["warp"].append(warp)
        cols["role"].append(roles.get(role, f"role{role}"))
        cols["event"].append(events.get(event, f"event{event}"))
        cols["label"].append(None)
        cols["phase"].append(tf.PHASES.get(phase, "instant"))
        cols["stage"].append(None if stage == tf.NO_STAGE else stage)
        cols["seq"].append(seq)
    return header, cols


def parse_chrome_trace(data: bytes, source: str) -> tuple[str | None, dict[str, list]]:
    """The kernel name (metadata, if any) and the events of a Chrome-trace JSON file, as
    columns (see COLUMNS); t_ns still absolute (ts converted from microseconds)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{source}: not JSON ({str(e)[:120]}); give a Chrome-trace or Perfetto JSON file") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply to be a Chrome-trace file") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise InputError(f"{source}: no traceEvents list; not a Chrome-trace file")
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    kernel = None
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M":
            name = str((e.get("args") or {}).get("name", ""))
            if e.get("name") == "process_name":
                procs[e.get("pid")] = name
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = name
    if isinstance(doc, dict):
        meta = doc.get("metadata") or doc.get("otherData") or {}
        kernel = _text(meta.get("kernel")) if isinstance(meta, dict) and isinstance(meta.get("kernel"), str) else None
    rows = EventColumns()
    open_b: dict[tuple, list] = {}

    def add(ts_us: float, phase: str, e: dict, seq: int | None = None) -> int:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        pid, tid = e.get("pid"), e.get("tid")
        return rows.add(float(ts_us) * 1000.0, phase, e.get("name", ""), args, procs.get(pid, pid),
                        threads.get((pid, tid), tid), pid, tid, seq)

    for e in events:
        # Proton also writes call-path bars and cross-warp flow endpoints: not warp intervals.
        if not isinstance(e, dict) or "ts" not in e or e.get("cat") in ("call_path", "flow"):
            continue
        if kernel is None and num(e.get("pid"), "cta") is not None and isinstance(e.get("cat"), str):
            kernel = e["cat"]  # Proton: pid '<kernel> Core<sm> CTA<cta>', cat the kernel's name
        try:
            ts = float(e["ts"])
            ph = e.get("ph")
            if ph == "X":
                seq = add(ts, "begin", e)
                add(ts + float(e.get("dur", 0.0)), "end", e, seq)
            elif ph == "B":
                open_b.setdefault((e.get("pid"), e.get("tid"), e.get("name")), []).append(add(ts, "begin", e))
            elif ph == "E":
                stack = open_b.get((e.get("pid"), e.get("tid"), e.get("name")))
                if stack:
                    add(ts, "end", e, stack.pop())
            elif ph in ("i", "I", "n"):
                add(ts, "instant", e)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{source}: an event has a ts or dur that is not a finite number of microseconds "
                             f"under 2^62 ns: {_text(str(e))[:120]}") from None
    return kernel, rows.columns()


@dataclass(frozen=True)
class ParsedTrace:
    """A trace file read and parsed, not yet in a store."""

    path: Path
    format: str
    kernel: str | None
    sha256: str
    size_bytes: int
    shape: tuple[int | None, int | None, int | None, int | None]  # ctas, cta_stride, warps_per_cta, slots_per_warp
    columns: dict[str, list]  # COLUMNS, t_ns absolute


def read_trace(path: str | Path) -> ParsedTrace:
    """Read and parse one trace file: a wsperf trace by its header, a Perfetto protobuf
    trace by its name or first byte, else Chrome-trace JSON."""
    p = Path(path)
    data = _read(p)
    digest = hashlib.sha256(data).hexdigest()
    name = p.name.lower()
    if name.endswith(WSPERF_SUFFIX) or data.startswith(b'{"format":"wsperf-trace"'):
        header, cols = parse_wsperf_trace(data, str(p))
        parsed = ParsedTrace(p, tf.FORMAT, header.kernel or None, digest, len(data),
                             (header.ctas, header.cta_stride, header.warps_per_cta, header.slots_per_warp), cols)
    elif name.endswith(PERFETTO_SUFFIXES) or looks_like_perfetto(data):
        kernel, cols = parse_perfetto_trace(data, str(p))
        parsed = ParsedTrace(p, "perfetto-trace", kernel or p.name.split(".")[0], digest, len(data),
                             (None, None, None, None), cols)
    else:
        kernel, cols = parse_chrome_trace(data, str(p))
        parsed = ParsedTrace(p, "chrome-trace", kernel or p.name.split(".")[0], digest, len(data),
                             (None, None, None, None), cols)
    if not cols["t_ns"]:
        raise InputError(f"{p}: holds no events (did the kernel run with tracing on, and was the buffer copied back?)")
    return parsed


def load_timeline(con: duckdb.DuckDBPyConnection, trace: str | Path | ParsedTrace, *,
                  launch_id: int | None = None) -> TimelineLoad:
    """Add one trace (a path, or what `read_trace` returned) to the store, in one
    transaction. `launch_id`: the launch its events belong to (an Nsight Compute launch of
    the same kernel); None gives the trace a `reports` row of kind 'timeline' with one
    launch of its own."""
    t = trace if isinstance(trace, ParsedTrace) else read_trace(trace)
    cols = dict(t.columns)
    t0 = min(cols["t_ns"])
    cols["t_ns"] = [x - t0 for x in cols["t_ns"]]
    n = len(cols["t_ns"])
    with transaction(con, f"timeline {t.path}"):
        con.execute(timeline_schema_sql())
        ((tid,),) = con.execute("SELECT coalesce(max(timeline_id), 0) + 1 FROM timelines").fetchall()
        if launch_id is None:
            launch_id = _own_launch(con, t)
        con.execute("INSERT INTO timelines VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [tid, str(t.path.resolve()), t.sha256, t.size_bytes, t.format, t.kernel, launch_id, max(t0, 0),
                     *t.shape, n, 0, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)])
        table = pa.table({"timeline_id": pa.array([tid] * n, pa.int32()),
                          "launch_id": pa.array([launch_id] * n, pa.int64()),
                          **{c: cols[c] for c in COLUMNS}})
        con.register("_wsperf_timeline", table)
        try:
            con.execute("INSERT INTO timeline_events BY NAME SELECT * FROM _wsperf_timeline")
        finally:
            con.unregister("_wsperf_timeline")
        # Which warps were cut is the view's rule (filled slots, last record not the warp's
        # kernel end), so the count and the rows that name them cannot disagree.
        ((full,),) = con.execute("SELECT count(*) FROM timeline_cut_warps WHERE timeline_id = ?", [tid]).fetchall()
        con.execute("UPDATE timelines SET full_warps = ? WHERE timeline_id = ?", [full, tid])
    return TimelineLoad(tid, t.path, t.format, t.kernel, launch_id, n, full)


def _own_launch(con: duckdb.DuckDBPyConnection, t: ParsedTrace) -> int:
    """A `reports` row of kind 'timeline' and its one launch, for a trace with no Nsight
    Compute launch; the same file loaded twice reuses them."""
    found = con.execute("SELECT l.launch_id FROM reports r JOIN launches l USING (report_id) WHERE r.sha256 = ?",
                        [t.sha256]).fetchall()
    if found:
        return found[0][0]
    ((report_id, lid),) = con.execute(
        "SELECT (SELECT coalesce(max(report_id), 0) + 1 FROM reports),"
        " (SELECT coalesce(max(launch_id), 0) + 1 FROM launches)").fetchall()
    con.execute(
        "INSERT INTO reports BY NAME SELECT ? AS report_id, ? AS path, ? AS sha256, ? AS size_bytes, "
        "1 AS num_launches, ? AS loaded_at, 'timeline' AS kind",
        [report_id, str(t.path.resolve()), t.sha256, t.size_bytes, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)])
    ctas, _, warps, _ = t.shape
    function = re.split(r"[<(]", t.kernel or "", maxsplit=1)[0].strip() or None
    con.execute(
        "INSERT INTO launches (launch_id, report_id, range_idx, action_idx, kernel_demangled, kernel_function, "
        "workload_type, grid_size, block_size, num_metrics) VALUES (?, ?, 0, 0, ?, ?, 'kernel', ?, ?, 0)",
        [lid, report_id, t.kernel, function, ctas, warps * 32 if warps else None])
    return lid


def kernel_instance(name: str) -> str:
    """A kernel name as both a trace and Nsight Compute's demangler can spell it: no C casts
    on template arguments (the demangler's '(int)4', '(bool)1'), true/false as 1/0, no integer
    suffixes, no spaces. 'ring_kernel<1, true, false>' and 'void ring_kernel<(int)1,
    (bool)1, (bool)0>(const float *, ...)' share 'ring_kernel<1,1,0>'."""
    s = re.sub(r"\([A-Za-z_][\w: ]*\)(?=-?\d)", "", name)
    s = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", s))
    return re.sub(r"\s+", "", re.sub(r"(?<=\d)[uUlL]+\b", "", s))


def match_launch(con: duckdb.DuckDBPyConnection, kernel: str | None, report_ids: list[int]) -> int | None:
    """The Nsight Compute launch (of the given reports) of the trace's kernel: a launch
    whose demangled name holds the trace's kernel name (a template instance such as
    'ring_kernel<4, true, false>', compared as `kernel_instance` spells both) if any, else
    one of the same function name (the part before '<' or '('); the last such launch. None
    when none."""
    function = re.split(r"[<(]", kernel or "", maxsplit=1)[0].strip()
    if not function or not report_ids:
        return None
    rows = con.execute(
        "SELECT launch_id, coalesce(kernel_demangled, '') FROM launches WHERE report_id IN (SELECT unnest($ids::INTEGER[])) "
        "AND (kernel_function = $f OR kernel_demangled LIKE $f || '%' OR kernel_demangled LIKE '% ' || $f || '%') "
        "ORDER BY launch_id DESC",
        {"ids": report_ids, "f": function}).fetchall()
    want = kernel_instance(kernel or "")
    same = [lid for lid, name in rows if want in kernel_instance(name)]
    return (same or [lid for lid, _ in rows] or [None])[0]
