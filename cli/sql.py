"""`wsperf sql`: one query over a store or freshly loaded reports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.sql import query_store, run_sql
from wsperf.cli import render
from wsperf.cli.common import TableFormat, error_boundary, out
from wsperf.cli.nsys import load_inputs
from wsperf.collectors.errors import InputError


def sql(
    query: str = typer.Argument(..., help="A DuckDB SQL query over the wsperf tables (see queries/schema.sql)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file written by `wsperf analyze --db`."),
    report: list[Path] = typer.Option([], "--report", "-r", help="Load this report (or Nsight Systems export: "
                                      ".sqlite, .sqlite.gz) into a new in-memory store and query it (repeatable); "
                                      "not with --db."),
    fmt: TableFormat = typer.Option(TableFormat.table, "--format", "-f", help="table, json or csv."),
) -> None:
    """Run one SQL query over a store (opened read-only) or reports loaded in memory,
    and print the result. The query reads the wsperf tables only: no other file,
    database or extension (docs/bad-input.md)."""
    with error_boundary():
        if db is not None and not report and not db.exists():
            raise InputError(f"{db}: no such database; create it with `wsperf analyze REPORT --db {db}`")
        # Read-only --db, or --report in a new in-memory store; external access off (analyses/sql.py).
        con = query_store(db, report, load=load_inputs)
        result = run_sql(con, query)
        if fmt is TableFormat.json:
            sys.stdout.write(result.to_json() + "\n")
        elif fmt is TableFormat.csv:
            sys.stdout.write(result.to_csv(text=lambda s: render.plain(s).plain))
        else:
            render.records_table(result.columns, result.rows, out)
