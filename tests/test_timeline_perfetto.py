"""Perfetto protobuf traces (collectors/perfetto_trace.py) on real writers' output: the ring
kernel's H200 buffers (ring1, ring4) rewritten by tg4perfetto the way FlashInfer's profiler
exports its buffer, and by Perfetto's own TraceProtoBuilder as the Perfetto SDK writes
track events (fixtures/src/timeline/to_perfetto.py; provenance in
fixtures/timeline/provenance.json). The same buffer must give the same rows, shares and
verdicts through either file as through its .wsperf-trace; and a file that is not such a
trace is one `Error:` line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter

import pytest

from support import ROOT, assert_one_error_line, wsperf
from wsperf.analyses.hypotheses import Status
from wsperf.analyses.timeline import summarize_timeline
from wsperf.collectors.store import open_store
from wsperf.collectors.timeline import is_timeline_input, load_timeline

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

TIMELINES = ROOT / "fixtures" / "timeline"
WRITERS = {"tg4perfetto": "{}_tg4perfetto.perfetto-trace", "builder": "{}_builder.pftrace"}
ROW = ("t_ns", "sm", "cta", "warp", "role", "event", "phase")


def _load(path):
    con = open_store(None)
    t = load_timeline(con, path)
    return con, summarize_timeline(con, t.timeline_id)


@pytest.fixture(scope="module")
def loaded():
    """(ring, writer) -> (store, summary); writer 'wsperf' is the .wsperf-trace itself."""
    out = {}
    for ring in ("ring1", "ring4"):
        out[(ring, "wsperf")] = _load(TIMELINES / f"{ring}.wsperf-trace")
        for writer, name in WRITERS.items():
            out[(ring, writer)] = _load(TIMELINES / name.format(ring))
    return out


def _rows(con, cols=ROW):
    return sorted(con.execute(f"SELECT {', '.join(cols)} FROM timeline_events").fetchall())


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("ring", ["ring1", "ring4"])
def test_the_same_buffer_gives_the_same_rows(loaded, ring, writer):
    """Every record comes back at its ns, on its SM, CTA and warp, with its role, event and
    phase: 14,476 rows. The builder's file also keeps stage and seq; tg4perfetto's carries
    what FlashInfer's 64-bit entry holds (no stage; seq by order, as for a Chrome trace)."""
    ref, got = loaded[(ring, "wsperf")][0], loaded[(ring, writer)][0]
    assert len(_rows(got)) == 14_476
    assert _rows(got) == _rows(ref)
    if writer == "builder":
        assert _rows(got, ROW + ("stage", "seq")) == _rows(ref, ROW + ("stage", "seq"))
    else:
        assert got.execute("SELECT count(*) FROM timeline_events WHERE stage IS NOT NULL").fetchone() == (0,)
        # FlashInfer's events are '<role>_<event>' names: each row keeps it as its label
        labels = Counter(r for (r,) in got.execute("SELECT label FROM timeline_events").fetchall())
        assert labels["consumer_compute"] == 2 * 2816 and labels["producer_copy"] == 2 * 704


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("ring, verdict", [("ring1", Status.confirmed), ("ring4", Status.rejected)])
def test_the_same_buffer_gives_the_same_shares_and_verdicts(loaded, ring, verdict, writer):
    """Per-role shares, interval counts and medians, pipeline-bubbles and serialized-roles
    are the .wsperf-trace's exactly (the times are the same ns: nothing is rounded; the
    H200's timer ticks every 32 ns, the builder's clock unit). Only pipeline-bubbles'
    `stages` differs for tg4perfetto: FlashInfer's entry has no stage field."""
    ref, got = loaded[(ring, "wsperf")][1], loaded[(ring, writer)][1]
    assert (got.format, got.events, got.ctas, got.warps, got.span_ns) == \
        ("perfetto-trace", ref.events, ref.ctas, ref.warps, ref.span_ns) == ("perfetto-trace", 14_476, 22, 110, got.span_ns)
    assert got.roles == ref.roles
    assert got.bubbles.status is ref.bubbles.status is verdict
    assert got.serialized.status is ref.serialized.status is verdict
    lost = {"stages"} if writer == "tg4perfetto" else set()
    same = {k: v for k, v in ref.bubbles.evidence.items() if k not in lost}
    assert {k: v for k, v in got.bubbles.evidence.items() if k not in lost} == same
    if writer == "tg4perfetto":
        assert (ref.bubbles.evidence["stages"], got.bubbles.evidence["stages"]) == ({"ring1": 1, "ring4": 4}[ring], 0)
    # the builder's trace names the kernel (an interned debug annotation); tg4perfetto's
    # cannot, so the file name stands in, as for a Chrome trace without metadata
    assert got.kernel == (ref.kernel if writer == "builder" else f"{ring}_tg4perfetto")


