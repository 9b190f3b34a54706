"""Packaged SQL: the store schema and one file per hypothesis.

Files are package data, read through importlib.resources so they are found the same way
from a checkout, an editable install or a wheel. `schema.sql` is the store layout; every
other `<name>.sql` is a query (hypothesis files start with a YAML header in `/* */`).
"""

from __future__ import annotations

from importlib import resources

from wsperf.collectors.errors import QueryError
from wsperf.collectors.metrics import figures_sql

SCHEMA = "schema.sql"


def schema_sql() -> str:
    """The DDL of the store (idempotent: CREATE ... IF NOT EXISTS), and the figure views
    generated from the per-architecture metric mapping (wsperf.collectors.metrics)."""
    return (resources.files(__name__) / SCHEMA).read_text(encoding="utf-8") + figures_sql()


def query_names() -> list[str]:
    """Names of the packaged queries (file names without `.sql`), schema excluded."""
    return sorted(
        f.name[: -len(".sql")]
        for f in resources.files(__name__).iterdir()
        if f.name.endswith(".sql") and f.name != SCHEMA
    )


def read_query(name: str) -> str:
    """The text of packaged query `name` ('launches' or 'launches.sql')."""
    stem = name[: -len(".sql")] if name.endswith(".sql") else name
    # A name, never a path: nothing outside this package is readable through here.
    if not stem or "/" in stem or "\\" in stem or stem.startswith(".") or stem + ".sql" == SCHEMA:
        raise QueryError(f"{name!r} is not a query name; known queries: {', '.join(query_names()) or 'none'}")
    f = resources.files(__name__) / f"{stem}.sql"
    if not f.is_file():
        raise QueryError(f"no packaged query named {stem!r}; known queries: {', '.join(query_names()) or 'none'}")
    return f.read_text(encoding="utf-8")
