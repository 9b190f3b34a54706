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

from importlib.metadata import PackageNotFoundError, version as _version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers only: the real import is lazy (__getattr__)
    from wsperf.session import Launch, Session, load

try:
    __version__ = _version("wsperf")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Launch", "Session", "load", "__version__"]


def __getattr__(name: str) -> Any:
    # PEP 562: `wsperf.load` imports pandas, DuckDB and the analyses only when asked for.
    if name in ("load", "Session", "Launch"):
        from wsperf import session

        return getattr(session, name)
    raise AttributeError(f"module 'wsperf' has no attribute {name!r}")