def test_the_command_line_reads_both_writers_to_the_same_figures():
    p = wsperf("timeline", TIMELINES / "ring4.wsperf-trace", TIMELINES / "ring4_tg4perfetto.perfetto-trace",
               TIMELINES / "ring4_builder.pftrace", "-f", "json")
    assert p.returncode == 0, p.stderr
    a, b, c = json.loads(p.stdout)["timelines"]
    assert [t["format"] for t in (a, b, c)] == ["wsperf-trace", "perfetto-trace", "perfetto-trace"]
    assert a["roles"] == b["roles"] == c["roles"]
    assert a["pipeline_bubbles"]["status"] == b["pipeline_bubbles"]["status"] == c["pipeline_bubbles"]["status"] \
        == "rejected"
    assert a["pipeline_bubbles"]["evidence"] == c["pipeline_bubbles"]["evidence"]


# ---- what the fixtures exercise: the writers' real conventions ---------------------------


def _trace(name):
    return pb.Trace.FromString((TIMELINES / name).read_bytes())


def test_the_fixtures_are_the_writers_conventions():
    """tg4perfetto: SM groups with a process descriptor, blk<b>_g<g> child tracks, begins
    named by interned iid, instants none, every event on clock 1 (REALTIME, its sequence's
    default) under a snapshot whose primary clock is BOOTTIME. The builder: one sequence per
    warp whose defaults name its track and clock 64 (incremental, 32 ns units), names and
    argument names interned per sequence, the state cleared every 64 events."""
    tg = _trace("ring1_tg4perfetto.perfetto-trace").packet
    names = {p.track_descriptor.name for p in tg if p.HasField("track_descriptor")}
    assert "SM_128" in names and "blk0_g1" in names and len(names) == 22 + 110
    begins = [p for p in tg if p.HasField("track_event") and p.track_event.type == 1]
    assert begins and all(p.track_event.HasField("name_iid") and not p.track_event.HasField("name") for p in begins)
    assert [p.trace_packet_defaults.timestamp_clock_id for p in tg if p.HasField("trace_packet_defaults")] == [1]
    b = _trace("ring1_builder.pftrace").packet
    events = [p for p in b if p.HasField("track_event")]
    assert not any(p.track_event.HasField("track_uuid") for p in events)
    assert len({p.trusted_packet_sequence_id for p in events}) == 110
    clears = [p for p in b if p.sequence_flags & 1]
    assert len(clears) > 110 and all(p.trace_packet_defaults.timestamp_clock_id == 64 for p in clears)
    assert {c.unit_multiplier_ns for p in clears for c in p.clock_snapshot.clocks if c.clock_id == 64} == {32}
    # the same iid stands for different names on different sequences
    meaning = {(p.trusted_packet_sequence_id, e.iid): e.name for p in b for e in p.interned_data.event_names}
    by_iid: dict[int, set] = {}
    for (_, iid), name in meaning.items():
        by_iid.setdefault(iid, set()).add(name)
    assert any(len(v) > 1 for v in by_iid.values()), by_iid
    provenance = json.loads((TIMELINES / "provenance.json").read_text())
    entry = next(e for e in provenance["later"] if "ring1_builder.pftrace" in e.get("files", []))
    assert set(entry["files"]) == {n.format(r) for n in WRITERS.values() for r in ("ring1", "ring4")}
    assert "tg4perfetto" in entry["writers"] and "0.59.1" in entry["writers"]["perfetto"]


# ---- interning, incremental state and clocks, on small traces built here ---------------------


def _write(tmp_path, trace, name="t.pftrace"):
    path = tmp_path / name
    path.write_bytes(trace.SerializeToString())
    return path


def _slice(trace, sid, t, *, iid=None, name=None, kind=1, flags=0, track=None, clock=None):
    p = trace.packet.add()
    p.trusted_packet_sequence_id = sid
    p.timestamp = t
    if flags:
        p.sequence_flags = flags
    if clock is not None:
        p.timestamp_clock_id = clock
    p.track_event.type = kind
    if track is not None:
        p.track_event.track_uuid = track
    if iid is not None:
        p.track_event.name_iid = iid
    if name is not None:
        p.track_event.name = name
    return p


def _tracks(trace, *names_by_uuid):
    for uuid, name, parent in names_by_uuid:
        p = trace.packet.add()
        p.track_descriptor.uuid = uuid
        p.track_descriptor.name = name
        if parent is not None:
            p.track_descriptor.parent_uuid = parent


