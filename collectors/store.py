"""The wsperf store: one DuckDB database (in memory or a file) with the tables of
`queries/schema.sql`.

`open_store` is the only way in: it opens or creates the database, applies the schema
(idempotent) and checks that a file it did not just create is a wsperf store of the
same layout, so a wrong `--db` fails with one clear StoreError instead of a confusing
query error later. `transaction` is how loaders write: all or nothing.

Several processes. DuckDB lets one process open a file for writing, or any number open
it read-only, never both (an OS file lock; a second process gets "Could not set lock on
file"). So `open_store` waits for the lock: it retries for `lock_timeout` seconds,
saying once on stderr that it waits and for whom, then fails with one StoreError naming
the file. Two nightly jobs pointed at one store thus run one after the other instead of
one of them failing. A process killed mid-write (even SIGKILL) leaves no lock behind:
the OS drops it with the process, and DuckDB's write-ahead log holds only committed
transactions, so the next open sees the store as of the last commit (tests/test_store_safety.py).
"""

from __future__ import annotations

import math
import os
import re
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from wsperf.collectors.catalog import check_catalog, schema_complete
from wsperf.collectors.errors import InputError, StoreError
from wsperf.collectors.files import open_input, why
from wsperf.collectors.limits import duckdb_config
from wsperf.collectors.process import Terminated, received_signal
from wsperf.queries import schema_sql

# Layout of the tables in schema.sql; bump when a column changes meaning or name.
SCHEMA_VERSION = "3"

# The tables a report fills, in the order the loader writes them.
TABLES = ("reports", "launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules")
# The run history (`wsperf analyze --db`): which reports each recorded run loaded.
HISTORY_TABLES = ("runs", "run_reports")
# Tables keyed by launch_id (each row belongs to one launch).
LAUNCH_TABLES = ("metrics", "sass", "stalls", "opcodes", "ncu_rules", "role_pcs")

# How long a command waits for another process to release the store (seconds): long
# enough for a nightly analyze of a few reports, short enough that a wedged job is noticed.
LOCK_TIMEOUT_S = 300.0
# DuckDB's message when another process holds the file: 'IO Error: Could not set lock on
# file "...": Conflicting lock is held in /usr/bin/python3 (PID 123). See also ...'
_LOCKED = re.compile(r"Could not set lock on file")
_HOLDER = re.compile(r"\(PID (\d+)\)")
# Connections inside a `transaction` block, by id(): a nested block joins the outer one.
_OPEN_TRANSACTIONS: set[int] = set()
# Connections to store files, for `close_all` (the console script's fast exit, cli/entry.py).
_FILE_CONNECTIONS: weakref.WeakSet = weakref.WeakSet()


def close_all() -> None:
    """Close every store file this process opened (DuckDB checkpoints on close), as the
    interpreter's shutdown would; in-memory stores hold nothing to keep."""
    for con in list(_FILE_CONNECTIONS):
        try:
            con.close()
        except duckdb.Error:
            pass


