"""`wsperf timeline`: load role timelines (wsperf traces, Proton / Chrome / Perfetto JSON,
Perfetto protobuf traces),
optionally beside the Nsight Compute report of the same kernel, and show when each role
works and waits, how full the ring is, and the `pipeline-bubbles` and `serialized-roles`
verdicts (the latter decided by the timeline's copy/compute overlap); `--charts`
draws the role lanes and the stage occupancy, `--perfetto` writes the events as one
Perfetto / Chrome-trace JSON file. `wsperf trace-include` prints the -I flag for
wsperf_trace.cuh."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from wsperf.analyses.hypotheses import Finding
from wsperf.analyses.timeline import (RoleShare, TimelineExport, TimelineSummary, export_timeline, load_timelines,
                                      summarize_timeline)
from wsperf.cli.common import check_outputs, emit, err, error_boundary, load_progress
from wsperf.cli.render import OutputFormat, _jsonable, duration, md, plain, version
from wsperf.cli.table import Table
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import check_output, write_output
from wsperf.collectors.store import LOCK_TIMEOUT_S, open_store


def include_dir() -> Path:
    """The directory holding wsperf_trace.cuh (package data of wsperf.collectors)."""
    return Path(str(resources.files("wsperf.collectors") / "include"))


def trace_include() -> None:
    """Print the nvcc flag that finds wsperf_trace.cuh, the in-kernel role-event header:
    `nvcc $(wsperf trace-include) ...`."""
    with error_boundary():
        d = include_dir()
        if not (d / "wsperf_trace.cuh").is_file():
            raise InputError(f"{d}: wsperf_trace.cuh is missing from this installation; reinstall wsperf")
        sys.stdout.write(f"-I{d}\n")


def perfetto_json(summaries: list[TimelineExport]) -> str:
    """Chrome-trace JSON (Perfetto reads it): one process per timeline CTA, one thread
    per warp, one 'X' event per interval and an 'i' event per instant (ts in microseconds
    from each timeline's first event); args carry cta, warp, sm, role, stage and seq, so
    `wsperf timeline` reads the file back the same. With several timelines, args.cta is
    the process id (timeline id * 1,000,000 + CTA) so their CTAs stay apart on reading."""
    events: list[dict[str, Any]] = []
    several = len(summaries) > 1
    for s in summaries:
        seen: set[tuple[int, int]] = set()
        instants = set(s.instants)
        for i in s.intervals + s.instants:
            pid, tid = s.timeline_id * 1_000_000 + i.cta, i.warp
            if (pid, tid) not in seen:
                if not any(p == pid for p, _ in seen):
                    events.append({"ph": "M", "name": "process_name", "pid": pid,
                                   "args": {"name": f"timeline {s.timeline_id} CTA {i.cta}"
                                                    + (f" SM {i.sm}" if i.sm is not None else "")}})
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": f"warp {i.warp} {i.role}"}})
                seen.add((pid, tid))
            ev = {"name": i.label or i.event, "cat": i.role, "pid": pid, "tid": tid, "ts": i.start_ns / 1e3,
                  "args": {"cta": pid if several else i.cta, "warp": i.warp, "sm": i.sm, "role": i.role, "stage": i.stage, "seq": i.seq}}
            if i in instants:
                ev.update(ph="i", s="t")
            else:
                ev.update(ph="X", dur=(i.end_ns - i.start_ns) / 1e3)
            events.append(ev)
    kernels = sorted({s.kernel for s in summaries if s.kernel})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ns",
                       "metadata": {"kernel": kernels[0] if len(kernels) == 1 else None, "wsperf_version": version()}},
                      default=_jsonable, allow_nan=False)


def timeline(
    traces: list[Path] = typer.Argument(..., help="Trace files: .wsperf-trace (wsperf_trace.cuh), Proton "
                                        ".chrome_trace, Chrome-trace / Perfetto .json, Perfetto protobuf "
                                        ".perfetto-trace / .pftrace / .perfetto (optionally .gz).",
                                        show_default=False),
    report: Optional[list[Path]] = typer.Option(None, "--report", help="Nsight Compute report(s) of the same "
                                                "kernel: each trace joins the last launch of its kernel there, so "
                                                "its verdicts and the timeline's are one launch's."),
    perfetto: Optional[Path] = typer.Option(None, "--perfetto", help="Write every interval and instant as "
                                            "Perfetto / Chrome-trace JSON to this file (ui.perfetto.dev opens it)."),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Write the per-role lane charts and the "
                                              "stage occupancy (.vl.json, .html, .png, .svg) into this directory."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file to load into (created if absent). "
                                      "Default: an in-memory database."),
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help="Seconds to wait for another wsperf "
                                       "holding the --db file."),
) -> None:
    """When each role works and waits inside one kernel: per-role time shares, the ring's
    stage occupancy and the pipeline-bubbles verdict (prologue, steady-state idle and
    epilogue shares, copy/compute overlap) from in-kernel role events. serialized-roles cites
    the overlap as its evidence."""
    with error_boundary():
        check_outputs(charts_dir, None, inputs=[*traces, *(report or [])], store=db, more={"--perfetto": perfetto})
        if perfetto is not None:
            check_output(perfetto, what="the Perfetto file")
        con = open_store(db, lock_timeout=lock_timeout)
        with load_progress() as tick:
            loaded = load_timelines(con, traces, report or [], progress=tick)
        summaries = [summarize_timeline(con, t.timeline_id) for t in loaded]
        if perfetto is not None:
            write_output(perfetto, perfetto_json([export_timeline(con, t.timeline_id) for t in loaded]),
                         what="the Perfetto file")
        charts: dict = {}
        if charts_dir is not None:
            from wsperf.cli.charts import charts_markdown, write_charts, wrote_charts
            from wsperf.cli.timeline_charts import timeline_charts

            for s in summaries:
                charts.update(timeline_charts(s))
            err.print(plain(wrote_charts("wsperf", charts, write_charts(charts, charts_dir), charts_dir)))
        emit(fmt, summaries, timeline_text, timeline_json, timeline_markdown)
        if charts and fmt is OutputFormat.markdown:
            sys.stdout.write(charts_markdown(charts, charts_dir))


def _head(s: TimelineSummary) -> str:
    src = "Nsight Compute launch" if s.from_report else "launch"
    dropped = f"; {s.full_warps} warps filled their slots (later events dropped)" if s.full_warps else ""
    # A report that runs the function only with other template arguments: say which launch joined.
    other = "" if s.same_instance or not s.from_report else f" (another instance: {s.launch_kernel})"
    return (f"timeline {s.timeline_id} ({s.format}) {s.kernel or '?'} -> {src} {s.launch_id}{other}: {s.events:,} "
            f"events, {s.ctas:,} CTAs, {s.warps:,} warps over {duration(s.span_ns)}{dropped}")


def _verdicts(s: TimelineSummary) -> list[Finding]:
    return [f for f in (s.bubbles, s.serialized) if f is not None]


def _share(r: RoleShare) -> str:
    # None: the role has cut warps, whose time past their last record is unknown.
    return "no_data" if r.share is None else f"{100 * r.share:.1f}%"


def _cut_line(s: TimelineSummary) -> str | None:
    """The reason every figure a cut leaves unknown is no_data (None: nothing was cut)."""
    if s.truncation is None:
        return None
    roles = sorted({c.role for c in s.truncation.cuts})
    return (f"truncated: {s.truncation.reason}. no_data: the {', '.join(roles)} shares, pipeline-bubbles, "
            "the timeline's overlap in serialized-roles, and each CTA's stage occupancy past its first cut")


def timeline_text(summaries: list[TimelineSummary], console: Console) -> None:
    for s in summaries:
        console.print(plain(_head(s)))
        t = Table(title_justify="left")
        for c in ("role", "event", "warps", "intervals", "share of warp time", "median"):
            t.add_column(c, justify="left" if c in ("role", "event") else "right")
        for r in s.roles:
            t.add_row(plain(r.role), plain(r.event), f"{r.warps:,}", f"{r.intervals:,}", _share(r), duration(r.median_ns))
        console.print(t)
        if (cut := _cut_line(s)) is not None:
            console.print(plain(cut))
        for f in _verdicts(s):
            console.print(plain(f"{f.id}: {f.status.value} - {f.summary}"))
        console.print()


def _dict(s: TimelineSummary) -> dict[str, Any]:
    return {"timeline_id": s.timeline_id, "path": s.path, "format": s.format, "kernel": s.kernel,
            "launch_id": s.launch_id, "from_report": s.from_report, "launch_kernel": s.launch_kernel,
            "same_instance": s.same_instance, "events": s.events, "ctas": s.ctas,
            "warps": s.warps, "span_ns": s.span_ns, "full_warps": s.full_warps,
            "roles": [_jsonable(r) for r in s.roles],
            # null: nothing cut; else the reason, the cut warps and the slots that would have sufficed
            "truncation": _jsonable(s.truncation),
            "pipeline_bubbles": _finding(s.bubbles), "serialized_roles": _finding(s.serialized)}


def _finding(f: Finding | None) -> dict[str, Any] | None:
    return None if f is None else {"status": f.status.value, "summary": f.summary, "evidence": f.evidence}


def timeline_json(summaries: list[TimelineSummary]) -> str:
    return json.dumps({"wsperf_version": version(), "timelines": [_dict(s) for s in summaries]}, indent=2,
                      default=str, allow_nan=False)


def timeline_markdown(summaries: list[TimelineSummary]) -> str:
    out = ["## Role timelines", ""]
    for s in summaries:
        out += [md(_head(s)), "", "| role | event | warps | intervals | share of warp time | median |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        out += [f"| {md(r.role)} | {md(r.event)} | {r.warps:,} | {r.intervals:,} | {_share(r)} | "
                f"{duration(r.median_ns)} |" for r in s.roles]
        if (cut := _cut_line(s)) is not None:
            out += ["", f"**{md(cut)}**"]
        for f in _verdicts(s):
            out += ["", f"**{f.id}: {f.status.value}** - {md(f.summary)}"]
        out.append("")
    return "\n".join(out) + "\n"