def test_interned_names_belong_to_their_sequence_and_die_with_a_clear(tmp_path):
    """iid 1 is 'copy' on the producer's sequence and 'compute' on the consumer's, the two
    sequences interleaved; after the producer's sequence clears its state, iid 1 is 'wait'
    there, and iid 2 (interned only before the clear) names nothing. Read without interning,
    every slice would be unnamed; with one table for all sequences, the producer would
    compute; with clears ignored, the last instant would be a release."""
    t = pb.Trace()
    _tracks(t, (1, "CTA 0", None), (2, "warp 0 producer", 1), (3, "warp 1 consumer", 1))

    def intern(p, *names):
        for i, n in enumerate(names, 1):
            p.interned_data.event_names.add(iid=i, name=n)

    intern(_slice(t, 10, 100, iid=1, flags=1 | 2, track=2), "copy", "release")
    intern(_slice(t, 11, 100, iid=1, flags=1 | 2, track=3), "compute")
    _slice(t, 10, 200, kind=2, track=2, flags=2)
    _slice(t, 10, 210, iid=2, kind=3, track=2, flags=2)
    _slice(t, 11, 200, kind=2, track=3, flags=2)
    _slice(t, 10, 250, iid=1, track=2, flags=2)
    _slice(t, 10, 280, kind=2, track=2, flags=2)
    intern(_slice(t, 10, 300, iid=1, flags=1, track=2), "wait")
    _slice(t, 10, 400, kind=2, track=2)
    _slice(t, 10, 450, iid=2, kind=3, track=2)
    con, s = _load(_write(tmp_path, t))
    got = con.execute("SELECT role, event, t_ns FROM timeline_events WHERE phase <> 'end' ORDER BY t_ns, role"
                      ).fetchall()
    assert got == [("consumer", "compute", 0), ("producer", "copy", 0), ("producer", "release", 110),
                   ("producer", "copy", 150), ("producer", "wait", 200), ("producer", "event2", 350)]


def test_defaults_name_the_track_and_snapshots_relate_the_clocks(tmp_path):
    """A slice without track_uuid is on its sequence's track_event_defaults track. Times on
    REALTIME (clock 1) and on an incremental sequence clock (64, 10 ns units) are brought
    onto BOOTTIME by the snapshots: here all three mark the same instant."""
    t = pb.Trace()
    _tracks(t, (1, "CTA 4 SM 7", None), (2, "warp 2 consumer", 1), (3, "warp 0 producer", 1))
    snap = t.packet.add()
    snap.trusted_packet_sequence_id = 5
    snap.sequence_flags = 1
    snap.trace_packet_defaults.track_event_defaults.track_uuid = 2
    snap.trace_packet_defaults.timestamp_clock_id = 64
    snap.clock_snapshot.clocks.add(clock_id=6, timestamp=1_000_000)
    snap.clock_snapshot.clocks.add(clock_id=1, timestamp=9_000_000)
    snap.clock_snapshot.clocks.add(clock_id=64, timestamp=50, is_incremental=True, unit_multiplier_ns=10)
    _slice(t, 5, 100, name="compute")  # clock 64: 50 + 100 ticks, 1,000 ns past the snapshot
    _slice(t, 5, 30, kind=2)  # + 30 ticks: 300 ns later
    _slice(t, 6, 9_001_000, name="copy", track=3, clock=1)  # REALTIME runs 8 ms ahead of BOOTTIME here
    _slice(t, 6, 1_001_300, kind=2, track=3, clock=6)
    con, _ = _load(_write(tmp_path, t))
    rows = con.execute("SELECT role, event, cta, warp, sm, phase, t_ns FROM timeline_events ORDER BY role, t_ns"
                       ).fetchall()
    assert rows == [("consumer", "compute", 4, 2, 7, "begin", 0), ("consumer", "compute", 4, 2, 7, "end", 300),
                    ("producer", "copy", 4, 0, 7, "begin", 0), ("producer", "copy", 4, 0, 7, "end", 300)]


def test_flashinfer_track_names_and_thread_tracks_of_a_process(tmp_path):
    """FlashInfer's names (group 'SM_005', track 'blk12_g3'), a thread track tied to its
    process by pid alone, and a parent cycle all place their slices; an end with nothing
    open is dropped, an instant is kept."""
    t = pb.Trace()
    _tracks(t, (1, "SM_005", None), (2, "blk12_g3", 1), (7, "a", 8), (8, "b", 7))
    proc = t.packet.add()
    proc.track_descriptor.uuid = 3
    proc.track_descriptor.process.pid = 40
    proc.track_descriptor.process.process_name = "CTA 9"
    thr = t.packet.add()
    thr.track_descriptor.uuid = 4
    thr.track_descriptor.thread.pid = 40
    thr.track_descriptor.thread.tid = 41
    thr.track_descriptor.thread.thread_name = "warp 1 producer"
    _slice(t, 1, 10, name="consumer_mma", track=2)
    _slice(t, 1, 20, kind=2, track=2)
    _slice(t, 1, 15, kind=2, track=4)
    _slice(t, 1, 16, name="tma", kind=3, track=4)
    _slice(t, 1, 17, name="x", kind=3, track=7)
    con, _ = _load(_write(tmp_path, t))
    rows = con.execute("SELECT sm, cta, warp, role, event, phase FROM timeline_events ORDER BY t_ns, cta").fetchall()
    assert rows == [(5, 12, 3, "consumer", "compute", "begin"), (None, 9, 1, "producer", "copy", "instant"),
                    (None, 0, 0, "other", "x", "instant"), (5, 12, 3, "consumer", "compute", "end")]


