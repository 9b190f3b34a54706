"""The readers' hand-over (collectors/staging.py): what the standard library writes, DuckDB's
CSV reader gives back exactly, value for value, and what a column cannot hold is refused.
(tests/test_loader.py holds the tables of every fixture report equal to ncu_report.)"""

from __future__ import annotations

import math
import struct

import duckdb
import pytest

from wsperf.collectors import staging

TEXTS = ["", "plain", 'say "hi"', "a,b", "two\nlines", "cr\r\nlf", "nul\x00inside", "tab\tand ;", "  spaced  ",
         "null", "NULL", "\\N", "ünïcødé ∑ 🚀", "'single'", '"', '""', ",", "\n", "x" * 100_000]
DOUBLES = [0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, 1e-310, 5e-324, 1.7976931348623157e308, -2.2250738585072014e-308,
           math.inf, -math.inf, math.nan, -math.nan, 123456789012345.67, 1e22, 2.0 ** 53 + 1]
UINTS = [0, 1, 2 ** 31 - 1, 2 ** 32, 2 ** 53 + 1, 2 ** 63, 2 ** 64 - 1]


def _read(tmp_path, table: str, readers: int = 1) -> list[tuple]:
    return duckdb.connect().execute(staging.read_sql(tmp_path, table, readers)).fetchall()


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_every_value_comes_back_exactly(tmp_path):
    n = max(len(TEXTS), len(DOUBLES), len(UINTS))
    cols = {
        "launch_idx": [i % 3 for i in range(n)],
        "key": [None if i % 4 == 0 else -i for i in range(n)],
        "instance": [None] * n,
        "correlation_id": [UINTS[i % len(UINTS)] for i in range(n)],
        "correlation_name": [None if i % 5 == 0 else TEXTS[i % len(TEXTS)] for i in range(n)],
        "v_float": [DOUBLES[i % len(DOUBLES)] for i in range(n)],
        "v_int": [None] * n,
        "value_string": [TEXTS[i % len(TEXTS)] for i in range(n)],
    }
    staging.write(staging.stage_file(tmp_path, "metrics", 0), "metrics", cols)
    rows = _read(tmp_path, "metrics")
    assert len(rows) == n
    for i, row in enumerate(rows):
        expect = [cols[c][i] for c, _ in staging.STAGES["metrics"]]
        got = list(row)
        # doubles by their bits: -0.0, NaN and the NaN's sign bit included
        assert _bits(got[5]) == _bits(expect[5]), (i, got[5], expect[5])
        got[5] = expect[5] = None
        assert got == expect, i  # NULL is not "", "NULL" is text, every character survives


def test_an_empty_table_and_several_readers(tmp_path):
    staging.write(staging.stage_file(tmp_path, "stalls", 0), "stalls", {c: [] for c, _ in staging.STAGES["stalls"]})
    assert _read(tmp_path, "stalls") == []
    staging.write(staging.stage_file(tmp_path, "stalls", 1), "stalls",
                  {"launch_idx": [4], "pc": [2 ** 64 - 16], "reason": ["long_scoreboard"], "samples": [7],
                   "samples_not_issued": [None]})
    assert _read(tmp_path, "stalls", readers=2) == [(4, 2 ** 64 - 16, "long_scoreboard", 7, None)]


@pytest.mark.parametrize("column, value", [
    ("samples", 1.5),  # a fraction where a count belongs: refused, not truncated
    ("samples", "7"),  # text where a number belongs
    ("reason", 3),  # a number where text belongs
    ("reason", "bad \udcff surrogate"),  # not Unicode (what a damaged name decodes to)
])
def test_a_value_its_column_cannot_hold_is_refused(tmp_path, column, value):
    cols = {"launch_idx": [0], "pc": [16], "reason": ["wait"], "samples": [1], "samples_not_issued": [0]}
    cols[column] = [value]
    path = staging.stage_file(tmp_path, "stalls", 0)
    with pytest.raises(staging.StagingError, match="stalls"):
        staging.write(path, "stalls", cols)
    assert not path.exists()  # nothing half-written for the load to read


def test_integers_where_doubles_belong_are_doubles(tmp_path):
    cols = {c: [None] for c, _ in staging.STAGES["launches"]}
    cols.update(launch_idx=[0], duration_ns=[1500], grid_x=[2 ** 53 + 1])
    staging.write(staging.stage_file(tmp_path, "launches", 0), "launches", cols)
    con = duckdb.connect()
    (row,) = con.execute(f"SELECT duration_ns, grid_x, kernel_mangled FROM ({staging.read_sql(tmp_path, 'launches', 1)})").fetchall()
    assert row == (1500.0, float(2 ** 53 + 1), None)


def test_a_row_longer_than_duckdbs_default_line_is_read_with_a_limit_just_above_it(tmp_path):
    # A 3 MB text value: over DuckDB's default 2 MiB line. The limit comes from what the
    # writer saw, not one huge limit for every load (DuckDB 1.4 reserves 16x it as it
    # reads: a 1 GiB limit failed every load under `ulimit -v` 2 GiB).
    cols = {"launch_idx": [0, 0], "opcode": ["X" * 3_000_000, "IMAD"], "executed": [1, 2],
            "thread_executed": [None, 64], "source": ["sass", "sass"]}
    longest = staging.write(staging.stage_file(tmp_path, "opcodes", 0), "opcodes", cols)
    assert 3_000_000 < longest <= 4 * 3_000_100
    sql = staging.read_sql(tmp_path, "opcodes", 1, longest=longest)
    assert f"max_line_size = {longest + 1}" in sql
    assert duckdb.connect().execute(sql).fetchall() == [(0, "X" * 3_000_000, 1, None, "sass"), (0, "IMAD", 2, 64, "sass")]
    with pytest.raises(duckdb.Error):
        duckdb.connect().execute(staging.read_sql(tmp_path, "opcodes", 1)).fetchall()
    assert f"max_line_size = {staging.MIN_LINE_BYTES}" in staging.read_sql(tmp_path, "stalls", 1, longest=100)
