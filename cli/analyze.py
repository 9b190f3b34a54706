"""`wsperf analyze` and `wsperf chart`: load reports (or a bundle) and print the
verdicts, or write the charts; the handoff rule first (a hung or broken kernel gets its
report, never performance advice)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Optional

import typer

from wsperf.analyses.analyze import analyze as run_analysis, unmet_expectations
from wsperf.analyses.config import load_config
from wsperf.analyses.evidence import gather
from wsperf.analyses.sql import check_kernel_regex
from wsperf.cli import render
from wsperf.cli.common import (check_outputs, err, error_boundary, expectation_gate, load_with_progress, longest_first,
                               out, progress_bar)
from wsperf.cli.gate import handoff, no_profile, with_caveats
from wsperf.cli.render import OutputFormat
from wsperf.cli.runs import LOCK_HELP, begin_run, load_run
from wsperf.collectors.errors import InputError
from wsperf.collectors.files import split_inputs
from wsperf.collectors.store import LOCK_TIMEOUT_S, open_store


def analyze(
    reports: list[Path] = typer.Argument(None, help="Nsight Compute reports (.ncu-rep, .ncu-repz), or bundle directories "
                                         "written by `wsperf collect`; Nsight Systems exports (.sqlite, .sqlite.gz, .nsys-rep) "
                                         "for the timeline report.", show_default=False),
    sanitizer: list[Path] = typer.Option([], "--sanitizer", "-s", help="compute-sanitizer XML (`--xml --save "
                                         "FILE`), repeatable: any error -> the correctness report, exit 3."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file to load into (created if absent, appended to "
                                      "if present). Default: an in-memory database."),
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only launches whose kernel name matches "
                                         "this regular expression (RE2 syntax)."),
    expect: list[str] = typer.Option([], "--expect", "-e", help="What the kernel should use (repeatable): tma, "
                                     "tensor-core, wgmma, tcgen05, setmaxnreg, warp-specialized."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with `expect = [...]` and "
                                          "`[thresholds.<hypothesis>]` overrides."),
    expect_advisory: bool = typer.Option(False, "--expect-advisory", help="Say an unmet expectation but exit 0 "
                                         "(default: exit 6, docs/exit-codes.md)."),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Also write each launch's charts into this "
                                              "directory (.vl.json, .html, .png, .svg); Markdown links the PNGs."),
    html_file: Optional[Path] = typer.Option(None, "--html", help="Also write one standalone HTML page (works "
                                             "offline): summaries, verdicts, charts, Nsight Compute's rules."),
    label: Optional[str] = typer.Option(None, "--label", help="With --db: name of the run recorded (unique in "
                                        "the store). Default: `<branch>@<commit>:<UTC time>`."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="With --db: tag the recorded run (repeatable), e.g. nightly."),
    commit: Optional[str] = typer.Option(None, "--commit", help="With --db: git commit of the run. Default: git "
                                         "rev-parse HEAD here, else $GITHUB_SHA / $CI_COMMIT_SHA."),
    branch: Optional[str] = typer.Option(None, "--branch", help="With --db: git branch of the run. Default: git's, "
                                         "else $GITHUB_REF_NAME / $CI_COMMIT_REF_NAME."),
    lock_timeout: float = typer.Option(LOCK_TIMEOUT_S, "--lock-timeout", help=LOCK_HELP),
    source: list[Path] = typer.Option([], "--source", help="Generated code of the kernels (repeatable: .cu, .ptx, "
                                      ".cubin, fatbin): the handoff worksheet ties a hang or a race to its barrier."),
    write_report: bool = typer.Option(False, "--write-report", help="With a bundle: (re)write its REPORT.md, the "
                                      "reproducible report for an upstream issue."),
    allow_unverified: bool = typer.Option(False, "--allow-unverified", help="Give the verdicts of a bundle whose "
                                          "sanitizer evidence is incomplete, each marked unverified (exit 5 still)."),
) -> None:
    """Load reports and print, per launch: what ran (launch shape, duration, the
    instruction paths its SASS uses), its producer/consumer roles, and the verdict of
    every slow-kernel hypothesis with its evidence and remedy. A kernel the sanitizer
    found broken gets the correctness report instead (exit 3); a bundle whose repro hung,
    the deadlock report (exit 4); a bundle whose sanitizer evidence is incomplete (a tool
    that did not finish, a missing or damaged file), the unverified report (exit 5)."""
    reports = reports or []
    with error_boundary():
        exports, reports = split_inputs(reports)  # Nsight Systems exports: the timeline report (cli/nsys.py)
        if exports:
            return _nsys().analyze_timeline(exports, reports, sanitizer=sanitizer, db=db, fmt=fmt, charts_dir=charts_dir,
                                    lock_timeout=lock_timeout, label=label, tags=tag, commit=commit, branch=branch)
        cfg = load_config(config, tuple(expect))
        check_kernel_regex(kernel)
        if not reports and not sanitizer:
            raise InputError("nothing to analyze: give reports, a bundle directory or --sanitizer FILE.xml")
        check_outputs(charts_dir, html_file, inputs=[*reports, *sanitizer, *source, config], store=db)
        con = open_store(db, lock_timeout=lock_timeout)
        run = begin_run(con, db, label, tag, commit, branch, reports)
        evidence = gather(con, reports, sanitizer, source)
        gate = handoff(evidence, fmt, allow_unverified, unrelated=lambda: _unrelated(evidence))
        if write_report and evidence.bundle is None:
            raise InputError("--write-report needs a bundle directory written by `wsperf collect`")
        if write_report:  # imported only when asked for (start-up time: cuda-gdb's parser and more)
            from wsperf.cli.report_md import write_report as write_bundle_report
        if not gate.allows_verdicts(allow_unverified) or not evidence.reports:
            timeline = (_nsys().bundle_timeline(con, evidence.timelines, None)
                        if evidence.timelines and gate.allows_verdicts(allow_unverified) else None)
            if timeline is not None:  # collect --nsys without a profile: the timeline alone
                with_caveats(fmt, gate.caveats, timeline, _nsys().nsys_text, _nsys().nsys_json, _nsys().nsys_markdown)
            elif gate.allows_verdicts(allow_unverified):
                no_profile(fmt, gate)
            if write_report:
                err.print(render.plain(f"wsperf analyze: wrote {write_bundle_report(evidence.bundle, evidence, gate, None)}"))
            _say(gate.warnings)  # (the report printed asked for them: a scratch store read the reports' names)
            raise typer.Exit(gate.code)
        reports = list(evidence.reports)
        # The metrics' units only go into a store that outlives the command (--db): this
        # command's output never shows them (prestart.needs_units guesses the same).
        ids = load_run(con, run, reports, partial(load_with_progress, units=db is not None))
        warnings = gate.warnings or _unrelated(evidence, con, ids)
        _say(warnings)
        results = run_analysis(con, kernel, expect=cfg.expect, thresholds=cfg.thresholds, launch_ids=ids)
        if evidence.bundle is not None:
            results = longest_first(results)  # a repro's many kernels: the ones that matter lead
        if not results:
            what = f"matches --kernel {kernel!r}" if kernel else "was found"
            raise InputError(f"no kernel launch {what} in {len(reports)} report(s)")
        charts = _write_charts(results, charts_dir)[0] if charts_dir is not None else {}
        if html_file is not None:
            from wsperf.cli.html import analysis_page, write_page

            err.print(render.plain(f"wsperf analyze: wrote {write_page(analysis_page(results), html_file)}"))
        # collect --nsys: verdicts by GPU time
        timeline = _nsys().bundle_timeline(con, evidence.timelines, results) if evidence.timelines else None
        if timeline is not None:
            with_caveats(fmt, gate.caveats, timeline, _nsys().nsys_text, _nsys().nsys_json, _nsys().nsys_markdown)
        else:
            with_caveats(fmt, gate.caveats, results, render.analyses_text, render.analyses_json,
                         render.analyses_markdown, warnings)
        if charts and fmt is OutputFormat.markdown:
            from wsperf.cli.charts import charts_markdown

            sys.stdout.write(charts_markdown(charts, charts_dir))
        if write_report:
            err.print(render.plain(f"wsperf analyze: wrote {write_bundle_report(evidence.bundle, evidence, gate, results)}"))
        # the gate's code (a stop, unverified evidence) comes first; then the expectations
        unmet = 0 if gate.code else expectation_gate(unmet_expectations(results), expect_advisory, "analyze")
    if gate.code:
        raise typer.Exit(gate.code)
    if unmet:
        raise typer.Exit(unmet)


def _say(warnings: tuple[str, ...]) -> None:
    for w in warnings:
        err.print(render.plain(f"wsperf analyze: warning: {w}"), soft_wrap=True)


def _unrelated(evidence, con=None, ids: list[int] | None = None) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    """A warning when sanitizer files given with --sanitizer name only kernels that no
    report given beside them holds: likely another program's run (a synccheck XML of one
    kernel beside another kernel's report stopped with exit 3 and said nothing of it). The
    reports' kernel names are their launches `ids` in `con` once loaded; without `con`
    (a stop: nothing was loaded) a scratch store reads them. A bundle's files belong
    together and are not checked. JSON carries it (`warnings`) and stderr says it."""
    if evidence.bundle is not None or not evidence.reports:
        return ()
    named = {f.kernel for _, o in evidence.sanitizer for f in o.findings if f.kernel}
    if not named:
        return ()
    query = "SELECT DISTINCT kernel_function, kernel_mangled, kernel_demangled FROM launches"
    if con is not None:
        rows = con.execute(query + " WHERE list_contains($ids, launch_id)", {"ids": ids or []}).fetchall()
    else:
        from wsperf.collectors.ncu import load_reports

        scratch = open_store(None)
        try:
            load_reports(scratch, list(evidence.reports))
            rows = scratch.execute(query).fetchall()
        finally:
            scratch.close()
    have = {n for r in rows for n in r if n}
    if any(k in have or any(k in d for d in have) for k in named):
        return ()
    return (f"the sanitizer file(s) name kernel(s) {', '.join(sorted(named))}, and no report given holds one "
            f"({', '.join(sorted({r[0] for r in rows if r[0]}))}): inputs of different programs? Analyze each with "
            "its own files",)


def _nsys() -> ModuleType:
    """cli/nsys.py, imported only for Nsight Systems input (start-up time, not a cycle:
    with the timeline analyses and compare it pulls in, ~0.1 s of a one-report analyze)."""
    from wsperf.cli import nsys

    return nsys


def _write_charts(results, out_dir: Path) -> tuple[dict, list[Path]]:
    from wsperf.cli.charts import analysis_charts, write_charts, wrote_charts

    charts = analysis_charts(results)
    if not charts:
        raise InputError("nothing to chart: the launches hold no PC samples, instruction counts or throughput "
                         "metrics (collect with `ncu --set full --import-source yes`)")
    # A transient bar on stderr (a terminal only): each chart's PNG and SVG take a while.
    with progress_bar(err, "charts") as tick:
        files = write_charts(charts, out_dir,
                             progress=lambda done, total, name: tick(done, total, f"wrote chart {name}"))
    err.print(render.plain(wrote_charts("wsperf", charts, files, out_dir)))
    return charts, files


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
        check_outputs(out_dir, None, inputs=reports, charts_option="--out")
        con = open_store(None)
        evidence = gather(con, reports)
        gate = handoff(evidence, OutputFormat.text)
        if gate.code:
            # Charts are performance advice: none for a hung, broken or unverified bundle.
            raise typer.Exit(gate.code)
        paths = list(evidence.reports)
        if not paths:
            raise InputError("no Nsight Compute report among the inputs; give .ncu-rep files or bundle directories")
        load_with_progress(con, paths, units=False)  # an in-memory store, and charts show no units
        results = run_analysis(con, kernel)
        if not results:
            what = f"matches --kernel {kernel!r}" if kernel else "was found"
            raise InputError(f"no kernel launch {what} in {len(paths)} report(s)")
        for p in _write_charts(results, out_dir)[1]:
            out.print(render.plain(str(p)))


