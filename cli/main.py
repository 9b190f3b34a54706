"""The `wsperf` command. Each command parses, calls one library function and renders;
every expected failure is a `WsperfError`, printed once as `Error: ...` on stderr with
its documented exit code (README, "Exit codes")."""

from __future__ import annotations

import enum
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wsperf.analyses.analyze import analyze as run_analysis, prepare
from wsperf.analyses.config import load_config
from wsperf.analyses.correctness import correctness_report, deadlock_report, gather
from wsperf.cli import render
from wsperf.cli.render import OutputFormat as SummaryFormat
from wsperf.cli.compare import compare
from wsperf.cli.history import LOCK_HELP, begin_run, export, history, load_run
from wsperf.cli.inspect import inspect
from wsperf.cli.worksheet import worksheet
from wsperf.collectors import environment
from wsperf.collectors.collect import CollectError, Options as CollectOptions, collect as run_collect
from wsperf.collectors.sanitizer import TOOLS as SANITIZER_TOOLS
from wsperf.collectors.errors import ExitCode, InputError, WsperfError
from wsperf.collectors.ncu import load_reports
from wsperf.analyses.sql import check_kernel_regex, run_sql
from wsperf.collectors.store import LOCK_TIMEOUT_S, open_store

app = typer.Typer(
    name="wsperf",
    help="Why is this warp-specialized kernel broken or slow? Answers from real Nsight Compute output.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

# Piped output (CI logs, files) is read in wide windows: do not wrap it at 80 columns.
out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False)


class TableFormat(str, enum.Enum):
    table = "table"
    json = "json"
    csv = "csv"


@contextmanager
def error_boundary() -> Iterator[None]:
    """The one place a WsperfError becomes an `Error:` line and an exit code."""
    try:
        yield
    except WsperfError as e:
        # One line, whatever the message quotes (a file name or a tool's output may hold newlines).
        err.print(render.plain("Error: " + " ".join(str(e).split())), soft_wrap=True)
        raise typer.Exit(e.exit_code) from None


def _load(con, reports: list[Path]) -> list:
    if not reports:
        return []
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("loading", total=None)

        def tick(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=render.plain(f"loading {label}"))

        return load_reports(con, reports, progress=tick)


@app.command()
def analyze(
    reports: list[Path] = typer.Argument(None, help="Nsight Compute reports (.ncu-rep), or bundle directories "
                                         "written by `wsperf collect`.", show_default=False),
    sanitizer: list[Path] = typer.Option([], "--sanitizer", "-s", help="compute-sanitizer XML (`--xml --save "
                                         "FILE`), repeatable: any error -> the correctness report, exit 3."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file to load into (created if absent, appended to "
                                      "if present). Default: an in-memory database."),
    fmt: SummaryFormat = typer.Option(SummaryFormat.text, "--format", "-f", help="text, json or markdown."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only launches whose kernel name matches "
                                         "this regular expression (RE2 syntax)."),
    expect: list[str] = typer.Option([], "--expect", "-e", help="What the kernel should use (repeatable): tma, "
                                     "tensor-core, wgmma, tcgen05, setmaxnreg, warp-specialized."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with `expect = [...]` and "
                                          "[thresholds.<hypothesis>] overrides."),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Also write each launch's charts into this "
                                              "directory (.vl.json, .html, .png, .svg); Markdown links the PNGs."),
    html_file: Optional[Path] = typer.Option(None, "--html", help="Also write one standalone HTML page (works "
                                             "offline): summaries, verdicts, charts, Nsight Compute's rules."),
    label: Optional[str] = typer.Option(None, "--label", help="With --db: name of the run recorded (unique in "
                                        "the store). Default: <branch>@<commit>:<UTC time>."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="With --db: tag the recorded run (repeatable), e.g. nightly."),
    commit: Optional[str] = typer.Option(None, "--commit", help="With --db: git commit of the run. Default: git "
                                         "rev-parse HEAD here, else $GITHUB_SHA / $CI_COMMIT_SHA."),
    branch: Optional[str] = typer.Option(None, "--branch", help="With --db: git branch of the run. Default: git's, "
                                         "else $GITHUB_REF_NAME / $CI_COMMIT_REF_NAME."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help=LOCK_HELP),
) -> None:
    """Load reports and print, per launch: what ran (launch shape, duration, the
    instruction paths its SASS uses), its producer/consumer roles, and the verdict of
    every slow-kernel hypothesis with its evidence and remedy. A kernel the sanitizer
    found broken gets the correctness report instead (exit 3); a bundle whose repro hung,
    the deadlock report (exit 4)."""
    reports = reports or []
    with error_boundary():
        cfg = load_config(config, tuple(expect))
        check_kernel_regex(kernel)
        if not reports and not sanitizer:
            raise InputError("nothing to analyze: give reports, a bundle directory or --sanitizer FILE.xml")
        _check_outputs(charts_dir, html_file)
        con = open_store(db, lock_timeout=lock_timeout)
        run = begin_run(con, db, label, tag, commit, branch, reports)
        evidence = gather(con, reports, sanitizer)
        code = _handoff(evidence, fmt)
        if code:
            raise typer.Exit(code)
        if not evidence.reports:
            err.print("The sanitizer found no error; no Nsight Compute report to analyze.")
            return
        reports = list(evidence.reports)
        ids = load_run(con, run, reports, _load)
        results = run_analysis(con, kernel, expect=cfg.expect, thresholds=cfg.thresholds, launch_ids=ids)
        if not results:
            what = f"matches --kernel {kernel!r}" if kernel else "was found"
            raise InputError(f"no kernel launch {what} in {len(reports)} report(s)")
        charts = _write_charts(results, charts_dir)[0] if charts_dir is not None else {}
        if html_file is not None:
            from wsperf.cli.html import analysis_page, write_page

            err.print(render.plain(f"wsperf analyze: wrote {write_page(analysis_page(results), html_file)}"))
        _emit(fmt, results, render.analyses_text, render.analyses_json, render.analyses_markdown)
        if charts and fmt is SummaryFormat.markdown:
            from wsperf.cli.charts import charts_markdown

            sys.stdout.write(charts_markdown(charts, charts_dir))


