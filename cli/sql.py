"""`wsperf sql`: one query over a store or freshly loaded reports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.analyze import prepare
from wsperf.analyses.sql import run_sql
from wsperf.cli import render
from wsperf.cli.common import TableFormat, error_boundary, load_with_progress, out
from wsperf.collectors.errors import InputError
from wsperf.collectors.store import open_store


def sql(
    query: str = typer.Argument(..., help="A DuckDB SQL query over the wsperf tables (see queries/schema.sql)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file written by `wsperf analyze --db`."),
    report: list[Path] = typer.Option([], "--report", "-r", help="Load this report first (repeatable); "
                                      "without --db it is queried in memory."),
    fmt: TableFormat = typer.Option(TableFormat.table, "--format", "-f", help="table, json or csv."),
) -> None:
    """Run one SQL query over loaded reports and print the result."""
    with error_boundary():
        if db is None and not report:
            raise InputError("nothing to query: give --db FILE (from `wsperf analyze --db FILE`) or --report REPORT")
        if db is not None and not report and not db.exists():
            raise InputError(f"{db}: no such database; create it with `wsperf analyze REPORT --db {db}`")
        con = open_store(db, read_only=db is not None and not report)
        load_with_progress(con, report)
        if report:
            prepare(con)  # role tables for what was just loaded
        result = run_sql(con, query)
        if fmt is TableFormat.json:
            sys.stdout.write(result.to_json() + "\n")
        elif fmt is TableFormat.csv:
            sys.stdout.write(result.to_csv())
        else:
            render.records_table(result.columns, result.rows, out)
