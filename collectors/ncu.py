"""Load Nsight Compute reports (.ncu-rep) into the wsperf store.

`load_report(con, path)` reads one report through NVIDIA's `ncu_report` module and fills
the tables of `queries/schema.sql` (reports, launches, metrics, sass, stalls, opcodes,
ncu_rules) in one transaction: a report that fails to load leaves the store as it was.
A report is identified by the SHA-256 of its bytes, so loading the same content again,
under any path, adds nothing and says `already_present`.

Why the reading happens in other processes. `ncu_report` is C++ behind SWIG and it can
kill the interpreter on damaged input. Tried on copies of the fixture reports: ~250
truncation offsets, ~400 copies with 1 to 256 random bytes changed (half of them in the
first 64 KiB), zeroed blocks, spliced files, random bytes behind a valid "NVR" header.
Most damage is reported softly (num_ranges() == 0; an action whose name() is None with
0 metrics; metric names with invalid UTF-8 that metric_by_name() rejects with
TypeError), but one changed byte in the section headers of the embedded cubin (an
sh_name far out of range) makes `IAction.sass_by_pc` die with SIGSEGV, every time.
So reader processes (`python -m wsperf.collectors.ncu --serve`) make every ncu_report
call, under a time limit, and hand their rows back as Arrow IPC files in a temporary
directory; a crash, a hang or a damaged result becomes one ReportError and the caller's
process lives on.

Speed: most of the time is ncu_report calls, one per value. Each metric is looked up
once (metric_by_name), its values are read with the typed accessor for its value kind
(IMetric.value() rebuilds a dispatch table per call and costs ~3x as much), and rows go
to DuckDB as whole Arrow tables, never row by row. Two or more readers share a report
(`_Schedule`): a launch's metrics and its disassembly can go to different readers, and
the readers are kept between loads, since each pays ~0.5 s of ncu_report set-up before
its first disassembly. `benchmarks/bench_load.py` measures the cost against reading
every value bare.
"""

from __future__ import annotations

import atexit
import collections
import gzip
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __name__ == "__main__":
    # A reader process (`--serve`): load ncu_report before pyarrow. With pyarrow's
    # libraries loaded first, ncu_report 2025.3 (the module Nsight Compute 2025.3 ships,
    # and PyPI's ncu-report==2025.3.1) crashes in its first IMetric.unit() call.
    import ncu_report  # noqa: F401

import pyarrow as pa
import pyarrow.ipc

from wsperf.collectors import prestart
from wsperf.collectors.errors import ReportError
from wsperf.collectors.files import open_input, why

if TYPE_CHECKING:
    import duckdb

Progress = Callable[[int, int, str], None]
"""progress(done, total, label): `done` of `total` launches of the current report read;
`label` is '<file name>: <kernel>'. Called from the calling thread."""

READ_TIMEOUT_S = 600.0  # per report; a hung ncu_report read becomes a ReportError
MAX_READERS = 4  # reader processes per report, at most
BYTES_PER_READER = 4 << 20  # beyond two readers, one more per 4 MiB of report


@dataclass(frozen=True)
class LoadResult:
    """What loading one report did."""

    report_id: int  # reports.report_id (the existing one when already_present)
    path: Path  # the path given
    sha256: str  # hex SHA-256 of the file's bytes
    launches: int  # launches the report holds
    already_present: bool  # True: the same content was in the store; nothing was added
    rows: Mapping[str, int]  # rows added per table (all 0 when already_present)


def load_report(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], progress: Progress | None = None, *,
                timeout_s: float = READ_TIMEOUT_S) -> LoadResult:
    """Load the report at `path` into the store `con` (from `store.open_store`), in one
    transaction. Raises ReportError when the file is missing, empty, not a report,
    truncated or damaged (the store is then unchanged)."""
    from wsperf.collectors.store import TABLES, transaction  # the reader processes never need DuckDB

    p = Path(path)
    with _scratch(p) as tmp:
        # The readers read a private copy, never the user's path: a report replaced or
        # rewritten while it loads cannot mix the identity (sha256) of one file with the
        # launches of another. A gzip-compressed report (CI artifacts often are; the
        # compare fixtures are) is decompressed into that copy; its identity is that of
        # the report inside.
        src = Path(tmp) / "report.ncu-rep"
        digest, size = _snapshot(p, src)
        # fetchall, not fetchone: DuckDB refuses other work on a connection whose result
        # was not read to the end.
        found = con.execute("SELECT report_id, num_launches FROM reports WHERE sha256 = ?", [digest]).fetchall()
        if found:
            report_id, launches = found[0]
            if progress is not None:
                progress(launches, launches, f"{p.name}: already loaded")
            return LoadResult(report_id, p, digest, launches, True, {t: 0 for t in TABLES})
        metas = _pool().read(src, Path(tmp), _reader_count(size), timeout_s, progress, shown=p)
        staged = _staged_tables(Path(tmp), len(metas))
        report = _report_row(p.resolve(), digest, size, metas)
        with transaction(con, f"report {p}"):
            ((report_id, base),) = con.execute(
                "SELECT (SELECT coalesce(max(report_id), 0) + 1 FROM reports),"
                " (SELECT coalesce(max(launch_id), 0) + 1 FROM launches)").fetchall()
            con.execute("INSERT INTO reports BY NAME SELECT $report_id AS report_id, "
                        + ", ".join(f"${k} AS {k}" for k in report), {**report, "report_id": report_id})
            rows = {"reports": 1}
            for stage, arrow in staged.items():
                con.register(f"_wsperf_{stage}", arrow)
            try:
                for table, sql in _INSERTS:
                    params = {"base": base, "report_id": report_id} if "$report_id" in sql else {"base": base}
                    ((n,),) = con.execute(sql, params).fetchall()
                    rows[table] = rows.get(table, 0) + n
            finally:
                for stage in staged:
                    con.unregister(f"_wsperf_{stage}")
    return LoadResult(report_id, p, digest, report["num_launches"], False, rows)


def load_reports(con: duckdb.DuckDBPyConnection, paths: Iterable[str | os.PathLike[str]], progress: Progress | None = None, *,
                 timeout_s: float = READ_TIMEOUT_S) -> list[LoadResult]:
    """Load several reports, each in its own transaction, in order. Stops at the first
    that fails (raising its ReportError); those before it stay loaded."""
    return [load_report(con, p, progress, timeout_s=timeout_s) for p in paths]


