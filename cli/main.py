"""The `wsperf` command: the Typer app and its commands, one module each. Each command
parses, calls one library function and renders; every expected failure is a
`WsperfError`, printed once as `Error: ...` on stderr with its documented exit code
(README, "Exit codes"); the shared pieces live in `wsperf.cli.common`."""

from __future__ import annotations

import typer

from wsperf.cli.analyze import analyze, chart
from wsperf.cli.collect import collect
from wsperf.cli.compare import compare
from wsperf.cli.doctor import doctor
from wsperf.cli.history import export, history
from wsperf.cli.inspect import inspect
from wsperf.cli.nsys import nsys
from wsperf.cli.render import version
from wsperf.cli.sql import sql
from wsperf.cli.timeline import timeline, trace_include
from wsperf.cli.worksheet import worksheet

app = typer.Typer(
    name="wsperf",
    help="Why is this warp-specialized kernel broken or slow? Answers from real Nsight Compute output.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # Docstrings are wrapped in the source; Markdown mode reflows each paragraph to the
    # terminal instead of breaking lines where the source did.
    rich_markup_mode="markdown",
)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"wsperf {version()}")
        raise typer.Exit()


@app.callback()
def _main(show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                            help="Print wsperf's version and exit.")) -> None:
    """Why is this warp-specialized kernel broken or slow? Answers from real Nsight Compute,
    compute-sanitizer and cuda-gdb output."""


def _short(f) -> str:
    """A command's first sentence, for the command list of `wsperf --help`."""
    text = " ".join((f.__doc__ or "").split())
    return text.split(". ")[0].rstrip(".") + "."


app.command(short_help=_short(analyze))(analyze)
app.command(short_help=_short(chart))(chart)
app.command(short_help=_short(collect), context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    collect)
app.command(short_help=_short(sql))(sql)
app.command(short_help=_short(doctor))(doctor)
app.command(short_help=_short(inspect))(inspect)
app.command(short_help=_short(compare))(compare)
app.command(short_help=_short(history))(history)
app.command(short_help=_short(export))(export)
app.command(short_help=_short(worksheet))(worksheet)
app.command(short_help=_short(nsys))(nsys)
app.command(short_help=_short(timeline))(timeline)
app.command(short_help=_short(trace_include))(trace_include)


def main() -> None:  # pragma: no cover - console-script shim
    app()
