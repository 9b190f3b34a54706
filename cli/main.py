"""The `wsperf` command: the Typer app and its commands, one module each. Each command
parses, calls one library function and renders; every expected failure is a
`WsperfError`, printed once as `Error: ...` on stderr with its documented exit code
(docs/exit-codes.md); the shared pieces live in `wsperf.cli.common`.

Start-up time: the app is a lazy command group. `wsperf --help` and `--version` import
no command module, and `wsperf CMD` imports only CMD's module (and what it needs): the
analyses, DuckDB and the chart libraries together cost about a second to import on a
2-core machine, most of which one command does not use. Each command's one-line summary
for `wsperf --help` is therefore written here (`_COMMANDS`); tests/test_startup.py
checks that it is still the first sentence of the command's docstring."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer
import typer.core
import typer.main

try:  # Typer 0.2x vendors the Click it runs on
    from typer import _click as click
except ImportError:  # pragma: no cover - Typer releases that depend on Click instead
    import click  # type: ignore[no-redef]

import wsperf
from wsperf.cli.help import WholeHelpCommand, name_choice_placeholders
from wsperf.cli.params import paths_checked_by_wsperf
from wsperf.collectors import prestart

# name -> (module under wsperf.cli, function, first sentence of its docstring, context settings)
_COMMANDS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "analyze": ("analyze", "analyze", "Load reports and print, per launch: what ran (launch shape, duration, the "
                "instruction paths its SASS uses), its producer/consumer roles, and the verdict of every "
                "slow-kernel hypothesis with its evidence and remedy.", {}),
    "chart": ("analyze", "chart", "Write each launch's charts (stall reasons per role, instruction families, speed "
              "of light) as Vega-Lite JSON, standalone HTML, PNG and SVG; prints the files.", {}),
    "collect": ("collect", "collect", "Run a repro under compute-sanitizer first, then ncu, into a bundle "
                "directory.", {"allow_extra_args": True, "ignore_unknown_options": True}),
    "sql": ("sql", "sql", "Run one SQL query over a store (opened read-only) or reports loaded in memory, and "
            "print the result.", {}),
    "doctor": ("doctor", "doctor", "Print what a debugging session must verify first: Python and package "
               "versions, NVIDIA tools (ncu, compute-sanitizer, nvcc, cuda-gdb), the GPUs, torch/triton/TVM.", {}),
    "inspect": ("inspect", "inspect", "Disassemble compiled kernels (no GPU needed) and print, per kernel: "
                "registers and shared memory, which instruction paths its SASS holds (tcgen05 / wgmma / mma.sync, "
                "TMA / cp.async / ld/st, mbarrier, setmaxnreg, local memory), the compiler's notes, and the "
                "verdicts that static code can give; the others say no_data.", {}),
    "compare": ("compare", "compare", "Compare a candidate against a base: every kernel on both sides, figure by "
                "figure (duration and shares tested with Mann-Whitney U and a minimum change; registers, shared "
                "memory, launch shape, instruction paths exactly) and hypothesis by hypothesis.", {}),
    "history": ("history", "history", "A kernel's figure over the recorded runs: one row per (run, kernel), oldest "
                "run first, with the run's label, commit, date and tags, its number of launches and the median, "
                "min and max of the metric over them.", {}),
    "export": ("history", "export", "Write the store as Parquet for a warehouse: runs, reports and run_reports "
               "whole; launches, metrics, sass, stalls, opcodes and ncu_rules with their run_id, Hive-partitioned "
               "by the run's date (`DIR/<table>/run_date=YYYY-MM-DD/`).", {}),
    "worksheet": ("worksheet", "worksheet", "Print, per kernel, the handoff worksheet read from PTX: roles, shared "
                  "and tensor memory, every mbarrier (init count, who arrives, who waits), fences, lifetimes, and "
                  "the mistakes visible statically (flags 1-15), each marked evidence or assumption, and what it "
                  "could not check.", {}),
    "nsys": ("nsys", "nsys", "Where the GPU time goes in an Nsight Systems timeline: per-kernel statistics "
             "(count, total, median, p10/p90, share of GPU time), idle gaps per stream with a launch-bound / "
             "host-bound finding when the GPU waits on the CPU, overlap across streams, NVTX range totals.", {}),
    "timeline": ("timeline", "timeline", "When each role works and waits inside one kernel: per-role time shares, the "
                 "ring's stage occupancy and the pipeline-bubbles verdict (prologue, steady-state idle and epilogue "
                 "shares, copy/compute overlap) from in-kernel role events.", {}),
    "trace-include": ("timeline", "trace_include", "Print the nvcc flag that finds wsperf_trace.cuh, the in-kernel "
                      "role-event header: `nvcc $(wsperf trace-include) ...`.", {}),
}


def _short(f) -> str:
    """A command's first sentence, for the command list of `wsperf --help`."""
    text = " ".join((f.__doc__ or "").split())
    return text.split(". ")[0].rstrip(".") + "."


