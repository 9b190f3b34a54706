"""What every command shares: the two consoles, the one error boundary, the progress bar
while reports load, the emitter for text/JSON/Markdown, the output-target check, and the
handoff rule (hang -> deadlock report, sanitizer errors -> correctness report).

Every command module imports from here; nothing here imports a command module."""

from __future__ import annotations

import enum
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wsperf.analyses.correctness import correctness_report, deadlock_report
from wsperf.cli import render
from wsperf.cli.render import OutputFormat
from wsperf.collectors.errors import ExitCode, WsperfError
from wsperf.collectors.ncu import load_reports

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


@contextmanager
def load_progress(console: Console = err) -> Iterator[Callable[[int, int, str], None]]:
    """A transient progress bar on stderr while reports load; yields the loaders'
    `progress(done, total, label)` callback."""
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("loading", total=None)

        def tick(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=render.plain(f"loading {label}"))

        yield tick


def load_with_progress(con, reports: list[Path]) -> list:
    """Load Nsight Compute reports into `con`, showing progress."""
    if not reports:
        return []
    with load_progress() as tick:
        return load_reports(con, reports, progress=tick)


def emit(fmt: OutputFormat, value, text, as_json, as_markdown) -> None:
    """Write `value` to stdout in `fmt` with the renderer for that format."""
    if fmt is OutputFormat.json:
        sys.stdout.write(as_json(value) + "\n")
    elif fmt is OutputFormat.markdown:
        sys.stdout.write(as_markdown(value))
    else:
        text(value, out)


def check_outputs(charts_dir: Optional[Path], html_file: Optional[Path]) -> None:
    """Refuse an unusable --charts / --html target before loading anything."""
    # Imported only when asked for: the chart modules pull in Altair, slow to import.
    if charts_dir is not None:
        from wsperf.cli.charts import check_out_dir

        check_out_dir(charts_dir)
    if html_file is not None:
        from wsperf.cli.html import check_page_path

        check_page_path(html_file)


def handoff(evidence, fmt: OutputFormat) -> int:
    """The handoff rule: a hang -> the deadlock report (4); sanitizer errors -> the
    correctness report (3); else 0 and the caller goes on to performance."""
    code = ExitCode.OK
    if evidence.hang is not None:
        rep = deadlock_report(evidence)
        emit(fmt, rep, render.deadlock_text, render.deadlock_json, render.deadlock_markdown)
        code = ExitCode.DEADLOCK
    corr = correctness_report(evidence.sanitizer)
    if corr.broken:
        emit(fmt, corr, render.correctness_text, render.correctness_json, render.correctness_markdown)
        code = code or ExitCode.CORRECTNESS
    return code