# ---------------------------------------------------------------------------------------
# Parent side: check the file, run the readers, stage their tables.

# launch_idx is the action's position in the report (0-based over all ranges); launch
# ids are allocated inside the transaction, so the readers never see them. Staged table
# <t> is registered as _wsperf_<t>.
_INSERTS = (
    ("launches", "INSERT INTO launches BY NAME SELECT * EXCLUDE (launch_idx), launch_idx + $base AS launch_id, "
                 "$report_id AS report_id FROM _wsperf_launches"),
    # Integer-kinded values are staged exactly (UBIGINT) and become DOUBLE here: Arrow
    # refuses to convert integers above 2**53 to float64 on the Python side.
    ("metrics", "INSERT INTO metrics BY NAME SELECT * EXCLUDE (launch_idx, v_float, v_int), launch_idx + $base "
                "AS launch_id, coalesce(v_float, v_int::DOUBLE) AS value_double FROM _wsperf_metrics"),
    # A PC's counters and its disassembly come from different parts of the read.
    ("sass", "INSERT INTO sass BY NAME SELECT launch_idx + $base AS launch_id, pc, "
             "c.* EXCLUDE (launch_idx, pc), t.* EXCLUDE (launch_idx, pc) "
             "FROM _wsperf_sass_counts AS c FULL JOIN _wsperf_sass_code AS t USING (launch_idx, pc)"),
    ("stalls", "INSERT INTO stalls BY NAME SELECT * EXCLUDE (launch_idx), launch_idx + $base AS launch_id FROM _wsperf_stalls"),
    ("opcodes", "INSERT INTO opcodes BY NAME SELECT * EXCLUDE (launch_idx), launch_idx + $base AS launch_id FROM _wsperf_opcodes"),
    # Launches without ncu's per-opcode counts (no InstructionStats section) but with
    # source counters: executed instructions per opcode, summed from their SASS rows.
    ("opcodes", "INSERT INTO opcodes (launch_id, opcode, executed, thread_executed, source) "
                "SELECT launch_id, opcode, sum(inst_executed), sum(thread_inst_executed_true), 'sass' FROM sass AS s "
                "WHERE launch_id >= $base AND opcode IS NOT NULL AND inst_executed > 0 "
                "AND NOT EXISTS (SELECT 1 FROM opcodes AS o WHERE o.launch_id = s.launch_id) "
                "GROUP BY launch_id, opcode ORDER BY launch_id, opcode"),
    ("ncu_rules", "INSERT INTO ncu_rules BY NAME SELECT * EXCLUDE (launch_idx), launch_idx + $base AS launch_id "
                  "FROM _wsperf_ncu_rules"),
)


# Limits on what a report can be: beyond them it is refused before it is read.
MAX_REPORT_BYTES = 8 << 30  # on disk (the 1,000-launch report of the benchmarks is 312 MB)
MAX_GUNZIP_BYTES = 8 << 30  # decompressed, for a .gz report (a decompression bomb is refused)
REPORT_MAGIC = b"NVR\0"  # every .ncu-rep starts with it (see tests/corpus.py, concatenated_report)
GZIP_MAGIC = b"\x1f\x8b"
_KIND = "an Nsight Compute report (.ncu-rep or .ncu-rep.gz)"
_CHUNK = 1 << 20


@contextmanager
def _scratch(p: Path) -> Iterator[str]:
    """A private temporary directory for one load, removed afterwards (also on SIGTERM,
    which the CLI turns into an exception)."""
    try:
        tmp = tempfile.mkdtemp(prefix="wsperf-ncu-")
    except OSError as e:
        raise ReportError(f"{p}: cannot make a temporary directory to load it ({why(e)}); "
                          "check that TMPDIR is writable") from None
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _snapshot(p: Path, dest: Path) -> tuple[str, int]:
    """Copy the report at `p` (decompressing a .gz) to `dest`, returning the SHA-256 and
    size of what was written. The file is checked first (a regular file, at most
    MAX_REPORT_BYTES, starting with the report or gzip magic) and a .gz must decompress
    to the report magic in its first MiB: nothing is hashed, copied or expanded before
    the header says it is a report."""
    h = hashlib.sha256()
    size = 0
    with open_input(p, kind=_KIND, limit=MAX_REPORT_BYTES, magic=(REPORT_MAGIC, GZIP_MAGIC), error=ReportError) as f:
        gz = f.read(2) == GZIP_MAGIC
        f.seek(0)
        try:
            with open(dest, "wb") as out:
                source = gzip.GzipFile(fileobj=f, mode="rb") if gz else f
                first = True
                while chunk := source.read(_CHUNK):
                    if first and not chunk.startswith(REPORT_MAGIC[:len(chunk)]):
                        raise ReportError(f"{p}: decompresses to something that is not {_KIND}" if gz
                                          else f"{p}: is not {_KIND} (it does not start like one)")
                    first = False
                    size += len(chunk)
                    if gz and size > MAX_GUNZIP_BYTES:
                        raise ReportError(f"{p}: expands to more than {MAX_GUNZIP_BYTES:,} bytes; "
                                          "not a plausible compressed report")
                    h.update(chunk)
                    out.write(chunk)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise ReportError(f"{p}: is a damaged or truncated gzip file ({e}); copy the report again") from None
        except OSError as e:
            where = "the temporary directory" if e.filename in (None, str(dest)) else p
            raise ReportError(f"{p}: cannot copy it into {where} to read it ({why(e)}); free space there or "
                              "point TMPDIR elsewhere") from None
    if size == 0:
        what = "decompresses to nothing" if gz else "is empty (0 bytes)"
        raise ReportError(f"{p}: {what}, not an Nsight Compute report; collect it again with ncu -o")
    if size < len(REPORT_MAGIC):
        raise ReportError(f"{p}: is not {_KIND} (it is {size} bytes long)")
    return h.hexdigest(), size


