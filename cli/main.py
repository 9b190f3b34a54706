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
from wsperf.cli.sql import sql
from wsperf.cli.worksheet import worksheet

app = typer.Typer(
    name="wsperf",
    help="Why is this warp-specialized kernel broken or slow? Answers from real Nsight Compute output.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

app.command()(analyze)
app.command()(chart)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(collect)
app.command()(sql)
app.command()(doctor)
app.command()(inspect)
app.command()(compare)
app.command()(history)
app.command()(export)
app.command()(worksheet)


def main() -> None:  # pragma: no cover - console-script shim
    app()
