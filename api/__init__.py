"""wsperf: why is this warp-specialized kernel broken or slow?

From Python (a notebook, a script), the same analysis as `wsperf analyze`:

    >>> import wsperf
    >>> s = wsperf.load("fixtures/reports/gemm_ffma.ncu-rep")
    >>> s.verdicts()            # pandas DataFrame: one row per (launch, hypothesis)
    >>> s.launches(), s.roles() # DataFrames
    >>> s.sql("SELECT * FROM roles")
    >>> s.charts()              # Altair charts, shown inline in Jupyter
    >>> s                       # in Jupyter: the HTML report's summary

`load` and `Session` live in `wsperf.session`; they are imported on first use so that
`import wsperf` (which the command line runs too) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers only: the real import is lazy (__getattr__)
    from wsperf.session import Launch, Session, load

__all__ = ["Launch", "Session", "load", "__version__"]


def version() -> str:
    """The installed wsperf version (the distribution's metadata)."""
    # importlib.metadata costs ~0.1 s to import: every `python -m wsperf.collectors.ncu_reader`
    # reader process imports this package, so it is asked only when wanted.
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("wsperf")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    # PEP 562: `wsperf.load` imports pandas, DuckDB and the analyses only when asked for.
    if name == "__version__":
        return version()
    if name in ("load", "Session", "Launch"):
        from wsperf import session

        return getattr(session, name)
    raise AttributeError(f"module 'wsperf' has no attribute {name!r}")
