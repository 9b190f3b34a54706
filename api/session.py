"""The Python API: `wsperf.load(...)` returns a `Session`, the analysis of some reports
as pandas DataFrames, Altair charts and the HTML summary a notebook cell shows.

It calls the library functions `wsperf analyze` calls (`load_config`,
`check_kernel_regex`, `open_store`, `load_reports`, `launch_ids_of_reports`, `analyze`,
and the same renderers for HTML and JSON), so a verdict in a notebook is the verdict on
the command line. Bad input raises the same `WsperfError` subclasses (`InputError`,
`ReportError`, `QueryError`) whose message the command line prints after `Error:`.

This module sits above `cli/` (it reuses the HTML renderer and the charts): nothing
below imports it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import altair as alt
import duckdb
import pandas as pd

from wsperf.analyses.analyze import KernelAnalysis, analyze, launch_ids_of_reports
from wsperf.analyses.config import load_config
from wsperf.analyses.sql import check_kernel_regex, sandbox, select_only
from wsperf.cli import charts as _charts
from wsperf.cli import html as _html
from wsperf.cli import render as _render
from wsperf.collectors.catalog import create_every_table, expose_every_table
from wsperf.collectors.errors import InputError
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

PathLike = str | os.PathLike[str]

# The columns every verdict row has; evidence fields that would clash get an `evidence_` prefix.
_VERDICT_COLUMNS = ("launch_id", "kernel", "report", "hypothesis", "status", "summary", "remedy")


def _flat(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _df(columns: list[str], rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=columns)


@dataclass(frozen=True)
class Launch:
    """One analyzed launch: `analysis` is the typed result (summary, roles, findings);
    in Jupyter it displays as the HTML report's section for the launch."""

    analysis: KernelAnalysis

    @property
    def launch_id(self) -> int:
        return self.analysis.summary.launch_id

    def charts(self) -> dict[str, alt.TopLevelMixin]:
        """This launch's charts (role stalls, instruction families, speed of light)."""
        return _charts.analysis_charts([self.analysis])

    def to_dict(self) -> dict[str, Any]:
        """The launch as `wsperf analyze --format json` writes it (null for missing figures)."""
        return _render.analysis_dict(self.analysis)

    def _repr_html_(self) -> str:
        return _html.analysis_fragment([self.analysis])

    def __repr__(self) -> str:
        a = self.analysis
        return f"<wsperf.Launch {a.summary.launch_id} {a.summary.name}: {a.headline()}>"


