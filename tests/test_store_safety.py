"""Nothing lost: a `wsperf analyze --db` killed with SIGKILL mid-load leaves the store
exactly as it was, and several wsperf processes on one store take turns (DuckDB allows
one writing process per file) instead of failing, or fail with one clear line when told
not to wait. Real processes, real reports, real kills."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from support import REPORTS, ROOT, wsperf, wsperf_exe
from test_cli import assert_one_error_line

from wsperf.cli.main import app
from wsperf.collectors.errors import StoreError
from wsperf.collectors.ncu import load_report
from wsperf.collectors.store import HISTORY_TABLES, TABLES, check_store, open_store

COMPARE = ROOT / "fixtures" / "compare"
HEALTHY_A, HEALTHY_B = COMPARE / "cmp_healthy_a.ncu-rep.gz", COMPARE / "cmp_healthy_b.ncu-rep.gz"
# A load long enough to be killed in the middle of, and to hold the store while other
# commands start (~5 s on 2 cores; four reports, ~3.8 s, were once done before a command
# started beside it on a busy machine got to the lock): the largest report first (its
# rows are written, uncommitted, while the others are still being read).
LONG = [REPORTS / n for n in ("multi_launch.ncu-rep", "gemm_ffma.ncu-rep", "ws_stream_consumer.ncu-rep",
                              "ws_stream_fewctas.ncu-rep", "ws_stream_producer.ncu-rep", "ws_stream_serialized.ncu-rep",
                              "ws_stream_spill.ncu-rep", "ws_stream_healthy1.ncu-rep", "triton_matmul.ncu-rep")]
ALL = (*TABLES, *HISTORY_TABLES, "role_pcs")


def start(*args: str | Path, log: Path) -> subprocess.Popen:
    """wsperf in its own process group (it and its reader processes), stderr to `log`."""
    with open(log, "wb") as f:
        return subprocess.Popen([wsperf_exe(), *map(str, args)], stdout=subprocess.DEVNULL, stderr=f,
                                start_new_session=True)


def snapshot(db: Path) -> dict[str, tuple]:
    """Per table: row count and a checksum of every row's content."""
    con = open_store(db, read_only=True, lock_timeout=30)
    try:
        return {t: tuple(con.execute(f"SELECT count(*), sum(hash(x)) FROM {t} AS x").fetchone()) for t in ALL}
    finally:
        con.close()


def readers(pid: int) -> list[int]:
    """The loader's reader processes among the children of `pid`."""
    try:
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            if b"wsperf.collectors.ncu" in Path(f"/proc/{k}/cmdline").read_bytes():
                out.append(k)
        except OSError:
            pass
    return out


def holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (DuckDB holds the store's lock while it does).
    The readers start before the command opens the store, so they do not tell this."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if Path(os.readlink(fd)) == path:
                return True
        except OSError:
            pass
    return False


def wait_until(p: subprocess.Popen, cond, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert p.poll() is None, f"wsperf finished (exit {p.returncode}) before {what}: give it a longer load"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.01)


def group_alive(pgid: int) -> list[int]:
    """Members of process group `pgid` that still run. Zombies are dead: orphans may be
    re-parented to this process (collectors/process.py makes it a child subreaper when
    another test runs collect in-process), and those are reaped here."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        pid, state, group = int(stat.parent.name), fields[0], int(fields[2])
        if group != pgid:
            continue
        if state == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # someone else's to reap
        else:
            alive.append(pid)
    return alive


def kill_group(p: subprocess.Popen) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 30
    while group_alive(p.pid):  # the readers die with the group
        assert time.monotonic() < deadline, "reader processes outlived SIGKILL of their group"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A store holding one recorded run, and its snapshot."""
    db = tmp_path_factory.mktemp("safety") / "base.duckdb"
    p = wsperf("analyze", HEALTHY_A, "--db", db, "--label", "before")
    assert p.returncode == 0, p.stderr
    return db, snapshot(db)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the reader processes through /proc (Linux)")
@pytest.mark.parametrize("when", ["readers-started", "reading", "writing"])
def test_sigkill_mid_load_keeps_exactly_the_previous_history(base, tmp_path, when):
    src, before = base
    db = tmp_path / "store.duckdb"
    shutil.copy(src, db)
    size = db.stat().st_size
    p = start("analyze", *LONG, "--db", db, "--label", "killed", "--format", "json", log=tmp_path / "stderr.txt")
    try:
        wait_until(p, lambda: readers(p.pid), "the reader processes started")
        if when == "reading":
            time.sleep(1.0)
        elif when == "writing":
            # The first report's rows reach the file (uncommitted) while the next is read.
            wait_until(p, lambda: db.stat().st_size > size, "the store file grew")
        kill_group(p)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == -signal.SIGKILL
    # The lock went with the process; the store opens (replaying its log) and is whole.
    con = open_store(db, lock_timeout=5)
    assert check_store(con) == []
    assert con.execute("SELECT label FROM runs").fetchall() == [("before",)]
    con.close()
    assert snapshot(db) == before
    if when == "writing":  # and it takes the next run as usual
        p = wsperf("analyze", HEALTHY_B, "--db", db, "--label", "after")
        assert p.returncode == 0, p.stderr
        con = open_store(db, read_only=True)
        assert check_store(con) == [] and [r[0] for r in con.execute("SELECT label FROM runs ORDER BY run_id")
                                           .fetchall()] == ["before", "after"]
        con.close()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_reader_killed_from_outside_is_not_called_a_damaged_report(tmp_path, sig):
    # What the system's out-of-memory killer does to a reader (SIGKILL), or another
    # process: one Error line that says so, not "ncu_report crashed: the report is damaged"
    # (that is for a reader that crashes by itself: tests/test_loader.py); nothing stored.
    db = tmp_path / "store.duckdb"
    p = start("analyze", *LONG, "--db", db, "--label", "killed", log=tmp_path / "stderr.txt")
    try:
        # Once the store is open the first report (multi_launch: three readers, ~1 s) is read.
        wait_until(p, lambda: readers(p.pid) and holds_open(p.pid, db), "the store open and the readers reading")
        deadline = time.monotonic() + 120
        while p.poll() is None and time.monotonic() < deadline:  # each reader, until the command gives up
            for pid in readers(p.pid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    err = (tmp_path / "stderr.txt").read_text()
    assert p.returncode == 2 and err.count("Error:") == 1 and "Traceback" not in err, err
    assert f"reader process was killed ({signal.Signals(sig).name})" in err and "out-of-memory killer" in err, err
    assert "damaged" not in err and "nothing was stored" in err
    con = open_store(db, read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    con.close()


def test_two_writers_started_at_once_both_succeed(tmp_path):
    db = tmp_path / "shared.duckdb"
    ps = [start("analyze", r, "--db", db, "--tag", "ci", "--format", "json", log=tmp_path / f"{i}.txt")
          for i, r in enumerate((HEALTHY_A, HEALTHY_B))]
    codes = [p.wait(timeout=300) for p in ps]
    logs = [(tmp_path / f"{i}.txt").read_text() for i in range(2)]
    assert codes == [0, 0], logs
    # One of them found the store busy and said it waits (once), naming the file.
    waits = [l for log in logs for l in log.splitlines() if "waiting for" in l]
    assert len(waits) == 1 and str(db) in waits[0] and "another wsperf" in waits[0], logs
    con = open_store(db, read_only=True)
    assert check_store(con) == []
    rows = con.execute("""SELECT run_id, label, tags, regexp_extract(path, '([^/]+)\\.ncu-rep', 1) FROM runs
                          JOIN run_reports USING (run_id) JOIN reports USING (report_id) ORDER BY run_id""").fetchall()
    assert len(rows) == 2 and rows[0][1] != rows[1][1] and all(r[2] == ["ci"] for r in rows)
    assert sorted(r[3] for r in rows) == ["cmp_healthy_a", "cmp_healthy_b"]
    assert con.execute("SELECT count(*) FROM launches").fetchall() == [(12,)]
    con.close()


def test_without_the_lock_in_time_a_writer_or_reader_fails_clearly(tmp_path):
    db = tmp_path / "busy.duckdb"
    assert wsperf("analyze", HEALTHY_A, "--db", db, "--label", "first").returncode == 0
    long = start("analyze", *LONG, "--db", db, "--label", "long", "--format", "json", log=tmp_path / "long.txt")
    try:
        wait_until(long, lambda: readers(long.pid) and holds_open(long.pid, db), "the long writer holds the store")
        # At once: a writer and a reader that may wait 1 s, and a reader that waits as
        # long as it takes (it then sees the long writer's run).
        run = [wsperf_exe(), "analyze", str(HEALTHY_B), "--db", str(db), "--label", "third", "--lock-timeout", "1"]
        look = [wsperf_exe(), "history", "--db", str(db), "--format", "csv"]
        impatient = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for a in (run, look + ["--lock-timeout", "1"])]
        patient = subprocess.Popen(look, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        done = [(q.args, *q.communicate(timeout=120)) for q in impatient]
        assert long.poll() is None, "the long writer finished too early for this test"
    finally:
        code = long.wait(timeout=300)
    assert code == 0, (tmp_path / "long.txt").read_text()
    for q, (args, stdout, stderr), says in zip(impatient, done, ("writing or reading it", "writing it")):
        # The waiting note, then exactly one Error line naming the file and the reason.
        note, rest = stderr.split("\n", 1)
        assert note.startswith(f"wsperf: waiting for {db}: another wsperf is {says}"), stderr
        assert_one_error_line(subprocess.CompletedProcess(args, q.returncode, stdout, rest),
                              2, str(db), f"another wsperf is {says}", "within 1 s", "--lock-timeout")
    out, errs = patient.communicate(timeout=300)
    assert patient.returncode == 0, errs
    assert [line.split(",")[1] for line in out.splitlines()[1:]].count("long") > 0 and "waiting for" in errs
    con = open_store(db, read_only=True)
    assert check_store(con) == [] and [r[0] for r in con.execute("SELECT label FROM runs ORDER BY run_id")
                                       .fetchall()] == ["first", "long"]
    con.close()


def test_open_store_waits_for_the_lock_then_gives_up_clearly(tmp_path):
    db = tmp_path / "held.duckdb"
    open_store(db).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(float(sys.argv[2]))", str(db), "3"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match=rf"{db}: another wsperf is writing it \(PID {holder.pid} holds the lock\)"
                                             r" and did not finish within 0.2 s"):
            open_store(db, read_only=True, lock_timeout=0.2, on_wait=lambda m: None)
        notes: list[str] = []
        t0 = time.monotonic()
        con = open_store(db, lock_timeout=60, on_wait=notes.append)
        assert time.monotonic() - t0 > 1.0  # it waited for the holder to exit
        con.close()
        assert len(notes) == 1 and f"PID {holder.pid}" in notes[0] and "--lock-timeout" in notes[0]
    finally:
        holder.kill()
        holder.wait()


def test_a_report_swapped_while_analyze_records_it_is_stored_whole(tmp_path):
    """`analyze --db` of a path that another process keeps replacing with one of two
    reports: each report stored has the launches of the file its sha256 names, never a
    mix. In-process, three runs (the library test in test_input_safety swaps at the one
    point the race hit; this one goes through the command line, readers and all)."""
    a, b = tmp_path / "a.ncu-rep", tmp_path / "b.ncu-rep"
    shutil.copy(REPORTS / "gemm_wgmma_tma_basic.ncu-rep", a)
    shutil.copy(REPORTS / "ws_stream_healthy.ncu-rep", b)
    want = {}
    for src in (a, b):
        con = open_store(None)
        sha = load_report(con, src).sha256
        want[sha] = sorted(k for (k,) in con.execute("SELECT kernel_function FROM launches").fetchall())
    path, db, stop = tmp_path / "report.ncu-rep", tmp_path / "s.duckdb", threading.Event()
    shutil.copy(a, path)

    def swap() -> None:  # os.replace of a hard link: the name always names one whole report
        while not stop.is_set():
            for src in (b, a):
                os.link(src, tmp_path / "next")
                os.replace(tmp_path / "next", path)
                time.sleep(0.003)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for i in range(3):
            r = CliRunner().invoke(app, ["analyze", str(path), "--db", str(db), "--label", f"swap{i}"])
            assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    finally:
        stop.set()
        swapper.join()
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute("""SELECT r.sha256, list(l.kernel_function ORDER BY l.kernel_function)
                                FROM reports AS r JOIN launches AS l USING (report_id) GROUP BY ALL""").fetchall()
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(3,)]
    assert stored and all(want.get(sha) == kernels for sha, kernels in stored), (stored, want)
