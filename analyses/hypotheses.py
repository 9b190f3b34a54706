"""The hypothesis catalogue and its verdicts.

Each hypothesis is one packaged SQL file (`queries/<id>.sql`) whose leading `/* */`
comment is a YAML header: id, question, evidence, threshold (named defaults, used in the
query as `$name`), measured (the fixture values the thresholds were chosen from),
remedy. The query returns exactly one row per launch with `launch_id`, `status`
(confirmed / rejected / no_data), `summary`, and any further columns: those are the
evidence, shown beside the verdict.

Which launches: `evaluate` fills the temporary table `_wsperf_ids (launch_id)` with the
launches asked about, and every query restricts its scans to them (`launch_id IN (SELECT
launch_id FROM _wsperf_ids)` on `launches` and on each large table it reads). A store
with a year of runs thus costs a query what the new report costs, not what the year
costs (benchmarks/bench_history.py). A table, not a `$param`: the `$params` of a query
are its thresholds (the catalogue test holds them equal).
"""

from __future__ import annotations

import enum
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Iterable, Iterator

import duckdb
import yaml

from wsperf.analyses.ffma import matrix_ffma
from wsperf.collectors.errors import InputError, QueryError
from wsperf.collectors.store import run_spread
from wsperf.queries import query_names, read_query

# libyaml's parser where PyYAML was built with it: the headers of every hypothesis are read
# on each analyze, ~0.06 s in pure Python.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_HEADER = re.compile(r"\A\s*/\*(.*?)\*/", re.S)
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
REQUIRED_KEYS = ("id", "question", "evidence", "threshold", "remedy")

# The temporary table the queries read the requested launch ids from.
IDS_TABLE = "_wsperf_ids"
FFMA_TABLE = "_wsperf_ffma"  # (launch_id, ffma_executed, matrix_ffma_executed): analyses/ffma.py
WORKERS = 2  # connections that run the hypotheses at once (evaluate)

# What a user can ask to be present (`--expect`): each maps to the families that meet it.
EXPECTATIONS = ("tma", "tensor-core", "wgmma", "tcgen05", "setmaxnreg", "warp-specialized")

# A result that is not one kernel launch (launches.workload_type) adds up the work of
# several kernels: its counters, PC samples, SASS and launch statistics mix them, so no
# hypothesis about a kernel applies (measured on fixtures/reports/range_workload and
# graph_workload: four kernels in one result each, which the hypotheses read as one
# kernel with too few CTAs and serialized roles). How each kind is collected, and how
# to collect the kernels one at a time instead:
_AGGREGATES = {
    "range": ("ncu --replay-mode range or app-range", "kernel replay, ncu's default"),
    "graph": ("ncu --graph-profiling graph", "--graph-profiling node, the default"),
    "cmdlist": ("a command list profiled whole", "kernel replay, ncu's default"),
}


def aggregate_reason(workload: str) -> str:
    """Why a `workload` result (not 'kernel') gets no verdict, and what to do instead."""
    how, instead = _AGGREGATES.get(workload, ("not a single kernel launch", "kernel replay, ncu's default"))
    return (f"a {workload} result ({how}) adds up the work of several kernels: no verdict about one kernel; "
            f"profile the kernels one at a time ({instead})")


class Status(str, enum.Enum):
    """A verdict: the evidence confirms or rejects the hypothesis, or is missing."""

    confirmed = "confirmed"
    rejected = "rejected"
    no_data = "no_data"


@dataclass(frozen=True)
class Hypothesis:
    """One catalogue entry: its header and its SQL."""

    id: str
    question: str
    evidence: tuple[str, ...]
    thresholds: dict[str, Any]
    remedy: str
    sql: str
    measured: str = ""
    # The falsifiable experiment a confirmed verdict proposes: the change, and the figure
    # that must move (with the fixtures' before/after), for `wsperf compare` to check.
    experiment: str = ""
    # Tables from an optional source (e.g. `timeline_events`, created when a timeline is
    # loaded): while one is absent the query cannot bind, and the verdict is no_data with
    # `missing` (the header's text: what to collect) as its summary.
    requires: tuple[str, ...] = ()
    missing: str = ""
    # Tables the query reads where present (`optional:` maps each to its DuckDB column list):
    # while one is absent the query reads an empty temporary stand-in, so the verdict rests on
    # the other evidence, and the stand-in's columns stay out of the evidence.
    optional: dict[str, str] = field(default_factory=dict)

    @property
    def params(self) -> set[str]:
        return set(_PARAM.findall(self.sql))


