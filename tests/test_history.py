"""Run history in a `--db` store: `wsperf analyze --db` records runs, `wsperf history`
reads a kernel's figures across them, `wsperf export` writes them as Parquet; and
analyze on a store with history reads only the launches it was asked about. Real
processes on the real compare fixtures (fixtures/compare: the same kernel profiled
repeatedly on an H200), expected values recomputed from the store's raw rows."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from support import ROOT, REPORTS, wsperf
from test_cli import assert_one_error_line

from wsperf.analyses.analyze import analyze, launch_ids_of_reports
from wsperf.analyses.history import describe_run, history, launch_ids_for_run, record_run
from wsperf.analyses.hypotheses import IDS_TABLE, catalogue, evaluate, stand_ins
from wsperf.collectors.environment import Environment, Gpu, Tool
from wsperf.collectors.errors import InputError
from wsperf.collectors.ncu import load_reports
from wsperf.collectors.store import HISTORY_TABLES, TABLES, check_store, open_store, table_counts

COMPARE = ROOT / "fixtures" / "compare"
HEALTHY_A, HEALTHY_B = COMPARE / "cmp_healthy_a.ncu-rep.gz", COMPARE / "cmp_healthy_b.ncu-rep.gz"
SERIALIZED, CPASYNC = COMPARE / "cmp_serialized.ncu-rep.gz", COMPARE / "cmp_cpasync.ncu-rep.gz"
# Labels are untrusted text: the third run's carries Markdown and HTML syntax.
EVIL = "c|*<b>x</b>"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ALL = (*TABLES, *HISTORY_TABLES, "role_pcs")


def counts(db: Path) -> dict[str, int]:
    con = open_store(db, read_only=True)
    try:
        return table_counts(con, ALL)
    finally:
        con.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A store with three recorded runs: a (healthy_a), b (healthy_b and healthy_a
    again), EVIL (serialized); and the JSON analyze printed for each."""
    db = tmp_path_factory.mktemp("history") / "runs.duckdb"
    started = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    out = {}
    for label, reports, extra in [
        ("a", [HEALTHY_A], ["--tag", "nightly", "--commit", COMMIT, "--branch", "main"]),
        ("b", [HEALTHY_B, HEALTHY_A], ["--tag", "nightly", "--tag", "weekly"]),
        (EVIL, [SERIALIZED], ["--tag", "nightly"]),
    ]:
        p = wsperf("analyze", *reports, "--db", db, "--label", label, *extra, "--format", "json")
        assert p.returncode == 0, p.stderr
        assert f"recorded run {label!r}" in p.stderr
        out[label] = json.loads(p.stdout)["kernels"]
    return db, out, started


def test_runs_are_recorded_with_their_reports(runs):
    db, _, started = runs
    con = open_store(db, read_only=True)
    rows = con.execute("""SELECT run_id, label, git_commit, git_branch, started_at, machine, gpu, tags, wsperf_version
                          FROM runs ORDER BY run_id""").fetchall()
    assert [r[:2] for r in rows] == [(1, "a"), (2, "b"), (3, EVIL)]
    assert rows[0][2:4] == (COMMIT, "main")
    assert [r[7] for r in rows] == [["nightly"], ["nightly", "weekly"], ["nightly"]]
    for r in rows:
        assert started - timedelta(seconds=1) <= r[4] <= datetime.now(timezone.utc).replace(tzinfo=None)
        assert r[5] == socket.gethostname() and r[6] == "NVIDIA H200" and r[8]
    # healthy_a is stored once and belongs to runs a and b.
    links = con.execute("""SELECT run_id, regexp_extract(path, '([^/]+)\\.ncu-rep', 1) FROM run_reports
                           JOIN reports USING (report_id) ORDER BY run_id, report_id""").fetchall()
    assert links == [(1, "cmp_healthy_a"), (2, "cmp_healthy_a"), (2, "cmp_healthy_b"), (3, "cmp_serialized")]
    assert con.execute("SELECT count(*) FROM reports").fetchall() == [(3,)]
    assert check_store(con) == []
    con.close()


