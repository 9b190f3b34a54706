"""`wsperf nsys`: load Nsight Systems exports (and optionally Nsight Compute reports of
the same program) and print where the GPU time goes, where the GPU waits on the CPU,
how streams overlap and what the NVTX ranges cost; with reports, each launch's verdicts
lead with its kernel's share of GPU time. Also the text/JSON/Markdown renderers of that
result, shared with `wsperf analyze` when it is given exports."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import duckdb
import typer
from rich.console import Console

from wsperf.analyses.analyze import analyze as run_analysis
from wsperf.analyses.analyze import launch_ids_of_reports
from wsperf.analyses.compare import CompareResult
from wsperf.analyses.config import AnalysisConfig
from wsperf.analyses.nsys import (
    NsysSummary,
    RankedAnalysis,
    compare_nsys,
    gaps_header,
    match_ncu,
    rank_by_gpu_time,
    record_nsys_run,
    run_export_ids,
    summarize_nsys,
)
from wsperf.cli.common import check_outputs, emit, err, error_boundary, load_with_progress
from wsperf.cli.runs import begin_run
from wsperf.cli.render import OutputFormat, analyses_json, analyses_markdown, analyses_text, counted, distinct_names, \
    duration, fold_name, md, plain
from wsperf.cli.table import Table
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import is_nsys_input, split_inputs
from wsperf.collectors.nsys import load_nsys_export
from wsperf.collectors.store import LOCK_TIMEOUT_S, open_store, transaction


@dataclass(frozen=True)
class NsysReport:
    """What `wsperf nsys` prints: the timeline's summary and, with Nsight Compute
    reports, their launches ranked by GPU time."""

    summary: NsysSummary
    ranked: tuple[RankedAnalysis, ...] = ()
    top: int = 10  # kernels shown in text and Markdown (JSON holds all)
    warnings: tuple[str, ...] = ()  # inputs that do not belong together (`unrelated`)


def unrelated(summary: NsysSummary, analyses: list) -> tuple[str, ...]:
    """A warning when the Nsight Compute reports ran on a GPU none of the exports' targets
    had (an RTX 3060 timeline beside an H200 report): their launches are not the
    timeline's, and no share of its GPU time applies to them."""
    gpus = {g.split(": ", 1)[-1].split(" (")[0] for e in summary.exports for g in e.gpus}
    devices = sorted({a.summary.device for a in analyses if a.summary.device})
    other = [d for d in devices if gpus and d not in gpus]
    if not other:
        return ()
    return (f"the Nsight Compute reports ran on {', '.join(other)}, and the Nsight Systems export(s) on "
            f"{', '.join(sorted(gpus))}: not the same run; their launches are not ranked by this timeline's GPU time",)


def load_inputs(con: duckdb.DuckDBPyConnection, paths: list[Path]) -> list:
    """Load Nsight Systems exports and Nsight Compute reports alike (`wsperf sql
    --report`); returns what loading the reports did."""
    exports, reports = split_inputs(paths)
    for p in exports:
        load_nsys_export(con, p)
    return load_with_progress(con, reports)


def nsys_report(con: duckdb.DuckDBPyConnection, exports: list[Path], reports: list[Path], top: int = 10,
                launch_ids: list[int] | None = None, export_ids: list[int] | None = None) -> NsysReport:
    """Load `exports` into `con` (unless given as `export_ids`, already loaded; with
    `reports`, unless their launches are given as `launch_ids`) and build the report."""
    if not exports:
        raise InputError("no Nsight Systems export among the inputs; give `nsys export --type sqlite` files "
                         "(.sqlite, .sqlite.gz) or .nsys-rep reports")
    ids = sorted(set(export_ids)) if export_ids else sorted({load_nsys_export(con, p).export_id for p in exports})
    summary = summarize_nsys(con, ids)
    ranked: tuple[RankedAnalysis, ...] = ()
    if launch_ids is None and reports:
        loaded = load_with_progress(con, reports)
        launch_ids = launch_ids_of_reports(con, [r.report_id for r in loaded])
    warnings: tuple[str, ...] = ()
    if launch_ids:
        analyses = run_analysis(con, launch_ids=launch_ids)
        ranked = tuple(rank_by_gpu_time(analyses, match_ncu(con, [a.summary.launch_id for a in analyses], ids)))
        warnings = unrelated(summary, analyses)
    return NsysReport(summary, ranked, top, warnings)


