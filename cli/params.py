"""Paths given on the command line are checked by wsperf, not by Typer.

Typer checks that an existing path given to a `Path` parameter is readable (its
`readable=True` default) while it parses the command line, before the command's error
boundary runs, and reports a failure in its multi-line usage box. wsperf's own checks
(collectors/files.py: a regular file, its size, its magic, the permission to open it)
say the same in one `Error:` line with exit 2, and name what to give instead; so every
command is built with Typer's check turned off (cli/main.py, `command`)."""

from __future__ import annotations

import inspect
from typing import Callable, TypeVar

from typer.models import ParameterInfo

F = TypeVar("F", bound=Callable[..., object])


def paths_checked_by_wsperf(f: F) -> F:
    """`f`, a command function, with Typer's own readability check turned off for each
    of its parameters (it applies to `Path` parameters only)."""
    for p in inspect.signature(f).parameters.values():
        if isinstance(p.default, ParameterInfo):
            p.default.readable = False
    return f