def open_store(path: str | os.PathLike[str] | None = None, *, read_only: bool = False,
               lock_timeout: float = LOCK_TIMEOUT_S,
               on_wait: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the store at `path` (a DuckDB file, created if absent), or to a
    fresh in-memory store when `path` is None. `read_only` opens an existing store for
    queries only (no schema changes, other readers allowed). While another process holds
    the file, waits up to `lock_timeout` seconds, calling `on_wait(message)` once
    (default: the message on stderr)."""
    if path is None:
        if read_only:
            raise StoreError("an in-memory store cannot be opened read-only: give the path of a store file")
        con = duckdb.connect(":memory:", config=duckdb_config())
        _apply_schema(con, "the in-memory store", in_memory=True)
        return con

    p = Path(path)
    lock_timeout = check_lock_timeout(lock_timeout)
    _check_file(p, read_only)
    con = _connect(p, read_only, lock_timeout, on_wait)
    _FILE_CONNECTIONS.add(con)
    try:
        if read_only:
            _check_version(con, p)
            check_catalog(con, p)
        else:
            _apply_schema(con, p)
    except BaseException:
        con.close()
        raise
    return con


# What --lock-timeout may be (seconds): a week is longer than any CI job waits.
MAX_LOCK_TIMEOUT_S = 7 * 24 * 3600.0


def check_lock_timeout(seconds: float) -> float:
    """`seconds` when it is a finite number of seconds in 0..MAX_LOCK_TIMEOUT_S (NaN
    would make the wait endless), else InputError."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or not 0 <= seconds <= MAX_LOCK_TIMEOUT_S:
        raise InputError(f"--lock-timeout {seconds!r}: give a number of seconds from 0 to {MAX_LOCK_TIMEOUT_S:g}")
    return float(seconds)


# A DuckDB database file: a 4 KiB header whose bytes 8..11 read "DUCK" (after an 8-byte checksum).
_DUCKDB_MAGIC_AT, _DUCKDB_MAGIC = 8, b"DUCK"
_NOT_A_STORE = "give a store written by wsperf (`wsperf analyze REPORT --db FILE`), or a new file name"


def _check_file(p: Path, read_only: bool) -> bool:
    """Refuse a path that is not a DuckDB file or a new/empty path, before DuckDB opens it
    (DuckDB would open a Parquet, CSV or JSON file as an empty in-memory database, and
    block on a FIFO). Returns True when the store is new: the file is absent or empty (an
    empty file, e.g. from mktemp, is removed so that DuckDB can create it)."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if read_only:
            raise StoreError(f"{p}: no such store; create it by loading a report into it first") from None
        if not p.parent.is_dir():
            raise StoreError(f"{p}: directory {p.parent} does not exist; create it first or pick another path") from None
        return True
    except (OSError, ValueError) as e:
        raise StoreError(f"{p}: cannot open it as a store ({why(e)}); {_NOT_A_STORE}") from None
    if stat.S_ISDIR(st.st_mode):
        raise StoreError(f"{p}: is a directory, not a store file; give a file path such as {p / 'wsperf.duckdb'}")
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{p}: is not a regular file (a FIFO, device or socket); {_NOT_A_STORE}")
    if st.st_size == 0:
        if read_only:
            raise StoreError(f"{p}: is empty, not a store; create it by loading a report into it first")
        try:
            p.unlink()
        except OSError as e:
            raise StoreError(f"{p}: cannot replace the empty file with a store ({why(e)})") from None
        return True
    with open_input(p, kind="a DuckDB store", limit=1 << 62, error=StoreError) as f:
        head = f.read(_DUCKDB_MAGIC_AT + len(_DUCKDB_MAGIC))
    if head[_DUCKDB_MAGIC_AT:] != _DUCKDB_MAGIC:
        raise StoreError(f"{p}: is not a DuckDB database (a Parquet, CSV, JSON, SQLite or other file); {_NOT_A_STORE}")
    return False


def _connect(p: Path, read_only: bool, lock_timeout: float,
             on_wait: Callable[[str], None] | None) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + max(lock_timeout, 0.0)
    waited = False
    pause = 0.05
    while True:
        try:
            return duckdb.connect(str(p), read_only=read_only, config=duckdb_config())
        except duckdb.IOException as e:
            if not _LOCKED.search(str(e)):
                raise StoreError(f"{p}: cannot open as a DuckDB store ({_first_line(e)}); "
                                 "give a store written by wsperf, or a new file name") from None
            pid = _HOLDER.search(str(e))
            holder = f"PID {pid.group(1)}" if pid else "another process"
            # A reader waits only for a writer; a writer waits for writers and readers.
            doing = "writing it" if read_only else "writing or reading it"
            if time.monotonic() >= deadline:
                raise StoreError(f"{p}: another wsperf is {doing} ({holder} holds the lock) and did not finish within "
                                 f"{lock_timeout:g} s; wait for it to finish, or give a longer --lock-timeout") from None
            if not waited:
                waited = True
                (on_wait or _note)(f"wsperf: waiting for {p}: another wsperf is {doing} ({holder} holds the lock); "
                                   f"giving up after {lock_timeout:g} s (--lock-timeout)")
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 2, 0.5)
        except duckdb.Error as e:
            if "different configuration" in str(e):
                raise StoreError(f"{p}: this process has it open already, read-only (a wsperf session of it, "
                                 "`wsperf.load(..., db=...)`): close that session first (`s.close()`, or end its "
                                 "`with` block)") from None
            raise StoreError(f"{p}: cannot open as a DuckDB store ({_first_line(e)}); "
                             "give a store written by wsperf, or a new file name") from None


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT around the block; ROLLBACK on any exception, which propagates.
    A DuckDB failure becomes a StoreError naming `what` was being written.

    Blocks nest: inside an open block on the same connection, an inner block joins the
    outer transaction (DuckDB has no savepoints), so a caller can make several loads one
    unit; a failure inside rolls back everything since the outermost BEGIN."""
    if id(con) in _OPEN_TRANSACTIONS:
        try:
            yield con
        except duckdb.Error as e:
            raise _failure(what, e) from e
        return
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.Error as e:
        raise StoreError(f"cannot start writing {what}: {_first_line(e)}") from None
    _OPEN_TRANSACTIONS.add(id(con))
    try:
        yield con
        con.execute("COMMIT")
    except BaseException as e:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # the transaction is already gone (failed COMMIT); nothing was written
        if isinstance(e, duckdb.Error):
            raise _failure(what, e) from e
        raise
    finally:
        _OPEN_TRANSACTIONS.discard(id(con))


def _failure(what: str, e: duckdb.Error) -> BaseException:
    """What a DuckDB error inside a transaction means: a signal that interrupted a query
    (DuckDB reports it as its own error, and the next statement as 'transaction is
    aborted') is that signal; anything else, a failed write."""
    signum = received_signal()
    if signum is not None:
        return Terminated(signum)
    return StoreError(f"writing {what} failed, nothing was stored: {_first_line(e)}")


def table_counts(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...] = TABLES) -> dict[str, int]:
    """Rows per store table (default: the tables a report fills), e.g. to show what a
    load added."""
    sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in tables)
    return dict(con.execute(sql).fetchall())


