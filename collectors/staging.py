"""What a report reader hands the load: the staged tables and their files.

A reader process (collectors/ncu_reader.py) writes each staged table as one Parquet file
per reader, `<table>.<reader>.parquet` in the load's directory, and the load
(collectors/ncu.py) inserts them with DuckDB's own Parquet reader (`source`). Parquet,
and not Arrow IPC, so that the command's process never imports pyarrow and numpy (~0.3 s
of CPU at every start, on the path of a one-report analyze): pyarrow's writer in the
reader, DuckDB's reader here. Parquet keeps what the staged columns hold exactly: the
types (UBIGINT included), NULL apart from the empty string, and every double's bits (NaN
with its sign). The columns and their types are the reader's (`STAGE_SCHEMAS`).

The standard library only: the command imports this before it knows it will read a report.
"""

from __future__ import annotations

from pathlib import Path

# Parts of a launch's work. METRICS: launches, metrics, sass_counts, stalls, opcodes.
# CODE: sass_code (disassembly, source lines) and ncu_rules.
ALL, METRICS, CODE = "all", "metrics", "code"

READER_MAX_RSS = 1 << 30  # ncu_report keeps ~7x each report's size for good; retire a reader beyond this (bytes)

# The staged tables, each one file per reader. launch_idx is the action's position in the
# report; the load turns it into a launch id.
TABLES = ("launches", "metrics", "sass_counts", "sass_code", "stalls", "opcodes", "ncu_rules")


def stage_file(out: Path, table: str, reader: int) -> Path:
    """Where reader number `reader` writes staged table `table`."""
    return out / f"{table}.{reader}.parquet"


def source(out: Path, table: str, readers: int) -> str:
    """A DuckDB table expression for staged table `table` as the `readers` readers wrote
    it into `out` (rows in reader order: ids, not row order, tie them up)."""
    files = ", ".join(_literal(str(stage_file(out, table, i))) for i in range(readers))
    return f"read_parquet([{files}])"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
