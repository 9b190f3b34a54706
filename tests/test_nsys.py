"""Nsight Systems exports: the loader, the timeline analyses and the join with Nsight
Compute, on real public exports (../shared/public/nsys, beside the clone: nsys 2022.2, 2024.5 and 2025.5: three
schema versions), every figure checked against a direct sqlite3 query of the same file;
then hostile inputs, each one Error line."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from rich.console import Console

from bundles import sanitizer_bundle
from support import PUBLIC, ROOT, assert_one_error_line, wsperf, wsperf_exe
from wsperf.analyses.analyze import analyze
from wsperf.analyses.compare import Change
from wsperf.analyses.hypotheses import Status
from wsperf.analyses.nsys import compare_nsys, match_ncu, rank_by_gpu_time, summarize_nsys, timeline
from wsperf.cli.nsys import nsys_json, nsys_markdown, nsys_report, nsys_text
from wsperf.cli.nsys_charts import nsys_charts
from wsperf.collectors.errors import InputError
from wsperf.collectors.ncu import load_report
from wsperf.collectors.nsys import (
    MAX_NAME_CHARS,
    TABLES as NSYS_TABLES,
    NsysExportError,
    load_nsys_export,
    nsys_schema_sql,
)
from wsperf.collectors.nsys_capture import NsysProbe, NsysUnavailableError, probe_nsys, profile_nsys
from wsperf.collectors.bundle import RunRecord, read_bundle, write_manifest
from wsperf.collectors.store import check_store, open_store

NSYS = ROOT / "fixtures" / "nsys"  # the project's own: the H200's nsys stub, vecadd under ncu
PUBLIC_NSYS = PUBLIC / "nsys"  # other people's exports, each with its .provenance.json
SAXPY = PUBLIC_NSYS / "saxpy_mpi_cuda_a100_nsys2022.2.sqlite.gz"  # schema 2.9.1, NVTX, host-bound
CLOVER = PUBLIC_NSYS / "cloverleaf_cuda_a100_nsys2024.5.sqlite.gz"  # schema 3.13.2, 1312 kernels
VECADD = PUBLIC_NSYS / "vecadd_rtx3060_nsys2025.5.sqlite.gz"  # schema 3.24.0, cluster columns
NO_KERNELS = PUBLIC_NSYS / "cublas_test_rtx5060_nsys2025.1_no_kernels.sqlite.gz"
VECADD_REP = PUBLIC_NSYS / "vecadd_rtx3060_nsys2025.5.nsys-rep"
VECADD_NCU = NSYS / "vecadd_h200.ncu-rep.gz"  # the same program's kernel under ncu (H200)
EXPORTS = [SAXPY, CLOVER, VECADD]

# Every test here may read a public export: a missing ../shared/public fails them all, clearly.
pytestmark = pytest.mark.usefixtures("public_data")


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict[Path, Path]:
    """The fixtures gunzipped, for direct sqlite3 queries."""
    d = tmp_path_factory.mktemp("nsys")
    out = {}
    for gz in EXPORTS + [NO_KERNELS]:
        p = d / gz.name.removesuffix(".gz")
        p.write_bytes(gzip.decompress(gz.read_bytes()))
        out[gz] = p
    return out


def _direct(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(sql, params).fetchall()


def _loaded(*exports: Path):
    con = open_store(None)
    for e in exports:
        load_nsys_export(con, e)
    return con


# -- the loader --------------------------------------------------------------------------


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name.split("_nsys")[1].removesuffix(".sqlite.gz"))
def test_rows_match_the_export(export, plain):
    db = plain[export]
    con = _loaded(export)
    tables = {r[0] for r in _direct(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def count(t, where=""):
        return _direct(db, f"SELECT count(*) FROM {t} {where}")[0][0] if t in tables else 0

    got = dict(con.execute("SELECT 'k', count(*) FROM nsys_kernels UNION ALL SELECT 'm', count(*) FROM nsys_memcpy "
                           "UNION ALL SELECT 'r', count(*) FROM nsys_runtime UNION ALL SELECT 'n', count(*) FROM nsys_nvtx "
                           "UNION ALL SELECT 'g', count(*) FROM nsys_gpus").fetchall())
    assert got == {"k": count("CUPTI_ACTIVITY_KIND_KERNEL"),
                   "m": count("CUPTI_ACTIVITY_KIND_MEMCPY") + count("CUPTI_ACTIVITY_KIND_MEMSET"),
                   "r": count("CUPTI_ACTIVITY_KIND_RUNTIME"),
                   "n": count("NVTX_EVENTS", "WHERE eventType IN (34, 59, 60, 65, 70, 71)"),
                   "g": count("TARGET_INFO_GPU")}
    assert got["k"] > 0
    # Every kernel with its names resolved through StringIds, as sqlite3 joins them.
    want = sorted(_direct(db, """SELECT k.start, k.end, k.streamId, k.correlationId, d.value, s.value, k.gridX, k.blockX,
                                        k.registersPerThread, k.staticSharedMemory, k.dynamicSharedMemory
                                 FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName
                                 JOIN StringIds s ON s.id = k.shortName"""))
    have = sorted(con.execute("""SELECT start_ns, end_ns, stream_id, correlation_id, kernel_demangled, kernel_short,
                                        grid_x, block_x, registers_per_thread, static_smem_bytes, dynamic_smem_bytes
                                 FROM nsys_kernels""").fetchall())
    assert have == want
    assert con.execute("SELECT count(*) FROM nsys_kernels WHERE duration_ns <> end_ns - start_ns").fetchone()[0] == 0


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name.split("_nsys")[1].removesuffix(".sqlite.gz"))
def test_the_arrow_reader_stores_what_sqlite3_stores(export, monkeypatch):
    """The bulk tables come through SQLite's ADBC driver into Arrow; without it (USE_ADBC
    off, as where the driver cannot read a table) each row goes through Python's sqlite3.
    Every table of the store holds the same rows either way, on all three schema versions."""
    import wsperf.collectors.nsys as nsys

    def rows(con):
        return {t: sorted(map(repr, con.execute(f"SELECT * EXCLUDE (export_id) FROM {t}").fetchall()))
                for t in NSYS_TABLES if t != "nsys_exports"}

    fast = rows(_loaded(export))
    monkeypatch.setattr(nsys, "USE_ADBC", False)
    assert rows(_loaded(export)) == fast
    assert fast["nsys_kernels"]


def test_each_schema_version_has_its_columns_and_says_which_are_absent():
    con = _loaded(SAXPY, CLOVER, VECADD)
    rows = {v: (schema, set(absent)) for v, schema, absent in con.execute(
        "SELECT nsys_version, export_schema, absent_columns FROM nsys_exports").fetchall()}
    cluster = {f"CUPTI_ACTIVITY_KIND_KERNEL.{c}" for c in ("clusterX", "clusterY", "clusterZ")}
    green = "CUPTI_ACTIVITY_KIND_KERNEL.greenContextId"
    assert rows["2022.2.1.31"][0] == "2.9.1" and cluster | {green} <= rows["2022.2.1.31"][1]
    assert rows["2024.5.1.113"][0] == "3.13.2" and cluster <= rows["2024.5.1.113"][1]
    assert green not in rows["2024.5.1.113"][1]
    assert rows["2025.5.2.266"][0] == "3.24.0" and not cluster & rows["2025.5.2.266"][1]
    # Absent columns are NULL; present ones carry the export's values (0: no cluster).
    clusters = dict(con.execute("""SELECT e.nsys_version, list(DISTINCT [k.cluster_x, k.max_active_clusters])
                                   FROM nsys_kernels k JOIN nsys_exports e USING (export_id) GROUP BY ALL""").fetchall())
    assert clusters["2022.2.1.31"] == [[None, None]] and clusters["2024.5.1.113"] == [[None, None]]
    assert clusters["2025.5.2.266"] == [[0, 0]]
    gpus = dict(con.execute("SELECT e.nsys_version, list(g.name || ' ' || g.compute_capability ORDER BY g.device_id) "
                            "FROM nsys_gpus g JOIN nsys_exports e USING (export_id) GROUP BY ALL").fetchall())
    assert gpus["2025.5.2.266"] == ["NVIDIA GeForce RTX 3060 8.6"]
    assert gpus["2024.5.1.113"] == ["NVIDIA A100-SXM4-80GB 8.0"] * 4


def test_the_same_export_loads_once():
    con = open_store(None)
    first = load_nsys_export(con, VECADD)
    again = load_nsys_export(con, VECADD)
    assert not first.already_present and again.already_present and again.export_id == first.export_id
    assert set(again.rows.values()) == {0}
    assert con.execute("SELECT count(*) FROM nsys_kernels").fetchone()[0] == 1


def test_launch_latency_is_the_kernel_start_after_its_api_call(plain):
    con = _loaded(CLOVER)
    want = sorted(_direct(plain[CLOVER], """
        SELECT r.correlationId, k.start - r.start, max(k.start - r.end, 0)
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k
          ON k.correlationId = r.correlationId AND k.globalPid = (r.globalTid >> 24) << 24"""))
    have = sorted(con.execute("SELECT correlation_id, launch_latency_ns, queue_ns FROM nsys_runtime "
                              "WHERE kernels > 0").fetchall())
    assert have == want and len(have) == 1312
    assert con.execute("SELECT count(*) FROM nsys_runtime WHERE api = 'cudaLaunchKernel_v7000' AND kernels = 1"
                       ).fetchone()[0] == 1312


# -- the analyses ------------------------------------------------------------------------


def test_kernel_statistics_match_the_export(plain):
    con = _loaded(CLOVER)
    s = summarize_nsys(con)
    durations = defaultdict(list)
    for name, d in _direct(plain[CLOVER], "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                          "JOIN StringIds s ON s.id = k.demangledName"):
        durations[name].append(d)
    total = sum(sum(v) for v in durations.values())
    assert s.kernel_time_ns == total and len(s.kernels) == len(durations)
    assert [k.total_ns for k in s.kernels] == sorted((sum(v) for v in durations.values()), reverse=True)
    assert sum(k.share for k in s.kernels) == pytest.approx(1.0)
    for k in s.kernels:
        v = sorted(durations[k.kernel])
        assert (k.launches, k.total_ns, k.min_ns, k.max_ns) == (len(v), sum(v), v[0], v[-1])
        assert k.median_ns == pytest.approx(statistics.median(v))
        assert k.share == pytest.approx(sum(v) / total)
        if len(v) > 1:
            deciles = statistics.quantiles(v, n=10, method="inclusive")  # linear, as DuckDB's quantile_cont
            assert (k.p10_ns, k.p90_ns) == (pytest.approx(deciles[0]), pytest.approx(deciles[-1]))


def _host_wait(db: Path) -> tuple[int, int, int]:
    """The gap rule of nsys_stream_gaps.sql, in Python over sqlite3 rows of the one
    stream: (gaps, idle ns, idle ns where the issuing call began after the previous end)."""
    calls = {}
    for corr, start in _direct(db, "SELECT correlationId, min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY 1"):
        calls[corr] = start
    ops = sorted(_direct(db, "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                             "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY"))
    gaps = idle = host = 0
    prev_end = None
    for start, end, corr in ops:
        if prev_end is not None:
            gap = max(start - prev_end, 0)
            gaps, idle = gaps + 1, idle + gap
            if calls.get(corr) is not None and calls[corr] >= prev_end:
                host += gap
        prev_end = end if prev_end is None else max(prev_end, end)
    return gaps, idle, host


@pytest.mark.parametrize("export, status, kind", [(SAXPY, Status.confirmed, "host-bound"),
                                                   (CLOVER, Status.rejected, "host-bound"),
                                                   (VECADD, Status.no_data, None)])
def test_gpu_waits_on_host(export, status, kind, plain):
    (g,) = summarize_nsys(_loaded(export)).streams  # each export has one stream
    assert g.status is status
    if kind:
        assert g.kind == kind
    assert (g.gaps, g.idle_ns, g.host_wait_ns) == _host_wait(plain[export])
    assert g.host_wait_share == pytest.approx(g.host_wait_ns / g.span_ns)


def test_a_lower_threshold_confirms_the_rejected_stream():
    con = _loaded(CLOVER)
    (g,) = summarize_nsys(con, thresholds={"min_host_wait_share": 0.05}).streams
    assert g.status is Status.confirmed and 0.05 <= g.host_wait_share < 0.2
    with pytest.raises(InputError, match="no threshold"):
        summarize_nsys(con, thresholds={"nope": 1})


def test_overlap_of_one_stream_is_none_and_busy_is_the_kernel_union(plain):
    (d,) = summarize_nsys(_loaded(CLOVER)).devices
    spans = sorted(_direct(plain[CLOVER], "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    busy, cur_s, cur_e = 0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            busy += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    assert (d.streams, d.overlap_ns, d.max_concurrent, d.busy_ns) == (1, 0, 1, busy)
    assert d.idle_ns == d.span_ns - busy == spans[-1][1] - spans[0][0] - busy


def test_nvtx_totals_and_the_gpu_time_they_launched(plain):
    s = summarize_nsys(_loaded(SAXPY))
    by = {(n.domain, n.text): n for n in s.nvtx}
    want = _direct(plain[SAXPY], "SELECT count(*), sum(e.end - e.start) FROM NVTX_EVENTS e "
                   "JOIN StringIds s ON s.id = e.textId WHERE s.value = 'MPI_Send'")[0]
    assert (by[("MPI", "MPI_Send")].ranges, by[("MPI", "MPI_Send")].total_ns) == want
    saxpy = by[(None, "saxpy")]
    # Each 'saxpy' range wraps one launch: all five kernels, each counted once.
    assert (saxpy.ranges, saxpy.kernels, saxpy.kernel_ns) == (5, 5, s.kernel_time_ns)


def test_timeline_spans_are_the_kernels_in_time_order():
    con = _loaded(CLOVER)
    spans = timeline(con, top=2)
    assert len(spans) == 1312 and spans[0].start_ns == 0
    assert all(a.start_ns <= b.start_ns for a, b in zip(spans, spans[1:]))
    assert {sp.kernel for sp in spans} <= {"par_ranged2d_kernel", "par_reduce_kernel", "other"}
    assert len(timeline(con, max_spans=10)) == 10


# -- joined with Nsight Compute ----------------------------------------------------------


def test_an_ncu_launch_gets_its_kernels_share_of_gpu_time():
    con = _loaded(VECADD)
    load_report(con, VECADD_NCU)
    results = analyze(con)
    times = match_ncu(con, [a.summary.launch_id for a in results])
    (t,) = times.values()
    assert (t.matched_by, t.launches, t.total_ns, t.share) == ("mangled", 1, 38912, 1.0)
    (ranked,) = rank_by_gpu_time(results, times)
    assert ranked.headline.startswith("100% of GPU time (the timeline ran on NVIDIA GeForce RTX 3060")


def test_a_launch_absent_from_the_timeline_says_so():
    con = _loaded(CLOVER)
    load_report(con, VECADD_NCU)
    results = analyze(con)
    assert match_ncu(con, [a.summary.launch_id for a in results]) == {}
    (ranked,) = rank_by_gpu_time(results, {})
    assert ranked.headline.startswith("not in the Nsight Systems timeline; ")


# -- hostile inputs ----------------------------------------------------------------------


def _copy(plain: dict, export: Path, tmp_path: Path, sql: str | None = None, name: str = "x.sqlite") -> Path:
    p = tmp_path / name
    shutil.copy(plain[export], p)
    if sql:
        with sqlite3.connect(p) as db:
            db.executescript(sql)
    return p


def _refused(path: Path, *needles: str) -> str:
    con = open_store(None)
    with pytest.raises(NsysExportError) as e:
        load_nsys_export(con, path)
    for n in needles:
        assert n in str(e.value)
    con.execute(nsys_schema_sql())
    assert con.execute("SELECT count(*) FROM nsys_exports").fetchone()[0] == 0  # nothing half-written
    return str(e.value)


def test_one_launch_of_one_kernel_reads_in_the_singular():
    p = wsperf("nsys", PUBLIC / "nsys" / "vecadd_rtx3060_nsys2025.5.sqlite.gz", env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert "1 kernel record," in p.stdout and "over 1 launch of 1 kernel\n" in p.stdout


def test_an_export_without_kernel_activity_is_refused():
    _refused(NO_KERNELS, "holds no CUDA kernel activity", "CUDA trace was on, but no kernel ran")


def test_an_export_collected_without_cuda_trace_says_so(plain, tmp_path):
    p = _copy(plain, NO_KERNELS, tmp_path, "UPDATE META_DATA_CAPTURE SET value = 'false' "
                                           "WHERE name = 'PROCESS_0:COLLECT_CUDA_TRACE'")
    _refused(p, "collected without CUDA trace", "--trace=cuda")


@pytest.mark.parametrize("frac", [0.0001, 0.3, 0.99])
def test_a_truncated_export_is_refused(plain, tmp_path, frac):
    data = plain[CLOVER].read_bytes()
    p = tmp_path / "cut.sqlite"
    p.write_bytes(data[: max(int(len(data) * frac), 1)])
    _refused(p, "truncated")


def test_a_damaged_schema_is_refused_in_one_line(plain, tmp_path):
    # Found by the fuzzer: SQLite quotes a damaged CREATE statement whole, newlines and all,
    # and the error said it over 25 lines
    data = plain[VECADD].read_bytes()
    at = data.find(b"blockX ", data.find(b"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL"))
    p = tmp_path / "schema.sqlite"
    p.write_bytes(data[:at] + b"[[     " + data[at + 7:])
    said = _refused(p, "cannot be read as SQLite", "malformed database schema")
    assert "\n" not in said and len(said) < 400, said


def test_bad_files_are_refused(plain, tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    _refused(empty, "is empty")
    text = tmp_path / "text.sqlite"
    text.write_text("start,end\n1,2\n")
    _refused(text, "is not an SQLite file")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE orders (id INTEGER)")
    _refused(other, "not an Nsight Systems export")
    _refused(_copy(plain, VECADD, tmp_path, "DROP TABLE StringIds", "nostrings.sqlite"), "not an Nsight Systems export")
    _refused(_copy(plain, VECADD, tmp_path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "nokernels.sqlite"),
             "holds no CUDA kernel activity")
    _refused(_copy(plain, VECADD, tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon'", "typed.sqlite"),
             "wrong type")
    cut_gz = tmp_path / "cut.sqlite.gz"
    cut_gz.write_bytes(VECADD.read_bytes()[:5000])
    _refused(cut_gz, "not a complete gzip file")
    _refused(tmp_path / "missing.sqlite", "no such file")
    fifo = tmp_path / "fifo.sqlite"
    os.mkfifo(fifo)
    _refused(fifo, "not a regular file")
    stream = tmp_path / "capture.qdstrm"
    stream.write_bytes(b"\x00" * 64)
    _refused(stream, ".qdstrm", "never imported")


def test_a_huge_name_is_cut_not_loaded_whole(plain, tmp_path):
    p = _copy(plain, VECADD, tmp_path, "UPDATE StringIds SET value = printf('%.*c', 20000000, 'x') "
                                       "WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con = _loaded(p)
    assert con.execute("SELECT length(kernel_demangled) FROM nsys_kernels").fetchone()[0] == MAX_NAME_CHARS


def test_a_report_needs_nsys_on_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    _refused(VECADD_REP, "no `nsys` is on PATH", "nsys export --type sqlite")


# -- compare on nsys timings -------------------------------------------------------------


def test_a_timeline_compared_with_itself_is_unchanged():
    con = open_store(None)
    eid = load_nsys_export(con, CLOVER).export_id
    r = compare_nsys(con, [eid], [eid])
    assert len(r.kernels) == 102 and not r.regression and not r.only_base and not r.only_cand
    assert {k.figures[0].change for k in r.kernels} == {Change.unchanged}
    top = r.kernels[0]  # most GPU time: 10 launches a side, all of them samples
    assert len(top.figures[0].base_values) == len(top.figures[0].cand_values) == 10


def test_slower_kernels_are_a_regression_by_the_compare_rule(plain, tmp_path):
    """The candidate is the CloverLeaf export with every kernel 20% longer (a changed copy
    of the real file): kernels with 10 launches a side pass Mann-Whitney; those with one
    launch a side are decided by the wide threshold, which 20% exceeds."""
    slow = _copy(plain, CLOVER, tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + (end - start) / 5",
                 "slow.sqlite")
    con = open_store(None)
    base, cand = load_nsys_export(con, CLOVER).export_id, load_nsys_export(con, slow).export_id
    r = compare_nsys(con, [base], [cand])
    assert r.regression and len(r.kernels) == 102
    changes = {k.figures[0].change for k in r.kernels}
    assert changes == {Change.regression}
    tested = [k.figures[0] for k in r.kernels if len(k.figures[0].base_values) >= 10]
    assert tested and all(f.p_value is not None and f.p_value < 0.01 for f in tested)
    assert all(f.delta_pct == pytest.approx(20.0, abs=0.1) for f in tested), [f.delta_pct for f in tested]
    back = compare_nsys(con, [cand], [base])
    assert not back.regression and {k.figures[0].change for k in back.kernels} == {Change.improvement}


def test_different_programs_share_no_kernel():
    con = open_store(None)
    r = compare_nsys(con, [load_nsys_export(con, CLOVER).export_id], [load_nsys_export(con, SAXPY).export_id])
    assert r.kernels == () and len(r.only_base) == 102
    assert r.only_cand == ("saxpy(double *, double *, double *, double, int)",)


# -- a working nsys is tried, not assumed --------------------------------------------------


def test_no_nsys_on_path_does_not_work(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert probe_nsys() == NsysProbe(None, None, False, "no nsys on PATH")


def test_a_program_that_exits_0_but_writes_no_report_does_not_work():
    """Like the nsys of the GPU machine here (fixtures/nsys/nsys_stub_h200.txt): exit 0,
    no .nsys-rep. /bin/true stands for it: success by exit status is not trusted."""
    p = probe_nsys("/bin/true")
    assert not p.works and "wrote no .nsys-rep" in p.reason and "exit 0" in p.reason
    p = probe_nsys(str(NSYS / "no-such-nsys"))
    assert not p.works and "cannot run" in p.reason


def test_profiling_without_a_working_nsys_says_why(tmp_path):
    with pytest.raises(NsysUnavailableError, match=r"no working nsys \(`nsys profile` of a tiny run wrote no"):
        profile_nsys(["/bin/true"], tmp_path / "bundle", timeout_s=60, probe=probe_nsys("/bin/true"))
    assert not (tmp_path / "bundle").exists()


# -- what the command prints and draws -----------------------------------------------------


def test_the_report_in_text_json_and_markdown():
    con = open_store(None)
    rep = nsys_report(con, [SAXPY], [])
    console = Console(record=True, width=200)
    nsys_text(rep, console)
    text = console.export_text()
    assert "nsys 2022.2.1.31" in text and "gpu-waits-on-host confirmed" in text and "host-bound" in text
    doc = json.loads(nsys_json(rep))
    assert [k["launches"] for k in doc["kernel_stats"]] == [5]
    assert doc["streams"][0]["status"] == "confirmed" and doc["streams"][0]["kind"] == "host-bound"
    assert doc["thresholds"] == {"gpu-waits-on-host": {"min_host_wait_share": 0.2, "min_gaps": 10}}
    assert {(n["domain"], n["text"]) for n in doc["nvtx"]} >= {("MPI", "MPI_Send"), (None, "saxpy")}
    md_ = nsys_markdown(rep)
    assert "| confirmed | host-bound: the GPU waited on the CPU 66%" in md_


def test_with_ncu_reports_the_launches_lead_with_their_gpu_time():
    con = open_store(None)
    rep = nsys_report(con, [VECADD], [VECADD_NCU])
    doc = json.loads(nsys_json(rep))
    (launch,) = doc["launches"]
    assert launch["headline"].startswith("100% of GPU time (the timeline ran on NVIDIA GeForce RTX 3060") and launch["gpu_time"]["matched_by"] == "mangled"
    (k,) = doc["kernels"]  # analyze's own JSON of the launch
    assert k["mangled"] == "_Z13kernVectorAddPKfS0_Pfi" and k["grid"] == [4096, 1, 1]
    assert "100% of GPU time" in nsys_markdown(rep)


def test_charts_hold_the_results_figures():
    con = _loaded(CLOVER)
    s = summarize_nsys(con)
    spans = timeline(con)
    charts = nsys_charts(s, spans)
    assert set(charts) == {"nsys_kernel_time", "nsys_timeline"}
    bars = charts["nsys_kernel_time"].to_dict()
    rows = next(iter(bars["datasets"].values()))
    assert [r["share"] for r in rows[:10]] == [k.share for k in s.kernels[:10]]
    assert rows[-1]["kernel"] == f"other ({len(s.kernels) - 10} kernels)"
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    gantt = next(iter(charts["nsys_timeline"].to_dict()["datasets"].values()))
    assert len(gantt) == 1312 and gantt[0]["start_ms"] == 0.0
    assert {r["stream"] for r in gantt} == {"pid 1701896 dev 0 stream 7"}


# -- `wsperf analyze` given exports: a user's process --------------------------------------


def test_analyze_reads_an_export():
    p = wsperf("analyze", SAXPY, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["exports"][0]["nsys_version"] == "2022.2.1.31" and doc["streams"][0]["status"] == "confirmed"


def test_analyze_ranks_ncu_launches_by_gpu_time(tmp_path):
    p = wsperf("analyze", VECADD, VECADD_NCU, "--format", "markdown", "--charts", tmp_path / "charts")
    assert p.returncode == 0, p.stderr
    assert "**100% of GPU time (the timeline ran on" in p.stdout and "nsys_timeline.png" in p.stdout
    assert (tmp_path / "charts" / "nsys_kernel_time.svg").is_file()


@pytest.mark.parametrize("args, needles", [
    ((NO_KERNELS,), ("holds no CUDA kernel activity",)),
    ((VECADD, "--sanitizer", NSYS / "x.xml"), ("--sanitizer is not combined",)),
])
def test_analyze_refuses_with_one_error_line(args, needles):
    assert_one_error_line(wsperf("analyze", *args), 2, *needles)


def test_analyze_of_a_report_without_nsys_names_what_is_missing():
    env = {**os.environ, "PATH": "/nonexistent"}
    p = subprocess.run([wsperf_exe(), "analyze", str(VECADD_REP)], capture_output=True, text=True, env=env, timeout=300)
    assert_one_error_line(p, 2, "no `nsys` is on PATH")


def test_compare_gates_on_exports(plain, tmp_path):
    same = wsperf("compare", SAXPY, SAXPY)
    assert same.returncode == 0, same.stderr
    slow = _copy(plain, CLOVER, tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + (end - start) / 5",
                 "slow.sqlite")
    p = wsperf("compare", CLOVER, slow, "--format", "json", "--kernel", "accelerate_kernel")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["regression"] is True and len(doc["kernels"]) == 1  # the one accelerate_kernel lambda
    assert_one_error_line(wsperf("compare", SAXPY, VECADD_NCU), 2, "is not an export")


def test_sql_queries_an_export(plain):
    p = wsperf("sql", "SELECT count(*) AS n, sum(duration_ns) AS t FROM nsys_kernels", "--report", CLOVER,
               "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [dict(zip(("n", "t"), _direct(
        plain[CLOVER], "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]))]


def test_every_nsys_column_is_documented():
    con = open_store(None)
    con.execute(nsys_schema_sql())
    sql = nsys_schema_sql()
    columns = con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE table_name LIKE 'nsys_%'"
                          ).fetchall()
    assert {t for t, _ in columns} == set(NSYS_TABLES) | {"nsys_run_exports"}
    for table, column in columns:
        block = sql[sql.index(f"CREATE TABLE IF NOT EXISTS {table} ("):]
        line = next(l for l in block.splitlines()[1:] if l.split() and l.split()[0] == column)
        assert "--" in line, (table, column)


def test_an_export_is_only_read(plain, tmp_path):
    """Opened read-only and immutable: loading from a directory made read-only works and
    leaves the file as it was, with nothing beside it (no journal, no lock file)."""
    d = tmp_path / "ro"
    d.mkdir()
    shutil.copy(plain[VECADD], d / "x.sqlite")
    before = (d / "x.sqlite").read_bytes()
    d.chmod(0o555)
    try:
        load_nsys_export(open_store(None), d / "x.sqlite")
        assert [p.name for p in d.iterdir()] == ["x.sqlite"] and (d / "x.sqlite").read_bytes() == before
    finally:
        d.chmod(0o755)


# -- collect --nsys, a bundle's timeline, runs of exports ---------------------------------

STUB = NSYS / "stub" / "nsys"  # behaves as the H200's nsys did (fixtures/nsys/nsys_stub_h200.txt)


def test_collect_nsys_detects_the_h200_stub_by_trying_it(tmp_path):
    """The stand-in is a real program on PATH named nsys: exit 0, only a .qdstrm. collect
    tries it on a tiny run, prints one Warning line, records no nsys run and goes on."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(STUB, bin_dir / "nsys")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = tmp_path / "bundle"
    p = subprocess.run([wsperf_exe(), "collect", "--nsys", "--no-profile", "--allow-unverified", "--out", str(out),
                        "--timeout", "10", "--", sys.executable, "-c", "print('ok')"],
                       capture_output=True, text=True, env=env, timeout=300)
    (warning,) = [line for line in p.stderr.splitlines() if line.startswith("Warning:") and "nsys" in line]
    assert f"no working nsys ({bin_dir / 'nsys'}: `nsys profile` of a tiny run wrote no .nsys-rep (it wrote a " \
           ".qdstrm" in warning and "the Nsight Systems step was skipped" in warning
    b = read_bundle(out)
    assert [r.phase for r in b.runs if r.phase == "nsys"] == [] and not (out / "nsys").exists()
    assert any("no working nsys" in w for w in b.manifest["warnings"])
    assert not any("nsys" in line for line in p.stderr.splitlines() if line.startswith("Error:"))