def command(name: str) -> typer.core.TyperCommand:
    """The real Click command `name`: its module imported, built by Typer as the app
    would have built it."""
    module, attr, summary, settings = _COMMANDS[name]
    f = getattr(importlib.import_module(f"wsperf.cli.{module}"), attr)
    one = typer.Typer(rich_markup_mode="markdown", add_completion=False)
    one.command(name=name, short_help=summary, context_settings=settings or None,
                cls=WholeHelpCommand)(paths_checked_by_wsperf(f))
    return name_choice_placeholders(typer.main.get_command(one))  # type: ignore[return-value]


class _LazyCommand(typer.core.TyperCommand):
    """A command as the command list shows it (name and summary); it imports and builds
    the real one when it is run, completed or asked for its own --help."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, short_help=_COMMANDS[name][2], help=_COMMANDS[name][2],
                         context_settings=_COMMANDS[name][3] or None)
        self._real: typer.core.TyperCommand | None = None

    def real(self) -> typer.core.TyperCommand:
        if self._real is None:
            self._real = command(self.name)  # type: ignore[arg-type]
        return self._real

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[no-untyped-def]
        try:
            # A command that loads reports gets its readers started before its module imports.
            prestart.start_for(self.name, list(args))  # type: ignore[arg-type]
            real = self.real()
        except KeyboardInterrupt:
            # Ctrl-C while the command's module and its libraries import (most of a second,
            # before its error boundary): Typer would exit 130 silently; say it, as the boundary does.
            sys.stderr.write("Error: interrupted (Ctrl-C); nothing was recorded\n")
            raise SystemExit(130) from None
        # The context is the real command's: Click then parses, completes and invokes it.
        return real.make_context(info_name, args, parent=parent, **extra)


def _usage_error(self: click.exceptions.UsageError, file: Any = None) -> None:
    """A command line Click cannot parse (an unknown option or command, a bad --format, a
    number that is not one): one `Error:` line and the usage hint, on stderr, exit 2 (Click's
    own code for usage errors), instead of Rich's box without an `Error:` line."""
    out = file or sys.stderr
    out.write("Error: " + " ".join(self.format_message().split()) + "\n")
    ctx = self.ctx
    if ctx is not None:
        out.write(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n")


click.exceptions.UsageError.show = _usage_error  # type: ignore[method-assign]


class _LazyGroup(typer.core.TyperGroup):
    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        # Errors Click raises are shown by their own show() (above), not Rich's box; help
        # still renders with Rich (format_help reads the group's own markup mode).
        kwargs.pop("rich_markup_mode", None)
        return typer.core._main(self, *args, rich_markup_mode=None, **kwargs)

    def list_commands(self, ctx) -> list[str]:  # type: ignore[no-untyped-def]
        return list(_COMMANDS)

    def get_command(self, ctx, cmd_name: str):  # type: ignore[no-untyped-def]
        if cmd_name not in _COMMANDS:
            return None
        return self.commands.setdefault(cmd_name, _LazyCommand(cmd_name))


app = typer.Typer(
    name="wsperf",
    cls=_LazyGroup,
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
        typer.echo(f"wsperf {wsperf.version()}")
        raise typer.Exit()


@app.callback()
def _main(show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                            help="Print wsperf's version and exit.")) -> None:
    """Why is this warp-specialized kernel broken or slow? Answers from real Nsight Compute,
    compute-sanitizer and cuda-gdb output."""
