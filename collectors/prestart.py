"""Start the report readers of a command before the command's own modules import.

Why: a one-launch `wsperf analyze REPORT` used to run its phases one after the other:
~0.6 s importing its modules (DuckDB, pyarrow, the analyses, Rich), then ~0.3 s for a
reader process to start (the interpreter, pyarrow, ncu_report), then ~0.6 s for
ncu_report to set up its disassembler on the first `sass_by_pc` of that process, then
the reading itself. The set-up is per process, not per report (measured: a second report
in the same process disassembles its first PC in 0.01 s). Started here, the readers'
start-up and that set-up run while the command imports.

What runs early is only this: for each argument that names an existing regular
`.ncu-rep` file starting with the report magic, at most MAX_REPORT_BYTES long, two reader
processes start (one on a one-core machine), and the first is asked to disassemble one
instruction of that report. What it reads is thrown away: the load itself still reads a
private snapshot of the file (collectors/ncu.py), checked as before. A reader that the
command never takes is stopped when the process exits. Standard library only: this runs
before the command's module is imported, on every `wsperf analyze` / `wsperf chart`."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from wsperf.collectors.errors import WsperfError
from wsperf.collectors.files import open_input

# What a report file is, for this module and collectors/ncu.py, which imports them from here
# (ncu.py imports pyarrow, which this module must not).
REPORT_MAGIC = b"NVR\0"  # every .ncu-rep starts with it (see tests/corpus.py, concatenated_report)
MAX_REPORT_BYTES = 8 << 30  # on disk (the 1,000-launch report of the benchmarks is 312 MB)
COMMANDS = frozenset({"analyze", "chart"})

_started: list[tuple[subprocess.Popen, Path]] = []
_dir: list[Path] = []
_registered: list[bool] = []  # stop() is registered to run at exit


def start_for(command: str, args: list[str]) -> int:
    """Start readers when `command` loads reports and `args` name a readable .ncu-rep;
    how many were started (0 for any other command line, --help included)."""
    if command not in COMMANDS or _started or os.environ.get("WSPERF_NO_PRESTART"):
        return 0
    if any(a in ("--help", "-h") for a in args):
        return 0
    report = next((a for a in args if a.endswith(".ncu-rep") and _is_report(a)), None)
    if report is None:
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        for _ in range(2 if cpus >= 2 else 1):
            _started.append(_spawn())
        proc = _started[0][0]
        proc.stdin.write(json.dumps({"warm": os.path.abspath(report)}).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    except OSError:  # cannot start a process or a temporary directory: the load starts its own
        stop()
        return 0
    except BaseException:  # a signal (Terminated) or Ctrl-C: nothing left behind
        stop()
        raise
    return len(_started)


def take() -> list[tuple[subprocess.Popen, Path]]:
    """The readers started here, each with its stderr file; the caller owns them now."""
    taken = list(_started)
    _started.clear()
    return taken


def stop() -> None:
    """Stop readers nobody took, and remove their directory once no reader writes there."""
    for proc, _ in take():
        proc.kill()
        proc.wait()
    if _dir and not _started:
        shutil.rmtree(_dir.pop(), ignore_errors=True)


def _is_report(path: str) -> bool:
    try:
        with open_input(path, kind="an Nsight Compute report", limit=MAX_REPORT_BYTES, magic=(REPORT_MAGIC,)):
            return True
    except (WsperfError, OSError, ValueError):
        return False  # the load says why, in its own words


def _spawn() -> tuple[subprocess.Popen, Path]:
    if not _dir:
        # In this order, so that a signal at any point (they arrive between any two lines:
        # SIGTERM in the first second is tested) still has the directory removed at exit.
        if not _registered:
            atexit.register(stop)
            _registered.append(True)
        d = Path(tempfile.gettempdir()) / f"wsperf-readers-{os.getpid()}-{os.urandom(6).hex()}"
        _dir.append(d)
        d.mkdir(mode=0o700)
    path = _dir[0] / f"prestarted-{len(_started) + 1}.stderr"
    with open(path, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "wsperf.collectors.ncu_reader", "--serve"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    return proc, path
