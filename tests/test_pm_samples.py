"""The pm_samples view over Nsight Compute's two namings of PM-sampled metrics, on real H200
reports of the ring kernel (fixtures/timeline, collected by scripts/gpu-pm-probe.sh and
fixtures/collect_timeline.sh; ncu 2025.3.1, driver 580.159.04)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import open_store
from wsperf.collectors.timeline import timeline_schema_sql

TIMELINES = Path(__file__).resolve().parents[1] / "fixtures" / "timeline"


@pytest.fixture(scope="module")
def con():
    c = open_store(None)
    load_reports(c, [TIMELINES / "ring_pm.ncu-rep", TIMELINES / "ring_pmsampling.ncu-rep"])
    c.execute(timeline_schema_sql())
    return c


def per_metric(con, report: str) -> dict[str, tuple[int, int, int]]:
    """{metric: (samples in the view, instances in the report, largest t_ns)} of the report's first launch."""
    rows = con.execute(
        "WITH l AS (SELECT min(l.launch_id) AS id FROM launches AS l JOIN reports AS r USING (report_id) "
        "           WHERE r.path LIKE '%' || ?) "
        "SELECT m.name, (SELECT count(*) FROM pm_samples AS p WHERE p.launch_id = l.id AND p.metric = m.name), "
        "       count(*), (SELECT max(t_ns) FROM pm_samples AS p WHERE p.launch_id = l.id AND p.metric = m.name) "
        "FROM metrics AS m, l WHERE m.launch_id = l.id AND m.instance IS NOT NULL "
        "  AND (m.name LIKE 'pmsampling:%' OR m.name LIKE '%.TriageCompute.%') GROUP BY m.name, l.id",
        [report]).fetchall()
    return {name: (n, k, t or 0) for name, n, k, t in rows}


def test_pmsampling_section_gives_triage_named_throughputs(con):
    # --section PmSampling on a GH100 (driver >= 560) names its metrics <unit>.TriageCompute.<metric>:
    # none is `pmsampling:`, which is why counting `pmsampling:` names once found nothing.
    m = per_metric(con, "ring_pmsampling.ncu-rep")
    assert len(m) == 32 and not any(name.startswith("pmsampling:") for name in m), sorted(m)
    assert "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed" in m
    for name, (n, k, t_max) in m.items():
        # the first instance has correlation id 0 (no timestamp) and is left out
        assert n == k - 1 and n >= 200, (name, n, k)
        # one pass: the sampler's window around a 123 us launch, 1.5 us a sample
        assert 300_000 < t_max < 1_000_000, (name, t_max)


def test_warp_states_time_is_counted_within_each_pass(con):
    # PmSampling_WarpStates samples its 15 stall reasons over 5 passes, ~130 ms apart in GPU
    # time; a sample's time is from its own pass's start, so no sample lies beyond one pass.
    m = per_metric(con, "ring_pm.ncu-rep")
    assert len(m) == 15 and all(name.startswith("pmsampling:smsp__warps_issue_stalled_") for name in m)
    for name, (n, k, t_max) in m.items():
        assert n == k and n > 250, (name, n, k)
        assert 300_000 < t_max < 1_000_000, (name, t_max)


def test_samples_are_in_time_order_within_a_metric(con):
    (bad,) = con.execute(
        "SELECT count(*) FROM (SELECT t_ns, lag(t_ns) OVER (PARTITION BY launch_id, metric ORDER BY sample) AS prev "
        "FROM pm_samples) WHERE t_ns < prev").fetchone()
    assert bad == 0