def check_store(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What is inconsistent in the store, one sentence per problem ([] when sound):
    rows pointing at launches, reports or runs that do not exist, reports whose launch
    count disagrees with their launches, runs without reports. Every table is read in
    full (DuckDB verifies each block's checksum on read), so a damaged file shows up
    here as a StoreError rather than later."""
    problems: list[str] = []
    checks = [(f"{t} rows of launches that do not exist",
               f"SELECT count(*) FROM {t} WHERE launch_id NOT IN (SELECT launch_id FROM launches)")
              for t in LAUNCH_TABLES]
    checks += [
        ("launches of reports that do not exist",
         "SELECT count(*) FROM launches WHERE report_id NOT IN (SELECT report_id FROM reports)"),
        ("reports whose num_launches differs from their launches (static reports excepted)",
         """SELECT count(*) FROM reports AS r WHERE coalesce(r.kind, 'ncu') = 'ncu'
            AND r.num_launches <> (SELECT count(*) FROM launches AS l WHERE l.report_id = r.report_id)"""),
        ("run_reports rows of runs that do not exist",
         "SELECT count(*) FROM run_reports WHERE run_id NOT IN (SELECT run_id FROM runs)"),
        ("run_reports rows of reports that do not exist",
         "SELECT count(*) FROM run_reports WHERE report_id NOT IN (SELECT report_id FROM reports)"),
        ("runs without any report", "SELECT count(*) FROM runs WHERE run_id NOT IN (SELECT run_id FROM run_reports)"
         # a run of Nsight Systems exports (analyses/nsys.py) links its exports instead
         + (" AND run_id NOT IN (SELECT run_id FROM nsys_run_exports)" if con.execute(
             "SELECT 1 FROM duckdb_tables() WHERE table_name = 'nsys_run_exports'").fetchall() else "")),
    ]
    try:
        for what, sql in checks:
            ((n,),) = con.execute(sql).fetchall()
            if n:
                problems.append(f"{n} {what}")
        for t in TABLES + HISTORY_TABLES + ("role_pcs",):
            con.execute(f"SELECT count(*), sum(hash(t)) FROM {t} AS t").fetchall()
    except duckdb.Error as e:
        raise StoreError(f"the store cannot be read in full: {_first_line(e)}; load the reports into a new store "
                         "file") from None
    return problems


def _apply_schema(con: duckdb.DuckDBPyConnection, where: object, *, in_memory: bool = False) -> None:
    # Nothing is written until the file is known to be ours: a DuckDB file that holds
    # anything but a wsperf store of this layout is refused as it is.
    try:
        if not in_memory:
            found = _check_owner(con, where)
            if found is not None and schema_complete(found):
                return  # a store of this layout (_check_version), whole: opening it writes nothing
        con.execute(schema_sql())
        con.execute("INSERT OR IGNORE INTO wsperf_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
    except duckdb.IOException as e:
        raise StoreError(f"{where}: cannot be read as a store ({_first_line(e)}); the file is damaged or "
                         "truncated: restore it, or load the reports into a new store file") from None
    except duckdb.OutOfMemoryException as e:
        raise StoreError(f"{where}: out of memory creating the wsperf tables ({_first_line(e)}); is a memory "
                         "limit such as `ulimit -v` set?") from None
    except duckdb.Error as e:
        raise StoreError(f"{where}: cannot write the wsperf tables ({_first_line(e)}); "
                         "check that the file and its directory are writable") from None
    _check_version(con, where)


def _check_owner(con: duckdb.DuckDBPyConnection, where: object) -> dict | None:
    """Refuse a database that is not an empty one or a wsperf store of this layout: one
    of another program (tables, views, sequences or macros, in any schema, and no
    wsperf_meta) or a wsperf store of another layout. Reads only. The catalog of a store
    of this layout (collectors/catalog.py); None for an empty database."""
    objects = con.execute("""
        SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE database_name = current_database()
        UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views()
            WHERE database_name = current_database() AND NOT internal
        UNION ALL SELECT schema_name || '.' || sequence_name FROM duckdb_sequences()
            WHERE database_name = current_database()
        UNION ALL SELECT schema_name || '.' || function_name FROM duckdb_functions()
            WHERE database_name = current_database() AND NOT internal
        ORDER BY 1""").fetchall()
    names = [r[0] for r in objects]
    if not names:
        return None  # an empty database: a new store
    if "main.wsperf_meta" not in names:
        raise StoreError(f"{where}: is a DuckDB database but not a wsperf store (it holds "
                         f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''}); give a new file name")
    _check_version(con, where)
    return check_catalog(con, where)


def _check_version(con: duckdb.DuckDBPyConnection, where: object) -> None:
    try:
        rows = con.execute("SELECT value FROM wsperf_meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:
        raise StoreError(f"{where}: is a DuckDB database but not a wsperf store; "
                         "create one by loading a report into a new file") from None
    except duckdb.Error as e:  # a cut or damaged file: DuckDB fails reading its blocks
        raise StoreError(f"{where}: cannot be read as a store ({_first_line(e)}); the file is damaged or "
                         "truncated: restore it, or load the reports into a new store file") from None
    if not rows or rows[0][0] != SCHEMA_VERSION:
        raise StoreError(f"{where}: was written with store layout {rows[0][0] if rows else 'unknown'}, this wsperf "
                         f"uses layout {SCHEMA_VERSION}; load the reports into a new store file")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run_spread(con: duckdb.DuckDBPyConnection, items: list, run: Callable[[duckdb.DuckDBPyConnection, list], None],
               workers: int = 2) -> None:
    """run(connection, share) for `workers` shares of `items` at once (item k in share
    k % workers): the first on `con` in this thread, each other on a cursor of `con` in a
    thread of its own (DuckDB plans and runs a query without Python's lock); all on `con`,
    in order, while a transaction is open on it (a cursor is another connection, which
    cannot see the rows it has not committed). The first exception raised in any is raised."""
    shares = [items[k::workers] for k in range(workers)] if workers > 1 and not in_transaction(con) else [items]
    errors: list[BaseException] = []
    threads = []
    for share in (s for s in shares[1:] if s):
        cursor = con.cursor()

        def work(c: duckdb.DuckDBPyConnection = cursor, part: list = share) -> None:
            try:
                run(c, part)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                errors.append(e)
            finally:
                c.close()

        threads.append(threading.Thread(target=work, name="wsperf-spread", daemon=True))
        threads[-1].start()
    try:
        run(con, shares[0])
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def each(con: duckdb.DuckDBPyConnection, tasks: list[Callable[[duckdb.DuckDBPyConnection], None]]) -> None:
    """For run_spread: every task of a share, in order, on its connection."""
    for task in tasks:
        task(con)


def in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a transaction is open on `con`: then two statements run in one transaction
    (outside, each in its own). Asking DuckDB to begin one would abort the open one."""
    (first,), (second,) = (con.execute("SELECT txid_current()").fetchall()[0] for _ in range(2))
    return first == second
