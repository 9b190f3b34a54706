"""`wsperf compare`: the regression gate, and its renderings (terminal, JSON, a pull-request
comment in Markdown, JUnit XML for CI test reports). Registered on the app in cli/main.py;
its error boundary and consoles are main's (imported when it runs, since main imports
this module)."""

from __future__ import annotations

import enum
import io
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from wsperf.analyses.compare import Change, CompareResult, FigureChange, KernelComparison, \
    compare as run_compare, resolve_side
from wsperf.analyses.config import load_config
from wsperf.analyses.sql import check_kernel_regex
from wsperf.cli import render
from wsperf.cli.common import check_outputs, err, error_boundary, expectation_gate, load_progress, out
from wsperf.cli.nsys import compare_exports
from wsperf.cli.runs import require_store
from wsperf.cli.table import Table
from wsperf.collectors.errors import ExitCode, InputError
from wsperf.collectors.files import write_output
from wsperf.collectors.store import open_store


class CompareFormat(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    junit = "junit"


def compare(
    inputs: list[str] = typer.Argument(..., help="BASE CANDIDATE: each a report (.ncu-rep, .ncu-repz, .ncu-rep.gz), a bundle "
                                       "directory from `wsperf collect`, or a run label in --db; or Nsight Systems "
                                       "exports (.sqlite, .sqlite.gz: kernel durations, every launch a sample). With "
                                       "--vs, every argument is the base.", show_default=False),
    vs: list[str] = typer.Option([], "--vs", help="A candidate (repeatable): compare all the positional arguments "
                                 "(the base) against all of these.", show_default=False),
    db: Optional[Path] = typer.Option(None, "--db", help="Store holding recorded runs: BASE and CANDIDATE may be run "
                                      "labels there; reports named are loaded into it."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only kernels whose name matches this regular "
                                         "expression (RE2 syntax)."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file: [compare.thresholds] (alpha, minimum "
                                          "change per figure), expect, `[thresholds.<hypothesis>]`."),
    fmt: CompareFormat = typer.Option(CompareFormat.text, "--format", "-f", help="text, json, markdown or junit."),
    out_file: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the output to this file instead of "
                                            "stdout."),
    charts_dir: Optional[Path] = typer.Option(None, "--charts", help="Also write the before/after charts into this "
                                              "directory (.vl.json, .html, .png, .svg); Markdown links the PNGs."),
    html_file: Optional[Path] = typer.Option(None, "--html", help="Also write one standalone HTML page (works "
                                             "offline): the verdict, the charts, every figure per kernel."),
    expect_advisory: bool = typer.Option(False, "--expect-advisory", help="Say the candidate's unmet `expect` "
                                         "(config) but exit 0 (default: exit 6 when nothing regressed)."),
) -> None:
    """Compare a candidate against a base: every kernel on both sides, figure by figure
    (duration and shares tested with Mann-Whitney U and a minimum change; registers,
    shared memory, launch shape, instruction paths exactly) and hypothesis by hypothesis.
    Exit 1 when anything regressed, else 6 when the candidate misses the config's `expect`,
    0 when not."""
    with error_boundary():
        check_outputs(charts_dir, html_file, inputs=[*inputs, *vs, config], store=db, more={"--out": out_file})
        if vs:
            base_names, cand_names = list(inputs), list(vs)
        elif len(inputs) == 2:
            base_names, cand_names = [inputs[0]], [inputs[1]]
        else:
            raise InputError(f"give BASE CANDIDATE, or BASE... --vs CANDIDATE... (got {render.counted(len(inputs), 'argument')} "
                             "and no --vs)")
        cfg = load_config(config)
        if db is not None:
            require_store(db, "record runs into it first, or leave out --db to compare files")
        # Only run labels of the store on both sides: nothing to load, so the store is read,
        # never written (no write lock; a reader beside a nightly job's writer).
        labels_only = db is not None and not any(Path(n).exists() for n in (*base_names, *cand_names))
        con = open_store(db, read_only=labels_only)
        check_kernel_regex(kernel)
        result = compare_exports(con, base_names, cand_names, cfg, kernel)  # Nsight Systems exports; else None
        if result is None:
            with load_progress(err) as tick:
                base = resolve_side(con, base_names, db=db, progress=tick)
                cand = resolve_side(con, cand_names, db=db, progress=tick)
            result = run_compare(con, base.launch_ids, cand.launch_ids, cfg, base_label=base.label,
                                 cand_label=cand.label, kernel=kernel)
        charts = _charts_and_page(result, charts_dir, html_file, err)
        _write(fmt, result, out_file, charts, charts_dir)
        if out_file is not None:
            err.print(render.plain(f"wsperf compare: {summary_line(result)}; wrote {out_file}"))
    if result.regression:
        # a regression decides the exit; the candidate's unmet expectations are still said
        expectation_gate(list(result.unmet), True, "compare")
        raise typer.Exit(ExitCode.REGRESSION)
    if (unmet := expectation_gate(list(result.unmet), expect_advisory, "compare")):
        raise typer.Exit(unmet)


def _charts_and_page(result: CompareResult, charts_dir: Path | None, html_file: Path | None,
                     console: Console) -> dict:
    """Write --charts and --html; returns the charts written (empty without --charts)."""
    if charts_dir is None and html_file is None:
        return {}
    from wsperf.cli.charts import compare_charts, write_charts, wrote_charts

    charts = compare_charts(result)
    if html_file is not None:
        from wsperf.cli.html import compare_page, write_page

        console.print(render.plain(f"wsperf compare: wrote {write_page(compare_page(result, charts), html_file)}"))
    if charts_dir is None:
        return {}
    files = write_charts(charts, charts_dir)
    console.print(render.plain(wrote_charts("wsperf compare", charts, files, charts_dir)))
    return charts


def _write(fmt: CompareFormat, result: CompareResult, out_file: Path | None, charts: dict,
           charts_dir: Path | None) -> None:
    """The output in `fmt` to stdout or `out_file`; Markdown ends with links to the
    charts written into `charts_dir`."""
    if fmt is CompareFormat.text:
        if out_file is None:
            compare_text(result, out)
            return
        buf = io.StringIO()
        compare_text(result, Console(file=buf, width=160, no_color=True, highlight=False, soft_wrap=False))
        text = buf.getvalue()
    elif fmt is CompareFormat.json:
        text = compare_json(result) + "\n"
    elif fmt is CompareFormat.markdown:
        text = compare_markdown(result)
        if charts:
            from wsperf.cli.charts import charts_markdown

            text += charts_markdown(charts, charts_dir)
    else:
        text = compare_junit(result)
    if out_file is None:
        sys.stdout.write(text)
        return
    # A temporary file renamed into place, never through a link (collectors/files.py).
    write_output(out_file, text, what="the compare output")


# ---------------------------------------------------------------------------------------
# Shared wording


def _regressions(result: CompareResult) -> tuple[int, int]:
    """(regressed figures and verdicts, kernels with any)."""
    n = sum(sum(f.change is Change.regression for f in k.figures) + sum(v.regression for v in k.verdicts)
            for k in result.kernels)
    return n, sum(k.regression for k in result.kernels)


def summary_line(result: CompareResult) -> str:
    n, m = _regressions(result)
    k = len(result.kernels)
    return (f"{n} regression{'' if n == 1 else 's'} in {m} kernel{'' if m == 1 else 's'} "
            f"({k} kernel{'' if k == 1 else 's'} compared)")


def values(f: FigureChange) -> tuple[str, str]:
    """A figure's base and candidate values, for people: the cluster as its dims are
    written (`none`, `2x1x1`, as the note and the header say), every other figure in its unit."""
    if f.name == "cluster" and f.base_detail and f.cand_detail:
        return f.base_detail, f.cand_detail
    return value(f, f.base), value(f, f.cand)


def launch_configs(k: KernelComparison) -> str:
    """The kernel's launch configuration, each part that differs as `base -> candidate`:
    `grid 396x1x1 block 160x1x1 cluster none -> 2x1x1`."""
    cand = k.launch_config.split()
    base = k.base_launch_config.split()
    if len(base) != len(cand):
        return k.launch_config
    return " ".join(f"{name} {b}" if b == c else f"{name} {b} -> {c}"
                    for name, b, c in zip(cand[0::2], base[1::2], cand[1::2]))


def value(f: FigureChange, v: float | None) -> str:
    """A figure's value in its unit, for people."""
    if v is None:
        return "n/a"
    if f.unit == "ns":
        return render.duration(v)
    if f.unit == "share":
        return f"{100 * v:.1f}%"
    if f.unit == "%":
        return f"{v:.1f}%"
    if f.unit == "present":
        return "yes" if v else "no"
    return f"{v:,.0f}"


def _delta(f: FigureChange) -> str:
    return "-" if f.delta_pct is None else f"{f.delta_pct:+.1f}%"


def _p(f: FigureChange) -> str:
    return "-" if f.p_value is None else f"{f.p_value:.2g}"


def _matched(k: KernelComparison) -> str:
    return {"name+config": "name and launch configuration",
            "function+config": "function name and launch configuration (template arguments differ)",
            "function": "function name (launch configuration differs)"}.get(k.matched_by, k.matched_by)


def _status(status: str, confirmed: int, launches: int) -> str:
    if status == "confirmed":
        return f"confirmed on {confirmed}/{launches}"
    return f"{status} (confirmed on {confirmed}/{launches})" if confirmed else status


# ---------------------------------------------------------------------------------------
# Text (Rich)

_CHANGE_STYLE = {Change.regression: "bold red", Change.improvement: "green", Change.changed: "yellow",
                 Change.unchanged: "dim", Change.insufficient: "yellow"}


def compare_text(result: CompareResult, console: Console) -> None:
    console.print(Text.assemble(("base ", "bold"), render.plain(result.base)))
    console.print(Text.assemble(("candidate ", "bold"), render.plain(result.candidate)))
    # kernels where nothing moved (every figure unchanged, no verdict changed) share one table:
    # an export compared with itself is one line per kernel, not a page each
    steady = [k for k in result.kernels if not any(f.change is not Change.unchanged for f in k.figures)
              and not any(v.changed for v in k.verdicts)]
    for k in result.kernels:
        if k in steady:
            continue
        console.print()
        title = Text.assemble(("kernel ", "bold"), render.plain(k.kernel), f"  {launch_configs(k)}, "
                              f"{len(k.base_launch_ids)} vs {len(k.cand_launch_ids)} launches")
        console.print(title)
        console.print(Text.assemble("matched by ", _matched(k)))
        if k.base_name != k.cand_name:
            console.print(Text.assemble("  base      ", render.plain(k.base_name)))
            console.print(Text.assemble("  candidate ", render.plain(k.cand_name)))
        t = Table(title_justify="left")
        for c in ("figure", "base", "candidate", "delta", "p", "verdict", "note"):
            t.add_column(c, justify="right" if c in ("base", "candidate", "delta", "p") else "left",
                         no_wrap=c != "note")
        for f in k.figures:
            t.add_row(f.name, *values(f), _delta(f), _p(f),
                      Text(f.change.value, style=_CHANGE_STYLE[f.change]), render.plain(f.note))
        console.print(t)
        changed = [v for v in k.verdicts if v.changed]
        if changed:
            vt = Table(title="verdict changes", title_justify="left")
            for c in ("hypothesis", "base", "candidate", "verdict", "candidate evidence"):
                vt.add_column(c, no_wrap=c != "candidate evidence")
            for v in changed:
                verdict = Text("regression", style="bold red") if v.regression else \
                    Text("improvement", style="green") if v.resolved else Text("changed", style="yellow")
                vt.add_row(v.hypothesis, _status(v.base_status, v.base_confirmed, len(k.base_launch_ids)),
                           _status(v.cand_status, v.cand_confirmed, len(k.cand_launch_ids)), verdict,
                           render.plain(v.cand_summary))
            console.print(vt)
        elif k.verdicts:
            console.print(Text("verdicts: no hypothesis changed", style="dim"))
    if steady:
        console.print()
        _steady_table(steady, console)
    if result.kernels and not any(k.verdicts for k in result.kernels):
        console.print(Text("verdicts: none compared (the inputs carry kernel durations only: no hypothesis runs "
                           "on Nsight Systems data)", style="dim"))
    for label, names in (("only in base", result.only_base), ("only in candidate", result.only_cand)):
        for n in names:
            console.print(Text.assemble((f"{label}: ", "yellow"), render.plain(n)))
    console.print()
    console.print(Text(summary_line(result), style="bold red" if result.regression else "bold green"))


def _steady_table(steady: list[KernelComparison], console: Console) -> None:
    """The kernels where nothing moved, one row each: their duration on both sides."""
    t = Table(title=f"{len(steady)} kernel{'s' if len(steady) != 1 else ''} unchanged (every figure within its "
              "threshold or noise, no verdict changed)", title_justify="left")
    for c in ("kernel", "launch", "launches", "base", "candidate", "delta"):
        t.add_column(c, justify="right" if c in ("launches", "base", "candidate", "delta") else "left")
    for k, name in zip(steady, render.distinct_names(k.base_name for k in steady)):
        d = next((f for f in k.figures if f.name == "duration_ns"), None)
        t.add_row(render.plain(name), render.plain(k.launch_config), f"{len(k.base_launch_ids)} / {len(k.cand_launch_ids)}",
                  value(d, d.base) if d else "-", value(d, d.cand) if d else "-", _delta(d) if d else "-")
    console.print(t)


# ---------------------------------------------------------------------------------------
# JSON: the dataclasses, field for field, plus the derived regression flags.


def compare_json(result: CompareResult) -> str:
    n, m = _regressions(result)
    doc = {
        "base": result.base,
        "candidate": result.candidate,
        "regression": result.regression,
        "regressions": n,
        "kernels_regressed": m,
        # (--expect-advisory turns the 6 into 0 at the process level only)
        "exit_code": ExitCode.REGRESSION if result.regression else ExitCode.EXPECTATION if result.unmet else ExitCode.OK,
        "unmet_expectations": list(result.unmet),
        "kernels": [dict(render._jsonable(k), regression=k.regression) for k in result.kernels],
        "only_base": list(result.only_base),
        "only_cand": list(result.only_cand),
    }
    return json.dumps(doc, indent=2, allow_nan=False)


# ---------------------------------------------------------------------------------------
# Markdown: a pull-request comment. The summary line first, then what changed.


def compare_markdown(result: CompareResult) -> str:
    out = [f"**{summary_line(result)}**", "",
           f"base {render.md(result.base)} against candidate {render.md(result.candidate)}", ""]
    rows = []
    unchanged = 0
    for k in result.kernels:
        for f in k.figures:
            # The duration always shows: it is what a reviewer looks for first.
            if f.change is Change.unchanged and f.name != "duration_ns":
                unchanged += 1
                continue
            verdict = f"**{f.change.value}**" if f.change is Change.regression else f.change.value
            base, cand = values(f)
            rows.append(f"| {render.md(k.kernel)} | {render.md(f.name)} | {render.md(base)} | "
                        f"{render.md(cand)} | {_delta(f)} | {_p(f)} | {verdict} | {render.md(f.note)} |")
        for v in k.verdicts:
            if not v.changed:
                continue
            verdict = "**regression**" if v.regression else "improvement" if v.resolved else "changed"
            rows.append(f"| {render.md(k.kernel)} | hypothesis {render.md(v.hypothesis)} | {v.base_status} | "
                        f"{v.cand_status} | - | - | {verdict} | {render.md(v.cand_summary)} |")
    if rows:
        out += ["| kernel | figure | base | candidate | delta | p | verdict | note |",
                "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |", *rows, ""]
    out.append(f"{unchanged} figure{'' if unchanged == 1 else 's'} unchanged in "
               f"{len(result.kernels)} kernel{'' if len(result.kernels) == 1 else 's'}: "
               + ", ".join(f"{render.md(k.kernel)} ({render.md(launch_configs(k))}, {len(k.base_launch_ids)} vs "
                           f"{len(k.cand_launch_ids)} launches, matched by {k.matched_by})" for k in result.kernels)
               + ".")
    for label, names in (("Only in base", result.only_base), ("Only in candidate", result.only_cand)):
        out += [f"- {label}: {render.md(n)}" for n in names]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------
# JUnit XML: one testsuite, one testcase per (kernel, figure) and (kernel, hypothesis);
# a regression is a <failure>, a figure a side lacks is <skipped>. ElementTree escapes
# markup; characters XML 1.0 cannot hold at all (ANSI escapes, other controls) are removed.

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x9b\ud800-\udfff\ufffe\uffff]")


