"""The Python API as a notebook user meets it: `import wsperf; s = wsperf.load(...)`,
DataFrames, charts, the HTML a cell shows, errors. On the real fixture reports, and
checked against `wsperf analyze --format json` (one code path, one answer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import altair as alt
import pandas as pd
import pytest

from wsperf.analyses.hypotheses import catalogue

import wsperf
from support import wsperf as run_cli
from wsperf.cli import html
from wsperf.collectors.errors import InputError, QueryError, WsperfError

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"
FFMA = REPORTS / "gemm_ffma.ncu-rep"
WS = REPORTS / "gemm_wgmma_tma.ncu-rep"


@pytest.fixture(scope="module")
def session():
    with wsperf.load([FFMA, WS]) as s:
        yield s


def test_import_is_cheap_and_versioned():
    # `import wsperf` alone must not pull pandas, DuckDB or the analyses in: the command
    # line imports it too.
    code = "import sys, wsperf; print(wsperf.__version__); print('pandas' in sys.modules, 'duckdb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0][0].isdigit() and out[1:] == ["False", "False"]
    assert callable(wsperf.load) and wsperf.Session.__doc__


def test_verdicts_are_one_row_per_launch_and_hypothesis(session):
    v = session.verdicts()
    assert isinstance(v, pd.DataFrame)
    assert list(v.columns[:7]) == ["launch_id", "kernel", "report", "hypothesis", "status", "summary", "remedy"]
    assert len(v) == 2 * len(catalogue()) and not v.duplicated(["launch_id", "hypothesis"]).any()
    row = v[(v.kernel == "gemm_ffma") & (v.hypothesis == "missing-specialized-instructions")].iloc[0]
    # flat evidence fields are columns
    assert row.status == "confirmed" and row.basis == "assumption" and row.smem_reads_per_store == 256.0
    assert set(v[v.kernel == "gemm_ws"].status) <= {"rejected", "no_data"}


def test_api_and_cli_give_the_same_verdicts(session):
    p = run_cli("analyze", str(FFMA), str(WS), "--format", "json")
    assert p.returncode == 0, p.stderr
    cli = {(k["name"], f["id"]): (f["status"], f["summary"]) for k in json.loads(p.stdout)["kernels"]
           for f in k["findings"]}
    api = {(r.kernel, r.hypothesis): (r.status, r.summary) for r in session.verdicts().itertuples()}
    assert api == cli


def test_launches_roles_sql_and_tables(session):
    l = session.launches().set_index("kernel")
    assert l.loc["gemm_ws", "warp_specialized"] is True or l.loc["gemm_ws", "warp_specialized"] == True  # noqa: E712
    assert l.loc["gemm_ffma", "outcome"] == "confirmed" and l.loc["gemm_ws", "tensor"] == "wgmma"
    r = session.roles()
    # the prologue every warp runs before the dispatch is common code
    assert set(r[r.kernel == "gemm_ws"].role) == {"producer", "consumer", "common"}
    assert list(r[r.kernel == "gemm_ffma"].label) == ["common code"]
    q = session.sql("SELECT launch_id, count(*) AS n FROM sass GROUP BY launch_id ORDER BY launch_id")
    assert list(q.columns) == ["launch_id", "n"] and (q.n > 100).all()
    assert len(session.table("launches")) == 2 and "duration_ns" in session.table("launches")
    assert len(session) == 2 and [x.launch_id for x in session] == list(l.launch_id.sort_values())


def test_charts_are_altair_and_render(session):
    charts = session.charts()
    assert charts and all(isinstance(c, alt.TopLevelMixin) for c in charts.values())
    lid = session.launches().launch_id.iloc[0]
    assert set(session[int(lid)].charts()) <= set(charts)
    for c in charts.values():
        assert c.to_dict()["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


def test_charts_display_offline_with_the_inline_template(session):
    # A cluster's Jupyter without internet: Altair's default HTML loads Vega from a CDN;
    # the inline template (vl-convert-python, a wsperf dependency) puts it in the page.
    chart = next(iter(session.charts().values()))
    with alt.renderers.enable("html", template="inline"):
        bundle = chart._repr_mimebundle_()
    page = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]
    assert "vegaEmbed" in page and '<script src="http' not in page and "cdn.jsdelivr" not in page
    default = chart._repr_mimebundle_()
    assert "cdn.jsdelivr" in (default[0] if isinstance(default, tuple) else default)["text/html"]


def test_a_cell_shows_the_html_reports_summary(session):
    frag = session._repr_html_()
    page = html.analysis_page(list(session.results), with_charts=False)
    for a in session.results:
        head = html.headline(a)
        assert head in frag and head in page
    assert frag.startswith('<div class="wsperf">') and "<html" not in frag and "<script" not in frag
    assert "missing-specialized-instructions" in frag and "matrix work on FP32 FFMA" in frag
    one = session[session.results[0].summary.launch_id]
    assert html.headline(one.analysis) in one._repr_html_()
    assert "confirmed: missing-specialized-instructions" in repr(session)


def test_db_file_keeps_reports_and_analyzes_only_those_given(tmp_path):
    db = tmp_path / "store.duckdb"
    with wsperf.load(FFMA, db=db) as s:
        assert len(s) == 1
    with wsperf.load(WS, db=db, expect=["tma"]) as s:
        assert list(s.launches().kernel) == ["gemm_ws"]
        assert len(s.table("reports")) == 2


def test_expect_and_config_reach_the_hypotheses(tmp_path):
    with wsperf.load(WS, expect="tcgen05") as s:
        v = s.verdicts().set_index("hypothesis")
        assert v.loc["missing-specialized-instructions", "status"] == "confirmed"
    cfg = tmp_path / "wsperf.toml"
    cfg.write_text('expect = ["tcgen05"]\n')
    with wsperf.load(WS, config=cfg) as s:
        assert s.verdicts().set_index("hypothesis").loc["missing-specialized-instructions", "status"] == "confirmed"


def test_bad_input_raises_the_cli_errors(session, tmp_path):
    with pytest.raises(WsperfError):
        wsperf.load(tmp_path / "missing.ncu-rep")
    with pytest.raises(InputError, match="unknown --expect"):
        wsperf.load(FFMA, expect=["tensorcores"])
    with pytest.raises(InputError, match="no kernel launch matches"):
        wsperf.load(FFMA, kernel="^nothing$")
    with pytest.raises(InputError, match="no table or view"):
        session.table("launches; DROP TABLE launches")
    with pytest.raises(QueryError):
        session.sql("SELEC 1")
    with pytest.raises(KeyError):
        session[10_000]


def test_session_sql_has_the_cli_policy(tmp_path):
    """The Python API's queries follow `wsperf sql`: they read the store and nothing else,
    and change nothing (a db= store's history was dropped by `DROP TABLE runs` before)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("wsperf-api-secret")
    db = tmp_path / "store.duckdb"
    with wsperf.load(FFMA, db=db) as s:
        assert len(s.sql("SELECT * FROM reports")) == 1
        for q in (f"SELECT * FROM read_text('{secret}')", "DROP TABLE runs", f"COPY runs TO '{tmp_path / 'x.csv'}'",
                  f"ATTACH '{tmp_path / 'other.duckdb'}' AS o", "SET enable_external_access = true",
                  "SELECT 1; DELETE FROM runs"):
            with pytest.raises(QueryError):
                s.sql(q)
        # a second load into the same file while this session holds it says so
        with pytest.raises(WsperfError, match="has it open already"):
            wsperf.load(FFMA, db=db)
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "other.duckdb").exists()
    with wsperf.load(FFMA, db=db) as s:  # closed: the store is whole, its tables all there
        assert len(s.sql("SELECT * FROM reports")) == 1 and s.sql("SELECT count(*) AS n FROM runs").n[0] == 0
    with wsperf.load(FFMA) as s:  # an in-memory session is sandboxed too
        with pytest.raises(QueryError):
            s.sql(f"SELECT * FROM read_text('{secret}')")


