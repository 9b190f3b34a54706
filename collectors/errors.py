"""The one exception family that crosses into the CLI.

Library code raises a `WsperfError` subclass whose message says what failed and how
to fix it; `wsperf.cli` prints it as one `Error:` line and exits with `exit_code`.
Bugs are not WsperfErrors: they keep their traceback.
"""

from __future__ import annotations


class ExitCode:
    """Documented process exit codes (docs/exit-codes.md)."""

    OK = 0
    REGRESSION = 1  # compare/nightly: a regression was found
    ERROR = 2  # bad input, bad usage, a tool that could not run
    CORRECTNESS = 3  # collect: the sanitizer found errors; no performance advice
    DEADLOCK = 4  # collect: the repro hung; warps' wait points were captured
    UNVERIFIED = 5  # the sanitizer's evidence is incomplete (a tool did not finish, a file is missing or damaged)
    EXPECTATION = 6  # analyze/inspect/compare: a kernel does not meet an --expect (or config `expect`)


class WsperfError(Exception):
    """Base class: an expected failure with a message a user can act on."""

    exit_code = ExitCode.ERROR


class InputError(WsperfError):
    """A file given to wsperf is missing, empty, of the wrong kind or damaged."""


class ReportError(InputError):
    """An Nsight Compute report cannot be read (or only partly)."""


class UnverifiedError(WsperfError):
    """Correctness cannot be vouched for: the sanitizer's evidence is incomplete."""

    exit_code = ExitCode.UNVERIFIED


class StoreError(WsperfError):
    """The DuckDB store cannot be opened, written or queried."""


class QueryError(StoreError):
    """A user's SQL failed in DuckDB."""