def _x(text: object) -> str:
    return _XML_INVALID.sub("", str(text))


def compare_junit(result: CompareResult) -> str:
    suite = ET.Element("testsuite", name="wsperf compare")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="base", value=_x(result.base))
    ET.SubElement(props, "property", name="candidate", value=_x(result.candidate))
    functions = [k.kernel for k in result.kernels]
    tests = failures = skipped = 0
    for k in result.kernels:
        # The function name, with the launch configuration when it alone is ambiguous.
        classname = _x(k.kernel if functions.count(k.kernel) == 1 else f"{k.kernel} ({k.launch_config})")
        for f in k.figures:
            case = ET.SubElement(suite, "testcase", classname=classname, name=_x(f.name))
            tests += 1
            summary = f"{f.name}: {' -> '.join(values(f))} ({_delta(f)}, p {_p(f)}): {f.change.value}"
            if f.change is Change.regression:
                failures += 1
                ET.SubElement(case, "failure", type="regression", message=_x(summary)).text = _x(f.note)
            elif f.change is Change.insufficient:
                skipped += 1
                ET.SubElement(case, "skipped", message=_x(f"{summary}: {f.note}"))
            else:
                ET.SubElement(case, "system-out").text = _x(f"{summary}; {f.note}" if f.note else summary)
        for v in k.verdicts:
            case = ET.SubElement(suite, "testcase", classname=classname, name=_x(f"hypothesis:{v.hypothesis}"))
            tests += 1
            summary = f"{v.hypothesis}: {v.base_status} -> {v.cand_status}"
            if v.regression:
                failures += 1
                ET.SubElement(case, "failure", type="regression",
                              message=_x(f"{summary} (newly confirmed)")).text = _x(v.cand_summary)
            else:
                ET.SubElement(case, "system-out").text = _x(f"{summary}; {v.cand_summary}")
    for label, names in (("only in base", result.only_base), ("only in candidate", result.only_cand)):
        for n in names:
            case = ET.SubElement(suite, "testcase", classname=_x(n), name=label)
            ET.SubElement(case, "skipped", message=_x(f"{label}: no match on the other side"))
            tests += 1
            skipped += 1
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
