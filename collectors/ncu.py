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
So reader processes (`python -m wsperf.collectors.ncu_reader --serve`) make every ncu_report
call, under a time limit, and hand their rows back as Arrow IPC files in a temporary
directory; a crash, a hang or a damaged result becomes one ReportError and the caller's
process lives on.

Speed: most of the time is ncu_report calls, one per value. Each metric is looked up
once (metric_by_name), its values are read with the typed accessor for its value kind
(IMetric.value() rebuilds a dispatch table per call and costs ~3x as much), and rows go
to DuckDB as whole Arrow tables, never row by row. The disassembly is nvdisasm's, on the
cubins the report embeds, in a process of its own and cached by content
(collectors/cubin.py); ncu_report's `sass_by_pc` (~0.75 s of set-up per process) serves
only what nvdisasm cannot place. A report larger than 4 MiB is shared by several readers
(`_Schedule`), and readers are kept between loads (a process's start, imports and
nvdisasm listings are paid once). `benchmarks/bench_load.py` measures the cost against
reading every value bare.
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.ipc

from wsperf.collectors import prestart
from wsperf.collectors.prestart import MAX_REPORT_BYTES, REPORT_MAGIC, reader_count  # importable before pyarrow
from wsperf.collectors.errors import ReportError
from wsperf.collectors.files import open_input, why
from wsperf.collectors.ncu_reader import ALL, CODE, METRICS, READER_MAX_RSS, STAGE_SCHEMAS
from wsperf.collectors.store import TABLES, transaction

if TYPE_CHECKING:
    import duckdb

Progress = Callable[[int, int, str], None]
"""progress(done, total, label): `done` of `total` launches of the current report read;
`label` is '<file name>: <kernel>'. Called from the calling thread."""

READ_TIMEOUT_S = 600.0  # per report; a hung ncu_report read becomes a ReportError


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
                timeout_s: float = READ_TIMEOUT_S, units: bool = True) -> LoadResult:
    """Load the report at `path` into the store `con` (from `store.open_store`), in one
    transaction. Raises ReportError when the file is missing, empty, not a report,
    truncated or damaged (the store is then unchanged). With `units` false the metrics'
    units stay NULL (but the duration's): for a store that ends with the command and
    never shows them (collectors/ncu_reader.py, _Reader, says what that saves)."""
    p = Path(path)
    with _scratch(p) as tmp:
        # The readers read a private copy, never the user's path: a report replaced or
        # rewritten while it loads cannot mix the identity (sha256) of one file with the
        # launches of another. A gzip-compressed report (CI artifacts often are; the
        # compare fixtures are) is decompressed into that copy; its identity is that of
        # the report inside. A small report named on the command line was copied before
        # the command imported, and its reader is reading it (collectors/prestart.py).
        early = prestart.prefetched(p)
        if early is not None:
            src, digest, size, out = early.path, early.sha256, early.size, early.out
        else:
            src, out = Path(tmp) / "report.ncu-rep", Path(tmp)
            digest, size = _snapshot(p, src)
        # fetchall, not fetchone: DuckDB refuses other work on a connection whose result
        # was not read to the end.
        found = con.execute("SELECT report_id, num_launches FROM reports WHERE sha256 = ?", [digest]).fetchall()
        if found:
            report_id, launches = found[0]
            if progress is not None:
                progress(launches, launches, f"{p.name}: already loaded")
            return LoadResult(report_id, p, digest, launches, True, {t: 0 for t in TABLES})
        metas = _pool().read(src, out, _reader_count(size), timeout_s, progress, shown=p, units=units)
        staged = _staged_tables(out, len(metas))
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
                 timeout_s: float = READ_TIMEOUT_S, units: bool = True) -> list[LoadResult]:
    """Load several reports, each in its own transaction, in order. Stops at the first
    that fails (raising its ReportError); those before it stay loaded. `units`: as in
    load_report."""
    return [load_report(con, p, progress, timeout_s=timeout_s, units=units) for p in paths]


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


# Limits on what a report can be: beyond them it is refused before it is read (MAX_REPORT_BYTES
# and REPORT_MAGIC: collectors/prestart.py).
MAX_GUNZIP_BYTES = 8 << 30  # decompressed, for a .gz report (a decompression bomb is refused)
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


