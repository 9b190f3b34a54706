"""Run a user's SQL over the store and hand back a typed result."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

import duckdb

from wsperf.collectors.errors import InputError, QueryError


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of one query, renderable as JSON or CSV."""

    columns: list[str]
    rows: list[tuple]

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def to_json(self) -> str:
        return json.dumps(self.records(), default=_json_default, allow_nan=False, indent=2)

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        w.writerows(self.rows)
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


def check_kernel_regex(kernel: str | None) -> None:
    """Raise InputError when a `--kernel` filter is not a regular expression DuckDB's
    regexp_matches (RE2) accepts: checked before anything loads, one Error line."""
    if kernel is None:
        return
    with duckdb.connect() as con:
        try:
            con.execute("SELECT regexp_matches('', $kernel)", {"kernel": kernel}).fetchall()
        except duckdb.Error as e:
            raise InputError(f"--kernel {kernel!r}: not a regular expression in RE2 syntax "
                             f"({str(e).strip().splitlines()[0]})") from None