def test_analyze_on_a_store_with_history_reports_only_the_named_reports(runs):
    _, out, _ = runs
    assert {Path(k["report"]).name for k in out["a"]} == {"cmp_healthy_a.ncu-rep.gz"}
    # Run b named healthy_b and healthy_a (already stored): both, 6 launches each, and
    # not run a's copy again nor anything else in the store.
    assert sorted(Path(k["report"]).name for k in out["b"]) == ["cmp_healthy_a.ncu-rep.gz"] * 6 + [
        "cmp_healthy_b.ncu-rep.gz"] * 6
    assert {Path(k["report"]).name for k in out[EVIL]} == {"cmp_serialized.ncu-rep.gz"} and len(out[EVIL]) == 6


def _expected(db: Path, metric: str) -> dict[tuple[int, str], list[float]]:
    """(run, demangled) -> the raw values of the metric, read from the store's rows."""
    con = duckdb.connect(str(db), read_only=True)
    if metric == "duration_ns":
        rows = con.execute("""SELECT rr.run_id, l.kernel_demangled, l.duration_ns FROM run_reports AS rr
                              JOIN launches AS l USING (report_id)""").fetchall()
    else:
        rows = con.execute("""SELECT rr.run_id, l.kernel_demangled, m.value_double FROM run_reports AS rr
                              JOIN launches AS l USING (report_id) JOIN metrics AS m USING (launch_id)
                              WHERE m.name = ? AND m.instance IS NULL""", [metric]).fetchall()
    con.close()
    out: dict[tuple[int, str], list[float]] = {}
    for run_id, name, v in rows:
        out.setdefault((run_id, name), []).append(v)
    return out


