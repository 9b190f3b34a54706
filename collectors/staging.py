"""What a report reader hands the load: the staged tables, their columns, and the files.

A reader process (collectors/ncu_reader.py) writes each staged table as one CSV file per
reader, `<table>.<reader>.csv` in the load's directory (`write`), and the load
(collectors/ncu.py) inserts them with DuckDB's own CSV reader (`read_sql`).

Why CSV written by the standard library. The reader process then loads no native library
but ncu_report's: with pyarrow in the process, Nsight Compute 2025.3's ncu_report crashes
in its first IMetric.unit() when pyarrow loaded first, and pyarrow's Parquet writer
crashes (SIGSEGV, ParquetWriter.__init__) with that ncu_report loaded; and the command's
process never imports pyarrow and numpy either (~0.45 s of CPU at every start, on the
path of a one-report analyze). Every value survives the trip exactly: text is always
quoted (quotes doubled; commas, line breaks and NUL inside quotes), so that NULL, an
unquoted empty field, is not the empty string; doubles are written in their shortest
exact form (`repr`; NaN as `nan` or `-nan`, for some of ncu's NaNs carry the sign bit;
infinities as `inf`); integers up to 2**64 - 1 in full
(tests/test_staging.py; tests/test_loader.py holds every table of every fixture report
equal to ncu_report).

The standard library only: the command imports this before it knows it will read a report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from math import copysign
from operator import index
from pathlib import Path

# Parts of a launch's work. METRICS: launches, metrics, sass_counts, stalls, opcodes.
# CODE: sass_code (disassembly, source lines) and ncu_rules.
ALL, METRICS, CODE = "all", "metrics", "code"

READER_MAX_RSS = 1 << 30  # ncu_report keeps ~7x each report's size for good; retire a reader beyond this (bytes)

# Launch columns read from the launch's own metrics (aggregate values).
LAUNCH_METRICS = {
    "device_id": "launch__device_id",
    "stream_id": "launch__stream_id",
    "grid_x": "launch__grid_dim_x",
    "grid_y": "launch__grid_dim_y",
    "grid_z": "launch__grid_dim_z",
    "block_x": "launch__block_dim_x",
    "block_y": "launch__block_dim_y",
    "block_z": "launch__block_dim_z",
    "cluster_x": "launch__cluster_dim_x",
    "cluster_y": "launch__cluster_dim_y",
    "cluster_z": "launch__cluster_dim_z",
    "cluster_size": "launch__cluster_size",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "threads": "launch__thread_count",
    "registers_per_thread": "launch__registers_per_thread",
    "static_smem_bytes": "launch__shared_mem_per_block_static",
    "dynamic_smem_bytes": "launch__shared_mem_per_block_dynamic",
    "smem_config_bytes": "launch__shared_mem_config_size",
    "sm_count": "device__attribute_multiprocessor_count",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "occupancy_limit_blocks": "launch__occupancy_limit_blocks",
    "occupancy_limit_registers": "launch__occupancy_limit_registers",
    "occupancy_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "occupancy_limit_warps": "launch__occupancy_limit_warps",
    "occupancy_limit_barriers": "launch__occupancy_limit_barriers",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "elapsed_cycles": "gpc__cycles_elapsed.max",
}

# Per-PC (source counter) metrics that become sass columns: column -> metric.
SASS_METRICS = {
    "inst_executed": "inst_executed",
    "thread_inst_executed": "thread_inst_executed",
    "thread_inst_executed_true": "thread_inst_executed_true",
    "pcsamp_samples": "smsp__pcsamp_sample_count",
}

# The staged tables: (column, DuckDB type), in file order. launch_idx is the action's
# position in the report; the load turns it into a launch id. A metric row refers to its
# name, unit and type by `key` into its reader's metric_info (each name once a reader).
STAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "launches": (
        ("launch_idx", "INTEGER"), ("range_idx", "INTEGER"), ("action_idx", "INTEGER"),
        ("kernel_mangled", "VARCHAR"), ("kernel_demangled", "VARCHAR"), ("kernel_function", "VARCHAR"),
        ("workload_type", "VARCHAR"), ("num_metrics", "INTEGER"), ("duration_ns", "DOUBLE"),
        *((col, "DOUBLE") for col in LAUNCH_METRICS),  # DuckDB casts to the column types on insert
    ),
    "metrics": (
        ("launch_idx", "INTEGER"), ("key", "INTEGER"), ("instance", "INTEGER"),
        ("correlation_id", "UBIGINT"), ("correlation_name", "VARCHAR"),
        ("v_float", "DOUBLE"), ("v_int", "UBIGINT"), ("value_string", "VARCHAR"),
    ),
    "metric_info": (("key", "INTEGER"), ("name", "VARCHAR"), ("unit", "VARCHAR"), ("metric_type", "VARCHAR")),
    "sass_counts": (
        ("launch_idx", "INTEGER"), ("pc", "UBIGINT"), ("function_pc", "UBIGINT"), ("func_offset", "BIGINT"),
        *((col, "BIGINT") for col in SASS_METRICS), ("pcsamp_samples_not_issued", "BIGINT"),
    ),
    "sass_code": (
        ("launch_idx", "INTEGER"), ("pc", "UBIGINT"), ("opcode", "VARCHAR"), ("opcode_full", "VARCHAR"),
        ("guard", "VARCHAR"), ("sass", "VARCHAR"), ("source_file", "VARCHAR"), ("source_line", "INTEGER"),
    ),
    "stalls": (
        ("launch_idx", "INTEGER"), ("pc", "UBIGINT"), ("reason", "VARCHAR"),
        ("samples", "BIGINT"), ("samples_not_issued", "BIGINT"),
    ),
    "opcodes": (
        ("launch_idx", "INTEGER"), ("opcode", "VARCHAR"), ("executed", "BIGINT"),
        ("thread_executed", "BIGINT"), ("source", "VARCHAR"),
    ),
    "ncu_rules": (
        ("launch_idx", "INTEGER"), ("rule_idx", "INTEGER"), ("rule_id", "VARCHAR"), ("section_id", "VARCHAR"),
        ("name", "VARCHAR"), ("title", "VARCHAR"), ("message", "VARCHAR"), ("msg_type", "VARCHAR"),
        ("speedup_type", "VARCHAR"), ("estimated_speedup", "DOUBLE"),
    ),
}

# The tables of the launches' METRICS parts: a prefetching reader writes them before it
# reads the code, and the load inserts them while it waits for the rest (collectors/ncu.py).
METRICS_TABLES = tuple(t for t in STAGES if t not in ("sass_code", "ncu_rules"))

# The longest line DuckDB's CSV reader accepts, at least: its default. A file with a
# longer row (a long text value of a report) is read with a limit just above that row
# (`write` returns it). Not one large limit for all: DuckDB 1.4 reserves buffers of 16x
# the limit as it reads, and 1 GiB made every load fail under a 2 GiB `ulimit -v`.
MIN_LINE_BYTES = 1 << 21


class StagingError(ValueError):
    """A value that its column cannot hold (a report that gives text where a number
    belongs, or text that is not Unicode)."""


def _text(v: str) -> str:
    return '"' + v.replace('"', '""') + '"'


def _integer(v: int) -> str:
    return str(index(v))  # a float or text is refused, not truncated or passed on


def _double(v: float) -> str:
    if type(v) is not float:
        return repr(float(index(v)))
    if v != v and copysign(1.0, v) < 0:  # repr drops a NaN's sign; DuckDB reads it back from "-nan"
        return "-nan"
    return repr(v)


_FORMAT: dict[str, Callable[[object], str]] = {
    "VARCHAR": _text, "INTEGER": _integer, "BIGINT": _integer, "UBIGINT": _integer, "DOUBLE": _double,  # type: ignore[dict-item]
}

# A column of plain ints (or plain floats), each maybe None, is formatted in bulk: str (repr)
# of each value by `map`, joined with a character no number's text holds, None's text
# blanked, split again. The same text as _integer and _double give value by value, ~3x
# faster (a report's metrics are millions of values; their CSV took longer than reading
# them). A NaN (whose sign repr drops), a bool, or anything else goes value by value.
_BULK = {"INTEGER": (int, str), "BIGINT": (int, str), "UBIGINT": (int, str), "DOUBLE": (float, repr)}
_SEP = "\x1f"


def _column(kind: str, values: Sequence[object]) -> list[str]:
    bulk = _BULK.get(kind)
    if bulk is not None and set(map(type, values)) <= {bulk[0], type(None)}:
        text = _SEP.join(map(bulk[1], values))
        if "nan" not in text:
            return text.replace("None", "").split(_SEP) if values else []
    fmt = _FORMAT[kind]
    return ["" if v is None else fmt(v) for v in values]


def write(path: Path, table: str, columns: Mapping[str, Sequence[object]]) -> int:
    """Write staged table `table`, given as {column: values} (None is NULL), to `path`;
    the length of its longest row in bytes, at most (what `read_sql` needs to know).
    Raises StagingError for a value its column cannot hold, OSError where the file
    cannot be written."""
    names = [c for c, _ in STAGES[table]]
    out = []
    for col, kind in STAGES[table]:
        try:
            out.append(_column(kind, columns[col]))
        except (TypeError, AttributeError) as e:
            raise StagingError(f"its {table}.{col} holds a value of the wrong type ({e})") from None
    lines = [",".join(names), *map(",".join, zip(*out))] if out and out[0] else [",".join(names)]
    try:
        data = ("\n".join(lines) + "\n").encode("utf-8")
    except UnicodeError as e:
        raise StagingError(f"its {table} data holds text that is not Unicode ({e.reason})") from None
    # Written whole under another name, then renamed: a table written again (a prefetch that
    # failed after its metrics part, read anew) never shows a reader half a file.
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as f:
        f.write(data)
    os.replace(part, path)
    return 4 * max(map(len, lines))  # characters, 4 UTF-8 bytes each at most


def stage_file(out: Path, table: str, reader: int) -> Path:
    """Where reader number `reader` writes staged table `table`."""
    return out / f"{table}.{reader}.csv"


def read_sql(out: Path, table: str, readers: int, *, reader_column: bool = False, longest: int = 0) -> str:
    """A DuckDB query of staged table `table` as the `readers` readers wrote it into `out`,
    in reader order; with `reader_column`, each row's reader number as column `reader`.
    `longest`: the longest row they wrote (what `write` returned), in bytes."""
    max_line = max(MIN_LINE_BYTES, longest + 1)
    columns = "{" + ", ".join(f"{_literal(c)}: {_literal(t)}" for c, t in STAGES[table]) + "}"
    parts = []
    for i in range(readers):
        extra = f", {i} AS reader" if reader_column else ""
        parts.append(f"SELECT *{extra} FROM read_csv({_literal(str(stage_file(out, table, i)))}, header = true, "
                     f"columns = {columns}, auto_detect = false, delim = ',', quote = '\"', escape = '\"', "
                     f"nullstr = '', allow_quoted_nulls = false, max_line_size = {max_line})")
    return " UNION ALL ".join(parts)


def same_read(prefetch: Mapping[str, object], open_msg: Mapping[str, object]) -> bool:
    """Whether the "open" message `open_msg` asks for the read that a reader prefetched
    for the "open" message `prefetch` (collectors/ncu_reader.py, _serve): the same
    snapshot, directory, reader and options; then that reader's staged tables are the
    load's."""
    return all(open_msg.get(k) == v for k, v in prefetch.items())


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