def bundle_timeline(con: duckdb.DuckDBPyConnection, timelines: tuple[Path, ...], results: list | None
                    ) -> NsysReport | None:
    """The timeline a bundle holds (`collect --nsys`: the `timelines` of analyses.evidence),
    loaded into `con`, with the verdicts `results` ranked by their kernels' GPU time;
    None when the bundle has none."""
    if not timelines:
        return None
    ids = sorted({load_nsys_export(con, p).export_id for p in timelines})
    ranked: tuple[RankedAnalysis, ...] = ()
    if results:
        ranked = tuple(rank_by_gpu_time(results, match_ncu(con, [a.summary.launch_id for a in results], ids)))
    return NsysReport(summarize_nsys(con, ids), ranked)


def nsys(
    inputs: list[Path] = typer.Argument(..., help="Nsight Systems exports (`nsys export --type sqlite`: .sqlite or "
                                        ".sqlite.gz; .nsys-rep when nsys is on PATH) and, optionally, Nsight Compute "
                                        "reports (.ncu-rep) of the same program.", show_default=False),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file to load into (created if absent, appended to "
                                      "if present). Default: an in-memory database."),
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
    top: int = typer.Option(10, "--top", min=1, help="Kernels listed in text and Markdown (JSON lists all)."),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Also write the kernel-time breakdown and the "
                                              "per-stream timeline (.vl.json, .html, .png, .svg) into this directory."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help="Seconds to wait for another wsperf "
                                       "holding the --db file."),
) -> None:
    """Where the GPU time goes in an Nsight Systems timeline: per-kernel statistics
    (count, total, median, p10/p90, share of GPU time), idle gaps per stream with a
    launch-bound / host-bound finding when the GPU waits on the CPU, overlap across
    streams, NVTX range totals. With Nsight Compute reports, every launch's verdicts
    lead with its kernel's share of GPU time."""
    with error_boundary():
        exports, reports = split_inputs(inputs)
        check_outputs(charts_dir, None, inputs=inputs, store=db)
        con = open_store(db, lock_timeout=lock_timeout)
        rep = nsys_report(con, exports, reports, top)
        for w in rep.warnings:
            err.print(plain(f"wsperf nsys: warning: {w}"), soft_wrap=True)
        charts = write_nsys_charts(con, rep, charts_dir) if charts_dir is not None else {}
        emit(fmt, rep, nsys_text, nsys_json, nsys_markdown)
        if charts and fmt is OutputFormat.markdown:
            from wsperf.cli.charts import charts_markdown

            sys.stdout.write(charts_markdown(charts, charts_dir))


def analyze_timeline(exports: list[Path], reports: list[Path], *, sanitizer: list[Path], db: Optional[Path],
                     fmt: OutputFormat, charts_dir: Optional[Path], lock_timeout: float, label: str | None = None,
                     tags: list[str] | None = None, commit: str | None = None, branch: str | None = None) -> None:
    """`wsperf analyze` given Nsight Systems exports: the timeline report, with the
    Nsight Compute reports beside them ranked by their kernels' GPU time. With --db, the
    exports are recorded as one run (label, tags, commit, branch as for reports) whose
    kernel durations `wsperf history --source nsys` and `wsperf compare --db` read."""
    if sanitizer:
        raise InputError("--sanitizer is not combined with Nsight Systems exports: analyze the sanitizer output (and "
                         "its bundle) in its own run, then the timeline")
    dirs = [p for p in reports if p.is_dir()]
    if dirs:
        raise InputError(f"{dirs[0]}: a bundle is not combined with Nsight Systems exports; give its .ncu-rep files")
    check_outputs(charts_dir, None, inputs=[*exports, *reports], store=db)
    con = open_store(db, lock_timeout=lock_timeout)
    meta = begin_run(con, db, label, tags or [], commit, branch, [])
    # One transaction: an export that fails to load (or a killed process) records no run.
    with transaction(con, f"run {meta.label or meta.default_label()}") if meta is not None else nullcontext():
        ids = sorted({load_nsys_export(con, p).export_id for p in exports})
        run = record_nsys_run(con, meta, ids) if meta is not None else None
    if run is not None:
        err.print(plain(f"wsperf analyze: recorded run {run.label!r} (run {run.run_id}, {run.reports} Nsight Systems "
                        "export(s))"), soft_wrap=True)
    rep = nsys_report(con, exports, reports, export_ids=ids)
    for w in rep.warnings:
        err.print(plain(f"wsperf analyze: warning: {w}"), soft_wrap=True)
    charts = write_nsys_charts(con, rep, charts_dir) if charts_dir is not None else {}
    emit(fmt, rep, nsys_text, nsys_json, nsys_markdown)
    if charts and fmt is OutputFormat.markdown:
        from wsperf.cli.charts import charts_markdown

        sys.stdout.write(charts_markdown(charts, charts_dir))


