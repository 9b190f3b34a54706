"""Run a user's SQL over the store and hand back a typed result.

The policy of `wsperf sql` (docs/bad-input.md): a user's query may read the wsperf
tables and nothing else, and never changes a store it did not create in this call.
- `--db FILE` is opened read-only (DuckDB refuses every write);
- `--report R` is loaded into a new in-memory store, dropped at exit;
- both at once are refused: to query new reports beside the history, record them first
  (`wsperf analyze R --db FILE`);
- before the query runs, DuckDB's external access is switched off and the configuration
  locked (`sandbox`): no file is read or written outside the store (read_text,
  read_csv, COPY ... TO, EXPORT DATABASE), no other database is attached, no extension
  installed or loaded, and the query cannot switch any of it back on.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import duckdb

from wsperf.analyses.roles import build_roles
from wsperf.collectors.catalog import create_every_table, expose_every_table
from wsperf.collectors.errors import InputError, QueryError
from wsperf.collectors.limits import duckdb_config
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

Loader = Callable[[duckdb.DuckDBPyConnection, list], Any]


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of one query, renderable as JSON or CSV."""

    columns: list[str]
    rows: list[tuple]

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def to_json(self) -> str:
        return json.dumps(self.records(), default=_json_default, allow_nan=False, indent=2)

    def to_csv(self, text: Callable[[str], str] = str) -> str:
        """CSV with a header row; `text` is applied to every text cell and column name
        (the CLI passes one that makes untrusted text inert)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([text(c) for c in self.columns])
        w.writerows([text(v) if isinstance(v, str) else v for v in r] for r in self.rows)
        return buf.getvalue()


def _json_default(v: object) -> object:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def _finite(v: object) -> object:
    # JSON has no NaN/Infinity; a metric that ncu could not compute reads as null.
    return None if isinstance(v, float) and not math.isfinite(v) else v


def run_sql(con: duckdb.DuckDBPyConnection, query: str) -> QueryResult:
    try:
        cur = con.execute(query)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise QueryError(f"query failed: {first}") from None
    if cur.description is None:  # a statement with no result set (CREATE VIEW ...)
        return QueryResult([], [])
    columns = [d[0] for d in cur.description]
    rows = [tuple(_finite(v) for v in r) for r in cur.fetchall()]
    return QueryResult(columns, rows)


def select_only(con: duckdb.DuckDBPyConnection, query: str) -> QueryResult:
    """`run_sql` for a query that may only read: every statement must be a SELECT (WITH ...
    SELECT included); anything else (DROP, COPY, ATTACH, SET, CREATE) is a QueryError before
    it runs. The Python API's `Session.sql` policy, beside the sandboxed connection."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise QueryError(f"query failed: {first}") from None
    bad = [st.type.name for st in statements if st.type is not duckdb.StatementType.SELECT]
    if bad:
        raise QueryError(f"only SELECT queries run here ({', '.join(dict.fromkeys(bad))} refused): a session's "
                         "store is read, never changed, from Python")
    return run_sql(con, query)


def sandbox(con: duckdb.DuckDBPyConnection, writable: os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """Switch DuckDB's access to anything outside the open store off for good on `con`
    (see the module docstring), but for the directory `writable` when one is given (the
    only place a COPY ... TO may then write); returns `con`."""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    if writable is not None:
        con.execute("SET allowed_directories = " + _sql_list([os.fspath(writable)]))
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _sql_list(texts: list[str]) -> str:
    """A DuckDB list literal of the strings (SET takes no parameters)."""
    return "[" + ", ".join("'" + t.replace("'", "''") + "'" for t in texts) + "]"


def query_store(db: str | os.PathLike[str] | None, reports: Sequence[str | os.PathLike[str]] = (),
                load: Loader = load_reports) -> duckdb.DuckDBPyConnection:
    """A sandboxed connection for a user's query: the store `db` read-only, or the
    `reports` loaded (with `load(con, reports)`) into a new in-memory store."""
    if db is None and not reports:
        raise InputError("nothing to query: give --db FILE (from `wsperf analyze --db FILE`) or --report REPORT")
    if db is not None and reports:
        raise InputError("give --db or --report, not both: `wsperf sql` never writes a store it did not create; "
                         f"record the reports first (`wsperf analyze REPORT --db {db}`), then query --db")
    if db is not None:
        con = open_store(db, read_only=True)
        try:
            expose_every_table(con)  # every documented table and view, empty where the store lacks it
        except BaseException:
            con.close()
            raise
        return sandbox(con)
    con = open_store(None)
    try:
        load(con, list(reports))
        build_roles(con)  # the role tables for what was just loaded
        create_every_table(con)  # every documented table and view, empty where nothing filled it
    except BaseException:
        con.close()
        raise
    return sandbox(con)


def matching(names: Iterable[str], kernel: str | None) -> list[str]:
    """The `names` that the `--kernel` expression matches (RE2, as every other --kernel
    filter: linear time, so no expression can hang wsperf), in order."""
    names = list(names)
    if kernel is None:
        return names
    check_kernel_regex(kernel)
    with duckdb.connect(config=duckdb_config()) as con:
        ((found,),) = con.execute("SELECT list_filter($n::VARCHAR[], lambda x: regexp_matches(x, $k))",
                                  {"n": names, "k": kernel}).fetchall()
    return list(found or [])


def check_kernel_regex(kernel: str | None) -> None:
    """Raise InputError when a `--kernel` filter is not a regular expression DuckDB's
    regexp_matches (RE2) accepts: checked before anything loads, one Error line."""
    if kernel is None:
        return
    with duckdb.connect(config=duckdb_config()) as con:
        try:
            con.execute("SELECT regexp_matches('', $kernel)", {"kernel": kernel}).fetchall()
        except duckdb.Error as e:
            raise InputError(f"--kernel {kernel!r}: not a regular expression in RE2 syntax "
                             f"({str(e).strip().splitlines()[0]})") from None
