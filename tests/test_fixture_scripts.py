"""The fixture collection scripts stay in step with the code they stand for."""

from __future__ import annotations

import json
import re

from support import ROOT
from wsperf.collectors.collect import NCU_METRICS, NCU_SECTIONS

COMPARE = ROOT / "fixtures" / "compare"


def test_compare_fixtures_use_collects_section_set():
    """collect_compare.sh profiles what `wsperf collect` profiles, so compare is proven
    on the reports a nightly job makes."""
    script = (ROOT / "fixtures" / "collect_compare.sh").read_text()
    assert tuple(re.findall(r"--section (\w+)", script)) == NCU_SECTIONS
    (metrics,) = re.findall(r"--metrics (\S+)", script)
    assert tuple(metrics.split(",")) == NCU_METRICS


def test_compare_fixtures_have_provenance():
    reports = sorted(COMPARE.glob("*.ncu-rep.gz"))
    assert len(reports) == 4
    for r in reports:
        prov = json.loads((COMPARE / r.name.replace(".ncu-rep.gz", ".provenance.json")).read_text())
        assert prov["gpu"] == "NVIDIA H200" and prov["report"] == r.name[: -len(".gz")]
        assert "--section SourceCounters" in prov["command"] and "-c 6" in prov["command"]
        assert "max_rel_err=0" in prov["program_output"]