def compare_exports(con: duckdb.DuckDBPyConnection, base_names: list[str], cand_names: list[str],
                    config: AnalysisConfig, kernel: str | None = None) -> CompareResult | None:
    """`wsperf compare` of Nsight Systems exports, or of runs of them recorded in --db
    (named by label): kernel durations, every launch a sample (analyses.nsys.compare_nsys).
    None when no argument is an export or such a run."""
    names = base_names + cand_names
    runs = {n: run_export_ids(con, n) for n in names if not is_nsys_input(n)}
    timeline = {n for n in names if is_nsys_input(n) or runs.get(n)}
    if not timeline:
        return None
    if len(timeline) < len(set(names)):
        raise InputError("compare Nsight Systems exports (or runs of them) with exports and Nsight Compute reports "
                         f"with reports: {', '.join(n for n in names if n not in timeline)} is not an export")

    def ids(n: str) -> list[int]:
        return runs.get(n) or [load_nsys_export(con, Path(n)).export_id]

    base = [i for n in base_names for i in ids(n)]
    cand = [i for n in cand_names for i in ids(n)]
    return compare_nsys(con, base, cand, config, ", ".join(base_names), ", ".join(cand_names), kernel)


def write_nsys_charts(con: duckdb.DuckDBPyConnection, rep: NsysReport, out_dir: Path) -> dict:
    """Write the timeline charts; returns them by name."""
    # Imported only when asked for: Altair is slow to import.
    from wsperf.analyses.nsys import timeline
    from wsperf.cli.charts import write_charts, wrote_charts
    from wsperf.cli.nsys_charts import nsys_charts

    charts = nsys_charts(rep.summary, timeline(con, [e.export_id for e in rep.summary.exports]))
    files = write_charts(charts, out_dir)
    err.print(plain(wrote_charts("wsperf", charts, files, out_dir)))
    return charts


# -- renderers ---------------------------------------------------------------------------


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _stream(s: Any) -> str:
    return f"pid {'?' if s.pid is None else s.pid} dev {s.device_id} stream {s.stream_id}"




def _exports_lines(s: NsysSummary) -> list[str]:
    lines = []
    for e in s.exports:
        lines.append(f"{e.path}: nsys {e.nsys_version or '?'} (export schema {e.export_schema or '?'}), "
                     f"{counted(e.kernels, 'kernel record')}" + (f", command {e.command}" if e.command else ""))
        if e.gpus:
            lines.append("  GPUs: " + "; ".join(e.gpus))
    lines.append(f"Kernel time: {duration(s.kernel_time_ns)} over {counted(sum(k.launches for k in s.kernels), 'launch')} "
                 f"of {counted(len(s.kernels), 'kernel')}")
    return lines


def nsys_text(rep: NsysReport, console: Console) -> None:
    s = rep.summary
    for line in _exports_lines(s):
        console.print(plain(line))
    if rep.ranked:
        console.print()
        console.print("[bold]Nsight Compute launches, by their kernel's share of GPU time[/bold]")
        for r in rep.ranked:
            a = r.analysis.summary
            console.print(plain(f"  launch {a.launch_id} {fold_name(a.name)}: {r.headline}"))
        analyses_text([r.analysis for r in rep.ranked], console)
    t = Table(title=f"Kernels by GPU time (top {min(rep.top, len(s.kernels))} of {len(s.kernels)})", title_justify="left")
    for c in ("share", "total", "launches", "median", "p10", "p90", "kernel"):
        t.add_column(c, justify="left" if c == "kernel" else "right")
    top = s.kernels[: rep.top]
    for k, name in zip(top, distinct_names(k.kernel for k in top)):
        t.add_row(_pct(k.share), duration(k.total_ns), f"{k.launches:,}", duration(k.median_ns), duration(k.p10_ns),
                  duration(k.p90_ns), plain(name))
    console.print(t)
    t = Table(title="Streams: idle gaps (gpu-waits-on-host)", title_justify="left")
    for c in ("stream", "kernels", "copies", "span", "idle", "host wait", "status", "finding"):
        t.add_column(c)
    for g in s.streams:
        t.add_row(plain(_stream(g)), f"{g.kernels:,}", f"{g.copies:,}", duration(g.span_ns), duration(g.idle_ns),
                  _pct(g.host_wait_share), g.status.value, plain(g.summary))
    console.print(t)
    t = Table(title="Devices: overlap across streams", title_justify="left")
    for c in ("device", "streams", "kernels", "span", "busy", "overlap", "idle", "max concurrent"):
        t.add_column(c)
    for d in s.devices:
        t.add_row(str(d.device_id), f"{d.streams:,}", f"{d.kernels:,}", duration(d.span_ns),
                  f"{duration(d.busy_ns)} ({_pct(d.busy_share)})", f"{duration(d.overlap_ns)} ({_pct(d.overlap_share)})",
                  duration(d.idle_ns), str(d.max_concurrent))
    console.print(t)
    if s.nvtx:
        t = Table(title="NVTX ranges", title_justify="left")
        for c in ("range", "count", "total", "median", "kernels launched", "their GPU time"):
            t.add_column(c)
        for n in s.nvtx[: rep.top]:
            name = f"{n.domain}: {n.text}" if n.domain else str(n.text)
            t.add_row(plain(name), f"{n.ranges:,}", duration(n.total_ns), duration(n.median_ns),
                      f"{n.kernels:,}", duration(n.kernel_ns))
        console.print(t)
    for g in s.findings():
        console.print(plain(f"gpu-waits-on-host confirmed on {_stream(g)}: {g.summary}"))
        console.print(plain("  remedy: " + " ".join(str(gaps_header()["remedy"]).split())))


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, float) and v != v:  # NaN: JSON has none
        return None
    return v


