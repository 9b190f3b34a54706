"""Readers started before a command's imports (collectors/prestart.py): taken by the load,
warmed up on the report, never started for anything but a readable report, and never
left running. Real reports; real reader processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from support import REPORTS, assert_one_error_line, wsperf
from wsperf.collectors import cubin, ncu, prestart, readers
from wsperf.collectors.files import find_binary
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

REPORT = REPORTS / "gemm_wgmma_tma.ncu-rep"
KERNEL = "_Z7gemm_wsILb1EEv14CUtensorMap_stS0_PK13__nv_bfloat16S3_Pf"


def test_constants_agree_with_the_loader():
    assert prestart.REPORT_MAGIC == ncu.REPORT_MAGIC and prestart.MAX_REPORT_BYTES == ncu.MAX_REPORT_BYTES


@pytest.mark.parametrize("command, args", [
    ("inspect", [str(REPORT)]),  # does not load through the readers
    ("analyze", [str(REPORT), "--help"]),
    ("analyze", ["missing.ncu-rep"]),
    ("analyze", [str(REPORTS / "gemm_ffma.stdout.txt")]),  # not named .ncu-rep
])
def test_nothing_starts_for_other_command_lines(command, args):
    assert prestart.start_for(command, args) == 0 and prestart.take() == []


def test_nothing_starts_for_what_is_not_a_report(tmp_path):
    text = tmp_path / "notes.ncu-rep"
    text.write_text("not a report\n")
    fifo = tmp_path / "pipe.ncu-rep"
    os.mkfifo(fifo)  # must not block: stat says it is no regular file before anything opens it
    for p in (text, fifo, tmp_path):
        assert prestart.start_for("analyze", [str(p)]) == 0
    assert prestart.take() == []


def test_the_load_takes_the_warmed_readers():
    pool = readers.pool()
    pool.close()  # no idle reader of an earlier test
    spawned = pool.spawned
    assert prestart.start_for("analyze", [str(REPORT)]) >= 1
    con = open_store(None)
    (res,) = load_reports(con, [REPORT])
    assert res.launches == 1 and not prestart.take()
    assert pool.spawned == spawned  # no reader of its own: it used those started early
    (n,) = con.execute("SELECT count(*) FROM sass WHERE sass IS NOT NULL").fetchone()
    assert n == 1779


def _tables(con) -> dict[str, list[str]]:
    """Every stored table's rows in storage order, as text (a NaN equals a NaN)."""
    out = {}
    for table in ("reports", "launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules"):
        cur = con.execute(f"SELECT * FROM {table} ORDER BY rowid")
        cols = [d[0] for d in cur.description]
        out[table] = [repr({c: v for c, v in zip(cols, row) if c not in ("loaded_at", "path")}) for row in cur.fetchall()]
    return out


@pytest.mark.parametrize("name", ["gemm_wgmma_tma.ncu-rep", "gemm_ffma.ncu-rep", "gemm_wgmma_tma_basic.ncu-rep"])
def test_a_prefetched_load_stores_its_metrics_parts_early_and_the_same_rows(monkeypatch, name):
    """The prefetching reader says when the metrics parts are written, and the load
    inserts them then, before the code parts: what is stored is row for row what a load
    without the early start stores."""
    report = REPORTS / name
    readers.pool().close()
    runs: list[bool] = []
    run = ncu._Inserts.run
    monkeypatch.setattr(ncu._Inserts, "run", lambda self, metas, *, early: runs.append(early) or run(self, metas, early=early))
    assert prestart.start_for("analyze", [str(report)]) >= 1
    early = open_store(None)
    load_reports(early, [report], units=False)
    assert runs == [True, False]  # the metrics parts went in while the code was read
    runs.clear()
    plain = open_store(None)
    load_reports(plain, [report], units=False)
    assert runs == [False]
    assert _tables(early) == _tables(plain)