def test_suffixes_content_and_gzip_pick_the_perfetto_reader(tmp_path):
    for name in ("k.perfetto-trace", "k.pftrace", "k.perfetto", "k.pftrace.gz", "K.PERFETTO-TRACE.GZ"):
        assert is_timeline_input(name), name
    data = (TIMELINES / "ring1_builder.pftrace").read_bytes()
    (tmp_path / "ring1.trace").write_bytes(data)  # no known suffix: its first byte says protobuf
    (tmp_path / "ring1.pftrace.gz").write_bytes(gzip.compress(data))
    for name in ("ring1.trace", "ring1.pftrace.gz"):
        con, s = _load(tmp_path / name)
        assert (s.format, s.events, s.bubbles.status) == ("perfetto-trace", 14_476, Status.confirmed)
    # 0x0a is also a newline: Chrome JSON after a blank line stays JSON
    (tmp_path / "blank.json").write_text('\n{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": "copy"}]}')
    assert _load(tmp_path / "blank.json")[1].format == "chrome-trace"


def test_the_decoder_is_imported_only_when_a_perfetto_trace_is_read():
    code = ("import sys\nfrom wsperf.collectors.timeline import read_trace\n"
            f"read_trace({str(TIMELINES / 'ring1.wsperf-trace')!r})\n"
            "before = {m for m in sys.modules if m.startswith(('perfetto', 'google.protobuf'))}\n"
            f"read_trace({str(TIMELINES / 'ring1_builder.pftrace')!r})\n"
            "after = {m for m in sys.modules if m.startswith(('perfetto', 'google.protobuf'))}\n"
            "print(len(before), len(after) > 0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["0", "True"]


# ---- bad input: one Error: line, exit 2 ---------------------------------------------------


def _no_track_events():
    t = pb.Trace()
    _tracks(t, (1, "CTA 0", None))
    t.packet.add().clock_snapshot.clocks.add(clock_id=6, timestamp=5)
    return t.SerializeToString()


def _varint(n: int) -> bytes:
    out = b""
    while True:
        out += bytes([n & 0x7F | (0x80 if n >> 7 else 0)])
        n >>= 7
        if not n:
            return out


def _field(message, name: str, payload: bytes) -> bytes:
    """One length-delimited field of `message`, encoded by hand: the library refuses to
    build what a hostile file can hold."""
    return _varint(message.DESCRIPTOR.fields_by_name[name].number << 3 | 2) + _varint(len(payload)) + payload


def _deep():
    """A slice whose debug annotation is nested 5,000 dicts deep."""
    inner = b""
    for _ in range(5000):
        inner = _field(pb.DebugAnnotation, "dict_entries", inner)
    event = _field(pb.TrackEvent, "debug_annotations", inner) + _field(pb.TrackEvent, "name", b"copy")
    return _field(pb.Trace, "packet", _field(pb.TracePacket, "track_event", event))


def _clocks_unrelated():
    t = pb.Trace()
    _slice(t, 1, 100, name="copy", kind=3, clock=6)
    _slice(t, 1, 200, name="copy", kind=3, clock=1)
    return t.SerializeToString()


def _past_int64():
    t = pb.Trace()
    _slice(t, 1, 2 ** 64 - 1, name="copy", kind=3)
    return t.SerializeToString()


REAL = (TIMELINES / "ring1_tg4perfetto.perfetto-trace").read_bytes()


@pytest.mark.parametrize("name, content, needle", [
    ("empty.pftrace", b"", "empty"),
    ("cut.perfetto-trace", REAL[:-5], "cut short"),  # inside the last packet
    ("random.pftrace", bytes(range(7, 256)) * 16, "not a Perfetto protobuf trace"),
    ("chrome.pftrace", b'  {"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": "copy"}]}', "is JSON"),
    ("nothing.perfetto", _no_track_events(), "no track events"),
    ("deep.pftrace", _deep(), "not a Perfetto protobuf trace"),
    ("clocks.pftrace", _clocks_unrelated(), "clocks [1, 6]"),
    ("late.pftrace", _past_int64(), "past 2^62 ns"),
])
def test_a_bad_perfetto_trace_is_one_error_line(tmp_path, name, content, needle):
    path = tmp_path / name
    path.write_bytes(content)
    assert_one_error_line(wsperf("timeline", path), 2, needle)
