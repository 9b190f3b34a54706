"""`wsperf collect`: the repro under compute-sanitizer, then ncu, into a bundle; then
the same handoff rule and verdicts as `wsperf analyze BUNDLE`."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.analyze import analyze as run_analysis
from wsperf.analyses.correctness import gather
from wsperf.cli import render
from wsperf.cli.common import emit, err, error_boundary, handoff, load_with_progress
from wsperf.cli.render import OutputFormat
from wsperf.collectors.collect import CollectError, Options as CollectOptions, collect as run_collect
from wsperf.collectors.errors import ExitCode, InputError
from wsperf.collectors.sanitizer import TOOLS as SANITIZER_TOOLS
from wsperf.collectors.store import open_store

MAX_TIMEOUT_S = 7 * 24 * 3600.0  # --timeout: a week is longer than any repro is allowed to run


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
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
) -> None:
    """Run a repro under compute-sanitizer first, then ncu, into a bundle directory.
    Sanitizer errors -> the correctness report (exit 3, no profile); a hang -> cuda-gdb
    captures where every warp waits (exit 4); clean -> the verdicts (exit 0)."""
    with error_boundary():
        if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S) or launch_count < 1:
            raise InputError(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, and "
                             "--launch-count >= 1")
        opts = CollectOptions(out_dir or Path(f"wsperf-bundle-{time.strftime('%Y%m%d-%H%M%S')}"), timeout,
                              tuple(t.strip() for t in tools.split(",") if t.strip()), kernel, launch_count,
                              not no_profile)
        result = run_collect(command, opts, progress=lambda msg: err.print(render.plain(f"wsperf collect: {msg}")))
        for w in result.warnings:
            err.print(render.plain(f"Warning: {w}"), soft_wrap=True)
        err.print(render.plain(f"wsperf collect: bundle {result.bundle}"))
        con = open_store(None)
        code = handoff(gather(con, [result.bundle]), fmt)
        if not code and result.report is not None and result.outcome == "clean":
            load_with_progress(con, [result.report])
            results = run_analysis(con)
            emit(fmt, results, render.analyses_text, render.analyses_json, render.analyses_markdown)
        elif not code and result.report is not None:
            err.print("The sanitizer did not run: correctness is unverified, so no performance verdicts are printed; "
                      f"the report is in {result.bundle}.")
        if result.problems:
            raise CollectError("; ".join(result.problems), code or ExitCode.ERROR)
        if code:
            raise typer.Exit(code)
