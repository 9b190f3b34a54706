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
call, under a time limit, and hand their rows back as CSV files in a temporary
directory (collectors/staging.py); a crash, a hang or a damaged result becomes one ReportError and the caller's
process lives on.

Speed: most of the time is ncu_report calls, one per value. Each metric is looked up
once (metric_by_name), its values are read with the typed accessor for its value kind
(IMetric.value() rebuilds a dispatch table per call and costs ~3x as much), and rows go
to DuckDB as whole tables, never row by row. The disassembly is nvdisasm's, on the
cubins the report embeds, in a process of its own and cached by content
(collectors/cubin.py); ncu_report's `sass_by_pc` (~0.75 s of set-up per process) serves
only what nvdisasm cannot place. A report larger than 4 MiB is shared by several readers,
and readers are kept between loads (a process's start, imports and nvdisasm listings are
paid once): collectors/readers.py runs them. `benchmarks/bench_load.py` measures the cost
against reading every value bare.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from wsperf.collectors import prestart
from wsperf.collectors.prestart import MAX_REPORT_BYTES, REPORT_MAGIC, reader_count
from wsperf.collectors.errors import ReportError
from wsperf.collectors.files import open_input, why
from wsperf.collectors.readers import Progress, pool
from wsperf.collectors.staging import METRICS_TABLES, STAGES, read_sql
from wsperf.collectors.store import TABLES, transaction

if TYPE_CHECKING:
    import duckdb

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
        with transaction(con, f"report {p}"):
            ins = _Inserts(con, p, digest, size, Path(out))
            # A prefetching reader writes the metrics parts first: they go in while it
            # reads the code (nvdisasm often still listing it).
            metas = pool().read(src, out, _reader_count(size), timeout_s, progress, shown=p, units=units,
                                staged=lambda meta: ins.run([meta], early=True))
            ins.run(metas, early=False)
    return LoadResult(ins.report_id, p, digest, ins.launches, False, ins.rows)


def load_reports(con: duckdb.DuckDBPyConnection, paths: Iterable[str | os.PathLike[str]], progress: Progress | None = None, *,
                 timeout_s: float = READ_TIMEOUT_S, units: bool = True) -> list[LoadResult]:
    """Load several reports, each in its own transaction, in order. Stops at the first
    that fails (raising its ReportError); those before it stay loaded. `units`: as in
    load_report."""
    return [load_report(con, p, progress, timeout_s=timeout_s, units=units) for p in paths]


# ---------------------------------------------------------------------------------------
# Parent side: check the file, run the readers, stage their tables.