class Session:
    """The analysis of loaded reports, over one DuckDB store.

    `verdicts()`, `launches()`, `roles()`, `sql()` and `table()` return pandas
    DataFrames; `charts()` returns Altair charts; `session[launch_id]` (or iterating)
    gives `Launch` objects. In Jupyter the session displays as the HTML report's
    summary. Close it (or use `with wsperf.load(...) as s:`) to release a `db` file."""

    def __init__(self, con: duckdb.DuckDBPyConnection, results: Iterable[KernelAnalysis],
                 reports: Iterable[Path]) -> None:
        self.con = con  # the DuckDB connection: the tables of queries/schema.sql
        self.results: tuple[KernelAnalysis, ...] = tuple(results)
        self.reports: tuple[Path, ...] = tuple(reports)

    # -- launches ------------------------------------------------------------------

    def __iter__(self):
        return (Launch(a) for a in self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, launch_id: int) -> Launch:
        for a in self.results:
            if a.summary.launch_id == launch_id:
                return Launch(a)
        raise KeyError(f"no launch {launch_id}; launches: {[a.summary.launch_id for a in self.results]}")

    # -- DataFrames ----------------------------------------------------------------

    def verdicts(self) -> pd.DataFrame:
        """One row per (launch, hypothesis): launch_id, kernel, report, hypothesis,
        status (confirmed / rejected / no_data), summary, remedy, then every flat
        evidence field as a column (NaN/None where a hypothesis has no such field;
        list-valued evidence stays in `Launch.to_dict()`)."""
        rows: list[dict[str, Any]] = []
        for a in self.results:
            for f in a.findings:
                row: dict[str, Any] = {"launch_id": a.summary.launch_id, "kernel": a.summary.name,
                                       "report": a.summary.report, "hypothesis": f.id, "status": f.status.value,
                                       "summary": f.summary, "remedy": f.remedy}
                for k, v in f.evidence.items():
                    if _flat(v):
                        row[f"evidence_{k}" if k in _VERDICT_COLUMNS else k] = v
                rows.append(row)
        df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=list(_VERDICT_COLUMNS))
        return df

    def launches(self) -> pd.DataFrame:
        """One row per launch: identity, launch shape, duration, instruction paths,
        whether it is warp-specialized, and the headline of its verdicts."""
        rows = []
        for a in self.results:
            s, f = a.summary, a.summary.families
            rows.append({
                "launch_id": s.launch_id, "kernel": s.name, "demangled": s.demangled, "report": s.report,
                "arch": s.arch, "device": s.device, "grid": _render.dims(s.grid), "block": _render.dims(s.block),
                "cluster": _render.dims(s.cluster), "registers_per_thread": s.registers_per_thread,
                "static_smem_bytes": s.static_smem_bytes, "dynamic_smem_bytes": s.dynamic_smem_bytes,
                "duration_ns": s.duration_ns, "tensor": f.tensor,
                "copies": None if f.copies is None else ", ".join(f.copies),
                "warp_specialized": a.warp_specialized, "warp_specialized_basis": a.warp_specialized_basis,
                "outcome": a.outcome.value, "headline": a.headline(),
            })
        return pd.DataFrame.from_records(rows)

    def roles(self) -> pd.DataFrame:
        """One row per (launch, role): instructions, executed, PC samples, the share
        waiting on mbarriers, the top stall reasons; `label` is the name the report
        shows (code paths, not roles, when the kernel is not warp-specialized)."""
        rows = [{"launch_id": a.summary.launch_id, "kernel": a.summary.name, "role": r.role,
                 "label": a.role_label(r.role), "instructions": r.instructions, "executed": r.executed,
                 "samples": r.samples, "wait_samples": r.wait_samples, "wait_share": r.wait_share,
                 "top_stalls": ", ".join(f"{x} {n}" for x, n in r.top_stalls)}
                for a in self.results for r in a.roles]
        cols = ["launch_id", "kernel", "role", "label", "instructions", "executed", "samples", "wait_samples",
                "wait_share", "top_stalls"]
        return pd.DataFrame.from_records(rows, columns=cols)

    def sql(self, query: str) -> pd.DataFrame:
        """Run DuckDB SQL over the store (tables and views of queries/schema.sql, as
        `wsperf sql`); a failing query raises QueryError. Missing figures are None."""
        if not isinstance(query, str):
            raise InputError(f"sql: give the query as a string, not {type(query).__name__}")
        result = select_only(self.con, query)
        return _df(result.columns, result.rows)

    def table(self, name: str) -> pd.DataFrame:
        """Every row of one table or view of the store, e.g. `launches`, `metrics`,
        `sass`, `roles`, `role_stalls`, `instruction_families`."""
        known = [r[0] for r in self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1").fetchall()]
        if name not in known:
            raise InputError(f"no table or view {name!r} in the store; known: {', '.join(known)}")
        return self.sql(f'SELECT * FROM "{name}"')

    # -- charts and display ----------------------------------------------------------

    def charts(self) -> dict[str, alt.TopLevelMixin]:
        """Every chart the launches have data for, named `launch-<id>-<chart>`, as
        `wsperf chart` writes them; each displays inline in Jupyter."""
        return _charts.analysis_charts(self.results)

    def to_json(self) -> str:
        """What `wsperf analyze --format json` prints."""
        return _render.analyses_json(list(self.results))

    def to_html(self) -> str:
        """The standalone page `wsperf analyze --html` writes (charts included)."""
        return _html.analysis_page(list(self.results))

    def _repr_html_(self) -> str:
        return _html.analysis_fragment(list(self.results))

    def __repr__(self) -> str:
        lines = [f"<wsperf.Session: {len(self.results)} launch(es) from {len(self.reports)} report(s)>"]
        lines += [f"  launch {a.summary.launch_id} {a.summary.name}: {a.headline()}" for a in self.results]
        return "\n".join(lines)

    # -- lifetime ------------------------------------------------------------------

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load(paths: PathLike | Iterable[PathLike], db: PathLike | None = None, expect: Iterable[str] = (),
         config: PathLike | None = None, kernel: str | None = None) -> Session:
    """Load Nsight Compute reports and analyze every launch, as `wsperf analyze` does.

    paths: one report (.ncu-rep, .ncu-repz or .ncu-rep.gz) or several.
    db: a DuckDB file to load into (created if absent, appended to if present); default
        in memory. Only the reports given here are analyzed, whatever else the file holds.
    expect: what the kernels should use (tma, tensor-core, wgmma, tcgen05, setmaxnreg,
        warp-specialized), as `--expect`.
    config: a TOML config file (`expect = [...]`, `[thresholds.<hypothesis>]`), as `--config`.
    kernel: only launches whose kernel name matches this regular expression (RE2).

    Raises InputError / ReportError (subclasses of WsperfError) for bad input.
    """
    reports = _paths(paths)
    for name, v in (("db", db), ("config", config)):
        if v is not None and not isinstance(v, (str, os.PathLike)):
            raise InputError(f"{name}: give a path (str or os.PathLike), not {type(v).__name__}")
    if kernel is not None and not isinstance(kernel, str):
        raise InputError(f"kernel: give a regular expression (str), not {type(kernel).__name__}")
    if not isinstance(expect, str):
        expect = list(expect) if isinstance(expect, Iterable) else [expect]
    if not isinstance(expect, str) and not all(isinstance(x, str) for x in expect):
        raise InputError("expect: give a name or a list of names (tma, tensor-core, wgmma, tcgen05, setmaxnreg, "
                         "warp-specialized)")
    if not reports:
        raise InputError("nothing to load: give one or more Nsight Compute reports (.ncu-rep)")
    if isinstance(expect, str):
        expect = [expect]
    cfg = load_config(None if config is None else Path(config), tuple(expect))
    check_kernel_regex(kernel)
    con = open_store(None if db is None else Path(db))
    try:
        loaded = load_reports(con, reports)
        ids = launch_ids_of_reports(con, [r.report_id for r in loaded])
        results = analyze(con, kernel, expect=cfg.expect, thresholds=cfg.thresholds, launch_ids=ids)
    except BaseException:
        con.close()
        raise
    if not results:
        con.close()
        what = f"matches kernel={kernel!r}" if kernel else "was found"
        raise InputError(f"no kernel launch {what} in {len(reports)} report(s)")
    # The session only reads from here on, as `wsperf sql` does: a store file is opened again
    # read-only, and DuckDB's access outside the store is switched off for good on it.
    if db is not None:
        con.close()
        con = open_store(Path(db), read_only=True)
        expose_every_table(con)  # every documented table and view, empty where the store lacks it
    else:
        create_every_table(con)  # every documented table and view, empty where nothing filled it
    return Session(sandbox(con), results, reports)


def _paths(paths: Any) -> list[Path]:
    """The report paths load() was given, or InputError naming what it got instead."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    if isinstance(paths, Iterable) and not isinstance(paths, (bytes, dict)):
        items = list(paths)
        if all(isinstance(p, (str, os.PathLike)) for p in items):
            return [Path(p) for p in items]
    raise InputError(f"paths: give a report path or a list of them (str or os.PathLike), not "
                     f"{type(paths).__name__}")