def _check_outputs(charts_dir: Optional[Path], html_file: Optional[Path]) -> None:
    """Refuse an unusable --charts / --html target before loading anything."""
    if charts_dir is not None:
        from wsperf.cli.charts import check_out_dir

        check_out_dir(charts_dir)
    if html_file is not None:
        from wsperf.cli.html import check_page_path

        check_page_path(html_file)


def _write_charts(results, out_dir: Path) -> tuple[dict, list[Path]]:
    from wsperf.cli.charts import analysis_charts, write_charts

    charts = analysis_charts(results)
    if not charts:
        raise InputError("nothing to chart: the launches hold no PC samples, instruction counts or throughput "
                         "metrics (collect with `ncu --set full --import-source yes`)")
    files = write_charts(charts, out_dir)
    err.print(render.plain(f"wsperf: wrote {len(charts)} charts ({len(files)} files) to {out_dir}"))
    return charts, files


@app.command()
def chart(
    reports: list[Path] = typer.Argument(..., help="Nsight Compute reports (.ncu-rep), or bundle directories.",
                                         show_default=False),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Directory to write the charts into (created)."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only launches whose kernel name matches "
                                         "this regular expression (RE2 syntax)."),
) -> None:
    """Write each launch's charts (stall reasons per role, instruction families, speed
    of light) as Vega-Lite JSON, standalone HTML, PNG and SVG; prints the files."""
    with error_boundary():
        _check_outputs(out_dir, None)
        con = open_store(None)
        paths = list(gather(con, reports).reports)
        if not paths:
            raise InputError("no Nsight Compute report among the inputs; give .ncu-rep files or bundle directories")
        _load(con, paths)
        results = run_analysis(con, kernel)
        if not results:
            what = f"matches --kernel {kernel!r}" if kernel else "was found"
            raise InputError(f"no kernel launch {what} in {len(paths)} report(s)")
        for p in _write_charts(results, out_dir)[1]:
            out.print(render.plain(str(p)))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def collect(
    command: list[str] = typer.Argument(..., help="The repro and its arguments, after `--`.", show_default=False),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Bundle directory to create (new or empty). "
                                           "Default: ./wsperf-bundle-<time>."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Profile only kernels matching this regular "
                                         "expression (ncu -k regex:...)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds each run of the repro may take; longer is a "
                                  "hang (cuda-gdb captures it). ncu gets 4x."),
    tools: str = typer.Option(",".join(SANITIZER_TOOLS), "--tools", help="compute-sanitizer tools to run, "
                              "comma-separated."),
    launch_count: int = typer.Option(1, "--launch-count", "-c", help="Kernel launches to profile (ncu -c)."),
    no_profile: bool = typer.Option(False, "--no-profile", help="Stop after the sanitizer."),
    fmt: SummaryFormat = typer.Option(SummaryFormat.text, "--format", "-f", help="text, json or markdown."),
) -> None:
    """Run a repro under compute-sanitizer first, then ncu, into a bundle directory.
    Sanitizer errors -> the correctness report (exit 3, no profile); a hang -> cuda-gdb
    captures where every warp waits (exit 4); clean -> the verdicts (exit 0)."""
    with error_boundary():
        if timeout <= 0 or launch_count < 1:
            raise InputError("--timeout must be > 0 and --launch-count >= 1")
        opts = CollectOptions(out_dir or Path(f"wsperf-bundle-{time.strftime('%Y%m%d-%H%M%S')}"), timeout,
                              tuple(t.strip() for t in tools.split(",") if t.strip()), kernel, launch_count,
                              not no_profile)
        result = run_collect(command, opts, progress=lambda msg: err.print(render.plain(f"wsperf collect: {msg}")))
        for w in result.warnings:
            err.print(render.plain(f"Warning: {w}"), soft_wrap=True)
        err.print(render.plain(f"wsperf collect: bundle {result.bundle}"))
        con = open_store(None)
        code = _handoff(gather(con, [result.bundle]), fmt)
        if not code and result.report is not None and result.outcome == "clean":
            _load(con, [result.report])
            results = run_analysis(con)
            _emit(fmt, results, render.analyses_text, render.analyses_json, render.analyses_markdown)
        elif not code and result.report is not None:
            err.print("The sanitizer did not run: correctness is unverified, so no performance verdicts are printed; "
                      f"the report is in {result.bundle}.")
        if result.problems:
            raise CollectError("; ".join(result.problems), code or ExitCode.ERROR)
        if code:
            raise typer.Exit(code)


