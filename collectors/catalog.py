"""What a store file may hold: the objects wsperf itself defines, nothing else.

A store is a user's file, and a DuckDB file carries SQL of its own: a view runs its
query when a table of that name is read, a macro shadows a function wsperf calls (a
`median` macro that reads `read_text('/proc/self/environ')`), a column DEFAULT or CHECK
runs on every insert, and a column of another type turns a query into a traceback. So
every command that opens an existing store file (`open_store`) first compares its
catalog with the one wsperf's own DDL makes in an empty in-memory database:

- every table must be one wsperf defines, a base table whose DDL (columns, types,
  defaults, constraints: DuckDB's own `sql` text of it) is the same;
- every view one wsperf defines, with the same query;
- no schema but `main`, and no macro, function, type, sequence or index at all (wsperf
  defines none).

Absent tables are fine: the nsys, sanitizer, timeline and worksheet tables are created when
first needed. Anything else is a StoreError naming the objects, before any query runs,
and nothing is written. Reads only; the expected catalog is built once per process.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import duckdb

from wsperf.collectors.errors import StoreError
from wsperf.collectors.limits import duckdb_config

# Every DDL file wsperf runs on a store besides schema.sql (queries/): created on first use.
LAZY_SCHEMAS = ("nsys_schema.sql", "sanitizer_schema.sql", "timeline_schema.sql", "worksheet_schema.sql")

# (kind, query): each query lists (name, definition) of the current database's objects.
_OBJECTS = (
    # tables and views in the order they were made: a view comes after what it reads
    ("table", "SELECT table_name, sql FROM duckdb_tables() WHERE database_name = current_database() "
              "AND schema_name = 'main' ORDER BY table_oid"),
    ("view", "SELECT view_name, sql FROM duckdb_views() WHERE database_name = current_database() "
             "AND schema_name = 'main' AND NOT internal ORDER BY view_oid"),
    ("schema", "SELECT schema_name, sql FROM duckdb_schemas() WHERE database_name = current_database() "
               "AND schema_name <> 'main'"),
    ("object outside main", "SELECT schema_name || '.' || table_name, sql FROM duckdb_tables() "
                            "WHERE database_name = current_database() AND schema_name <> 'main' "
                            "UNION ALL SELECT schema_name || '.' || view_name, sql FROM duckdb_views() "
                            "WHERE database_name = current_database() AND schema_name <> 'main' AND NOT internal"),
    ("macro or function", "SELECT function_name, macro_definition FROM duckdb_functions() "
                          "WHERE database_name = current_database() AND NOT internal"),
    ("type", "SELECT type_name, logical_type FROM duckdb_types() WHERE database_name = current_database() "
             "AND NOT internal"),
    ("sequence", "SELECT sequence_name, sql FROM duckdb_sequences() WHERE database_name = current_database()"),
    ("index", "SELECT index_name, sql FROM duckdb_indexes() WHERE database_name = current_database()"),
)


def catalog(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str | None]]:
    """{kind: {name: definition}} of what the connection's current database holds."""
    return {kind: dict(con.execute(sql).fetchall()) for kind, sql in _OBJECTS}


@lru_cache(maxsize=1)
def _catalogs() -> tuple[dict[str, dict[str, str | None]], dict[str, dict[str, str | None]]]:
    """(what schema.sql alone makes, what all of wsperf's DDL makes), from one empty
    in-memory database."""
    from wsperf.queries import schema_sql  # queries imports collectors.metrics: not at import time

    files = resources.files("wsperf.queries")
    with duckdb.connect(":memory:", config=duckdb_config()) as con:
        con.execute(schema_sql())
        base = catalog(con)
        for name in LAZY_SCHEMAS:
            con.execute((files / name).read_text(encoding="utf-8"))
        return base, catalog(con)


def create_every_table(con: duckdb.DuckDBPyConnection) -> None:
    """Create, empty, every table and view created on first use (LAZY_SCHEMAS) that is not
    there yet: a store a user queries holds every documented object (a query of `pm_samples`
    on a report no timeline was loaded from finds it empty, not missing). Each DDL file is
    idempotent; a table already holding rows is left as it is."""
    files = resources.files("wsperf.queries")
    for name in LAZY_SCHEMAS:
        con.execute((files / name).read_text(encoding="utf-8"))


def expose_every_table(con: duckdb.DuckDBPyConnection) -> None:
    """`create_every_table` for a store opened read-only (`wsperf sql --db`, a Python
    session): every documented table and view the file lacks is made, empty, as a TEMP
    object of this connection, so a query finds it; the file is not written, and what it
    holds is read as it is (nothing stored is shadowed: only absent names are made)."""
    found = catalog(con)
    expected = expected_catalog()
    for kind in ("table", "view"):  # tables first: a view reads them
        for name, ddl in expected[kind].items():
            if name not in found[kind] and ddl is not None:
                con.execute(ddl.replace(f"CREATE {kind.upper()} ", f"CREATE TEMP {kind.upper()} ", 1))


def expected_catalog() -> dict[str, dict[str, str | None]]:
    """The catalog wsperf's own DDL makes: schema.sql with its figure views, and every
    table and view created on first use."""
    return _catalogs()[1]


def schema_complete(found: dict[str, dict[str, str | None]]) -> bool:
    """Whether a store's catalog (`check_catalog`'s: nothing else is there) already holds
    every table and view of schema.sql as wsperf defines them, so that opening it needs to
    write nothing: a command that only reads, or fails before it writes, leaves the file as
    it was."""
    want = _catalogs()[0]
    return all(found[kind].get(name, object()) == d for kind in ("table", "view") for name, d in want[kind].items())


def foreign_objects(found: dict[str, dict[str, str | None]]) -> list[str]:
    """What a store's catalog holds that wsperf did not define, one phrase each ([] when
    all is ours)."""
    expected = expected_catalog()
    other = {"table": expected["view"], "view": expected["table"]}  # a view where wsperf has a table, ...
    odd: list[str] = []
    for kind, objects in found.items():
        mine = expected.get(kind, {})
        for name, definition in sorted(objects.items()):
            if name in other.get(kind, {}):
                odd.append(f"{name!r} is a {kind} where wsperf defines a {'view' if kind == 'table' else 'table'}")
            elif name not in mine:
                odd.append(f"{kind} {name!r}, which wsperf does not define")
            elif definition != mine[name]:
                what = "columns, types or constraints" if kind == "table" else "definition"
                odd.append(f"{kind} {name!r} with other {what} than wsperf's")
    return odd


def check_catalog(con: duckdb.DuckDBPyConnection, where: object) -> dict[str, dict[str, str | None]]:
    """The store's catalog; StoreError when it holds anything wsperf did not define (see the
    module)."""
    try:
        found = catalog(con)
    except duckdb.Error as e:
        text = str(e).strip()
        raise StoreError(f"{where}: cannot be read as a store ({text.splitlines()[0] if text else type(e).__name__}); "
                         "the file is damaged or truncated: restore it, or load the reports into a new store "
                         "file") from None
    odd = foreign_objects(found)
    if odd:
        shown = "; ".join(odd[:4]) + (f"; and {len(odd) - 4} more" if len(odd) > 4 else "")
        raise StoreError(f"{where}: holds SQL objects wsperf did not write ({shown}); a store runs no SQL of "
                         "its own: load the reports into a new store file")
    return found