@pytest.mark.parametrize("kwargs", [{"paths": 123}, {"paths": [FFMA, 7]}, {"paths": None},
                                    {"paths": FFMA, "db": 5}, {"paths": FFMA, "expect": [1]},
                                    {"paths": FFMA, "kernel": 3}, {"paths": FFMA, "config": 2.5}])
def test_arguments_of_the_wrong_type_are_a_wsperf_error(kwargs):
    with pytest.raises(InputError):
        wsperf.load(**kwargs)


def test_every_documented_table_and_view_is_in_every_store(session):
    """`wsperf sql ... FROM pm_samples --report R` said "Table with name pm_samples does not
    exist": the timeline's views were created only by `wsperf timeline`, the worksheet's by
    a bundle, the sanitizer's and nsys's by their loads. Every table and view wsperf defines
    is in the store `wsperf sql --report` and the Python API query, empty where nothing
    filled it."""
    from wsperf.collectors.catalog import expected_catalog

    want = set(expected_catalog()["table"]) | set(expected_catalog()["view"])
    query = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    p = run_cli("sql", query, "--report", WS, "-f", "json")
    assert p.returncode == 0, p.stderr
    assert want <= {r["table_name"] for r in json.loads(p.stdout)}
    assert want <= set(session.sql(query).table_name)
    for name in ("pm_samples", "timeline_overlap", "ws_flags", "nsys_kernels"):
        assert session.sql(f"SELECT count(*) AS n FROM {name}").n[0] >= 0