def _json_dict(rep: NsysReport) -> dict[str, Any]:
    s = rep.summary
    d: dict[str, Any] = {
        "exports": [dataclasses.asdict(e) for e in s.exports],
        "warnings": list(rep.warnings),
        "kernel_time_ns": s.kernel_time_ns,
        "kernel_stats": [dataclasses.asdict(k) for k in s.kernels],
        "streams": [{**dataclasses.asdict(g), "status": g.status.value, "pid": g.pid, "summary": g.summary}
                    for g in s.streams],
        "devices": [dataclasses.asdict(x) for x in s.devices],
        "nvtx": [dataclasses.asdict(n) for n in s.nvtx],
        "thresholds": {"gpu-waits-on-host": dict(s.thresholds)},
    }
    if rep.ranked:
        # The launches' full analyses, as `wsperf analyze --format json` gives them, in GPU-time order.
        d["kernels"] = json.loads(analyses_json([r.analysis for r in rep.ranked]))["kernels"]
        d["launches"] = [{"launch_id": r.analysis.summary.launch_id, "kernel": r.analysis.summary.name,
                          "headline": r.headline, "gpu_time": dataclasses.asdict(r.time) if r.time else None,
                          "confirmed": [f.id for f in r.analysis.findings if f.status.value == "confirmed"]}
                         for r in rep.ranked]
    return d


def nsys_json(rep: NsysReport) -> str:
    return json.dumps(_json_dict(rep), default=_jsonable, indent=2, allow_nan=False)


def nsys_markdown(rep: NsysReport) -> str:
    s = rep.summary
    out = ["## Nsight Systems timeline", ""]
    out += [md(line) + "  " for line in _exports_lines(s)] + [""]
    if rep.ranked:
        out += ["### Nsight Compute launches by GPU time", ""]
        out += [f"- launch {r.analysis.summary.launch_id} {md(fold_name(r.analysis.summary.name))}: "
                f"**{md(r.headline)}**" for r in rep.ranked] + [""]
        out += [analyses_markdown([r.analysis for r in rep.ranked])]
    out += ["### Kernels by GPU time", "", "| share | total | launches | median | p10 | p90 | kernel |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    top = s.kernels[: rep.top]
    out += [f"| {_pct(k.share)} | {duration(k.total_ns)} | {k.launches} | {duration(k.median_ns)} | "
            f"{duration(k.p10_ns)} | {duration(k.p90_ns)} | {md(name)} |"
            for k, name in zip(top, distinct_names(k.kernel for k in top))]
    out += ["", "### Streams", "", "| stream | kernels | span | idle | host wait | status | finding |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    out += [f"| {md(_stream(g))} | {g.kernels} | {duration(g.span_ns)} | {duration(g.idle_ns)} | "
            f"{_pct(g.host_wait_share)} | {g.status.value} | {md(g.summary)} |" for g in s.streams]
    out += ["", "### Devices", "", "| device | streams | busy | overlap | idle |", "| ---: | ---: | ---: | ---: | ---: |"]
    out += [f"| {d.device_id} | {d.streams} | {duration(d.busy_ns)} ({_pct(d.busy_share)}) | "
            f"{duration(d.overlap_ns)} | {duration(d.idle_ns)} |" for d in s.devices]
    if s.nvtx:
        out += ["", "### NVTX ranges", "", "| range | count | total | kernels launched | their GPU time |",
                "| --- | ---: | ---: | ---: | ---: |"]
        out += [f"| {md(f'{n.domain}: {n.text}' if n.domain else n.text)} | {n.ranges} | "
                f"{duration(n.total_ns)} | {n.kernels} | {duration(n.kernel_ns)} |" for n in s.nvtx[: rep.top]]
    return "\n".join(out) + "\n"