def _points(*args) -> list[dict]:
    p = wsperf("history", *args, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["points"]


@pytest.mark.parametrize("metric", ["duration_ns", "sm__cycles_active.avg"])
def test_history_is_the_median_min_max_of_each_run(runs, metric):
    db = runs[0]
    points = _points("--db", db, "--metric", metric)
    expected = _expected(db, metric)
    assert [(p["run_id"], p["demangled"]) for p in points] == sorted(expected)
    for p in points:
        values = expected[(p["run_id"], p["demangled"])]
        assert p["n"] == len(values) and p["metric"] == metric and p["kernel"] == "ws_stream"
        assert p["median"] == pytest.approx(statistics.median(values))
        assert (p["min"], p["max"]) == (min(values), max(values))
    # The serialized build is ~12% slower (fixtures/README.md, "Compare fixtures").
    if metric == "duration_ns":
        by_run = {p["run_id"]: p["median"] for p in points}
        assert 1.08 < by_run[3] / by_run[1] < 1.16 and abs(by_run[2] / by_run[1] - 1) < 0.01
        assert by_run[2] == statistics.median(expected[(2, points[1]["demangled"])])  # 12 launches, a and b


def test_history_filters_tags_last_and_kernel(runs):
    con = open_store(runs[0], read_only=True)

    def labels(**kw) -> list[str]:
        return [p.label for p in history(con, **kw)]

    assert labels(tags=["weekly"]) == ["b"]
    assert labels(last=1) == [EVIL]
    assert labels(tags=["nightly"], last=2) == ["b", EVIL]
    # RE2 on the demangled name: the one-stage build is ws_stream<(int)1, ...>.
    assert labels(kernel=r"ws_stream<\(int\)1,") == [EVIL]
    assert labels(kernel="^ws_stream$") == ["a", "b", EVIL]
    assert [(p.label, p.tags, p.git_commit) for p in history(con, kernel="Li4E")] == [
        ("a", ("nightly",), COMMIT), ("b", ("nightly", "weekly"), describe_run().git_commit)]  # git's, here
    with pytest.raises(InputError, match="tags in this store: nightly, weekly"):
        history(con, tags=["release"])
    with pytest.raises(InputError, match="--last 0"):
        history(con, last=0)
    with pytest.raises(InputError, match="kernels in them: ws_stream"):
        history(con, kernel="gemm")
    con.close()


def test_history_text_markdown_and_csv(runs):
    db = runs[0]
    p = wsperf("history", "--db", db)
    assert p.returncode == 0 and "ws_stream" in p.stdout and "us" in p.stdout and EVIL in p.stdout
    md = wsperf("history", "--db", db, "--format", "markdown").stdout
    assert "c\\|\\*\\<b\\>x\\</b\\>" in md and "<b>" not in md
    rows = list(csv.DictReader(io.StringIO(wsperf("history", "--db", db, "--format", "csv").stdout)))
    assert [r["label"] for r in rows] == ["a", "b", EVIL] and rows[1]["tags"] == "nightly;weekly"
    assert float(rows[0]["median"]) == _points("--db", db)[0]["median"]


def test_history_errors_are_one_line(runs, tmp_path):
    db = runs[0]
    assert_one_error_line(wsperf("history", "--db", db, "--kernel", "ws_stream("), 2, "not a regular expression")
    assert_one_error_line(wsperf("history", "--db", db, "--metric", "sm__cycles_activ"), 2,
                          "no launch of the selected runs has metric", "sm__cycles_active.avg")
    assert_one_error_line(wsperf("history", "--db", tmp_path / "absent.duckdb"), 2, "no such store")
    empty = tmp_path / "empty.duckdb"
    open_store(empty).close()
    assert_one_error_line(wsperf("history", "--db", empty), 2, "no runs are recorded")


def test_a_duplicate_label_is_refused_before_anything_is_written(runs, tmp_path):
    db = tmp_path / "copy.duckdb"
    shutil.copy(runs[0], db)
    before = counts(db)
    assert_one_error_line(wsperf("analyze", CPASYNC, "--db", db, "--label", "b"), 2, "'b' is already recorded")
    assert counts(db) == before


def test_a_report_failing_to_load_leaves_no_run_and_no_report(runs, tmp_path):
    db = tmp_path / "copy.duckdb"
    shutil.copy(runs[0], db)
    before = counts(db)
    bad = tmp_path / "truncated.ncu-rep"
    bad.write_bytes((REPORTS / "ws_stream_healthy.ncu-rep").read_bytes()[:100_000])
    # cpasync loads first, then the truncated report fails: the command is one transaction.
    assert_one_error_line(wsperf("analyze", CPASYNC, bad, "--db", db, "--label", "d"), 2, bad.name)
    assert counts(db) == before
    con = open_store(db, read_only=True)
    assert check_store(con) == [] and con.execute("SELECT label FROM runs ORDER BY run_id").fetchall() == [
        ("a",), ("b",), (EVIL,)]
    con.close()


def test_run_options_need_a_db():
    assert_one_error_line(wsperf("analyze", HEALTHY_A, "--label", "x"), 2, "give --db FILE")


def test_launch_ids_for_run(runs):
    con = open_store(runs[0], read_only=True)
    ids = launch_ids_for_run(con, "b")
    assert ids == [r[0] for r in con.execute(
        """SELECT launch_id FROM launches JOIN reports USING (report_id)
           WHERE path LIKE '%cmp_healthy_a%' OR path LIKE '%cmp_healthy_b%' ORDER BY launch_id""").fetchall()]
    assert len(ids) == 12 and launch_ids_for_run(con, "a") == ids[:6]
    with pytest.raises(InputError, match=r"no run labelled 'nope'.*newest runs: c\|\*<b>x</b>, b, a"):
        launch_ids_for_run(con, "nope")
    con.close()


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


def test_default_label_from_git_ci_variables_or_time(tmp_path, monkeypatch):
    for v in ("GITHUB_SHA", "GITHUB_REF_NAME", "CI_COMMIT_SHA", "CI_COMMIT_REF_NAME"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # `plain` below is in no repository
    now = datetime(2026, 11, 30, 4, 5, 6, tzinfo=timezone.utc)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "feature/x")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    m = describe_run(cwd=repo, now=now)
    assert (m.git_commit, m.git_branch) == (head, "feature/x")
    assert m.default_label() == f"feature/x@{head[:12]}:20261130T040506"
    # A detached HEAD (how CI checks out) takes the branch from the CI variables.
    _git(repo, "checkout", "-q", "--detach")
    monkeypatch.setenv("GITHUB_REF_NAME", "main")
    assert describe_run(cwd=repo, now=now).git_branch == "main"
    # Outside git: the CI variables, else a time label.
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setenv("GITHUB_SHA", "f" * 40)
    assert describe_run(cwd=outside, now=now).default_label() == f"main@{'f' * 12}:20261130T040506"
    for v in ("GITHUB_SHA", "GITHUB_REF_NAME"):
        monkeypatch.delenv(v)
    assert describe_run(cwd=outside, now=now).default_label() == "run-20261130T040506"
    # --commit / --branch win over git.
    m = describe_run(commit="abc", branch="rel", cwd=repo, now=now)
    assert (m.git_commit, m.git_branch) == ("abc", "rel")


def test_two_default_labels_in_one_second_get_a_suffix():
    con = open_store(None)
    (loaded,) = load_reports(con, [HEALTHY_A])
    meta = describe_run(commit="c" * 40, branch="main", now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    labels = [record_run(con, meta, [loaded.report_id]).label for _ in range(3)]
    assert labels == ["main@cccccccccccc:20260102T030405", "main@cccccccccccc:20260102T030405-2",
                      "main@cccccccccccc:20260102T030405-3"]
    assert check_store(con) == []
    con.close()


def test_a_bundle_gives_the_run_its_driver_and_ncu_version(tmp_path):
    """A `wsperf collect` bundle's environment.json (written as collect writes it, with
    the values of the fixture's provenance) names the driver and ncu of the run."""
    from bundles import sanitizer_bundle

    prov = json.loads((REPORTS / "ws_stream_healthy.provenance.json").read_text())
    bundle = sanitizer_bundle(tmp_path, "clean", report="ws_stream_healthy")
    env = Environment(python="3.11", platform="Linux x86_64", wsperf="0.1.0", packages={},
                      tools=[Tool("ncu", "/usr/local/cuda/bin/ncu", prov["ncu_version"][0].split()[1])],
                      gpus=[Gpu(0, prov["gpu"], prov["driver"], prov["compute_capability"])])
    (bundle / "environment.json").write_text(json.dumps(dataclasses.asdict(env), indent=2) + "\n")
    db = tmp_path / "b.duckdb"
    p = wsperf("analyze", bundle, "--db", db, "--label", "bundled")
    assert p.returncode == 0, p.stderr
    con = open_store(db, read_only=True)
    assert con.execute("SELECT driver, ncu_version, gpu FROM runs").fetchall() == [
        ("580.159.04", "2025.3.1.0", "NVIDIA H200")]
    con.close()


def test_export_round_trips_through_parquet(runs, tmp_path):
    db = runs[0]
    out = tmp_path / "warehouse"
    p = wsperf("export", "--db", db, "--parquet", out)
    assert p.returncode == 0, p.stderr
    con = duckdb.connect(str(db), read_only=True)
    (days,), = con.execute("SELECT count(DISTINCT CAST(started_at AS DATE)) FROM runs").fetchall()
    assert f" ({days} run_date partition{'' if days == 1 else 's'}) to " in p.stdout  # (one day but at midnight)
    for t in ("runs", "reports", "run_reports"):
        assert con.execute("SELECT * FROM read_parquet(?) ORDER BY ALL", [str(out / f"{t}.parquet")]).fetchall() \
            == con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
    assert sorted(d.name for d in (out / "launches").iterdir()) == sorted(
        f"run_date={r[0]}" for r in con.execute("SELECT DISTINCT CAST(started_at AS DATE) FROM runs").fetchall())
    for t in ("launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules"):
        pq = f"read_parquet('{out / t}/**/*.parquet', hive_partitioning = true)"
        # One row per (row, run that loaded its report): healthy_a's rows twice.
        got = con.execute(f"SELECT run_id, run_date, count(*) FROM {pq} GROUP BY ALL ORDER BY ALL").fetchall()
        want = con.execute(f"""SELECT rr.run_id, CAST(ru.started_at AS DATE), count(*) FROM {t} AS x
                               JOIN launches AS l ON l.launch_id = x.launch_id
                               JOIN run_reports AS rr ON rr.report_id = l.report_id
                               JOIN runs AS ru USING (run_id) GROUP BY ALL ORDER BY ALL""").fetchall()
        assert got == want and len(got) == 3, t
    # Values survive: every launch's duration per run, and a metric's values.
    assert con.execute(f"""SELECT run_id, launch_id, duration_ns FROM read_parquet('{out}/launches/**/*.parquet',
                           hive_partitioning = true) ORDER BY ALL""").fetchall() == con.execute(
        """SELECT rr.run_id, l.launch_id, l.duration_ns FROM launches AS l JOIN run_reports AS rr USING (report_id)
           ORDER BY ALL""").fetchall()
    assert con.execute(f"""SELECT sum(value_double) FROM read_parquet('{out}/metrics/**/*.parquet',
                           hive_partitioning = true) WHERE name = 'smsp__inst_executed.sum'""").fetchall() == \
        con.execute("""SELECT sum(m.value_double) FROM metrics AS m JOIN launches USING (launch_id)
                       JOIN run_reports USING (report_id) WHERE m.name = 'smsp__inst_executed.sum'""").fetchall()
    con.close()
    # A non-empty directory is refused; --overwrite replaces wsperf's tables only.
    assert_one_error_line(wsperf("export", "--db", db, "--parquet", out), 2, "not empty", "--overwrite")
    (out / "notes.txt").write_text("mine")
    shutil.rmtree(out / "stalls")
    assert wsperf("export", "--db", db, "--parquet", out, "--overwrite").returncode == 0
    assert (out / "notes.txt").read_text() == "mine" and any((out / "stalls").rglob("*.parquet"))


def test_hypothesis_queries_read_only_the_requested_launches(runs):
    """On a store with history the SQL itself is restricted (not Python filtering
    afterwards), and the verdicts equal those from a store holding only that report."""
    con = open_store(runs[0], read_only=True)
    (lid,) = launch_ids_for_run(con, EVIL)[:1]
    verdicts = evaluate(con, [lid])
    present = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views()").fetchall()}
    for h in catalogue():
        if not set(h.requires) <= present:
            continue  # pipeline-bubbles reads timeline tables this store has none of (its verdict: no_data)
        params = {k: v for k, v in {**h.thresholds, "expect": []}.items() if k in h.params}
        with stand_ins(con, h, present):  # serialized-roles' optional timeline_overlap
            assert [r[0] for r in con.execute(h.sql, params).fetchall()] == [lid], h.id
    assert con.execute(f"SELECT launch_id FROM {IDS_TABLE}").fetchall() == [(lid,)]
    con.close()
    alone = open_store(None)
    (res,) = load_reports(alone, [SERIALIZED])
    (first, *_) = analyze(alone, launch_ids=launch_ids_of_reports(alone, [res.report_id]))
    assert [(f.id, f.status, f.evidence) for f in first.findings] == [
        (f.id, f.status, f.evidence) for f in verdicts[lid].findings]
    alone.close()


def test_history_writes_the_trend_chart_with_the_threshold(runs, tmp_path):
    """--charts: the trend chart's data are the history's points, and its threshold rule
    is the first run's median x (1 + the configured duration threshold)."""
    db = runs[0]
    cfg = tmp_path / "wsperf.toml"
    cfg.write_text("[compare.thresholds]\nduration_ns = 7.5\n")
    charts = tmp_path / "charts"
    p = wsperf("history", "--db", db, "--kernel", "^ws_stream$", "--charts", charts, "--config", cfg,
               "--format", "json")
    assert p.returncode == 0, p.stderr
    points = json.loads(p.stdout)["points"]
    assert (charts / "history.png").read_bytes()[:4] == b"\x89PNG"
    spec = json.loads((charts / "history.vl.json").read_text())
    rows = [r for ds in spec["datasets"].values() for r in ds]
    medians = sorted(r["median"] for r in rows if "median" in r)
    assert medians == sorted(pt["median"] for pt in points)
    (rule,) = [r for r in rows if "threshold" in r]
    first = min(points, key=lambda pt: pt["run_id"])
    assert rule["threshold"] == pytest.approx(first["median"] * 1.075)


def test_history_reads_a_figure_by_name_whatever_the_architecture(runs):
    # dram_throughput_pct is gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed on every
    # chip wsperf maps (collectors/metrics.py): the same medians either way
    db = runs[0]
    by_figure = _points("--db", db, "--metric", "dram_throughput_pct")
    by_name = _points("--db", db, "--metric", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
    assert by_figure and [p["median"] for p in by_figure] == [p["median"] for p in by_name]
    assert all(p["metric"] == "dram_throughput_pct" and 0 < p["median"] < 100 for p in by_figure)