def test_the_first_reader_gets_ahead_on_the_report():
    assert prestart.start_for("analyze", [str(REPORT)]) >= 1
    procs = prestart.take()
    first = procs[0][0]
    timer = threading.Timer(120, first.kill)  # a hung reader fails the test, not the suite
    timer.start()
    try:
        staged = json.loads(first.stdout.readline())
        # Said as soon as they are written: the load inserts them while the code is read.
        metrics = Path(staged["staged"]["spec"]["out"]) / "metrics.0.csv"
        rows = metrics.read_text().count("\n") - 1
        answer = first.stdout.readline()
    finally:
        timer.cancel()
        for proc, _ in procs:
            proc.kill()
            proc.wait()
    assert staged["staged"]["meta"]["total"] == 1 and rows > 2000, (staged, rows)
    assert json.loads(answer) == {"warmed": True}, answer  # read ahead, or nvdisasm under way


def test_unused_readers_are_stopped():
    assert prestart.start_for("chart", [str(REPORT)]) >= 1
    procs = [p for p, _ in prestart._started]
    prestart.stop()
    assert all(p.poll() is not None for p in procs) and not prestart._dir


def _processes_with(marker: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker.encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_a_command_that_fails_after_the_start_leaves_no_reader():
    marker = f"WSPERF_TEST_MARK={uuid.uuid4().hex}"
    key, value = marker.split("=")
    p = wsperf("analyze", REPORT, "--kernel", "a{4294967296}", env={key: value})
    assert_one_error_line(p, 2)
    assert _processes_with(marker) == []


def test_a_reader_loads_no_native_library_but_ncu_report():
    # A reader writes its tables with the standard library (collectors/staging.py): no
    # pyarrow (whose Parquet writer crashed beside Nsight Compute 2025.3's ncu_report, and
    # before which that ncu_report had to be imported), no numpy, no pandas.
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "wsperf.collectors.ncu_reader", "--serve"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in p.stderr.splitlines()
                if line.startswith("import time:")}
    assert "wsperf" in imported
    assert not imported & {"pyarrow", "numpy", "pandas", "duckdb"}, sorted(imported & {"pyarrow", "numpy", "pandas"})


def _rows(con) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules")}


@pytest.mark.skipif(prestart.reader_count(REPORT.stat().st_size) != 1,
                    reason="the report is read by one reader only where nvdisasm lists its code")
def test_a_small_report_is_read_whole_before_the_load_asks_and_stored_once(monkeypatch, tmp_path):
    pool = readers.pool()
    pool.close()
    plain = open_store(None)
    load_reports(plain, [REPORT])  # no reader started early: the reference
    want = _rows(plain)
    for count, cache in ((None, "warm"), (2, "warm"), (None, "cold")):  # as planned; a load asking for two readers
        pool.close()
        if cache == "cold":  # nvdisasm started by prestart itself, its output read by the reader
            monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cold"))
        assert prestart.start_for("analyze", [str(REPORT)]) == 1
        (snap,) = prestart._snapshots  # copied, and handed to the reader to read whole
        if cache == "cold":
            # the module handed to nvdisasm (removed once it is done, its output then written)
            assert list(snap.path.parent.glob("*.cubin")) or list(snap.path.parent.glob("*.sass"))
        if count is not None:
            monkeypatch.setattr(ncu, "_reader_count", lambda size: count)
        con = open_store(None)
        (res,) = load_reports(con, [REPORT], units=False)  # as `analyze REPORT` loads (prestart.needs_units)
        # The snapshot taken early was the load's (same identity), and it was given once.
        assert res.sha256 == plain.execute("SELECT sha256 FROM reports").fetchone()[0]
        assert prestart.prefetched(REPORT) is None
        # Each row once: a prefetched reader among two readers reads anew what it is given.
        assert _rows(con) == want, count
        assert con.execute("SELECT count(unit) FROM metrics").fetchone() == (1,)  # the duration's: read without units
        if cache == "cold":
            assert len(list((tmp_path / "cold" / "sass").iterdir())) == 1  # the reader kept the listing
        monkeypatch.undo()
    pool.close()


@pytest.mark.skipif(prestart.reader_count(REPORT.stat().st_size) != 1,
                    reason="the report is read by one reader only where nvdisasm lists its code")
@pytest.mark.parametrize("args, units", [([], True), (["--db", "runs.duckdb"], False)],
                         ids=["read without units, loaded with", "read with units (--db), loaded without"])
