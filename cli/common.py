"""What every command shares: the two consoles, the one error boundary, the progress bar
while reports load, the emitter for text/JSON/Markdown, the output-target check, and the
handoff rule (hang -> deadlock report, sanitizer errors -> correctness report).

Every command module imports from here; nothing here imports a command module."""

from __future__ import annotations

import enum
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, NoReturn, Optional

import typer
from rich.console import Console

from wsperf.cli import render
from wsperf.cli.render import OutputFormat
from wsperf.collectors.errors import ExitCode, WsperfError
from wsperf.collectors.files import refuse_overwrite, why
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.process import Terminated, received_signal, signal_words, signals_as_exceptions

# Piped output (CI logs, files) is read in wide windows: do not wrap it at 80 columns.
# Piped output keeps the width COLUMNS asks for, when it asks.
_COLUMNS = os.environ.get("COLUMNS", "")
out = Console(highlight=False, soft_wrap=False,
              width=None if sys.stdout.isatty() else int(_COLUMNS) if _COLUMNS.isdigit() and int(_COLUMNS) >= 40
              else 160)
# Messages on a piped stderr (a CI log) stay one line each, paths whole: no wrap at 80.
err = Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())


class TableFormat(str, enum.Enum):
    table = "table"
    json = "json"
    csv = "csv"


@contextmanager
def error_boundary() -> Iterator[None]:
    """The one place a WsperfError becomes an `Error:` line and an exit code. Also one
    line each: Ctrl-C (exit 130) and SIGTERM/SIGHUP (143/129: they unwind like Ctrl-C,
    so temporary files and child processes are cleaned up), running out of memory, and
    an OSError that reached here (a file or disk problem: a full disk, stdout on
    /dev/full, a name too long)."""
    try:
        with signals_as_exceptions():
            yield
            try:
                sys.stdout.flush()  # a full or closed stdout is said here, not at interpreter exit
            except OSError as e:
                _fail(f"cannot write the output ({why(e)})", ExitCode.ERROR)
    except WsperfError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted (Ctrl-C); nothing was recorded", 128 + signal.SIGINT)
    except Terminated as e:
        _fail(f"{signal_words(e.signum)}; nothing was recorded", 128 + e.signum)
    except RuntimeError:  # DuckDB's "Query interrupted" when a signal came mid-query
        if (signum := received_signal()) is None:
            raise
        _fail(f"{signal_words(signum)}; nothing was recorded", 128 + signum)
    except MemoryError:
        _fail("out of memory (is a memory limit such as `ulimit -v` set?); nothing was recorded", ExitCode.ERROR)
    except OSError as e:
        _fail(f"{e.filename}: {why(e)}" if e.filename else f"cannot write the output or a file ({why(e)})",
              ExitCode.ERROR)
    except Exception as e:
        # DuckDB's own out-of-memory error, where no wsperf code put it into words (its
        # module is loaded by then; looked up, not imported: not every command needs it)
        duckdb = sys.modules.get("duckdb")
        if duckdb is None or not isinstance(e, duckdb.OutOfMemoryException):
            raise
        _fail(f"out of memory ({' '.join(str(e).split())}; is a memory limit such as `ulimit -v` set?); "
              "nothing was recorded", ExitCode.ERROR)


def expectation_gate(unmet: list[str], advisory: bool, command: str) -> int:
    """The exit code for expectations a kernel does not meet (ExitCode.EXPECTATION, or 0
    with --expect-advisory), each said on stderr; 0 when every expectation is met."""
    if not unmet:
        return 0
    for line in unmet:
        err.print(render.plain(f"wsperf {command}: expectation not met: {line}"), soft_wrap=True)
    if advisory:
        return 0
    err.print(render.plain(f"wsperf {command}: exit {ExitCode.EXPECTATION}: an expectation is not met "
                           "(--expect-advisory keeps it advisory)"), soft_wrap=True)
    return ExitCode.EXPECTATION


def _fail(message: str, code: int) -> NoReturn:
    # One line, whatever the message quotes (a file name or a tool's output may hold newlines).
    err.print(render.plain("Error: " + " ".join(message.split())), soft_wrap=True)
    if _stdout_broken():
        # Point stdout at /dev/null so that the interpreter's last flush has nothing to fail on.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise typer.Exit(code) from None


def _stdout_broken() -> bool:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


@contextmanager
def progress_bar(console: Console, first: str, markup: str = "") -> Iterator[Callable[[int, int, str], None]]:
    """A transient progress bar on `console` (a terminal only; elsewhere nothing is drawn
    and Rich's progress module is not even imported, ~40 ms of every command's start-up);
    yields `tick(done, total, description)`. `markup` prefixes the description column."""
    if not console.is_terminal:
        yield lambda done, total, label: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # see above

    with Progress(TextColumn(markup + "{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(first, total=None)

        def tick(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=render.plain(label))

        yield tick


@contextmanager
def load_progress(console: Console = err) -> Iterator[Callable[[int, int, str], None]]:
    """A transient progress bar on stderr while reports load; yields the loaders'
    `progress(done, total, label)` callback."""
    with progress_bar(console, "loading", "[progress.description]") as tick:
        yield lambda done, total, label: tick(done, total, f"loading {label}")


def load_with_progress(con, reports: list[Path], *, units: bool = True) -> list:
    """Load Nsight Compute reports into `con`, showing progress; `units`: as in
    collectors.ncu.load_report (false only for a store that ends with the command)."""
    if not reports:
        return []
    with load_progress() as tick:
        return load_reports(con, reports, progress=tick, units=units)


def emit(fmt: OutputFormat, value, text, as_json, as_markdown) -> None:
    """Write `value` to stdout in `fmt` with the renderer for that format."""
    if fmt is OutputFormat.json:
        sys.stdout.write(as_json(value) + "\n")
    elif fmt is OutputFormat.markdown:
        sys.stdout.write(as_markdown(value))
    else:
        text(value, out)


def check_outputs(charts_dir: Optional[Path], html_file: Optional[Path], *, inputs: Iterable[object] = (),
                  store: Optional[Path] = None, more: Optional[dict[str, Optional[Path]]] = None,
                  charts_option: str = "--charts") -> None:
    """Refuse an unusable --charts / --html target before loading anything, and any
    output (these and `more`, by option name) that is an input, a file of an input
    bundle, the store or another output (collectors/files.py refuse_overwrite)."""
    refuse_overwrite({charts_option: charts_dir, "--html": html_file, **(more or {})},
                     [p for p in inputs if isinstance(p, (str, os.PathLike))], store=store)
    # Imported only when asked for: the chart modules pull in Altair, slow to import.
    if charts_dir is not None:
        from wsperf.cli.charts import check_out_dir

        check_out_dir(charts_dir)
    if html_file is not None:
        from wsperf.cli.html import check_page_path

        check_page_path(html_file)


def longest_first(results: list) -> list:
    """Launches that take the most GPU time first: a repro's RNG fills and copies last."""
    return sorted(results, key=lambda a: -(a.summary.duration_ns or 0.0))