def _handoff(evidence, fmt: SummaryFormat) -> int:
    """The handoff rule: a hang -> the deadlock report (4); sanitizer errors -> the
    correctness report (3); else 0 and the caller goes on to performance."""
    code = ExitCode.OK
    if evidence.hang is not None:
        rep = deadlock_report(evidence)
        _emit(fmt, rep, render.deadlock_text, render.deadlock_json, render.deadlock_markdown)
        code = ExitCode.DEADLOCK
    corr = correctness_report(evidence.sanitizer)
    if corr.broken:
        _emit(fmt, corr, render.correctness_text, render.correctness_json, render.correctness_markdown)
        code = code or ExitCode.CORRECTNESS
    return code


def _emit(fmt: SummaryFormat, value, text, as_json, as_markdown) -> None:
    if fmt is SummaryFormat.json:
        sys.stdout.write(as_json(value) + "\n")
    elif fmt is SummaryFormat.markdown:
        sys.stdout.write(as_markdown(value))
    else:
        text(value, out)


@app.command()
def sql(
    query: str = typer.Argument(..., help="A DuckDB SQL query over the wsperf tables (see queries/schema.sql)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file written by `wsperf analyze --db`."),
    report: list[Path] = typer.Option([], "--report", "-r", help="Load this report first (repeatable); "
                                      "without --db it is queried in memory."),
    fmt: TableFormat = typer.Option(TableFormat.table, "--format", "-f", help="table, json or csv."),
) -> None:
    """Run one SQL query over loaded reports and print the result."""
    with error_boundary():
        if db is None and not report:
            raise InputError("nothing to query: give --db FILE (from `wsperf analyze --db FILE`) or --report REPORT")
        if db is not None and not report and not db.exists():
            raise InputError(f"{db}: no such database; create it with `wsperf analyze REPORT --db {db}`")
        con = open_store(db, read_only=db is not None and not report)
        _load(con, report)
        if report:
            prepare(con)  # role tables for what was just loaded
        result = run_sql(con, query)
        if fmt is TableFormat.json:
            sys.stdout.write(result.to_json() + "\n")
        elif fmt is TableFormat.csv:
            sys.stdout.write(result.to_csv())
        else:
            render.records_table(result.columns, result.rows, out)


@app.command()
def doctor(
    fmt: SummaryFormat = typer.Option(SummaryFormat.text, "--format", "-f", help="text or json."),
) -> None:
    """Print what a debugging session must verify first: Python and package versions,
    NVIDIA tools (ncu, compute-sanitizer, nvcc, cuda-gdb), the GPUs, torch/triton/TVM."""
    with error_boundary():
        env = environment.probe()
        if fmt is SummaryFormat.json:
            sys.stdout.write(render.environment_json(env) + "\n")
        else:
            render.environment_text(env, out)


app.command()(inspect)
app.command()(compare)
app.command()(history)
app.command()(export)
app.command()(worksheet)


def main() -> None:  # pragma: no cover - console-script shim
    app()
