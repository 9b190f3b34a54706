"""`--help` that cuts nothing a user must type.

Typer lays each command's options out as a table: the option, its placeholder, and its
help with `[default: ...]` under it. At 80 columns two things went wrong:
- a choice option's placeholder spelled every choice (`<text|json|markdown|junit>`), which
  took a third of the width and was folded mid-word when it did not fit; every choice
  option's help already lists its choices (tests/test_cli.py checks it), so the placeholder
  names the value instead (`<format>`), which leaves the help column the room;
- Typer puts each help cell in Rich `Columns`, whose cells end a word wider than the column
  with "…" (`[default: memcheck,racecheck,initch…`, `warp-synced-single-lane-r…`): the
  cell here is rendered one part under the other, as Typer's are, with such a word
  continued on the next line instead, so it is there whole.
Only `--help` imports Rich's layout (`format_help`): a command that runs does not.
"""

from __future__ import annotations

from typing import Any

import typer.core

try:  # Typer 0.2x vendors the Click it runs on
    from typer import _click as click
except ImportError:  # pragma: no cover - Typer releases that depend on Click instead
    import click  # type: ignore[no-redef]


def name_choice_placeholders(command: click.Command) -> click.Command:
    """`command` with each choice option's placeholder naming its value (`<format>` for
    `--format`) instead of spelling every choice; returns it."""
    for p in command.params:
        if isinstance(p, typer.core.TyperOption) and getattr(p.type, "choices", None) and p.metavar is None:
            long = next((o for o in p.opts if o.startswith("--")), p.opts[0])
            p.metavar = f"<{long.lstrip('-')}>"
    return command


class WholeHelpCommand(typer.core.TyperCommand):
    """A Typer command whose `--help` continues a long word on the next line instead of
    cutting it (see the module)."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _fold_parameter_help()
        return super().format_help(ctx, formatter)


def _fold_parameter_help() -> None:
    """Make Typer render each option's help cell with `_Whole` (once per process)."""
    from typer import rich_utils

    if getattr(rich_utils._get_parameter_help, "wsperf_whole", False):
        return
    columns = rich_utils._get_parameter_help

    def whole(**kwargs: Any) -> _Whole:
        return _Whole(columns(**kwargs).renderables)

    whole.wsperf_whole = True  # type: ignore[attr-defined]
    rich_utils._get_parameter_help = whole


class _Whole:
    """The parts of a help cell one under another, a word wider than the cell folded onto
    the next line (Rich's `fold` overflow) rather than ended with "…"."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Any, options: Any) -> Any:
        folded = options.update(overflow="fold")
        for part in self.parts:
            yield from console.render(part, folded)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.console import Group
        from rich.measure import Measurement

        return Measurement.get(console, options, Group(*self.parts))