@dataclass(frozen=True)
class Finding:
    """One hypothesis tested on one launch."""

    id: str
    status: Status
    summary: str
    evidence: dict[str, Any]
    remedy: str


@dataclass(frozen=True)
class Verdicts:
    """All findings for one launch."""

    launch_id: int
    findings: tuple[Finding, ...] = field(default=())

    def confirmed(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.confirmed]


def parse_header(name: str, sql: str) -> dict[str, Any] | None:
    """The YAML header of a query, or None when the query has no hypothesis header."""
    m = _HEADER.match(sql)
    # Only a header that opens with `id:` declares a hypothesis; other queries and DDL
    # files carry prose headers.
    if not m or not m.group(1).lstrip().startswith("id:"):
        return None
    try:
        doc = yaml.load(m.group(1), Loader=_YAML_LOADER)
    except yaml.YAMLError as e:
        raise QueryError(f"queries/{name}.sql: header is not YAML: {e}") from None
    if not isinstance(doc, dict) or "id" not in doc:
        return None
    missing = [k for k in REQUIRED_KEYS if k not in doc]
    if missing:
        raise QueryError(f"queries/{name}.sql: header lacks {', '.join(missing)}")
    return doc


@cache
def catalogue() -> tuple[Hypothesis, ...]:
    """Every packaged hypothesis, in file-name order."""
    out = []
    for name in query_names():
        sql = read_query(name)
        doc = parse_header(name, sql)
        if doc is None:
            continue
        out.append(Hypothesis(
            id=str(doc["id"]),
            question=str(doc["question"]).strip(),
            evidence=tuple(str(e) for e in doc["evidence"] or ()),
            thresholds=dict(doc["threshold"] or {}),
            remedy=" ".join(str(doc["remedy"]).split()),
            sql=sql,
            measured=str(doc.get("measured", "")).strip(),
            experiment=" ".join(str(doc.get("experiment", "")).split()),
            requires=tuple(str(t) for t in doc.get("requires") or ()),
            missing=" ".join(str(doc.get("missing", "")).split()),
            optional={str(t): str(c) for t, c in (doc.get("optional") or {}).items()},
        ))
    return tuple(out)


def check_expectations(expect: Iterable[str]) -> list[str]:
    out = []
    for e in expect:
        if e not in EXPECTATIONS:
            raise InputError(f"unknown --expect {e!r}; known: {', '.join(EXPECTATIONS)}")
        out.append(e)
    return sorted(set(out))


def _clean(v: Any) -> Any:
    if isinstance(v, float) and v != v:  # NaN: a figure ncu could not compute
        return None
    if hasattr(v, "item"):  # numpy scalar
        return v.item()
    return v


@contextmanager
def stand_ins(con: duckdb.DuckDBPyConnection, h: Hypothesis, present: set[str]) -> Iterator[set[str]]:
    """Empty temporary stand-ins for the `optional` tables of `h` absent from `present`, for
    as long as the block runs; yields the evidence columns that only they would give."""
    absent = {t: c for t, c in h.optional.items() if t not in present}
    for t, c in absent.items():
        con.execute(f"CREATE OR REPLACE TEMP TABLE {t} ({c})")
    try:
        yield {c.split()[0] for cs in absent.values() for c in cs.split(",")} - {"launch_id"}
    finally:
        for t in absent:
            con.execute(f"DROP TABLE IF EXISTS temp.main.{t}")


def inputs(c: duckdb.DuckDBPyConnection, kernels: list[int], ffma: list[tuple[int, int, int]]) -> None:
    """The temporary tables every hypothesis's SQL reads beside the store: the launches asked
    about (IDS_TABLE) and their FFMA work's matrix shape (FFMA_TABLE, `matrix_ffma`'s rows)."""
    c.execute(f"CREATE OR REPLACE TEMP TABLE {IDS_TABLE} AS SELECT unnest($ids::BIGINT[]) AS launch_id",
              {"ids": kernels})
    cols = list(zip(*ffma)) or [(), (), ()]
    c.execute(f"CREATE OR REPLACE TEMP TABLE {FFMA_TABLE} AS SELECT unnest($l::BIGINT[]) AS launch_id, "
              "unnest($f::BIGINT[]) AS ffma_executed, unnest($m::BIGINT[]) AS matrix_ffma_executed",
              {"l": list(cols[0]), "f": list(cols[1]), "m": list(cols[2])})