def _reader_count(size: int) -> int:
    # Two even for a small report: a launch's metrics and its disassembly go in parallel.
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, MAX_READERS, max(2, 1 + size // BYTES_PER_READER)))


class _Worker:
    """One reader process (`python -m wsperf.collectors.ncu --serve`), spoken to in
    JSON lines on its stdin and stdout; it exits at the end of its input."""

    def __init__(self, stderr_path: Path, events: queue.Queue, proc: subprocess.Popen | None = None) -> None:
        """A new reader process, or `proc`: one started early (collectors/prestart.py)."""
        self.stderr_path = stderr_path
        self.state = "idle"  # idle | opening | opened | working | finishing | dead
        self.code_warm = False  # has disassembled before: ncu_report's set-up is behind it
        self.retire = False  # grown too large: stop it after this load
        if proc is None:
            with open(stderr_path, "ab") as err:
                proc = subprocess.Popen([sys.executable, "-m", "wsperf.collectors.ncu", "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.proc = proc
        threading.Thread(target=self._pump, args=(events,), daemon=True).start()

    def _pump(self, events: queue.Queue) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            events.put((self, json.loads(line)))
        events.put((self, None))

    def send(self, msg: dict, state: str) -> None:
        self.state = state
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


class _Schedule:
    """Hands out a report's work one task at a time, to whichever reader is free.

    A task is a launch's METRICS part, its CODE part (disassembly, source lines, rules)
    or ALL of it. A reader's first disassembly costs ~0.5 s (ncu_report's set-up), so
    code goes only to "warm" readers (that have disassembled before) and to one chosen
    reader; the others read metrics only and leave each launch's code part in a queue
    that the warm ones serve first. With fewer launches than readers, every launch is
    split into its two parts from the start so that two readers share it; with at least
    twice as many, cold readers warm up as they open the report (`_serve`) and whole
    launches go round."""

    def __init__(self, launches: int, readers: list[_Worker]) -> None:
        self.coder = next((w for w in readers if w.code_warm), readers[0])
        self.split = launches < len(readers)
        self.launches = collections.deque(range(launches))  # not handed out yet
        self.code = collections.deque(range(launches) if self.split else ())  # code parts left over

    def next(self, w: _Worker) -> list | None:
        codes = w.code_warm or w is self.coder
        if codes and self.code:
            return [self.code.popleft(), CODE]
        if not self.launches:
            return None
        idx = self.launches.popleft()
        if codes and not self.split:
            return [idx, ALL]
        if not self.split:
            self.code.append(idx)
        return [idx, METRICS]


class _ReaderPool:
    """Reader processes, kept between loads. Each pays ncu_report's one-time set-up
    (~0.5 s to disassemble its first PC, ~0.1 s for its first metric units) once, not
    once per report; one that crashes, hangs or grows too large is stopped and replaced
    on the next load."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self.idle: list[_Worker] = []
        self.dir: Path | None = None
        self.spawned = 0
        self.adopted = False  # has taken readers started early (their directory is prestart's)

    def read(self, p: Path, out: Path, n: int, timeout_s: float, progress: Progress | None, *,
             shown: Path | None = None) -> list[dict]:
        """Have `n` readers read report `p` into `out`; their metadata, by reader.
        Messages name `shown` (the path the user gave) when `p` is a decompressed copy."""
        with self.lock:
            workers = self._take(n)
            try:
                return self._run(workers, p, out, timeout_s, progress, shown or p)
            finally:
                # Whoever finished cleanly goes back; the rest are stopped (crashed,
                # hung, or interrupted mid-task and so out of step with us).
                for w in workers:
                    if w.state == "idle" and w.proc.poll() is None and not w.retire:
                        self.idle.append(w)
                    else:
                        w.stop(kill=w.state != "idle")

    def _take(self, n: int) -> list[_Worker]:
        # Readers started before the command's imports (a warm-up may be under way in the
        # first: its answer comes before that of anything sent after it).
        adopted = [_Worker(path, self.events, proc) for proc, path in prestart.take()]
        if adopted and not self.adopted:
            self.adopted = True
            atexit.register(self.close)
        self.idle.extend(adopted)
        alive = sorted((w for w in self.idle if w.proc.poll() is None), key=lambda w: not w.code_warm)
        for w in self.idle:
            if w not in alive:
                w.stop(kill=True)
        self.idle = alive[n:]
        taken = alive[:n]
        if len(taken) < n and self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="wsperf-readers-"))
            atexit.register(self.close)
        while len(taken) < n:
            self.spawned += 1
            taken.append(_Worker(self.dir / f"reader-{self.spawned}.stderr", self.events))  # type: ignore[operator]
        return taken

    def _run(self, workers: list[_Worker], src: Path, out: Path, timeout_s: float, progress: Progress | None,
             p: Path) -> list[dict]:
        for i, w in enumerate(workers):
            # The reader may not share our working directory for long: an absolute path
            # to open, and the path as given for its messages.
            w.send({"open": os.path.abspath(src), "name": str(p), "out": str(out), "reader": i,
                    "readers": len(workers)}, "opening")
        index = {id(w): i for i, w in enumerate(workers)}
        metas: list[dict | None] = [None] * len(workers)
        error: str | None = None
        schedule: _Schedule | None = None
        total = done = 0
        deadline = time.monotonic() + timeout_s

        def dispatch(w: _Worker) -> None:
            task = schedule.next(w) if schedule is not None and error is None else None
            if error is not None:
                w.send({"abort": True}, "finishing")
            elif task is None:
                w.send({"finish": True}, "finishing")
            else:
                w.send({"task": task}, "working")

        while any(w.state not in ("idle", "dead") for w in workers):
            try:
                w, msg = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ReportError(f"{p}: reading it took longer than {timeout_s:.0f} s and was stopped; the report "
                                  "may be damaged (or very large: raise the time limit)") from None
            i = index.get(id(w))
            if i is None:
                continue  # a reader stopped during an earlier load
            if msg is None:
                w.state = "dead"
                error = error or "a reader died"
            elif "warmed" in msg:  # the early warm-up (prestart) is done; nothing to hand out
                w.code_warm |= bool(msg["warmed"])
            elif "opened" in msg:
                w.state = "opened"
                total, w.code_warm = msg["opened"]["launches"], msg["opened"]["warm"]
            elif "did" in msg:
                _, part, label = msg["did"]
                w.code_warm |= part != METRICS
                if part != CODE:
                    done += 1
                    if progress is not None:
                        progress(done, total, f"{p.name}: {label}")
                dispatch(w)
            elif "error" in msg:  # the reader dropped the report and is idle again
                w.state = "idle"
                error = error or msg["error"]
            else:
                w.state = "idle"
                metas[i] = msg["done"]
                w.retire = (metas[i] or {}).get("rss", 0) > READER_MAX_RSS
            # Hand out work once every reader has the report open (or failed to).
            if schedule is None and not any(r.state == "opening" for r in workers):
                opened = [r for r in workers if r.state == "opened"]
                if opened:
                    schedule = _Schedule(total, opened)
                    for r in opened:
                        dispatch(r)

        for w in workers:
            if w.state == "dead":
                rc = w.proc.wait()
                if rc < 0:
                    raise ReportError(f"{p}: ncu_report crashed ({_signal_name(-rc)}) while reading it: the report "
                                      "is damaged; collect it again, or check it by opening it in Nsight Compute")
                # Not a damaged report (those are answered with an "error"): a bug.
                raise RuntimeError(f"report reader for {p} exited with status {rc}:\n{w.stderr_tail()}")
        if error is not None:
            raise ReportError(error)
        return metas  # type: ignore[return-value]

    def close(self) -> None:
        with self.lock:
            for w in self.idle:
                # An idle reader holds nothing unsaved: killing it spares the ~0.1 s its
                # interpreter and ncu_report take to tear down, at the end of every command.
                w.stop(kill=True)
            self.idle = []
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None


_POOLS: dict[int, _ReaderPool] = {}


def _pool() -> _ReaderPool:
    # By process id: a forked copy of this process must not talk to its parent's readers.
    return _POOLS.setdefault(os.getpid(), _ReaderPool())


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _staged_tables(out: Path, readers: int) -> dict[str, pa.Table]:
    staged = {}
    for table in STAGE_SCHEMAS:
        parts = [pa.ipc.open_file(pa.memory_map(str(out / f"{table}.{i}.arrow"))).read_all() for i in range(readers)]
        # Rows come in the order readers took launches; ids, not row order, tie them up.
        staged[table] = pa.concat_tables(parts, promote_options="permissive") if readers > 1 else parts[0]
    return staged


def _report_row(path: Path, digest: str, size: int, metas: list[dict]) -> dict:
    first = min((m["first"] for m in metas if m["first"]), key=lambda f: f["launch_idx"])
    starts = [m["start_ns"] for m in metas if m["start_ns"] is not None]
    major, minor = first["cc_major"], first["cc_minor"]
    have_cc = isinstance(major, int) and isinstance(minor, int)
    return {
        "path": str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),  # storable
        "sha256": digest,
        "size_bytes": size,
        "ncu_version": None,  # ncu_report does not expose the collecting ncu's version
        "reader_version": _reader_version(),
        "collected_at": _utc(min(starts)) if starts else None,
        "device_name": first["device_name"],
        "compute_capability": f"{major}.{minor}" if have_cc else None,
        "arch": f"sm_{major}{minor}" if have_cc else None,
        "num_launches": metas[0]["total"],
        "loaded_at": datetime.now(timezone.utc).replace(tzinfo=None),
    }


def _reader_version() -> str | None:
    try:
        return metadata.version("ncu-report")
    except metadata.PackageNotFoundError:
        return None


def _utc(ns: int) -> datetime | None:
    # The GPU global timer counts ns since the Unix epoch; anything outside 2000..2100
    # is not a wall-clock time (a timer that was never synchronised), so say unknown.
    if not 946_684_800 * 10**9 <= ns <= 4_102_444_800 * 10**9:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------------------------------
# Reader side: every ncu_report call happens below, in `python -m wsperf.collectors.ncu`.

# Launch columns read from the launch's own metrics (aggregate values).
LAUNCH_METRICS = {
    "device_id": "launch__device_id",
    "stream_id": "launch__stream_id",
    "grid_x": "launch__grid_dim_x",
    "grid_y": "launch__grid_dim_y",
    "grid_z": "launch__grid_dim_z",
    "block_x": "launch__block_dim_x",
    "block_y": "launch__block_dim_y",
    "block_z": "launch__block_dim_z",
    "cluster_x": "launch__cluster_dim_x",
    "cluster_y": "launch__cluster_dim_y",
    "cluster_z": "launch__cluster_dim_z",
    "cluster_size": "launch__cluster_size",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "threads": "launch__thread_count",
    "registers_per_thread": "launch__registers_per_thread",
    "static_smem_bytes": "launch__shared_mem_per_block_static",
    "dynamic_smem_bytes": "launch__shared_mem_per_block_dynamic",
    "smem_config_bytes": "launch__shared_mem_config_size",
    "sm_count": "device__attribute_multiprocessor_count",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "occupancy_limit_blocks": "launch__occupancy_limit_blocks",
    "occupancy_limit_registers": "launch__occupancy_limit_registers",
    "occupancy_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "occupancy_limit_warps": "launch__occupancy_limit_warps",
    "occupancy_limit_barriers": "launch__occupancy_limit_barriers",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "elapsed_cycles": "gpc__cycles_elapsed.max",
}
DURATION = "gpu__time_duration.sum"
NS_PER_UNIT = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}

# Per-PC (source counter) metrics that become sass columns.
SASS_METRICS = {
    "inst_executed": "inst_executed",
    "thread_inst_executed": "thread_inst_executed",
    "thread_inst_executed_true": "thread_inst_executed_true",
    "pcsamp_samples": "smsp__pcsamp_sample_count",
}
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
NOT_ISSUED = "_not_issued"
OPCODE_METRIC = "sass__inst_executed_per_opcode"  # instances keyed by opcode name (text correlation ids)
OPCODE_THREAD_METRIC = "sass__thread_inst_executed_true_per_opcode"
FUNCTION_PCS = "launch__function_pcs"  # instance values: start address of each function of the launch
START_TIMESTAMP = "profiler__timestamp_workload_start"  # correlation id: GPU global timer (ns)
# A metric is per-PC when its correlation ids all lie in [function start, start + 4 GiB):
# no kernel's code is that large, and the other numeric ids ncu uses (indices from 0,
# GPU timestamps) are far outside. Both parts of a launch apply the same test.
MAX_CODE_BYTES = 1 << 32
READER_MAX_RSS = 1 << 30  # ncu_report keeps ~7x each report's size for good; retire a reader beyond this (bytes)

# Slots of a value: which staging column holds it.
FLOAT, INT, TEXT, MIXED, NONE = range(5)
# Parts of a launch's work. METRICS: launches, metrics, sass_counts, stalls, opcodes.
# CODE: sass_code (disassembly, source lines) and ncu_rules.
ALL, METRICS, CODE = "all", "metrics", "code"

STAGE_SCHEMAS = {
    "launches": pa.schema([
        ("launch_idx", pa.int32()), ("range_idx", pa.int32()), ("action_idx", pa.int32()),
        ("kernel_mangled", pa.string()), ("kernel_demangled", pa.string()), ("kernel_function", pa.string()),
        ("workload_type", pa.string()), ("num_metrics", pa.int32()), ("duration_ns", pa.float64()),
        *((col, pa.float64()) for col in LAUNCH_METRICS),  # DuckDB casts to the column types on insert
    ]),
    # Collected as columns below; `key` becomes name, unit and metric_type when written.
    "metrics": pa.schema([
        ("launch_idx", pa.int32()), ("key", pa.int32()), ("instance", pa.int32()),
        ("correlation_id", pa.uint64()), ("correlation_name", pa.string()),
        ("v_float", pa.float64()), ("v_int", pa.uint64()), ("value_string", pa.string()),
    ]),
    "sass_counts": pa.schema([
        ("launch_idx", pa.int32()), ("pc", pa.uint64()), ("function_pc", pa.uint64()), ("func_offset", pa.int64()),
        *((col, pa.int64()) for col in SASS_METRICS), ("pcsamp_samples_not_issued", pa.int64()),
    ]),
    "sass_code": pa.schema([
        ("launch_idx", pa.int32()), ("pc", pa.uint64()), ("opcode", pa.string()), ("opcode_full", pa.string()),
        ("guard", pa.string()), ("sass", pa.string()), ("source_file", pa.string()), ("source_line", pa.int32()),
    ]),
    "stalls": pa.schema([
        ("launch_idx", pa.int32()), ("pc", pa.uint64()), ("reason", pa.string()),
        ("samples", pa.int64()), ("samples_not_issued", pa.int64()),
    ]),
    "opcodes": pa.schema([
        ("launch_idx", pa.int32()), ("opcode", pa.string()), ("executed", pa.int64()),
        ("thread_executed", pa.int64()), ("source", pa.string()),
    ]),
    "ncu_rules": pa.schema([
        ("launch_idx", pa.int32()), ("rule_idx", pa.int32()), ("rule_id", pa.string()), ("section_id", pa.string()),
        ("name", pa.string()), ("title", pa.string()), ("message", pa.string()), ("msg_type", pa.string()),
        ("speedup_type", pa.string()), ("estimated_speedup", pa.float64()),
    ]),
}


class _Damaged(Exception):
    """An action that ncu_report cannot read completely."""


def _serve() -> int:
    """`python -m wsperf.collectors.ncu --serve`: the reader process. Messages, one JSON
    object a line; each is answered on stdout:

      {"open": PATH, "name": NAME, "out": DIR, "reader": I, "readers": R}
                                   -> {"opened": {"launches": N, "warm": bool}}
      {"task": [launch, part]}                   -> {"did": [launch, part, kernel name]}
      {"finish": true}   write <table>.<I>.arrow into DIR -> {"done": {report facts}}
      {"abort": true}    drop the report                  -> {"done": null}
      {"warm": PATH}     disassemble one PC of the report at PATH, then forget it
                                                          -> {"warmed": bool}

    A damaged report is answered with {"error": "..."} and dropped. Exits at end of input."""
    try:
        import resource
    except ImportError:  # Windows has none: there readers are never retired for size
        resource = None  # type: ignore[assignment]

    # pyarrow imports pandas (~0.25 s) the first time it converts a Python list, only to
    # look for pandas types; a reader never has any, so keep pandas out of this process.
    sys.meta_path.insert(0, _NoPandas())
    # Answers go to a private copy of stdout; fd 1 then points at stderr, so whatever
    # the native library prints cannot corrupt them.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(**msg: object) -> None:
        channel.write(json.dumps(msg) + "\n")

    reader: _Reader | None = None
    name = "the report"  # as the user named it, for messages
    warm = False  # this process has disassembled before
    for line in sys.stdin:
        msg = json.loads(line)
        name = msg.get("name", name) if "open" in msg else name
        try:
            if "warm" in msg:
                warm = warm or _warm_up(msg["warm"])
                emit(warmed=warm)
            elif "open" in msg:
                reader = _Reader(msg["open"], msg["name"], Path(msg["out"]), msg["reader"])
                if not warm and reader.launches >= 2 * msg["readers"]:
                    # Enough launches to go round whole: worth the set-up now, so that
                    # no launch is opened twice (metrics here, disassembly elsewhere).
                    warm = reader.warm_up()
                emit(opened={"launches": reader.launches, "warm": warm})
            elif "task" in msg:
                idx, part = msg["task"]
                emit(did=[idx, part, reader.read(idx, part)])  # type: ignore[union-attr]
                warm |= part != METRICS
            elif "finish" in msg:
                meta = reader.finish()  # type: ignore[union-attr]
                if resource is not None:  # peak resident size; Linux counts KiB
                    meta["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                reader = None
                emit(done=meta)
            else:
                reader = None
                emit(done=None)
        except ReportError as e:
            reader = None
            emit(error=str(e))
        except OSError as e:  # writing the staged tables: a full or unwritable TMPDIR
            reader = None
            emit(error=f"{name}: cannot stage its tables in the temporary directory ({why(e)}); free space there "
                       "or point TMPDIR elsewhere")
    return 0


def _warm_up(path: str) -> bool:
    """Get ncu_report's disassembler set up (~0.6 s, once per process) on the report at
    `path`, whose data is then dropped; whether it was. Never fails: a report that cannot
    be read here is read (and reported on) by the load."""
    try:
        return _Reader(path, path, Path(os.devnull), 0).warm_up()
    except Exception:  # noqa: BLE001 - only speed is at stake
        return False


class _NoPandas:
    """Import hook of the reader process: `import pandas` fails (see _serve)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("pandas is not used by the report reader", name=name)
        return None


def _metric(by_name: Callable[[str], Any], name: str) -> Any:
    """The metric `name` of an action, or _Damaged when the report cannot give it."""
    try:
        m = by_name(name)
    except TypeError:  # the name is not valid UTF-8: metric_by_name refuses it
        raise _Damaged() from None
    if m is None:
        raise _Damaged()
    return m


class _Reader:
    """One report open in a reader process: reads the launch parts it is given into
    staging columns, and writes them out at the end."""

    def __init__(self, path: str, name: str, out: Path, reader: int) -> None:
        """Open report `path` (called `name` in messages) as reader number `reader`,
        which writes its tables into `out`."""
        import ncu_report  # only ever imported in the reader processes

        self.nr = ncu_report
        self.report, self.out, self.reader = name, out, reader
        im = ncu_report.IMetric
        # IMetric.as_double & co. only forward to the extension's flat functions; calling
        # those directly saves a Python frame per value, ~10% of a load.
        flat = getattr(ncu_report, "_ncu_report", None)
        as_double = getattr(flat, "IMetric_as_double", im.as_double)
        as_uint64 = getattr(flat, "IMetric_as_uint64", im.as_uint64)
        as_string = getattr(flat, "IMetric_as_string", im.as_string)
        self.getters = {
            im.ValueKind_DOUBLE: (as_double, FLOAT),
            im.ValueKind_FLOAT: (as_double, FLOAT),
            im.ValueKind_UINT32: (as_uint64, INT),
            im.ValueKind_UINT64: (as_uint64, INT),
            im.ValueKind_STRING: (as_string, TEXT),
        }
        self.uint_kinds = {im.ValueKind_UINT32, im.ValueKind_UINT64}
        self.metric_types = {im.MetricType_COUNTER: "counter", im.MetricType_RATIO: "ratio",
                             im.MetricType_THROUGHPUT: "throughput", im.MetricType_OTHER: "other"}
        # Older ncu_report modules (the one Nsight Compute 2025.3 ships in extras/python)
        # lack some of these names: map what the module has, so any ncu 2025.x reader works.
        ia = ncu_report.IAction
        self.workload_types = {getattr(ia, f"WorkloadType_{n.upper()}"): n
                               for n in ("kernel", "range", "graph", "cmdlist", "subgrid_schedule")
                               if hasattr(ia, f"WorkloadType_{n.upper()}")}
        self.msg_types = {int(t): t.name.lower() for t in getattr(ncu_report, "MsgType", ())}
        self.speedup_types = {int(t): t.name.lower() for t in getattr(ncu_report, "SpeedupType", ())}
        self.cols = {t: {name: [] for name in s.names} for t, s in STAGE_SCHEMAS.items()}
        self.metric_keys: dict[str, int] = {}  # metric name -> key of its (name, unit, type) in metric_info
        self.metric_info: list[tuple[str, str, str]] = []
        # Keep the context alive as long as its ranges and actions are used: older
        # ncu_report modules (2025.3) free the report with it, and a range of a freed
        # report crashes on first use.
        self.context = ncu_report.load_report(path)
        self.slots = self._slots(self.context)
        self.launches = len(self.slots)
        self.meta: dict[str, Any] = {"total": self.launches, "first": None, "start_ns": None}

    def read(self, idx: int, part: str) -> str:
        """Read part METRICS, CODE or ALL of launch `idx`; its kernel name."""
        ri, ai, rng = self.slots[idx]
        try:
            action = rng.action_by_idx(ai)
            name = action.name(self.nr.IAction.NameBase_FUNCTION) if action is not None else None
            if name is None:  # what the last result of a truncated report looks like
                raise _Damaged()
            pcs = None
            if part != CODE:
                first, start_ns, pcs = self._read_launch(action, idx, ri, ai)
                if self.meta["first"] is None or first["launch_idx"] < self.meta["first"]["launch_idx"]:
                    self.meta["first"] = first
                if start_ns is not None:
                    self.meta["start_ns"] = min(start_ns, self.meta["start_ns"] or start_ns)
            if part != METRICS:
                self._read_code(action, idx, pcs)
                self._read_rules(action, idx)
        except _Damaged as e:
            raise ReportError(f"{self.report}: report is truncated or damaged: action {idx} unreadable; collect "
                              "it again (or check it by opening it in Nsight Compute)") from e
        return name

    def finish(self) -> dict:
        self._write()
        return self.meta

    def warm_up(self) -> bool:
        """Disassemble one instruction, to get ncu_report's set-up done; whether it was."""
        ri, ai, rng = self.slots[0]
        action = rng.action_by_idx(ai)
        starts = action.metric_by_name(FUNCTION_PCS) if action is not None else None
        if starts is None or not starts.num_instances() or starts.kind(0) not in self.uint_kinds:
            return False
        return bool(action.sass_by_pc(starts.as_uint64(0)))

    def _slots(self, ctx: Any) -> list[tuple[int, int, Any]]:
        if ctx.num_ranges() == 0:
            # What an empty, text or early-truncated file gives: a context with no ranges.
            raise ReportError(f"{self.report}: not an Nsight Compute report, or truncated before its first result "
                              "(ncu_report finds nothing in it); give a .ncu-rep written by ncu -o")
        slots = []
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            if rng is None:
                raise ReportError(f"{self.report}: report is truncated or damaged: range {ri} unreadable; collect it again")
            slots.extend((ri, ai, rng) for ai in range(rng.num_actions()))
        if not slots:
            raise ReportError(f"{self.report}: holds no profiled kernel launch (truncated, or ncu profiled nothing); "
                              "collect it again")
        return slots

    # -- the metrics part of a launch --------------------------------------------------

    def _read_launch(self, action: Any, idx: int, ri: int, ai: int) -> tuple[dict, int | None, set[int]]:
        """launches, metrics, sass_counts, stalls and opcodes rows of one launch; the
        device facts and the start timestamp for the reports row, and the PCs."""
        scalars, instanced, n_metrics = self._read_metrics(action, idx)
        ia = self.nr.IAction
        duration = _number(scalars.get(DURATION))
        scale = NS_PER_UNIT.get(self.metric_info[self.metric_keys[DURATION]][1]) if DURATION in self.metric_keys else None
        self._append("launches", [{
            "launch_idx": idx, "range_idx": ri, "action_idx": ai,
            "kernel_mangled": action.name(ia.NameBase_MANGLED), "kernel_demangled": action.name(ia.NameBase_DEMANGLED),
            "kernel_function": action.name(ia.NameBase_FUNCTION),
            "workload_type": self.workload_types.get(action.workload_type()),
            "num_metrics": n_metrics,
            "duration_ns": duration * scale if duration is not None and scale else None,
            **{col: _number(scalars.get(metric)) for col, metric in LAUNCH_METRICS.items()},
        }])

        fstarts = sorted(v for v in instanced.get(FUNCTION_PCS, ((), (), NONE))[1] if isinstance(v, int))
        ie = instanced.get("inst_executed")
        anchor = _anchor(fstarts, ie[0] if ie and ie[2] == INT else ())
        per_pc = {name: dict(zip(ids, values)) for name, (ids, values, islot) in instanced.items()
                  if islot == INT and _is_code(ids, anchor)}
        pcs: set[int] = set().union(*per_pc.values())
        if per_pc:
            self._sass_counts(idx, per_pc, pcs, fstarts)
        self._opcodes(idx, instanced)

        first = {"launch_idx": idx, "device_name": _text(scalars.get("device__attribute_display_name")),
                 "cc_major": scalars.get("device__attribute_compute_capability_major"),
                 "cc_minor": scalars.get("device__attribute_compute_capability_minor")}
        starts = [t for name, (ids, _, slot) in instanced.items()
                  if name.startswith(START_TIMESTAMP) and slot == INT for t in ids]
        return first, min(starts) if starts else None, pcs

    def _read_metrics(self, action: Any, idx: int) -> tuple[dict, dict, int]:
        """Every metric of the action into the metrics staging columns: the aggregate
        row, then one row per instance. Returns the aggregate values by name, the
        instanced metrics as name -> (correlation ids, values, id slot), and the number
        of metrics."""
        names = action.metric_names()
        if not names:
            raise _Damaged()
        c = self.cols["metrics"]
        c_key, c_inst, c_cid, c_cname = c["key"], c["instance"], c["correlation_id"], c["correlation_name"]
        c_f, c_i, c_s = c["v_float"], c["v_int"], c["value_string"]
        by_name, getters, keys = action.metric_by_name, self.getters, self.metric_keys
        scalars: dict[str, Any] = {}
        instanced: dict[str, tuple[list, list, int]] = {}
        rows = 0
        for name in names:
            m = _metric(by_name, name)
            got = getters.get(m.kind())
            value = got[0](m) if got is not None else None
            if not value and not m.has_value():  # held without a value: reads as 0, stored as NULL
                value = None
            slot = got[1] if value is not None else NONE
            scalars[name] = value
            # name, unit and type are stored once (an Arrow dictionary) and every row of
            # the metric refers to them by key; a metric's unit and type are the same in
            # every launch of a report, so they are asked for once.
            key = keys.get(name)
            if key is None:
                key = keys[name] = len(keys)
                self.metric_info.append((name, m.unit(), self.metric_types.get(m.metric_type(), "other")))
            k = m.num_instances()
            rows += 1 + k
            c_key.extend([key] * (k + 1))
            c_inst.append(None)
            c_cid.append(None)
            c_cname.append(None)
            c_f.append(value if slot == FLOAT else None)
            c_i.append(value if slot == INT else None)
            c_s.append(value if slot == TEXT else None)
            if not k:
                continue
            # An instance's kind can differ from the aggregate's (launch__occupancy_per_*:
            # double aggregate, integer instances; numa__*: integer aggregate, text instances).
            values, vslot = self._instances(m, k)
            ids_metric = m.correlation_ids()
            ids, islot = self._instances(ids_metric, k) if ids_metric is not None else ([None] * k, NONE)
            instanced[name] = (ids, values, islot)
            nones = [None] * k
            c_inst.extend(range(k))
            c_cid.extend(ids if islot == INT else nones)
            c_cname.extend(ids if islot == TEXT else nones)
            if vslot == MIXED:
                c_f.extend(v if isinstance(v, float) else None for v in values)
                c_i.extend(v if isinstance(v, int) else None for v in values)
                c_s.extend(v if isinstance(v, str) else None for v in values)
            else:
                c_f.extend(values if vslot == FLOAT else nones)
                c_i.extend(values if vslot == INT else nones)
                c_s.extend(values if vslot == TEXT else nones)
        c["launch_idx"].extend([idx] * rows)
        return scalars, instanced, len(names)

    def _instances(self, m: Any, k: int) -> tuple[list, int]:
        first = m.kind(0)
        got = self.getters.get(first)
        if got is None:
            return [None] * k, NONE
        if k > 1 and m.kind(k - 1) != first:
            # Not seen in ncu 2025.3 reports; read each instance by its own kind.
            return [m.value(j) for j in range(k)], MIXED
        get, slot = got
        return [get(m, j) for j in range(k)], slot

    def _sass_counts(self, idx: int, per_pc: dict[str, dict], pcs: set[int], fstarts: list[int]) -> None:
        """The counter columns of sass, and stalls, from the per-PC metrics."""
        stalls: dict[tuple[int, str], list[int]] = {}
        for name, by_pc in per_pc.items():
            if not name.startswith(STALL_PREFIX):
                continue
            reason, col = name[len(STALL_PREFIX):], 0
            if reason.endswith(NOT_ISSUED):
                reason, col = reason[: -len(NOT_ISSUED)], 1
            for pc, v in by_pc.items():
                if v:
                    stalls.setdefault((pc, reason), [0, 0])[col] += int(v)
        not_issued: dict[int, int] = {}
        for (pc, _), (_, ni) in stalls.items():
            not_issued[pc] = not_issued.get(pc, 0) + ni
        have_stalls = any(name.startswith(STALL_PREFIX) for name in per_pc)

        rows = []
        lowest = min(pcs)
        for pc in sorted(pcs):
            k = bisect_right(fstarts, pc) - 1
            start = fstarts[k] if k >= 0 else lowest
            row = {"launch_idx": idx, "pc": pc, "function_pc": start, "func_offset": pc - start,
                   "pcsamp_samples_not_issued": not_issued.get(pc, 0) if have_stalls else None}
            for col, metric in SASS_METRICS.items():
                # A PC that a collected metric does not list did not count for it: 0.
                row[col] = _integer(per_pc[metric].get(pc, 0)) if metric in per_pc else None
            rows.append(row)
        self._append("sass_counts", rows)
        self._append("stalls", [
            {"launch_idx": idx, "pc": pc, "reason": reason, "samples": s, "samples_not_issued": ni}
            for (pc, reason), (s, ni) in sorted(stalls.items())
        ])

    def _opcodes(self, idx: int, instanced: dict) -> None:
        """ncu's per-opcode counts (InstructionStats). Without them the parent sums
        sass.inst_executed by opcode instead (source 'sass')."""
        ids, values, islot = instanced.get(OPCODE_METRIC, ((), (), NONE))
        if islot != TEXT:
            return
        tids, tvalues, tslot = instanced.get(OPCODE_THREAD_METRIC, ((), (), NONE))
        threads = dict(zip(tids, tvalues)) if tslot == TEXT else {}
        self._append("opcodes", [
            {"launch_idx": idx, "opcode": op, "executed": _integer(v), "thread_executed": _integer(threads.get(op)),
             "source": "ncu"} for op, v in zip(ids, values) if v is not None
        ])

    # -- the code part of a launch -----------------------------------------------------

    def _read_code(self, action: Any, idx: int, pcs: set[int] | None = None) -> None:
        """sass_code rows: disassembly and source line of every PC that a per-PC metric
        lists (`pcs`, when the metrics part just read them in this process)."""
        if pcs is None:
            pcs = self._code_pcs(action)
        rows = []
        for pc in sorted(pcs):
            text = action.sass_by_pc(pc) or ""
            guard, full = _split_sass(text)
            info = action.source_info(pc)
            rows.append({"launch_idx": idx, "pc": pc, "opcode": full.split(".", 1)[0] if full else None,
                         "opcode_full": full, "guard": guard, "sass": text or None,
                         "source_file": info.file_name() if info is not None else None,
                         "source_line": info.line() if info is not None else None})
        self._append("sass_code", rows)

    def _code_pcs(self, action: Any) -> set[int]:
        """The PCs the per-PC metrics list, reading only correlation ids (the values are
        the metrics part's, maybe in another process)."""
        by_name, uint_kinds = action.metric_by_name, self.uint_kinds
        fpcs = by_name(FUNCTION_PCS)
        fstarts = sorted(fpcs.as_uint64(j) for j in range(fpcs.num_instances())) if fpcs is not None else []
        ie = by_name("inst_executed")
        ie_ids = ie.correlation_ids() if ie is not None and ie.num_instances() else None
        anchor = _anchor(fstarts, [ie_ids.as_uint64(j) for j in range(ie.num_instances())]
                         if ie_ids is not None and ie_ids.kind(0) in uint_kinds else ())
        pcs: set[int] = set()
        if anchor is None:
            return pcs
        for name in action.metric_names():
            m = _metric(by_name, name)
            k = m.num_instances()
            ids_metric = m.correlation_ids() if k else None
            # Look at the first id before reading them all: most instanced metrics are
            # indexed from 0 or by timestamp and fail at once.
            if ids_metric is None or ids_metric.kind(0) not in uint_kinds \
                    or not 0 <= ids_metric.as_uint64(0) - anchor < MAX_CODE_BYTES:
                continue
            ids = [ids_metric.as_uint64(j) for j in range(k)]
            if _is_code(ids, anchor):
                pcs.update(ids)
        return pcs

    def _read_rules(self, action: Any, idx: int) -> None:
        rows = []
        for k, rule in enumerate(action.rule_results()):
            msg = rule.rule_message() if rule.has_rule_message() else {}
            speedup = rule.speedup_estimation() if rule.has_speedup_estimation() else None
            rows.append({
                "launch_idx": idx, "rule_idx": k, "rule_id": rule.rule_identifier(),
                "section_id": rule.section_identifier(), "name": rule.name(),
                "title": msg.get("title"), "message": msg.get("message"),
                "msg_type": self.msg_types.get(msg["type"], str(msg["type"])) if "type" in msg else None,
                "speedup_type": self.speedup_types.get(speedup["type"], str(speedup["type"])) if speedup else None,
                "estimated_speedup": speedup["speedup"] if speedup else None,
            })
        self._append("ncu_rules", rows)

    # -- output -----------------------------------------------------------------------

    def _append(self, table: str, rows: list[dict]) -> None:
        for name, col in self.cols[table].items():
            col.extend(row[name] for row in rows)

    def _write(self) -> None:
        for table, schema in STAGE_SCHEMAS.items():
            cols = self.cols[table]
            try:
                arrays = [pa.array(cols[f.name], f.type) for f in schema]
                if table == "metrics":
                    arrays, schema = self._metric_names(arrays, schema)
                arrow = pa.Table.from_arrays(arrays, schema=schema)
            except (pa.ArrowException, UnicodeError) as e:
                reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ReportError(f"{self.report}: report is damaged: its {table} data cannot be stored ({reason}); "
                                  "collect it again") from e
            with pa.ipc.new_file(str(self.out / f"{table}.{self.reader}.arrow"), schema) as w:
                w.write_table(arrow)

    def _metric_names(self, arrays: list[pa.Array], schema: pa.Schema) -> tuple[list[pa.Array], pa.Schema]:
        """Replace the key column by name, unit and metric_type dictionary columns."""
        at = schema.get_field_index("key")
        keys = arrays.pop(at)
        schema = schema.remove(at)
        for i, col in enumerate(("name", "unit", "metric_type")):
            values = pa.array([info[i] for info in self.metric_info], pa.string())
            arrays.append(pa.DictionaryArray.from_arrays(keys, values))
            schema = schema.append(pa.field(col, pa.dictionary(pa.int32(), pa.string())))
        return arrays, schema


def _anchor(fstarts: list[int], inst_executed_pcs: Iterable[int]) -> int | None:
    """Lowest address of the launch's code: its first function's start, else the lowest
    PC inst_executed lists; None when neither is known (then no metric is per-PC)."""
    return fstarts[0] if fstarts else min(inst_executed_pcs, default=None)


def _is_code(ids: list, anchor: int | None) -> bool:
    return anchor is not None and bool(ids) and anchor <= min(ids) and max(ids) - anchor < MAX_CODE_BYTES


def _split_sass(text: str) -> tuple[str | None, str | None]:
    """('@!P0', 'SYNCS.PHASECHK.TRANS64.TRYWAIT') from '@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3+URZ+0x8], R2 ;'."""
    parts = text.split()
    guard = parts.pop(0) if parts and parts[0].startswith("@") else None
    return guard, parts[0].rstrip(";") if parts else None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def _integer(v: Any) -> int | None:
    return int(round(v)) if isinstance(v, (int, float)) else None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve"]:
        sys.exit("usage: python -m wsperf.collectors.ncu --serve  (wsperf's report reader; see load_report)")
    sys.exit(_serve())