def test_a_prefetch_read_otherwise_than_the_load_asks_is_read_again(args, units):
    # prestart guesses from the command line whether the load wants the metrics' units
    # (only into a --db store); when the command asks otherwise, it gets what it asked for.
    pool = readers.pool()
    pool.close()
    assert prestart.needs_units("analyze", [str(REPORT), *args]) is not units
    assert prestart.start_for("analyze", [str(REPORT), *args]) == 1
    con = open_store(None)
    load_reports(con, [REPORT], units=units)
    assert prestart.prefetched(REPORT) is None
    count, with_unit = con.execute("SELECT count(*), count(unit) FROM metrics").fetchone()
    assert count > 1000 and with_unit == (count if units else 1)
    pool.close()


@pytest.mark.parametrize("name", ["gemm_wgmma_tma", "ws_stream_healthy", "multi_launch", "triton_matmul"])
def test_the_functions_disassembled_early_are_the_launched_ones(name):
    # Before ncu_report has read anything, a function named outside the cubins is taken
    # for launched: here exactly the kernels analyze reports (1 of 3, 1 of 5, 3 of 3, 1 of 1).
    report = REPORTS / f"{name}.ncu-rep"
    blob = report.read_bytes()
    modules = cubin.find_cubins(blob)
    p = wsperf("analyze", report, "-f", "json")
    assert p.returncode == 0, p.stderr
    launched = {k["mangled"] for k in json.loads(p.stdout)["kernels"]}
    assert prestart.named_outside(blob, modules) == launched
    assert len(launched) < sum(len(m.code) for m in modules) or name in ("multi_launch", "triton_matmul")


def test_a_report_without_per_pc_metrics_disassembles_nothing(tmp_path, monkeypatch):
    # --set basic: no source counters, no PC sampling; no code is read PC by PC, so no
    # nvdisasm runs, early or in the reader, and nothing enters the cache.
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    basic = tmp_path / "basic.ncu-rep"
    basic.write_bytes((REPORTS / "gemm_wgmma_tma_basic.ncu-rep").read_bytes())
    assert prestart._listings(basic) == {}
    p = wsperf("analyze", basic, "-f", "json", env={"WSPERF_CACHE_DIR": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "cache" / "sass").exists()
    # The full report: the launched function alone is listed, and kept in the cache.
    full = tmp_path / "full.ncu-rep"
    full.write_bytes(REPORT.read_bytes())
    (module,) = cubin.find_cubins(full.read_bytes())
    started = prestart._listings(full)
    assert list(started) == [module.sha256] and started[module.sha256][1] == [KERNEL]
    p = wsperf("analyze", REPORT, "-f", "json", env={"WSPERF_CACHE_DIR": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    tool = find_binary("nvdisasm")
    assert cubin.uncached(module, tool, module.code) == sorted(set(module.code) - {KERNEL})
    assert len(list((tmp_path / "cache" / "sass").iterdir())) == 1


def test_a_prefetch_stages_the_metrics_tables_before_the_code_and_each_table_once(tmp_path):
    # While nvdisasm lists the code, the reader writes what the metrics part read; the code
    # part then writes its own tables only, and a table gets written again only if rows
    # came since (the load reads the files once the reader says "done").
    from wsperf.collectors import ncu_reader, staging

    reader = ncu_reader._Reader(str(REPORT), "gemm", tmp_path, 0, units=False)
    reader.read(0, staging.METRICS)
    reader.stage_metrics()
    early = {t: staging.stage_file(tmp_path, t, 0) for t in staging.STAGES}
    assert {t for t, f in early.items() if f.exists()} == set(ncu_reader.METRICS_TABLES)
    written = {t: (f.read_bytes(), f.stat().st_mtime_ns) for t, f in early.items() if f.exists()}
    reader.read(0, staging.CODE)
    reader.finish()
    assert all(f.exists() for f in early.values())
    assert {t: (early[t].read_bytes(), early[t].stat().st_mtime_ns) for t in written} == written
    reader.cols["stalls"]["launch_idx"].append(0)
    for col in ("pc", "reason", "samples", "samples_not_issued"):
        reader.cols["stalls"][col].append({"pc": 2 ** 63, "reason": "late"}.get(col))
    reader._write()
    assert early["stalls"].read_bytes() == written["stalls"][0] + f"0,{2 ** 63},\"late\",,\n".encode()