_reader_count = reader_count  # by this name here: tests/test_input_safety.py wraps it


class _Worker:
    """One reader process (`python -m wsperf.collectors.ncu_reader --serve`), spoken to in
    JSON lines on its stdin and stdout; it exits at the end of its input."""

    def __init__(self, stderr_path: Path, events: queue.Queue, proc: subprocess.Popen | None = None) -> None:
        """A new reader process, or `proc`: one started early (collectors/prestart.py)."""
        self.stderr_path = stderr_path
        self.state = "idle"  # idle | opening | opened | working | finishing | dead
        self.code_warm = False  # has disassembled before: ncu_report's set-up is behind it
        self.listed = False  # started nvdisasm on the report it has open (it is the coder)
        self.retire = False  # grown too large: stop it after this load
        if proc is None:
            with open(stderr_path, "ab") as err:
                proc = subprocess.Popen([sys.executable, "-m", "wsperf.collectors.ncu_reader", "--serve"],
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
    or ALL of it. Where nvdisasm lists the report's kernels (collectors/cubin.py), the
    chosen reader (`coder`) started it as it opened the report, and every launch is split:
    the coder serves the code parts first, the others read metrics. Without nvdisasm a
    reader's first disassembly costs ~0.75 s (ncu_report's set-up), so code goes only to
    "warm" readers (that have disassembled before) and to the coder; the others read
    metrics only and leave each launch's code part in a queue that the warm ones serve
    first. With fewer launches than readers, every launch is split into its two parts
    from the start so that two readers share it; with at least twice as many, cold
    readers warm up as they open the report (`_serve`) and whole launches go round."""

    def __init__(self, launches: int, readers: list[_Worker], coder: _Worker) -> None:
        self.coder = coder if coder in readers else next((w for w in readers if w.code_warm), readers[0])
        # nvdisasm lists the code (in the background, started by the coder as it opened):
        # code parts cost little there, and one reader serves them all.
        self.split = launches < len(readers) or self.coder.listed
        self.others = len(readers) > 1
        self.launches = collections.deque(range(launches))  # not handed out yet
        self.code = collections.deque(range(launches) if self.split else ())  # code parts left over

    def next(self, w: _Worker) -> list | None:
        # Listed by nvdisasm, the code is the coder's alone (elsewhere it would start
        # nvdisasm again, or ncu_report's set-up).
        codes = w is self.coder or (w.code_warm and not self.coder.listed)
        # A reader alone reads the metrics first: meanwhile nvdisasm lists the code.
        if codes and self.code and (self.others or not self.launches):
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
    """Reader processes, kept between loads. Each pays its start-up (~0.2 s: the interpreter,
    ncu_report, pyarrow) and, where nvdisasm cannot serve, ncu_report's disassembler set-up
    (~0.75 s) once, not once per report; one that crashes, hangs or grows too large is
    stopped and replaced on the next load."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self.idle: list[_Worker] = []
        self.dir: Path | None = None
        self.spawned = 0
        self.adopted = False  # has taken readers started early (their directory is prestart's)

    def read(self, p: Path, out: Path, n: int, timeout_s: float, progress: Progress | None, *,
             shown: Path | None = None, units: bool = True) -> list[dict]:
        """Have `n` readers read report `p` into `out` (the metrics' units too, when
        `units`); their metadata, by reader. Messages name `shown` (the path the user
        gave) when `p` is a decompressed copy."""
        with self.lock:
            workers = self._take(n)
            try:
                return self._run(workers, p, out, timeout_s, progress, shown or p, units)
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
             p: Path, units: bool) -> list[dict]:
        for i, w in enumerate(workers):
            # The reader may not share our working directory for long: an absolute path
            # to open, and the path as given for its messages.
            # The first reader (a warm one, when there is one: `_take`) serves the code.
            w.send({"open": os.path.abspath(src), "name": str(p), "out": str(out), "reader": i,
                    "readers": len(workers), "coder": i == 0, "units": units}, "opening")
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
                w.listed = bool(msg["opened"].get("listed"))
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
                    schedule = _Schedule(total, opened, workers[0])
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
