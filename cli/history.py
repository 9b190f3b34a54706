"""`wsperf history` and `wsperf export`. The run recording of `wsperf analyze --db` is
shared by analyze and nsys: cli/runs.py."""

from __future__ import annotations

import csv
import enum
import io
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from wsperf.analyses.config import load_config
from wsperf.analyses.nsys import nsys_history
from wsperf.analyses.history import HistoryPoint, export_parquet, history as run_history
from wsperf.analyses.sql import sandbox
from wsperf.cli import render
from wsperf.cli.common import check_outputs, err, error_boundary, out
from wsperf.cli.runs import LOCK_HELP, require_store
from wsperf.cli.table import Table
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import refuse_overwrite
from wsperf.collectors.store import LOCK_TIMEOUT_S, open_store


class HistorySource(str, enum.Enum):
    ncu = "ncu"
    nsys = "nsys"


class HistoryFormat(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    csv = "csv"


# ---------------------------------------------------------------------------------------
# wsperf history


def history(
    db: Path = typer.Option(..., "--db", help="DuckDB file the runs were recorded in (`wsperf analyze --db`)."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only kernels whose function, demangled or "
                                         "mangled name matches this regular expression (RE2 syntax)."),
    metric: str = typer.Option("duration_ns", "--metric", "-m", help="duration_ns (the launch's duration), a figure "
                               "(e.g. dram_throughput_pct, tensor_pipe_pct, tc_pipe_pct: the metric that measures it on "
                               "each launch's GPU), or any Nsight Compute metric name, e.g. sm__cycles_active.avg."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="Only runs carrying this tag (repeatable: all of them)."),
    last: Optional[int] = typer.Option(None, "--last", "-n", help="Only the newest N of those runs."),
    fmt: HistoryFormat = typer.Option(HistoryFormat.text, "--format", "-f", help="text, json, markdown or csv."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help=LOCK_HELP),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Also write the trend chart (history.vl.json, "
                                              ".html, .png, .svg) into this directory: median per run, min-max band, "
                                              "and the regression threshold over the first run shown."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file whose [compare.thresholds] sets the "
                                          "threshold line (default: compare's, 3% for duration_ns)."),
    source: HistorySource = typer.Option(HistorySource.ncu, "--source", help="ncu: the runs of Nsight Compute "
                                         "reports; nsys: the runs of Nsight Systems exports (`wsperf analyze "
                                         "EXPORT --db`), every launch's duration (--metric duration_ns only)."),
) -> None:
    """A kernel's figure over the recorded runs: one row per (run, kernel), oldest run
    first, with the run's label, commit, date and tags, its number of launches and the
    median, min and max of the metric over them."""
    with error_boundary():
        check_outputs(charts_dir, None, inputs=[config], store=db)
        cfg = load_config(config)
        require_store(db)
        # the store's SQL is wsperf's own (open_store checks its catalog), and it reaches nothing outside it
        con = sandbox(open_store(db, read_only=True, lock_timeout=lock_timeout))
        if source is HistorySource.nsys and metric != "duration_ns":
            raise InputError(f"--metric {metric!r}: runs of Nsight Systems exports hold durations only (duration_ns)")
        points = (nsys_history(con, kernel=kernel, tags=tag, last=last) if source is HistorySource.nsys
                  else run_history(con, kernel=kernel, metric=metric, tags=tag, last=last))
        if fmt is HistoryFormat.json:
            sys.stdout.write(history_json(points) + "\n")
        elif fmt is HistoryFormat.markdown:
            sys.stdout.write(history_markdown(points))
        elif fmt is HistoryFormat.csv:
            sys.stdout.write(history_csv(points))
        else:
            history_text(points, out)
        if charts_dir is not None:
            from wsperf.cli.charts import history_chart, write_charts

            threshold = cfg.compare.threshold(metric)
            chart = history_chart(points, threshold if threshold is not None else cfg.compare.threshold("duration_ns"))
            files = write_charts({"history": chart}, charts_dir)
            err.print(render.plain(f"wsperf history: wrote the trend chart ({len(files)} files) to {charts_dir}"))


_COLUMNS = ("run", "label", "commit", "branch", "date", "tags", "kernel", "n", "median", "min", "max")


def _fmt_value(metric: str, v: float | None) -> str:
    if metric == "duration_ns":
        return render.duration(v)
    return "n/a" if v is None else f"{v:.6g}"


def _row(p: HistoryPoint) -> list[str]:
    return [str(p.run_id), p.label, (p.git_commit or "")[:12], p.git_branch or "",
            p.started_at.strftime("%Y-%m-%d %H:%M"), ",".join(p.tags), p.kernel, str(p.n),
            _fmt_value(p.metric, p.median), _fmt_value(p.metric, p.low), _fmt_value(p.metric, p.high)]


def history_text(points: list[HistoryPoint], console: Console) -> None:
    t = Table(title=f"history of {points[0].metric}" if points else "history", title_justify="left")
    for c in _COLUMNS:
        t.add_column(c, justify="right" if c in ("run", "n", "median", "min", "max") else "left")
    for p in points:
        t.add_row(*[render.plain(v) for v in _row(p)])
    console.print(t)


def _point_dict(p: HistoryPoint) -> dict:
    return {"run_id": p.run_id, "label": p.label, "git_commit": p.git_commit, "git_branch": p.git_branch,
            "started_at": p.started_at.isoformat() + "Z", "tags": list(p.tags), "kernel": p.kernel,
            "demangled": p.demangled, "metric": p.metric, "n": p.n, "median": p.median, "min": p.low,
            "max": p.high}


def history_json(points: list[HistoryPoint]) -> str:
    """`{"points": [{run_id, label, git_commit, git_branch, started_at, tags, kernel,
    demangled, metric, n, median, min, max}, ...]}`, oldest run first."""
    return json.dumps({"points": [_point_dict(p) for p in points]}, indent=2)


def history_markdown(points: list[HistoryPoint]) -> str:
    lines = [f"### History of `{render.md(points[0].metric) if points else ''}`", "",
             "| " + " | ".join(_COLUMNS) + " |", "|" + "|".join(" ---: " if c in ("run", "n", "median", "min", "max")
                                                              else " --- " for c in _COLUMNS) + "|"]
    lines += ["| " + " | ".join(render.md(v) for v in _row(p)) + " |" for p in points]
    return "\n".join(lines) + "\n"


def history_csv(points: list[HistoryPoint]) -> str:
    """Raw values (ns for duration_ns), one row per point; ready for a spreadsheet."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run_id", "label", "git_commit", "git_branch", "started_at", "tags", "kernel", "demangled",
                "metric", "n", "median", "min", "max"])
    for p in points:
        d = _point_dict(p)
        w.writerow([_csv_cell(v if k != "tags" else ";".join(v)) for k, v in d.items()])
    return buf.getvalue()


def _csv_cell(v: object) -> object:
    # A cell starting with =, +, - or @ is a formula to a spreadsheet: labels and kernel
    # names are untrusted text, so such a cell is quoted as text. Control characters
    # (ANSI escapes, C1 CSI, bidirectional overrides) are dropped, as in the tables.
    if isinstance(v, str):
        v = render.plain(v).plain
        return "'" + v if v[:1] in ("=", "+", "-", "@") else v
    return "" if v is None else v


# ---------------------------------------------------------------------------------------
# wsperf export


def export(
    db: Path = typer.Option(..., "--db", help="DuckDB file the runs were recorded in (`wsperf analyze --db`)."),
    parquet: Path = typer.Option(..., "--parquet", help="Directory to write the Parquet files into (new or empty)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the tables a previous export wrote into "
                                   "--parquet (other files there are left alone)."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help=LOCK_HELP),
) -> None:
    """Write the store as Parquet for a warehouse: runs, reports and run_reports whole;
    launches, metrics, sass, stalls, opcodes and ncu_rules with their run_id,
    Hive-partitioned by the run's date (`DIR/<table>/run_date=YYYY-MM-DD/`)."""
    with error_boundary():
        refuse_overwrite({"--parquet": parquet}, [], store=db)
        require_store(db)
        con = open_store(db, read_only=True, lock_timeout=lock_timeout)
        res = export_parquet(con, parquet, overwrite=overwrite)
        t = Table()
        t.add_column("table")
        t.add_column("rows", justify="right")
        for name, n in res.rows.items():
            t.add_row(name, f"{n:,}")
        out.print(t)
        out.print(render.plain(f"wrote {render.counted(res.files, 'Parquet file')} "
                               f"({render.counted(res.partitions, 'run_date partition')}) to {res.directory}"), soft_wrap=True)
