"""Session fixtures on the real reports in fixtures/reports: each report is loaded into
one in-memory store once per session, and opened once with ncu_report for the tests to
compare against (no mocks: both sides are NVIDIA's reader on the same files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
ALL_REPORTS = sorted(REPORTS.glob("*.ncu-rep"))


@pytest.fixture(scope="session")
def store():
    """An in-memory store holding every fixture report, and what loading each did."""
    con = open_store(None)
    results = {r.path: r for r in load_reports(con, ALL_REPORTS)}
    yield con, results
    con.close()


@pytest.fixture(scope="session")
def ncu_contexts():
    """ncu_report's own view of each fixture report, opened on first use. (In this
    process: these files are known to be sound, so ncu_report cannot crash on them.)"""
    import ncu_report

    opened: dict[Path, object] = {}

    def context(path: Path):
        if path not in opened:
            opened[path] = ncu_report.load_report(str(path))
        return opened[path]

    return context

