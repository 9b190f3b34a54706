"""The `wsperf` console script: a start-up shim around the command line (wsperf.cli.main).

The command's error boundary (wsperf.cli.common.error_boundary) only runs once Typer,
the command's module and its libraries (DuckDB, pyarrow, pandas: about a second on a
2-core machine) are imported. What goes wrong before that is caught here, so that it
too ends as one `Error:` line with a documented exit code (docs/exit-codes.md):

- SIGTERM / SIGHUP / SIGINT: the handlers that turn them into `Terminated` are installed
  before anything heavy is imported and stay for the whole run (the boundary sees they
  are set and keeps them), so a signal during start-up unwinds: exit 143 / 129 / 130, one
  line (Ctrl-C as `Terminated`, not KeyboardInterrupt, which Typer would swallow). A signal
  that arrives before the interpreter reaches this module (its first few tens of
  milliseconds) still gets the default action: nothing has started then that needs
  cleaning up. Python does not always let the exception through: inside a native
  module's initialization it would abort the process (collectors/process.py delivers the
  signal again once the import is through), a class body's `__set_name__` wraps it in a
  RuntimeError, compiling a module can drop it. So the signal received decides: an
  exception that escapes after one is that signal, and a command that ran on to its end
  after one still exits 128 + signal, saying so.
- An address-space limit (`ulimit -v`) below what wsperf needs to start
  (collectors/limits.py): one line before anything heavy is imported, exit 2; above it,
  wsperf is made to reserve less (`limits.fit_process`, and DuckDB's settings).
- Out of memory all the same: importing pyarrow, DuckDB or pandas then fails as an
  ImportError ("failed to map segment from shared object"), a MemoryError, or a thread
  that cannot start: exit 2, as in the boundary.

The report readers of `analyze` and `chart` start here, first thing, so that their own
start-up and disassembly run while Typer and the command's libraries import
(collectors/prestart.py; the command's own hook finds them started).

This module imports the standard library and three standard-library-only wsperf modules;
the command line is imported inside `main`, in its try, for start-up isolation (not to
dodge an import cycle): its import is one of the things that can fail.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

from wsperf.collectors import limits, prestart
from wsperf.collectors.errors import ExitCode
from wsperf.collectors.process import Terminated, received_signal, signal_words, signals_as_exceptions

# An ImportError or OSError whose text says that memory ran out: the dynamic loader's
# "failed to map segment from shared object" and "cannot allocate memory (in static TLS
# block)", ENOMEM's strerror, and a thread whose stack could not be mapped.
_MEMORY_WORDS = ("failed to map segment", "cannot allocate memory", "out of memory", "can't start new thread",
                 "failed to launch worker thread")

_NOTHING_RECORDED = "nothing was recorded"


def main() -> int:
    """Run the command line; what its error boundary cannot reach yet is one `Error:` line."""
    try:
        with signals_as_exceptions():
            # Ctrl-C here is Terminated too (signals_as_exceptions), caught below.
            if _runs_a_command(sys.argv[1:]):
                # Under `ulimit -v`: too little to start is one line now, before a library
                # fails to map or the loader aborts; enough, and wsperf reserves less.
                if (short := limits.too_little_address_space()) is not None:
                    return _fail(f"{short}; {_NOTHING_RECORDED}", ExitCode.ERROR)
                limits.fit_process()
            if len(sys.argv) > 1:
                prestart.start_for(sys.argv[1], sys.argv[2:])
            from wsperf.cli.main import app  # start-up isolation: see the module docstring
            try:
                app()
            except SystemExit as e:  # how Click ends every command
                _leave(e.code)
            _leave(0)
    except Terminated as e:
        return _fail(f"{signal_words(e.signum)}; {_NOTHING_RECORDED}", 128 + e.signum)
    except Exception as e:
        if (signum := received_signal()) is not None:
            # The signal's Terminated came back as another exception: Python wraps one
            # raised in a class body's __set_name__ in a RuntimeError (seen at 0.385 s).
            return _fail(f"{signal_words(signum)}; {_NOTHING_RECORDED}", 128 + signum)
        if not out_of_memory(e):
            raise  # a bug keeps its traceback
        return _fail(f"out of memory (is a memory limit such as `ulimit -v` set?); {_NOTHING_RECORDED}",
                     ExitCode.ERROR)
    return ExitCode.OK


def _leave(code: object) -> NoReturn:
    """End the process with exit status `code` (SystemExit's: None, a number, or a message
    for stderr and 1) after what the interpreter's shutdown does that matters: store files
    closed, exit handlers run (readers stopped, temporary directories removed), output
    flushed; without the rest (~0.1 s of freeing every module and object, a tenth of a
    one-report analyze)."""
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    signum = received_signal()
    if signum is not None and not code:
        # The signal's exception was lost on the way (seen: CPython drops one raised while
        # it compiles a module) and the command ran on to its end: still, it was signalled.
        sys.stderr.write(f"Error: {signal_words(signum)}, after the command had finished\n")
        code = 128 + signum
    store = sys.modules.get("wsperf.collectors.store")
    if store is not None:
        store.close_all()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


def _runs_a_command(args: list[str]) -> bool:
    """Whether the command line names a command (`wsperf --help` and `wsperf --version`
    import none; a command's own --help imports its modules, DuckDB and pyarrow)."""
    return bool(args) and args[0] not in ("--help", "-h", "--version")


def out_of_memory(e: BaseException) -> bool:
    """Whether `e` says that memory (or the address space for a thread) ran out."""
    if isinstance(e, MemoryError):
        return True
    text = str(e).lower()
    return any(w in text for w in _MEMORY_WORDS)


def _fail(message: str, code: int) -> int:
    # One line, as the boundary prints it; plain text (Rich may be what failed to import).
    try:
        sys.stderr.write("Error: " + " ".join(message.split()) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code
