"""Load Nsight Systems exports (`nsys export --type sqlite`) into the wsperf store.

`load_nsys_export(con, path)` reads one export and fills the tables of
`queries/nsys_schema.sql` (nsys_exports, nsys_gpus, nsys_kernels, nsys_memcpy,
nsys_runtime, nsys_nvtx; every column documented there) in one transaction: an export
that fails to load leaves the store as it was. An export is identified by the SHA-256
of its SQLite bytes, so loading the same content again adds nothing.

Inputs: a `.sqlite` export, the same gzip-compressed (`.sqlite.gz`, how the fixtures
and CI artifacts are kept), or a `.nsys-rep` report, converted with `nsys export` when a
working `nsys` is on PATH (otherwise one InputError that says so). A `.qdstrm` is a
capture nsys never imported: refused with the reason.

Reading. The file is opened read-only and immutable through Python's own `sqlite3`
(DuckDB's sqlite extension is downloaded on first use, so it is absent offline, and no
wheel of it matches DuckDB 2.0). The bulk tables (kernels, API calls, copies, NVTX ranges,
their names) are read by SQLite's ADBC driver (adbc-driver-sqlite, Apache Arrow's) straight
into Arrow, the same read-only immutable URI: 1.26x a bare sqlite3 fetch of the same rows
for a 1M-kernel export, load and summary together (benchmarks/bench_nsys.py); a table the
driver cannot give in the schema's types is read again through sqlite3. What is
read is bounded: only the rows of the tables above, names joined from StringIds one per
record (a huge StringIds table is never read whole), each name cut at MAX_NAME_CHARS, at
most MAX_RECORDS rows per table, under a time limit enforced by SQLite's progress
handler. A value of the wrong type (SQLite columns are not typed) or a damaged page is
one InputError naming the file.

Schema versions. Columns were added over nsys releases: greenContextId (2024.x), the
cluster dimensions, graphId and the qmd* timestamps (2025.x). Each wanted column is read
when the export has it and is NULL otherwise; `nsys_exports.absent_columns` lists the
ones missing. The fixtures hold exports of nsys 2022.2 (schema 2.9.1, EXPORT_META_DATA),
2024.5 (3.13.2) and 2025.5 (3.24.0).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sqlite3
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import duckdb
import pyarrow as pa

from wsperf.collectors.errors import InputError
from wsperf.collectors.files import open_input, why
from wsperf.collectors.process import run_bounded
from wsperf.collectors.store import transaction

SCHEMA = "nsys_schema.sql"
TABLES = ("nsys_exports", "nsys_gpus", "nsys_kernels", "nsys_memcpy", "nsys_runtime", "nsys_nvtx")
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"

MAX_NAME_CHARS = 4096  # a kernel or API name longer than this is cut (C++ names reach ~2,000)
MAX_RECORDS = 50_000_000  # rows per table; beyond, the export is refused rather than half-read
MAX_SQLITE_BYTES = 16 << 30  # a .sqlite.gz that inflates past this is refused (gzip bomb)
READ_TIMEOUT_S = 600.0  # per export, all tables
EXPORT_TIMEOUT_S = 900.0  # `nsys export` of a .nsys-rep
_CHUNK = 100_000  # rows fetched from SQLite and inserted into DuckDB at a time
USE_ADBC = True  # False: every read through sqlite3 (tests compare the two ways)
_ARROW_ROWS = 100_000  # rows of a batch SQLite's ADBC driver reads (its default, 1,024, costs an insert each)

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"

# CUpti_ActivityMemcpyKind, as ENUM_CUDA_MEMCPY_OPER of the 2024.5 fixture labels it
# (older exports carry no ENUM tables, so the map is here).
_COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
               8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}
# NVTX_EVENTS.eventType (ENUM_NSYS_EVENT_TYPE): marks, push/pop and start/end ranges, in
# their NVTX and NVTXT (text file) forms; 75 creates a domain (its text is the name).
_NVTX_KINDS = {34: "mark", 65: "mark", 59: "push-pop", 70: "push-pop", 60: "start-end", 71: "start-end"}
_NVTX_DOMAIN_CREATE = 75


class NsysExportError(InputError):
    """A file is not a usable Nsight Systems SQLite export."""


@dataclass(frozen=True)
class NsysLoad:
    """What loading one export did."""

    export_id: int  # nsys_exports.export_id (the existing one when already_present)
    path: Path  # the path given
    sha256: str  # hex SHA-256 of the SQLite bytes
    nsys_version: str | None  # EXPORT_PRODUCT_VERSION
    already_present: bool  # True: the same export was in the store; nothing was added
    rows: Mapping[str, int]  # rows added per table (all 0 when already_present)


def nsys_schema_sql() -> str:
    """The DDL of the nsys tables (idempotent)."""
    return (resources.files("wsperf.queries") / SCHEMA).read_text(encoding="utf-8")


def load_nsys_export(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], *,
                     timeout_s: float = READ_TIMEOUT_S) -> NsysLoad:
    """Load the export at `path` into the store `con` (from `store.open_store`), in one
    transaction. Raises InputError (NsysExportError) when the file is missing, empty,
    not an Nsight Systems export, damaged, or holds no kernel records."""
    p = Path(path)
    with tempfile.TemporaryDirectory(prefix="wsperf-nsys-") as tmp:
        src = _sqlite_file(p, Path(tmp))
        digest, size = _hash(src)
        con.execute(nsys_schema_sql())
        found = con.execute("SELECT export_id, nsys_version FROM nsys_exports WHERE sha256 = ?", [digest]).fetchall()
        if found:
            return NsysLoad(found[0][0], p, digest, found[0][1], True, {t: 0 for t in TABLES})
        with _Export(src, p, timeout_s) as ex:
            with transaction(con, f"Nsight Systems export {p}"):
                con.execute(nsys_schema_sql())
                ((export_id,),) = con.execute("SELECT coalesce(max(export_id), 0) + 1 FROM nsys_exports").fetchall()
                rows = ex.load(con, export_id)
                con.execute("INSERT INTO nsys_exports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [export_id, str(p.resolve()), digest, size, ex.meta.get("EXPORT_PRODUCT_VERSION"),
                             ex.meta.get("EXPORT_SCHEMA_VERSION"), ex.session_start(), ex.capture.get("PROCESS_0:COMMAND"),
                             _bool(ex.capture.get("PROCESS_0:COLLECT_CUDA_TRACE")), rows["nsys_kernels"],
                             sorted(ex.absent), datetime.now(timezone.utc).replace(tzinfo=None)])
                rows["nsys_exports"] = 1
    return NsysLoad(export_id, p, digest, ex.meta.get("EXPORT_PRODUCT_VERSION"), False, rows)


# -- the file ----------------------------------------------------------------------------


def _sqlite_file(p: Path, tmp: Path) -> Path:
    """The SQLite file behind `p`: itself, its gunzipped copy, or `nsys export` of it."""
    # A regular file of plausible size only (a FIFO or /dev/zero is refused unread).
    with open_input(p, kind="an Nsight Systems export", limit=MAX_SQLITE_BYTES, error=NsysExportError) as f:
        try:
            head = f.read(16)
        except OSError as e:
            raise NsysExportError(f"{p}: cannot read it ({why(e)})") from None
    name = p.name.lower()
    if not head:
        raise NsysExportError(f"{p}: is empty; export the report again (`nsys export --type sqlite`)")
    if name.endswith(".qdstrm"):
        raise NsysExportError(f"{p}: is a raw capture stream (.qdstrm) that nsys never imported into a report; "
                              "run the capture where nsys's QdstrmImporter works, or profile again with a working "
                              "nsys, and give the .nsys-rep or its `nsys export --type sqlite` file")
    if name.endswith((".nsys-rep", ".qdrep")) and not head.startswith(SQLITE_MAGIC):
        return _export_report(p, tmp)
    if head.startswith(GZIP_MAGIC):
        return _gunzip(p, tmp / "export.sqlite")
    if not head.startswith(SQLITE_MAGIC):
        raise NsysExportError(f"{p}: is not an SQLite file (it does not start with 'SQLite format 3'); give the "
                              "file `nsys export --type sqlite` writes")
    return p


def _gunzip(p: Path, dest: Path) -> Path:
    # Reading and writing fail apart: a temporary directory that fills up is said as such,
    # never blamed on the input's gzip (which a user would then copy again, in vain).
    full = ("cannot inflate it into the temporary directory ({}); free space there or point TMPDIR "
            "elsewhere")
    try:
        out = open(dest, "wb")
    except OSError as e:
        raise NsysExportError(f"{p}: {full.format(why(e))}") from None
    with gzip.open(p, "rb") as f, out:
        total = 0
        while True:
            try:
                chunk = f.read(1 << 20)
            except (OSError, EOFError, zlib.error) as e:
                raise NsysExportError(f"{p}: is not a complete gzip file ({e}); copy it again") from None
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_SQLITE_BYTES:
                raise NsysExportError(f"{p}: inflates past {MAX_SQLITE_BYTES >> 30} GiB; refused (a gzip bomb, "
                                      "or an export too large to load whole)")
            try:
                out.write(chunk)
            except OSError as e:
                raise NsysExportError(f"{p}: {full.format(why(e))}") from None
        try:
            out.flush()  # a full disk fails here at the latest, not as the file closes
        except OSError as e:
            raise NsysExportError(f"{p}: {full.format(why(e))}") from None
    with open(dest, "rb") as f:
        if not f.read(16).startswith(SQLITE_MAGIC):
            raise NsysExportError(f"{p}: holds no SQLite file inside the gzip; give an `nsys export --type sqlite` file")
    return dest


def _export_report(p: Path, tmp: Path) -> Path:
    """`nsys export --type sqlite` of a report, with the nsys on PATH."""
    exe = shutil.which("nsys")
    if exe is None:
        raise NsysExportError(f"{p}: is an Nsight Systems report; reading it needs `nsys export` and no `nsys` is on "
                              f"PATH: install Nsight Systems (or add its bin/ to PATH), or run `nsys export --type "
                              f"sqlite {p.name}` where it is installed and give the .sqlite file")
    out = tmp / "export.sqlite"
    argv = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(p)]
    try:
        done = run_bounded(argv, timeout=EXPORT_TIMEOUT_S)
    except OSError as e:
        raise NsysExportError(f"{p}: `{exe} export` cannot run ({e.strerror}); give the .sqlite file instead") from None
    if done.timed_out:
        raise NsysExportError(f"{p}: `nsys export` did not finish within {EXPORT_TIMEOUT_S:g} s; export it by hand "
                              "and give the .sqlite file")
    if done.exit_code != 0 or not out.is_file():
        said = " ".join((done.stderr or done.stdout).decode("utf-8", "replace").split())[-300:]
        raise NsysExportError(f"{p}: `nsys export` failed (exit {done.exit_code}): {said or 'no output'}; this nsys "
                              "cannot read the report (made by a newer nsys?) or the report is damaged")
    return out


def _hash(p: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _check_size(src: Path, shown: Path) -> None:
    """Refuse a file shorter than its SQLite header says (a cut copy or download): the
    header holds the page size (offset 16, big-endian; 1 means 65536) and the page
    count (offset 28), valid when the change counter (24) equals the version-valid-for
    number (92), as every SQLite since 3.7.0 writes it."""
    with open(src, "rb") as f:
        head = f.read(100)
        size = os.fstat(f.fileno()).st_size
    if len(head) < 100:
        raise NsysExportError(f"{shown}: is truncated (shorter than an SQLite header); export the report again")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages and pages * page > size:
        raise NsysExportError(f"{shown}: is truncated ({size:,} of the {pages * page:,} bytes its SQLite header "
                              "announces); copy or export it again")


def _bool(v: str | None) -> bool | None:
    return None if v is None else v.strip().lower() == "true"


# -- what is read ------------------------------------------------------------------------

# (column in the store, expression over the source table's columns, arrow type). In an
# expression, `{c}` names a source column: it becomes t."c" when the export has it and
# NULL otherwise. `{name:c}` (alone) is a StringIds id: it is read as the id and turned
# into its text in DuckDB, from a table of the ids the export's records use, each read
# once (a million launches of one kernel decode its name once, and StringIds is never
# read whole). A column `<col>__text` holds the inline text that older exports carry
# instead of an id: `<col>` is its id's text, else that.
_I64, _I32, _STR = pa.int64(), pa.int32(), pa.string()

_KERNEL_COLUMNS = [
    ("record_id", "t.rowid", _I64),
    ("start_ns", "{start}", _I64),
    ("end_ns", "{end}", _I64),
    ("duration_ns", "{end} - {start}", _I64),
    ("device_id", "{deviceId}", _I32),
    ("context_id", "{contextId}", _I64),
    ("green_context_id", "{greenContextId}", _I64),
    ("stream_id", "{streamId}", _I64),
    ("correlation_id", "{correlationId}", _I64),
    ("global_pid", "{globalPid}", _I64),
    ("pid", "({globalPid} >> 24) & 16777215", _I32),
    ("kernel_demangled", "{name:demangledName}", _I64),
    ("kernel_short", "{name:shortName}", _I64),
    ("kernel_mangled", "{name:mangledName}", _I64),
    ("launch_type", "{launchType}", _I32),
    ("grid_x", "{gridX}", _I64), ("grid_y", "{gridY}", _I64), ("grid_z", "{gridZ}", _I64),
    ("block_x", "{blockX}", _I32), ("block_y", "{blockY}", _I32), ("block_z", "{blockZ}", _I32),
    ("cluster_x", "{clusterX}", _I32), ("cluster_y", "{clusterY}", _I32), ("cluster_z", "{clusterZ}", _I32),
    ("cluster_scheduling_policy", "{clusterSchedulingPolicy}", _I32),
    ("max_potential_cluster_size", "{maxPotentialClusterSize}", _I32),
    ("max_active_clusters", "{maxActiveClusters}", _I32),
    ("registers_per_thread", "{registersPerThread}", _I32),
    ("static_smem_bytes", "{staticSharedMemory}", _I64),
    ("dynamic_smem_bytes", "{dynamicSharedMemory}", _I64),
    ("smem_executed_bytes", "{sharedMemoryExecuted}", _I64),
    ("local_memory_per_thread", "{localMemoryPerThread}", _I64),
    ("local_memory_total", "{localMemoryTotal}", _I64),
    ("grid_id", "{gridId}", _I64),
    ("graph_id", "{graphId}", _I64),
    ("graph_node_id", "{graphNodeId}", _I64),
]
_COPY_CASE = "CASE {copyKind} " + " ".join(f"WHEN {k} THEN '{v}'" for k, v in _COPY_KINDS.items()) + " END"
# What a copy and a memset record share (they go into one table, nsys_memcpy).
_TRANSFER_COLUMNS = [
    ("start_ns", "{start}", _I64), ("end_ns", "{end}", _I64), ("duration_ns", "{end} - {start}", _I64),
    ("device_id", "{deviceId}", _I32), ("context_id", "{contextId}", _I64), ("stream_id", "{streamId}", _I64),
    ("correlation_id", "{correlationId}", _I64), ("global_pid", "{globalPid}", _I64), ("bytes", "{bytes}", _I64),
]
_MEMCPY_COLUMNS = [
    ("operation", "'memcpy'", _STR), *_TRANSFER_COLUMNS,
    ("copy_kind", _COPY_CASE, _STR), ("src_kind", "{srcKind}", _I32), ("dst_kind", "{dstKind}", _I32),
    ("graph_node_id", "{graphNodeId}", _I64),
]
_MEMSET_COLUMNS = [
    ("operation", "'memset'", _STR), *_TRANSFER_COLUMNS,
    ("copy_kind", "NULL", _STR), ("src_kind", "NULL", _I32), ("dst_kind", "{memKind}", _I32),
    ("graph_node_id", "{graphNodeId}", _I64),
]
_RUNTIME_COLUMNS = [
    ("start_ns", "{start}", _I64), ("end_ns", "{end}", _I64), ("duration_ns", "{end} - {start}", _I64),
    ("global_tid", "{globalTid}", _I64),
    # globalTid = hardware id << 56 | pid << 24 | tid; a kernel's globalPid is the same
    # with the thread bits cleared.
    ("global_pid", "({globalTid} >> 24) << 24", _I64),
    ("pid", "({globalTid} >> 24) & 16777215", _I32), ("tid", "{globalTid} & 16777215", _I32),
    ("correlation_id", "{correlationId}", _I64),
    # 2022.x exports carry both nameId and a `name` text column (empty); later ones nameId only.
    ("api", "{name:nameId}", _I64),
    ("api__text", "{name}", _STR),
    ("return_value", "{returnValue}", _I64),
]
_NVTX_KIND_CASE = "CASE {eventType} " + " ".join(f"WHEN {k} THEN '{v}'" for k, v in _NVTX_KINDS.items()) + " END"
_NVTX_COLUMNS = [
    ("kind", _NVTX_KIND_CASE, _STR),
    ("start_ns", "{start}", _I64),
    ("end_ns", "CASE WHEN {end} >= {start} THEN {end} END", _I64),
    ("duration_ns", "CASE WHEN {end} >= {start} THEN {end} - {start} END", _I64),
    ("text", "{name:textId}", _I64),
    ("text__text", "{text}", _STR),
    # A domain id, named from the domain-create events (read once: see _domains).
    ("domain", "{domain:domainId}", _I64),
    ("global_tid", "{globalTid}", _I64),
    ("pid", "({globalTid} >> 24) & 16777215", _I32), ("tid", "{globalTid} & 16777215", _I32),
]
_NVTX_WHERE = "{eventType} IN (" + ", ".join(str(k) for k in _NVTX_KINDS) + ")"

_GPU_COLUMNS = [
    ("device_id", "{id}", _I32), ("cuda_device", "{cuDevice}", _I32), ("name", "{name}", _STR),
    ("chip", "{chipName}", _STR), ("bus_location", "{busLocation}", _STR),
    ("compute_capability", "{computeMajor} || '.' || {computeMinor}", _STR), ("sm_count", "{smCount}", _I32),
    ("clock_hz", "{clockRate}", _I64), ("memory_bytes", "{totalMemory}", _I64),
    ("memory_bandwidth", "{memoryBandwidth}", _I64), ("l2_cache_bytes", "{l2CacheSize}", _I64),
    ("uuid", "{uuid}", _STR),
]

# Which spec each source table is read with (for the StringIds ids they use).
_SPECS = {KERNEL_TABLE: _KERNEL_COLUMNS, "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME_COLUMNS, "NVTX_EVENTS": _NVTX_COLUMNS}


def _name_ids(spec: list[tuple[str, str, pa.DataType]]) -> list[str]:
    """The source columns of a spec that hold StringIds ids."""
    return [expr[len("{name:"):-1] for _, expr, _ in spec if expr.startswith("{name:")]


class _Export:
    """One open export: its tables, metadata, and the reads into the store."""

    def __init__(self, src: Path, shown: Path, timeout_s: float) -> None:
        self.src, self.shown, self.timeout_s = src, shown, timeout_s
        _check_size(src, shown)
        self.absent: set[str] = set()
        self._deadline = 0.0
        self._adbc: Any = None  # SQLite's ADBC connection, opened on the first bulk read (_arrow)
        try:
            # immutable: no lock, no journal, nothing written next to the file (it may
            # sit on a read-only mount or in the fixtures).
            self.db = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                                      check_same_thread=False)
        except sqlite3.Error as e:
            raise NsysExportError(f"{shown}: cannot be opened as SQLite ({e}); export the report again") from None
        # Names with bytes that are not UTF-8 are kept, with U+FFFD, rather than failing the row.
        self.db.text_factory = lambda b: b.decode("utf-8", "replace")
        self.db.set_progress_handler(self._late, 10_000)
        self._deadline = time.monotonic() + timeout_s
        try:
            self.tables = {r[0] for r in self._query("SELECT name FROM sqlite_master WHERE type = 'table'")}
            self._check_kind()
            self.meta = self._pairs("META_DATA_EXPORT" if "META_DATA_EXPORT" in self.tables else "EXPORT_META_DATA")
            self.capture = self._pairs("META_DATA_CAPTURE")
            self._check_kernels()
        except BaseException:
            self.db.close()
            raise

    def __enter__(self) -> _Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()
        if self._adbc is not None:
            self._adbc.close()

    def _late(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0  # non-zero interrupts the statement

    def _query(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, params)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            # UnicodeDecodeError: a column name that is not UTF-8 (text_factory covers values only)
            raise self._damaged(e) from None

    def _damaged(self, e: sqlite3.Error | UnicodeDecodeError) -> NsysExportError:
        if "interrupted" in str(e):
            return NsysExportError(f"{self.shown}: reading took longer than {self.timeout_s:g} s; the export is too "
                                   "large or damaged")
        # SQLite quotes the damaged schema text, newlines and all: one line, at most 200 characters
        said = " ".join(str(e).split())
        said = said if len(said) <= 200 else said[:199] + "…"
        return NsysExportError(f"{self.shown}: cannot be read as SQLite ({said}); the file is truncated or damaged: "
                               "export the report again")

    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self._query(f'PRAGMA table_info("{table}")')]

    def _pairs(self, table: str) -> dict[str, str]:
        if table not in self.tables or not {"name", "value"} <= set(self._columns(table)):
            return {}
        out: dict[str, str] = {}
        for k, v in self._query(f'SELECT name, substr(value, 1, 1024) FROM "{table}" LIMIT 100000'):
            out.setdefault(str(k), None if v is None else str(v))  # the first of repeated keys
        return out

    def _check_kind(self) -> None:
        marks = {"META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS"}
        if "StringIds" not in self.tables or not marks & self.tables:
            some = ", ".join(sorted(self.tables)[:5]) or "none"
            raise NsysExportError(f"{self.shown}: is an SQLite database but not an Nsight Systems export (no StringIds "
                                  f"and META_DATA_EXPORT tables; it has {some}); give the file `nsys export --type "
                                  "sqlite` writes")

    def _check_kernels(self) -> None:
        has = KERNEL_TABLE in self.tables and self._query(f"SELECT EXISTS (SELECT 1 FROM {KERNEL_TABLE})").fetchone()[0]
        if has:
            cols = set(self._columns(KERNEL_TABLE))
            missing = [c for c in ("start", "end", "demangledName", "shortName") if c not in cols]
            if missing:
                raise NsysExportError(f"{self.shown}: its {KERNEL_TABLE} table lacks {', '.join(missing)}; this is not "
                                      "a layout nsys writes")
            return
        traced = _bool(self.capture.get("PROCESS_0:COLLECT_CUDA_TRACE"))
        why = ("CUDA trace was on, but no kernel ran while nsys was recording" if traced else
               "it was collected without CUDA trace: profile with `nsys profile --trace=cuda,nvtx`")
        raise NsysExportError(f"{self.shown}: holds no CUDA kernel activity (no {KERNEL_TABLE} rows): {why}")

    def session_start(self) -> datetime | None:
        t = "TARGET_INFO_SESSION_START_TIME"
        if t not in self.tables or "utcEpochNs" not in self._columns(t):
            return None
        row = self._query(f"SELECT utcEpochNs FROM {t} LIMIT 1").fetchone()
        if not row or not isinstance(row[0], int) or not 0 < row[0] < (1 << 62):
            return None
        return datetime.fromtimestamp(row[0] / 1e9, timezone.utc).replace(tzinfo=None)

    # -- reading tables into the store --

    def _select(self, table: str, spec: list[tuple[str, str, pa.DataType]], where: str | None = None) -> str:
        have = set(self._columns(table))

        def col(name: str) -> str:
            if name in have:
                return f't."{name}"'
            self.absent.add(f"{table}.{name}")
            return "NULL"

        def render(expr: str) -> str:
            out, i = [], 0
            while (j := expr.find("{", i)) >= 0:
                k = expr.index("}", j)
                out.append(expr[i:j])
                ref = expr[j + 1:k]
                if ref.startswith(("name:", "domain:")):
                    out.append(col(ref.split(":", 1)[1]))
                else:
                    c = col(ref)
                    out.append(f"substr({c}, 1, {MAX_NAME_CHARS})" if ref in ("name", "text") and c != "NULL" else c)
                i = k + 1
            out.append(expr[i:])
            return "".join(out)

        cols = ", ".join(f"{render(expr)} AS {name}" for name, expr, _ in spec)
        sql = f'SELECT {cols} FROM "{table}" AS t'
        if where:
            sql += " WHERE " + render(where)
        return sql

    def _fetch(self, cur: sqlite3.Cursor) -> list[tuple]:
        try:
            return cur.fetchmany(_CHUNK)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise self._damaged(e) from None

    def _arrow(self, sql: str, schema: pa.Schema, table: str) -> Iterator[pa.Table] | None:
        """The rows of `sql` as Arrow tables of `schema`, read by SQLite's ADBC driver (C code,
        no Python object per value: a 1M-kernel export loads in less time than Python's
        sqlite3 takes only to fetch its rows), in chunks of _ARROW_ROWS. None where the
        driver is not installed or cannot give the rows in those types (a value of another
        type, bytes that are not UTF-8): the caller then reads them through sqlite3, which
        names what is wrong or replaces what it cannot decode. The chunks of a table are all
        converted before the first is handed over, so a fall back never follows rows
        already inserted (Arrow's memory, not Python objects: ~8 bytes a value)."""
        if not USE_ADBC:
            return None
        try:
            import adbc_driver_sqlite.dbapi as adbc
        except ImportError:
            return None
        try:
            if self._adbc is None:
                self._adbc = adbc.connect(f"{self.src.resolve().as_uri()}?mode=ro&immutable=1")
            cur = self._adbc.cursor()
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(_ARROW_ROWS)})
            cur.execute(sql)
            out, total = [], 0
            for batch in cur.fetch_record_batch():
                total += batch.num_rows
                if total > MAX_RECORDS:
                    raise NsysExportError(f"{self.shown}: {table} holds more than {MAX_RECORDS:,} rows; refused rather "
                                          "than loaded in part (export a shorter capture, e.g. `nsys profile --duration`)")
                if time.monotonic() > self._deadline:
                    raise NsysExportError(f"{self.shown}: reading took longer than {self.timeout_s:g} s; the export "
                                          "is too large or damaged")
                out.append(pa.Table.from_batches([batch]).rename_columns(schema.names).cast(schema))
            cur.close()
        except NsysExportError:
            raise
        except Exception:  # noqa: BLE001 - a type SQLite's columns do not hold, bytes that are not UTF-8, ...
            return None  # read again through sqlite3, which names what is wrong or replaces what it cannot decode
        return iter(out)

    def _batches(self, table: str, spec: list[tuple[str, str, pa.DataType]], where: str | None = None
                 ) -> Iterator[pa.Table]:
        schema = pa.schema([(name, typ) for name, _, typ in spec])
        sql = self._select(table, spec, where)
        fast = self._arrow(sql, schema, table)
        if fast is not None:
            yield from fast
            return
        cur = self._query(sql)
        total = 0
        while rows := self._fetch(cur):
            total += len(rows)
            if total > MAX_RECORDS:
                raise NsysExportError(f"{self.shown}: {table} holds more than {MAX_RECORDS:,} rows; refused rather than "
                                      "loaded in part (export a shorter capture, e.g. `nsys profile --duration`)")
            try:
                yield pa.Table.from_arrays([pa.array(c, t) for c, t in zip(zip(*rows), schema.types)], schema=schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                raise NsysExportError(f"{self.shown}: {table} holds a value of the wrong type ({e}); the export is "
                                      "damaged or not written by nsys") from None

    def _names(self, con: duckdb.DuckDBPyConnection) -> None:
        """The StringIds rows the records use, into the temporary table _wsperf_nsys_names."""
        uses = [(t, c) for t, spec in _SPECS.items() if t in self.tables
                for c in _name_ids(spec) if c in self._columns(t)]
        con.execute("CREATE OR REPLACE TEMP TABLE _wsperf_nsys_names (id BIGINT PRIMARY KEY, value VARCHAR)")
        if not uses:
            return
        ids = " UNION ".join(f'SELECT "{c}" FROM "{t}"' for t, c in uses)
        sql = f"SELECT id, substr(value, 1, {MAX_NAME_CHARS}) FROM StringIds WHERE id IN ({ids})"
        schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
        fast = self._arrow(sql, schema, "StringIds")
        for batch in fast or ():
            con.register("_wsperf_nsys", batch)
            try:
                con.execute("INSERT OR IGNORE INTO _wsperf_nsys_names SELECT * FROM _wsperf_nsys")
            finally:
                con.unregister("_wsperf_nsys")
        if fast is not None:
            return
        cur = self._query(sql)
        while rows := self._fetch(cur):
            try:
                batch = pa.Table.from_arrays([pa.array(c, t) for c, t in zip(zip(*rows), schema.types)], schema=schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                raise NsysExportError(f"{self.shown}: StringIds holds a value of the wrong type ({e}); the export is "
                                      "damaged or not written by nsys") from None
            con.register("_wsperf_nsys", batch)
            try:
                con.execute("INSERT OR IGNORE INTO _wsperf_nsys_names SELECT * FROM _wsperf_nsys")
            finally:
                con.unregister("_wsperf_nsys")

    def _domains(self, con: duckdb.DuckDBPyConnection) -> None:
        """NVTX domain names by id (the text of each domain-create event), into the
        temporary table _wsperf_nsys_domains: read once, not once per range."""
        con.execute("CREATE OR REPLACE TEMP TABLE _wsperf_nsys_domains (id BIGINT PRIMARY KEY, value VARCHAR)")
        if "NVTX_EVENTS" not in self.tables or not {"domainId", "eventType"} <= set(self._columns("NVTX_EVENTS")):
            return
        text = 't."text"' if "text" in self._columns("NVTX_EVENTS") else "NULL"
        textid = "s.value" if "textId" in self._columns("NVTX_EVENTS") else "NULL"
        join = 'LEFT JOIN StringIds AS s ON s.id = t."textId"' if textid != "NULL" else ""
        cur = self._query(f"SELECT t.domainId, substr(coalesce({text}, {textid}), 1, {MAX_NAME_CHARS}) "
                          f"FROM NVTX_EVENTS AS t {join} WHERE t.eventType = {_NVTX_DOMAIN_CREATE} AND t.domainId <> 0 "
                          "LIMIT 100000")
        for did, name in self._fetch(cur):
            if isinstance(did, int) and -(1 << 63) <= did < (1 << 63):
                con.execute("INSERT OR IGNORE INTO _wsperf_nsys_domains VALUES (?, ?)", [did, name])

    def _insert(self, con: duckdb.DuckDBPyConnection, target: str, export_id: int, spec: list,
                batches: Iterator[pa.Table]) -> int:
        """Insert batches into `target`, StringIds ids turned into their text."""
        cols = [name for name, _, _ in spec]
        picks = []
        for i, (name, expr, _) in enumerate(spec):
            if name.endswith("__text"):
                continue
            if expr.startswith("{domain:"):
                picks.append(f"(SELECT value FROM _wsperf_nsys_domains WHERE id = b.{name}) AS {name}")
            elif expr.startswith("{name:"):
                got = f"(SELECT value FROM _wsperf_nsys_names WHERE id = b.{name})"
                picks.append(f"coalesce({got}, b.{name}__text) AS {name}" if f"{name}__text" in cols
                             else f"{got} AS {name}")
            else:
                picks.append(f"b.{name}")
        n = 0
        for batch in batches:
            con.register("_wsperf_nsys", batch)
            try:
                con.execute(f"INSERT INTO {target} BY NAME SELECT $export_id AS export_id, {', '.join(picks)} "
                            "FROM _wsperf_nsys AS b", {"export_id": export_id})
            finally:
                con.unregister("_wsperf_nsys")
            n += batch.num_rows
        return n

    def load(self, con: duckdb.DuckDBPyConnection, export_id: int) -> dict[str, int]:
        rows = {t: 0 for t in TABLES}
        self._names(con)
        try:
            rows["nsys_kernels"] = self._insert(con, "nsys_kernels", export_id, _KERNEL_COLUMNS,
                                                self._batches(KERNEL_TABLE, _KERNEL_COLUMNS))
            if "TARGET_INFO_GPU" in self.tables:
                rows["nsys_gpus"] = self._insert(con, "nsys_gpus", export_id, _GPU_COLUMNS,
                                                 self._batches("TARGET_INFO_GPU", _GPU_COLUMNS))
            for table, spec in (("CUPTI_ACTIVITY_KIND_MEMCPY", _MEMCPY_COLUMNS),
                                ("CUPTI_ACTIVITY_KIND_MEMSET", _MEMSET_COLUMNS)):
                if table in self.tables:
                    rows["nsys_memcpy"] += self._insert(con, "nsys_memcpy", export_id, spec, self._batches(table, spec))
            if "NVTX_EVENTS" in self.tables:
                self._domains(con)
                rows["nsys_nvtx"] = self._insert(con, "nsys_nvtx", export_id, _NVTX_COLUMNS,
                                                 self._batches("NVTX_EVENTS", _NVTX_COLUMNS, _NVTX_WHERE))
            if "CUPTI_ACTIVITY_KIND_RUNTIME" in self.tables:
                rows["nsys_runtime"] = self._runtime(con, export_id)
        finally:
            con.execute("DROP TABLE IF EXISTS _wsperf_nsys_names")
            con.execute("DROP TABLE IF EXISTS _wsperf_nsys_domains")
        return rows

    def _runtime(self, con: duckdb.DuckDBPyConnection, export_id: int) -> int:
        """API calls, each with the kernels it launched (by process and correlation id)."""
        con.execute("CREATE OR REPLACE TEMP TABLE _wsperf_nsys_runtime AS SELECT * EXCLUDE (kernels, "
                    "first_kernel_start_ns, launch_latency_ns, queue_ns) FROM nsys_runtime LIMIT 0")
        try:
            self._insert(con, "_wsperf_nsys_runtime", 0, _RUNTIME_COLUMNS,
                         self._batches("CUPTI_ACTIVITY_KIND_RUNTIME", _RUNTIME_COLUMNS))
            con.execute("""
                INSERT INTO nsys_runtime BY NAME
                WITH k AS (
                    SELECT global_pid, correlation_id, count(*) AS kernels, min(start_ns) AS first_kernel_start_ns
                    FROM nsys_kernels WHERE export_id = $export_id AND correlation_id IS NOT NULL
                    GROUP BY ALL)
                SELECT r.* REPLACE ($export_id AS export_id), coalesce(k.kernels, 0) AS kernels, k.first_kernel_start_ns,
                       k.first_kernel_start_ns - r.start_ns AS launch_latency_ns,
                       greatest(k.first_kernel_start_ns - r.end_ns, 0) AS queue_ns
                FROM _wsperf_nsys_runtime AS r
                LEFT JOIN k ON k.global_pid = r.global_pid AND k.correlation_id = r.correlation_id""",
                        {"export_id": export_id})
            ((n,),) = con.execute("SELECT count(*) FROM _wsperf_nsys_runtime").fetchall()
        finally:
            con.execute("DROP TABLE IF EXISTS _wsperf_nsys_runtime")
        return n


def row_counts(con: duckdb.DuckDBPyConnection, export_id: int) -> dict[str, Any]:
    """Rows per nsys table for one export (what a load wrote)."""
    return {t: con.execute(f"SELECT count(*) FROM {t} WHERE export_id = ?", [export_id]).fetchone()[0] for t in TABLES}
