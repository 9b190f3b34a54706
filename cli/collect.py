"""`wsperf collect`: the repro under compute-sanitizer, then ncu, into a bundle; then
the same handoff rule and verdicts as `wsperf analyze BUNDLE`."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.analyze import analyze as run_analysis
from wsperf.analyses.evidence import gather
from wsperf.analyses.handoffs import ACCEPTABLE as ACCEPTABLE_RACES, barrier_sites, release_judge
from wsperf.cli import render
from wsperf.cli.common import err, error_boundary, load_with_progress, longest_first
from wsperf.cli.gate import handoff, with_caveats
from wsperf.cli.nsys import bundle_timeline, nsys_json, nsys_markdown, nsys_text
from wsperf.cli.render import OutputFormat
from wsperf.cli.report_md import write_report
from wsperf.collectors.collect import PROFILE_CAP, CollectError, Options as CollectOptions, collect as run_collect
from wsperf.collectors.errors import ExitCode, InputError
from wsperf.collectors.files import refuse_overwrite
from wsperf.collectors.generated import check_sources
from wsperf.collectors.sanitizer import TOOLS as SANITIZER_TOOLS
from wsperf.collectors.store import open_store

MAX_TIMEOUT_S = 7 * 24 * 3600.0  # --timeout: a week is longer than any repro is allowed to run


def collect(
    command: list[str] = typer.Argument(..., help="The repro and its arguments, after `--`.", show_default=False),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Bundle directory to create (new or empty). "
                                           "Default: `./wsperf-bundle-<time>`."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Check and profile only kernels matching this "
                                         "regular expression (compute-sanitizer --kernel-name regex=, ncu -k regex:). "
                                         "Default: for a Python repro, the kernels it compiled itself (Triton's "
                                         "cache or CuTe DSL's dump names them), every launch; else every kernel."),
    all_kernels: bool = typer.Option(False, "--all-kernels", help="Check every kernel the repro launches, PyTorch's "
                                     "and the libraries' too (their findings are listed, not judged)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds each run of the repro may take; longer is a "
                                  "hang (cuda-gdb captures it). ncu gets 4x; a sanitizer run 40x the plain run's "
                                  "time when that is longer (at most 30 min)."),
    tools: str = typer.Option(",".join(SANITIZER_TOOLS), "--tools", help="compute-sanitizer tools to run, "
                              "comma-separated."),
    launch_count: Optional[int] = typer.Option(None, "--launch-count", "-c", help="Kernel launches to check and "
                                               "profile. Default: 1 with --kernel; for a Python repro, every "
                                               "launch of its own kernels checked and one launch of each profiled; "
                                               f"else every launch checked and up to {PROFILE_CAP} profiled."),
    no_profile: bool = typer.Option(False, "--no-profile", help="Stop after the sanitizer."),
    source: list[Path] = typer.Option([], "--source", help="Generated code to keep in the bundle for the handoff "
                                      "worksheet (repeatable): .cu, .ptx, .cubin or a fatbin (TVM/TIRx output, a "
                                      "CUTLASS build, the source of a binary built without PTX)."),
    accept_race: list[str] = typer.Option([], "--accept-race", help="Let racecheck findings of this release class "
                                          "through to the profile, recorded and shown as a caveat (repeatable): "
                                          "warp-synced-single-lane-release."),
    allow_unverified: bool = typer.Option(False, "--allow-unverified", help="Profile and give verdicts even when a "
                                          "sanitizer tool did not finish (marked unverified; exit 5 still)."),
    nsys: bool = typer.Option(False, "--nsys", help="Also record the timeline: `nsys profile --trace=cuda,nvtx "
                              "--sample=none --cpuctxsw=none`, exported to SQLite in the bundle (nsys/report.sqlite). "
                              "nsys is tried on a tiny run first; where none works, one Warning line and the step "
                              "is skipped."),
    timeline: bool = typer.Option(False, "--timeline", help="Also profile ncu's PmSampling_WarpStates section: "
                                  "warp stall reasons over the launch's time (the pm_samples view)."),
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
) -> None:
    """Run a repro under compute-sanitizer first, then ncu, into a bundle directory.
    Sanitizer errors -> the correctness report (exit 3, no profile); a hang -> cuda-gdb
    captures where every warp waits (exit 4); a sanitizer tool that did not finish ->
    unverified (exit 5, no profile unless --allow-unverified); clean -> the verdicts
    (exit 0), the longest kernels first."""
    with error_boundary():
        if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S) or (launch_count is not None
                                                                             and launch_count < 1):
            raise InputError(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, and "
                             "--launch-count >= 1")
        if kernel and all_kernels:
            raise InputError("--kernel and --all-kernels contradict each other: give one")
        bad = [a for a in accept_race if a not in ACCEPTABLE_RACES]
        if bad:
            raise InputError(f"--accept-race {bad[0]!r}: only {', '.join(ACCEPTABLE_RACES)} can be accepted (a "
                             "release racecheck reports although it is valid); fix any other race")
        check_sources(tuple(str(p) for p in source))
        refuse_overwrite({"--out": out_dir}, source)
        opts = CollectOptions(out_dir or Path(f"wsperf-bundle-{time.strftime('%Y%m%d-%H%M%S')}"), timeout,
                              tuple(t.strip() for t in tools.split(",") if t.strip()), kernel, launch_count,
                              not no_profile, tuple(str(p) for p in source), tuple(accept_race), allow_unverified,
                              nsys=nsys, timeline=timeline, all_kernels=all_kernels)
        result = run_collect(command, opts, progress=lambda msg: err.print(render.plain(f"wsperf collect: {msg}")),
                             judge=release_judge(kernel, tuple(accept_race)), barrier_sites=barrier_sites)
        for w in result.warnings:
            err.print(render.plain(f"Warning: {w}"), soft_wrap=True)
        err.print(render.plain(f"wsperf collect: bundle {result.bundle}"))
        con = open_store(None)
        evidence = gather(con, [result.bundle])
        gate = handoff(evidence, fmt, allow_unverified, tuple(result.problems))
        results = None
        if gate.allows_verdicts(allow_unverified) and result.report is not None:
            load_with_progress(con, [result.report])
            results = longest_first(run_analysis(con))
            timeline = bundle_timeline(con, evidence.timelines, results)  # --nsys: verdicts by GPU time
            if timeline is not None:
                with_caveats(fmt, gate.caveats, timeline, nsys_text, nsys_json, nsys_markdown)
            else:
                with_caveats(fmt, gate.caveats, results, render.analyses_text, render.analyses_json,
                             render.analyses_markdown)
        err.print(render.plain(f"wsperf collect: wrote {write_report(result.bundle, evidence, gate, results)}"))
        if result.problems:
            raise CollectError("; ".join(result.problems), gate.code or ExitCode.ERROR)
        if gate.code:
            raise typer.Exit(gate.code)