# launch_idx is the action's position in the report (0-based over all ranges); launch
# ids are allocated inside the transaction, so the readers never see them. _wsperf_<t>
# stands for staged table <t> as the readers wrote it (collectors/staging.py, read_sql);
# those of _BY_READER carry each row's reader number as column `reader`.
_INSERTS = (
    ("launches", "INSERT INTO launches BY NAME SELECT * EXCLUDE (launch_idx), launch_idx + $base AS launch_id, "
                 "$report_id AS report_id FROM _wsperf_launches"),
    # Integer-kinded values are staged exactly (UBIGINT) and become DOUBLE here.
    ("metrics", "INSERT INTO metrics BY NAME SELECT m.* EXCLUDE (launch_idx, key, reader, v_float, v_int), "
                "m.launch_idx + $base AS launch_id, coalesce(m.v_float, m.v_int::DOUBLE) AS value_double, "
                "i.name, i.unit, i.metric_type FROM _wsperf_metrics AS m JOIN _wsperf_metric_info AS i "
                "USING (reader, key) ORDER BY m.reader, m.launch_idx, m.key, m.instance NULLS FIRST"),
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
MAX_GUNZIP_BYTES = 8 << 30  # decompressed, for a .gz or .ncu-repz report (a decompression bomb is refused)
GZIP_MAGIC = b"\x1f\x8b"
# Nsight Compute 2025.4's compressed report, .ncu-repz: zstd frames around the report's own
# bytes (ncu_report 2026.3 reads such a file as it reads the .ncu-rep inside). Decompressed
# here with `zstandard`, so that every ncu_report wsperf supports (2025.3 included) reads it
# and its identity is that of the report inside, as for a .gz.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_STAGED = re.compile(r"\b_wsperf_([a-z_]+)\b")
# Inserts that read only tables of the metrics parts, which a prefetching reader writes
# before the code parts (the rest read the code parts' tables, or what those inserted).
_EARLY = frozenset(i for i, (_, sql) in enumerate(_INSERTS)
                   if (reads := set(_STAGED.findall(sql))) and reads <= set(METRICS_TABLES))
_BY_READER = ("metrics", "metric_info")  # a metric's key is its reader's
_KIND = "an Nsight Compute report (.ncu-rep, .ncu-repz or .ncu-rep.gz)"
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


class _Unzstd:
    """A reader of the bytes inside the zstd frames of `f` (a .ncu-repz), frame after frame,
    that raises EOFError when the file ends inside a frame (a truncated copy) or its bytes
    are damaged."""

    def __init__(self, f) -> None:
        import zstandard  # only a .ncu-repz needs it

        self._f, self._new, self._error = f, zstandard.ZstdDecompressor().decompressobj, zstandard.ZstdError
        self._d, self._left, self._fed = self._new(), b"", False

    def read(self, n: int) -> bytes:
        while True:
            if self._d.eof:  # a frame ended: what followed it starts the next
                self._left = self._d.unused_data + self._left
                self._d, self._fed = self._new(), False
            data = self._left or self._f.read(n)
            self._left = b""
            if not data:
                if self._fed:
                    raise EOFError("the file ends inside a zstd frame")
                return b""
            self._fed = True
            try:
                out = self._d.decompress(data)
            except self._error as e:
                raise EOFError(str(e)) from None
            if out:
                return out


def _snapshot(p: Path, dest: Path) -> tuple[str, int]:
    """Copy the report at `p` (decompressing a .gz or a .ncu-repz) to `dest`, returning the
    SHA-256 and size of what was written. The file is checked first (a regular file, at
    most MAX_REPORT_BYTES, starting with the report, gzip or zstd magic) and a compressed
    one must decompress to the report magic in its first chunk: nothing is hashed, copied
    or expanded before the header says it is a report."""
    h = hashlib.sha256()
    size = 0
    with open_input(p, kind=_KIND, limit=MAX_REPORT_BYTES, magic=(REPORT_MAGIC, GZIP_MAGIC, ZSTD_MAGIC),
                    error=ReportError) as f:
        head = f.read(4)
        packed = "gzip" if head.startswith(GZIP_MAGIC) else "zstd" if head == ZSTD_MAGIC else None
        f.seek(0)
        try:
            with open(dest, "wb") as out:
                source = (gzip.GzipFile(fileobj=f, mode="rb") if packed == "gzip" else _Unzstd(f) if packed
                          else f)
                first = True
                while chunk := source.read(_CHUNK):
                    if first and not chunk.startswith(REPORT_MAGIC[:len(chunk)]):
                        raise ReportError(f"{p}: decompresses to something that is not {_KIND}" if packed
                                          else f"{p}: is not {_KIND} (it does not start like one)")
                    first = False
                    size += len(chunk)
                    if packed and size > MAX_GUNZIP_BYTES:
                        raise ReportError(f"{p}: expands to more than {MAX_GUNZIP_BYTES:,} bytes; "
                                          "not a plausible compressed report")
                    h.update(chunk)
                    out.write(chunk)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise ReportError(f"{p}: is a damaged or truncated {packed} file ({e}); copy the report again") from None
        except OSError as e:
            where = "the temporary directory" if e.filename in (None, str(dest)) else p
            raise ReportError(f"{p}: cannot copy it into {where} to read it ({why(e)}); free space there or "
                              "point TMPDIR elsewhere") from None
    if size == 0:
        what = "decompresses to nothing" if packed else "is empty (0 bytes)"
        raise ReportError(f"{p}: {what}, not an Nsight Compute report; collect it again with ncu -o")
    if size < len(REPORT_MAGIC):
        raise ReportError(f"{p}: is not {_KIND} (it is {size} bytes long)")
    return h.hexdigest(), size


_reader_count = reader_count  # by this name here: tests/test_input_safety.py wraps it


class _Inserts:
    """The inserts of one load, inside its transaction: the report's row and those that
    read the metrics parts' tables, early when a reader says it has written them (the
    report facts known then are those of the metrics parts), then the rest."""

    def __init__(self, con: duckdb.DuckDBPyConnection, p: Path, digest: str, size: int, out: Path) -> None:
        self.con, self.p, self.digest, self.size, self.out = con, p, digest, size, out
        self.report_id = self.base = self.launches = 0
        self.rows: dict[str, int] = {}
        self.done: set[int] = set()  # positions in _INSERTS

    def run(self, metas: list[dict], *, early: bool) -> None:
        """The inserts not run yet (those of _EARLY only, when `early`), from the staged
        tables of `metas`' readers."""
        con = self.con
        if not self.rows:
            report = _report_row(self.p.resolve(), self.digest, self.size, metas)
            ((self.report_id, self.base),) = con.execute(
                "SELECT (SELECT coalesce(max(report_id), 0) + 1 FROM reports),"
                " (SELECT coalesce(max(launch_id), 0) + 1 FROM launches)").fetchall()
            con.execute("INSERT INTO reports BY NAME SELECT $report_id AS report_id, "
                        + ", ".join(f"${k} AS {k}" for k in report), {**report, "report_id": self.report_id})
            self.rows, self.launches = {"reports": 1}, report["num_launches"]
        readers = len(metas)
        longest = max((m.get("longest_row", 0) for m in metas), default=0)
        staged = {t: f"({read_sql(self.out, t, readers, reader_column=t in _BY_READER, longest=longest)})"
                  for t in STAGES}
        for i, (table, sql) in enumerate(_INSERTS):
            if i in self.done or (early and i not in _EARLY):
                continue
            params = {"base": self.base, "report_id": self.report_id} if "$report_id" in sql else {"base": self.base}
            ((n,),) = con.execute(_STAGED.sub(lambda m: staged[m.group(1)], sql), params).fetchall()
            self.rows[table] = self.rows.get(table, 0) + n
            self.done.add(i)


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
