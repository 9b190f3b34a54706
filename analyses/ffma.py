"""Whether a kernel's FP32 FFMA work has the shape of a matrix product, read from its SASS.

A matrix product multiplies loaded values with each other, and reuses each loaded value
across outputs: `acc[i][j] += a[i] * b[j]` feeds a[i] into every accumulator of its row.
A reduction, a dot product or a streaming FMA chain does not: `acc += x * x`,
`acc += a[k] * x[k]` and `y = a * x + b` each put a loaded value into one accumulator, and
`x * (x * 0 + 1) + acc` multiplies it with a value computed from it. The instruction mix
(FFMA share, shared-memory reads per store) cannot tell these apart: a TMA-fed row sum has
a thousand shared-memory reads per store and FFMA most of its instructions
(fixtures/evidence/cute_ring, fixtures/reports/ffma_rowsq), and an outer-product GEMM that
reads its operands straight from global memory has none (fixtures/reports/ffma_outer).

`matrix_ffma` walks each launch's SASS once in address order (straight-line: a register's
last writer before the FFMA; loops are read as their body), marks the registers a load
(LDS/LDG/LD/LDL/LDC and their vector widths) wrote, and counts an FFMA as matrix work when
both multiplicands are loaded registers and at least one of them feeds FFMAs of two or more
accumulators. Weighted by each FFMA's executed count, that share is what
missing-specialized-instructions reads (`_wsperf_ffma`, filled by analyses.hypotheses).
It is an inference about the code, so the verdict it supports stays an assumption.
"""

from __future__ import annotations

import re
from collections import defaultdict

import duckdb

# A load and how many 32-bit registers its vector width writes.
_LOADS = ("LDS", "LDG", "LD", "LDL", "LDC")  # (LDSM feeds MMA fragments, not FFMA)
_WIDTH = {"64": 2, "128": 4}
_REG = re.compile(r"-?\|?(R\d+)")
# Writes no register as its first operand.
_NO_DEST = ("ST", "STS", "STG", "STL", "RED", "REDG", "ATOMS", "BRA", "BRX", "EXIT", "BAR", "SYNCS", "UBLKCP",
            "UTMALDG", "UTMASTG", "WARPSYNC", "NOP", "CALL", "RET", "MEMBAR", "FENCE", "DEPBAR", "ERRBAR", "CCTL",
            "BSYNC", "BSSY", "YIELD", "ELECT")


def _parse(text: str) -> tuple[str, list[str]]:
    """(mnemonic with its modifiers, operands) of one SASS instruction, guard dropped."""
    body = text.split(";", 1)[0].strip()
    if body.startswith("@"):
        body = body.split(None, 1)[1] if " " in body else ""
    parts = body.split(None, 1)
    return (parts[0] if parts else ""), ([o.strip() for o in parts[1].split(",")] if len(parts) > 1 else [])


def _reg(operand: str) -> str | None:
    m = _REG.fullmatch(operand.split(".")[0].replace("|", "")) if operand else None
    return m.group(1) if m else None


def ffma_shape(rows: list[tuple[str, str, int | None]]) -> tuple[int, int]:
    """(FFMA executed, of them matrix work) over one launch's SASS rows (opcode, text,
    executed), in address order. See the module docstring."""
    loaded: dict[str, tuple[int, str]] = {}  # register -> the load that wrote it (index, register)
    feeds: dict[tuple[int, str], set[str]] = defaultdict(set)  # a loaded value -> accumulators it multiplies into
    both: list[tuple[int, tuple[int, str], tuple[int, str]]] = []  # FFMAs of two loaded values
    total = 0
    for k, (opcode, text, executed) in enumerate(rows):
        mnemonic, ops = _parse(text or "")
        if opcode == "FFMA" and len(ops) >= 4:
            total += executed or 0
            dest, a, b = _reg(ops[0]), loaded.get(_reg(ops[1]) or ""), loaded.get(_reg(ops[2]) or "")
            if a is not None and b is not None and dest is not None:
                feeds[a].add(dest)
                feeds[b].add(dest)
                both.append((executed or 0, a, b))
        dest = _reg(ops[0]) if ops and opcode not in _NO_DEST else None
        if dest is None:
            continue
        width = 4 if ".128" in mnemonic else 2 if (".64" in mnemonic or ".WIDE" in mnemonic) else 1
        for r in (f"R{n}" for n in range(int(dest[1:]), int(dest[1:]) + width)):
            if opcode in _LOADS:
                loaded[r] = (k, r)
            else:
                loaded.pop(r, None)
    matrix = sum(e for e, a, b in both if len(feeds[a]) >= 2 or len(feeds[b]) >= 2)
    return total, matrix


def matrix_ffma(con: duckdb.DuckDBPyConnection, launch_ids: list[int]) -> list[tuple[int, int, int]]:
    """(launch_id, FFMA executed, of them matrix work) for the launches with executed FFMA;
    launches of one code (the same SASS) are read once."""
    todo = [r[0] for r in con.execute(
        "SELECT DISTINCT launch_id FROM sass WHERE list_contains($ids, launch_id) AND opcode = 'FFMA' "
        "AND inst_executed > 0", {"ids": launch_ids}).fetchall()]
    out, seen = [], {}
    for lid in todo:
        rows = con.execute("SELECT opcode, sass, inst_executed FROM sass WHERE launch_id = ? ORDER BY pc",
                           [lid]).fetchall()
        key = tuple(rows)
        if key not in seen:
            seen[key] = ffma_shape(rows)
        out.append((lid, *seen[key]))
    return out
