"""Session fixtures on the real reports in fixtures/reports: each report is loaded into
one in-memory store once per session, and opened once with ncu_report for the tests to
compare against (no mocks: both sides are NVIDIA's reader on the same files)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Before pyarrow (imported by the loader): ncu_report 2025.3 crashes in IMetric.unit()
# when pyarrow's libraries were loaded first. The tests compare against ncu_report in
# this process.
import ncu_report  # noqa: F401  isort: skip

from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

# The disassembly cache (collectors/cubin.py) of this test session, shared by its
# processes: never the user's own (set before tests.support copies the environment).
os.environ.setdefault("WSPERF_CACHE_DIR", tempfile.mkdtemp(prefix="wsperf-test-cache-"))

from support import PUBLIC  # noqa: E402  after the cache is set: support copies the environment

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
ALL_REPORTS = sorted(REPORTS.glob("*.ncu-rep"))


@pytest.fixture(scope="session")
def public_data() -> Path:
    """The public reports and exports (`ncu/`, `nsys/`) that tests read but the repository
    does not hold: ../shared/public beside the clone (or $WSPERF_PUBLIC_DATA). Absent is a
    failure, not a skip: CI always has the folder."""
    if not (PUBLIC / "ncu").is_dir() or not (PUBLIC / "nsys").is_dir():
        pytest.fail(f"public test data not found at {PUBLIC} (it needs ncu/ and nsys/): it is not part "
                    "of the repository; put the project's shared/public folder beside the clone, or "
                    "name a copy with WSPERF_PUBLIC_DATA", pytrace=False)
    return PUBLIC


@pytest.fixture(scope="session")
def store():
    """An in-memory store holding every fixture report, and what loading each did."""
    con = open_store(None)
    results = {r.path: r for r in load_reports(con, ALL_REPORTS)}
    yield con, results
    con.close()


@pytest.fixture(scope="session")
def ncu_actions():
    """ncu_report's own view of a fixture report: (range index, action index, IAction)
    of each action, in report order; opened once per report on first use. (In this
    process: these files are known to be sound, so ncu_report cannot crash on them.
    And once: ncu_report never frees what it loads.)"""
    import ncu_report

    opened: dict[Path, list] = {}

    def actions(path: Path) -> list:
        if path not in opened:
            ctx = ncu_report.load_report(str(path))
            opened[path] = [(ri, ai, ctx.range_by_idx(ri).action_by_idx(ai))
                            for ri in range(ctx.num_ranges()) for ai in range(ctx.range_by_idx(ri).num_actions())]
        return opened[path]

    return actions