def _with_timeline(root: Path, export: Path, report: Path) -> Path:
    """A bundle as `collect --nsys` leaves it: the profile phase's report replaced by
    `report` and an nsys phase whose export is `export` (both real files of one program)."""
    b = read_bundle(root)
    (root / "profile" / "report.ncu-rep").write_bytes(gzip.decompress(report.read_bytes()))
    (root / "nsys").mkdir()
    (root / "nsys" / "report.sqlite").write_bytes(gzip.decompress(export.read_bytes()))
    runs = [*b.runs, RunRecord("nsys", "nsys-export", ["nsys", "export", "--type", "sqlite", "report.nsys-rep"], 0, 1.0,
                               outputs={"export": "nsys/report.sqlite"})]
    write_manifest(root, {k: v for k, v in b.manifest.items() if k not in ("format", "runs")}, runs)
    return root


def test_analyze_bundle_shows_its_timeline_beside_the_verdicts(tmp_path):
    bundle = _with_timeline(sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy"), VECADD, VECADD_NCU)
    p = wsperf("analyze", bundle, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["exports"][0]["nsys_version"].startswith("2025.5") and doc["exports"][0]["kernels"] == 1
    (launch,) = doc["launches"]
    assert launch["headline"].startswith("100% of GPU time (the timeline ran on NVIDIA GeForce RTX 3060")
    (k,) = doc["kernels"]  # the verdicts, as analyze gives them for a bundle
    assert k["mangled"] == "_Z13kernVectorAddPKfS0_Pfi" and k["findings"]


def test_history_and_compare_over_runs_of_exports(plain, tmp_path):
    db = tmp_path / "runs.duckdb"
    slow = _copy(plain, CLOVER, tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + (end - start) / 5",
                 "slow.sqlite")
    for export, label in ((CLOVER, "night-1"), (slow, "night-2")):
        p = wsperf("analyze", export, "--db", db, "--label", label, "--tag", "nightly", "--format", "json")
        assert p.returncode == 0 and f"recorded run {label!r}" in p.stderr, p.stderr
    p = wsperf("history", "--db", db, "--source", "nsys", "--tag", "nightly", "--format", "json")
    assert p.returncode == 0, p.stderr
    points = json.loads(p.stdout)["points"]
    direct = _direct(plain[CLOVER], "SELECT count(*), min(end - start), max(end - start) FROM "
                     "CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.demangledName GROUP BY s.value")
    first = [pt for pt in points if pt["label"] == "night-1"]
    assert sorted((pt["n"], pt["min"], pt["max"]) for pt in first) == sorted(direct)
    assert sum(pt["n"] for pt in points if pt["label"] == "night-2") == 1312
    con = open_store(db, read_only=True)
    assert check_store(con) == []
    con.close()
    worse = wsperf("compare", "--db", db, "night-1", "night-2", "--kernel", "accelerate_kernel", "--format", "json")
    assert worse.returncode == 1, worse.stderr
    assert json.loads(worse.stdout)["regression"] is True
    assert_one_error_line(wsperf("history", "--db", db, "--source", "nsys", "--metric", "sm__cycles_active.avg"),
                          2, "durations only")


def test_timeline_of_another_gpu_is_said(public_data):
    """An RTX 3060 timeline with an H200 profile of the same program: the kernel matches,
    and its share of GPU time says the two are not one run (it read '100% of GPU time')."""
    p = wsperf("nsys", public_data / "nsys" / "vecadd_rtx3060_nsys2025.5.sqlite.gz",
               ROOT / "fixtures" / "nsys" / "vecadd_h200.ncu-rep.gz", "--format", "json")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["launches"]
    assert r["gpu_time"]["nsys_gpu"] == "NVIDIA GeForce RTX 3060" and r["gpu_time"]["ncu_gpu"] == "NVIDIA H200"
    text = wsperf("nsys", public_data / "nsys" / "vecadd_rtx3060_nsys2025.5.sqlite.gz",
                  ROOT / "fixtures" / "nsys" / "vecadd_h200.ncu-rep.gz").stdout
    assert "the timeline ran on NVIDIA GeForce RTX 3060, the profile on NVIDIA H200: not one run" in text


def test_an_export_without_global_pid_reads(tmp_path, public_data):
    """The README says absent columns become NULL: an export whose kernel table has no
    globalPid gave a TypeError traceback in the stream table ('pid ?' now)."""
    db = tmp_path / "nopid.sqlite"
    with gzip.open(public_data / "nsys" / "vecadd_rtx3060_nsys2025.5.sqlite.gz") as f, open(db, "wb") as out:
        shutil.copyfileobj(f, out)
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)") if r[1] != "globalPid"]
    con.execute(f"CREATE TABLE k2 AS SELECT {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    for fmt in ("text", "json", "markdown"):
        p = wsperf("nsys", db, "--format", fmt)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-300:]
    assert "pid ? dev" in wsperf("nsys", db).stdout
