"""The wsperf store: one DuckDB database (in memory or a file) with the tables of
`queries/schema.sql`.

`open_store` is the only way in: it opens or creates the database, applies the schema
(idempotent) and checks that a file it did not just create is a wsperf store of the
same layout, so a wrong `--db` fails with one clear StoreError instead of a confusing
query error later. `transaction` is how loaders write: all or nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from wsperf.collectors.errors import StoreError
from wsperf.queries import schema_sql

# Layout of the tables in schema.sql; bump when a column changes meaning or name.
SCHEMA_VERSION = "2"

# The tables a report fills, in the order the loader writes them.
TABLES = ("reports", "launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules")


def open_store(path: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the store at `path` (a DuckDB file, created if absent), or to a
    fresh in-memory store when `path` is None. `read_only` opens an existing store for
    queries only (no schema changes, other readers allowed)."""
    if path is None:
        if read_only:
            raise StoreError("an in-memory store cannot be opened read-only: give the path of a store file")
        con = duckdb.connect(":memory:")
        _apply_schema(con, "the in-memory store")
        return con

    p = Path(path)
    if p.is_dir():
        raise StoreError(f"{p}: is a directory, not a store file; give a file path such as {p / 'wsperf.duckdb'}")
    if read_only and not p.exists():
        raise StoreError(f"{p}: no such store; create it by loading a report into it first")
    if not p.parent.is_dir():
        raise StoreError(f"{p}: directory {p.parent} does not exist; create it first or pick another path")
    try:
        con = duckdb.connect(str(p), read_only=read_only)
    except duckdb.Error as e:
        raise StoreError(f"{p}: cannot open as a DuckDB store ({_first_line(e)}); "
                         "give a store written by wsperf, or a new file name") from None
    try:
        if read_only:
            _check_version(con, p)
        else:
            _apply_schema(con, p)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT around the block; ROLLBACK on any exception, which propagates.
    A DuckDB failure becomes a StoreError naming `what` was being written."""
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.Error as e:
        raise StoreError(f"cannot start writing {what}: {_first_line(e)}") from None
    try:
        yield con
        con.execute("COMMIT")
    except BaseException as e:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # the transaction is already gone (failed COMMIT); nothing was written
        if isinstance(e, duckdb.Error):
            raise StoreError(f"writing {what} failed, nothing was stored: {_first_line(e)}") from e
        raise


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows per store table, e.g. to show what a load added."""
    sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in TABLES)
    return dict(con.execute(sql).fetchall())


def _apply_schema(con: duckdb.DuckDBPyConnection, where: object) -> None:
    # A DuckDB file that already has tables but no wsperf_meta belongs to someone else:
    # adding our tables to it would be a surprise, so refuse.
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        if tables and "wsperf_meta" not in tables:
            raise StoreError(f"{where}: is a DuckDB database but not a wsperf store (it has tables "
                             f"{', '.join(sorted(tables)[:5])}); give a new file name")
        con.execute(schema_sql())
        con.execute("INSERT OR IGNORE INTO wsperf_meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
    except duckdb.Error as e:
        raise StoreError(f"{where}: cannot write the wsperf tables ({_first_line(e)}); "
                         "check that the file and its directory are writable") from None
    _check_version(con, where)


def _check_version(con: duckdb.DuckDBPyConnection, where: object) -> None:
    try:
        rows = con.execute("SELECT value FROM wsperf_meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:
        raise StoreError(f"{where}: is a DuckDB database but not a wsperf store; "
                         "create one by loading a report into a new file") from None
    if not rows or rows[0][0] != SCHEMA_VERSION:
        raise StoreError(f"{where}: was written with store layout {rows[0][0] if rows else 'unknown'}, this wsperf "
                         f"uses layout {SCHEMA_VERSION}; load the reports into a new store file")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
