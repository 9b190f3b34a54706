"""Start a report reader before a command's modules import, when the command line shows
that it will load an Nsight Compute report.

Why: `wsperf analyze REPORT` spends ~0.5 s importing its modules (DuckDB, the analyses,
Rich) before it reads anything, and a reader process spends ~0.3 s starting (the
interpreter, pyarrow) before it can open the report. Started first, the reader's
start-up overlaps the imports. This module imports nothing heavy: it runs on every
command, `--help` included, before any command module is imported."""

from __future__ import annotations

import os

from wsperf.collectors.ncu import prestart

# Commands whose report arguments are loaded through collectors.ncu.
_LOADERS = frozenset({"analyze", "chart"})
_REPORT_SUFFIXES = (".ncu-rep", ".ncu-rep.gz")


def prestart_readers(command: str, args: list[str]) -> None:
    """Start one reader when `command` loads reports and `args` name one (a .ncu-rep or a
    bundle directory); nothing for --help or any other command line."""
    if command not in _LOADERS or any(a in ("--help", "-h") for a in args):
        return
    if any(a.endswith(_REPORT_SUFFIXES) or (not a.startswith("-") and os.path.isdir(a)) for a in args):
        prestart(1)