def evaluate(
    con: duckdb.DuckDBPyConnection,
    launch_ids: list[int],
    expect: Iterable[str] = (),
    thresholds: dict[str, dict[str, Any]] | None = None,
) -> dict[int, Verdicts]:
    """Run every hypothesis over the given launches. `thresholds` overrides header
    defaults per hypothesis id (e.g. from a nightly job's config file).

    The queries run on WORKERS connections at once, `con` and cursors of it (DuckDB
    plans a query on the thread that runs it, without Python's lock, and planning is most
    of what these queries cost on one report's rows), each with its own `_wsperf_ids`:
    temporary tables belong to a connection. Inside a transaction open on `con`, whose
    rows no other connection sees yet, they all run on `con`."""
    expect = check_expectations(expect)
    overrides = thresholds or {}
    ids = sorted(set(launch_ids))
    # Results that are not one kernel launch get no hypothesis run on them (aggregate_reason).
    aggregates = dict(con.execute(
        "SELECT launch_id, workload_type FROM launches WHERE list_contains($ids, launch_id) "
        "AND workload_type IS NOT NULL AND workload_type <> 'kernel'", {"ids": ids}).fetchall())
    kernels = [lid for lid in ids if lid not in aggregates]
    # duckdb_tables()/duckdb_views(), not information_schema.tables: ~1 ms, not ~6 ms in a
    # new process (the view's first binding)
    present = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal"
    ).fetchall()}
    found: dict[str, list[tuple[int, Finding]]] = {}  # by hypothesis: (launch id, finding), in row order
    runnable = []
    for h in catalogue():
        if set(h.requires) <= present:
            runnable.append(h)
        else:
            found[h.id] = [(lid, Finding(h.id, Status.no_data, h.missing, {}, h.remedy)) for lid in kernels]

    # The matrix-product shape of FFMA work, read from the SASS once for all connections
    # (analyses/ffma.py); missing-specialized-instructions joins it as FFMA_TABLE.
    ffma = matrix_ffma(con, kernels) if kernels and "sass" in present else []

    def run(c: duckdb.DuckDBPyConnection, batch: list[Hypothesis]) -> None:
        inputs(c, kernels, ffma)
        for h in batch:
            values: dict[str, Any] = {**h.thresholds, **overrides.get(h.id, {}), "expect": expect}
            found[h.id] = _findings(c, h, {k: v for k, v in values.items() if k in h.params}, present)

    if kernels:
        run_spread(con, runnable, run, WORKERS)
    else:
        found.update({h.id: [] for h in runnable})
    by_launch: dict[int, list[Finding]] = {lid: [] for lid in ids}
    for h in catalogue():  # catalogue order, then row order
        for lid, f in found[h.id]:
            if lid in by_launch:
                by_launch[lid].append(f)
        for lid, workload in aggregates.items():
            by_launch[lid].append(Finding(h.id, Status.no_data, aggregate_reason(workload), {"workload": workload},
                                          h.remedy))
    return {lid: Verdicts(lid, tuple(fs)) for lid, fs in by_launch.items()}


def _findings(c: duckdb.DuckDBPyConnection, h: Hypothesis, params: dict[str, Any],
              present: set[str]) -> list[tuple[int, Finding]]:
    """The rows of hypothesis `h` on connection `c`, as (launch id, finding)."""
    with stand_ins(c, h, present) as left_out:
        try:
            cur = c.execute(h.sql, params)
            cols, rows = [d[0] for d in cur.description], cur.fetchall()
        except duckdb.Error as e:
            raise QueryError(f"hypothesis {h.id}: {str(e).strip().splitlines()[0]}") from None
    out = []
    for row in rows:
        rec = {k: v for k, v in zip(cols, row) if k not in left_out}
        lid = rec.pop("launch_id")
        status = Status(rec.pop("status"))
        summary = rec.pop("summary")
        out.append((lid, Finding(h.id, status, summary, {k: _clean(v) for k, v in rec.items()}, h.remedy)))
    return out
