"""`wsperf history`: a kernel's figures over the runs recorded in a `--db` store.

A run is one `wsperf analyze REPORTS --db FILE`: the `runs` row says when, on which
commit, branch, machine and GPU, with which tags; `run_reports` links it to every report
it loaded, including reports already in the store (a report's identity is its content
hash, so the same file analyzed by two runs is stored once and belongs to both).
`record_run` writes both in the caller's transaction; the CLI opens that transaction
around the report loads too, so a failed or killed command leaves no run and no report
behind. `history` turns the runs into one point per (run, kernel) with all arithmetic in
DuckDB; `launch_ids_for_run` is how other commands (compare) name a run; `export_parquet`
writes the store out for a warehouse.

Result types (the contract shared by the renderers and the trend chart).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Iterable, Mapping

import duckdb

from wsperf.analyses.sql import check_kernel_regex, sandbox
from wsperf.collectors.bundle import ENVIRONMENT
from wsperf.collectors.environment import recorded
from wsperf.collectors.errors import InputError, StoreError
from wsperf.collectors.files import check_output_dir, read_small, staged_into
from wsperf.collectors.metrics import BY_NAME as _FIGURES

FIGURE_NAMES = frozenset(_FIGURES)


@dataclass(frozen=True)
class HistoryPoint:
    """One kernel's figure in one recorded run."""

    run_id: int
    label: str                  # runs.label
    git_commit: str | None
    git_branch: str | None
    started_at: datetime        # runs.started_at (UTC)
    tags: tuple[str, ...]
    kernel: str                 # function name, e.g. 'ws_stream'
    demangled: str              # full demangled name
    metric: str                 # 'duration_ns' (launches.duration_ns) or an ncu metric name
    n: int                      # launches of the kernel in the run
    median: float | None
    low: float | None           # min over the run's launches
    high: float | None          # max over the run's launches


@dataclass(frozen=True)
class RunMeta:
    """What a run records about itself, decided before anything is loaded."""

    label: str | None           # None: the default label, made unique when recorded
    git_commit: str | None
    git_branch: str | None
    started_at: datetime        # UTC, naive (DuckDB TIMESTAMP)
    machine: str | None
    tags: tuple[str, ...]
    driver: str | None          # from a collect bundle's environment.json
    ncu_version: str | None     # likewise
    wsperf_version: str | None

    def default_label(self) -> str:
        when = self.started_at.strftime("%Y%m%dT%H%M%S")
        if self.git_commit:
            return f"{self.git_branch or 'HEAD'}@{self.git_commit[:12]}:{when}"
        return f"run-{when}"


@dataclass(frozen=True)
class RecordedRun:
    """A run as written: its id and final label."""

    run_id: int
    label: str
    reports: int                # reports linked to it


@dataclass(frozen=True)
class ExportResult:
    """What `export_parquet` wrote."""

    directory: Path
    rows: Mapping[str, int]     # rows written per table
    files: int                  # Parquet files written
    partitions: int             # distinct run_date partitions of the per-launch tables


# Per-launch tables written partitioned by their run's date, in this order.
EXPORT_PARTITIONED = ("launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules")
# Small tables written whole, one file each.
EXPORT_WHOLE = ("runs", "reports", "run_reports")

_GIT_TIMEOUT_S = 10.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# ---------------------------------------------------------------------------------------
# recording a run


def describe_run(label: str | None = None, tags: Iterable[str] = (), commit: str | None = None,
                 branch: str | None = None, bundles: Iterable[Path] = (), cwd: Path | None = None,
                 now: datetime | None = None) -> RunMeta:
    """The run a command is about to record. Commit and branch default to git in `cwd`
    (a detached HEAD, as CI checks out, takes the branch from $GITHUB_REF_NAME or
    $CI_COMMIT_REF_NAME), else the CI variables ($GITHUB_SHA / $CI_COMMIT_SHA)."""
    tags = tuple(tags)
    for value, what in [(label, "--label"), (commit, "--commit"), (branch, "--branch"), *((t, "--tag") for t in tags)]:
        if value is not None and (not value.strip() or _CONTROL.search(value)):
            raise InputError(f"{what} {value!r}: give a non-empty value without control characters")
    if len(set(tags)) != len(tags):
        raise InputError(f"--tag given twice: {', '.join(sorted({t for t in tags if tags.count(t) > 1}))}")
    git_commit, git_branch = _git(["rev-parse", "HEAD"], cwd), _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    if git_branch == "HEAD":  # detached: git knows no branch name
        git_branch = None
    driver, ncu_version = _bundle_environment(bundles)
    started = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(tzinfo=None, microsecond=0)
    return RunMeta(
        label=label,
        git_commit=commit or git_commit or os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA") or None,
        git_branch=branch or git_branch or os.environ.get("GITHUB_REF_NAME") or os.environ.get("CI_COMMIT_REF_NAME")
        or None,
        started_at=started,
        machine=socket.gethostname() or None,
        tags=tags,
        driver=driver,
        ncu_version=ncu_version,
        wsperf_version=_version(),
    )


def check_label(con: duckdb.DuckDBPyConnection, label: str | None) -> None:
    """Refuse a --label the store already holds (before anything is written)."""
    if label is None:
        return
    if con.execute("SELECT 1 FROM runs WHERE label = ?", [label]).fetchall():
        raise InputError(f"run label {label!r} is already recorded in this store; give another --label "
                         "(labels name runs for `wsperf history` and `wsperf compare`)")


def record_run(con: duckdb.DuckDBPyConnection, meta: RunMeta, report_ids: Iterable[int]) -> RecordedRun:
    """Write the run and link it to `report_ids` (loaded now or found by content hash).
    Call inside the transaction that loaded the reports: run and reports commit together."""
    ids = sorted(set(report_ids))
    if not ids:
        raise InputError("no report to record a run for: give at least one Nsight Compute report")
    ((gpu, ncu_version),) = con.execute(
        """SELECT string_agg(DISTINCT device_name, ', ' ORDER BY device_name),
                  string_agg(DISTINCT ncu_version, ', ' ORDER BY ncu_version)
           FROM reports WHERE list_contains($ids, report_id)""", {"ids": ids}).fetchall()
    run_id, label = insert_run(con, meta, gpu, ncu_version)
    con.execute("INSERT INTO run_reports SELECT $run_id, unnest($ids::INTEGER[])", {"run_id": run_id, "ids": ids})
    return RecordedRun(run_id, label, len(ids))


def insert_run(con: duckdb.DuckDBPyConnection, meta: RunMeta, gpu: str | None, ncu_version: str | None
               ) -> tuple[int, str]:
    """Write the `runs` row of `meta` (its label made unique when defaulted); returns
    (run_id, label). The caller links what the run loaded."""
    check_label(con, meta.label)
    label = meta.label
    if label is None:
        # Two jobs started in the same second on the same commit would share a default
        # label; the later one gets a suffix.
        base = meta.default_label()
        taken = {r[0] for r in con.execute("SELECT label FROM runs WHERE label = $b OR label LIKE $b || '-%'",
                                           {"b": base}).fetchall()}
        label = base if base not in taken else next(f"{base}-{i}" for i in range(2, len(taken) + 3)
                                                     if f"{base}-{i}" not in taken)
    ((run_id,),) = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM runs").fetchall()
    con.execute(
        """INSERT INTO runs (run_id, label, git_commit, git_branch, started_at, machine, gpu, driver, ncu_version,
                             tags, wsperf_version)
           VALUES ($run_id, $label, $commit, $branch, $started, $machine, $gpu, $driver, $ncu, $tags::VARCHAR[],
                   $version)""",
        {"run_id": run_id, "label": label, "commit": meta.git_commit, "branch": meta.git_branch,
         "started": meta.started_at, "machine": meta.machine, "gpu": gpu, "driver": meta.driver,
         "ncu": ncu_version or meta.ncu_version, "tags": list(meta.tags), "version": meta.wsperf_version})
    return run_id, label


def _git(args: list[str], cwd: Path | None) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git, or not answering: the CI variables or nothing
    out = p.stdout.strip()
    return out if p.returncode == 0 and out else None


_ENV_BYTES = 1 << 20  # a bundle's environment.json: a few KB


def _bundle_environment(bundles: Iterable[Path]) -> tuple[str | None, str | None]:
    """(driver, ncu version) from the first bundle whose environment.json says so."""
    driver = ncu = None
    for b in bundles:
        raw = read_small(Path(b) / ENVIRONMENT, _ENV_BYTES)  # a FIFO or a huge file there: as if absent
        try:
            env = json.loads(raw.decode("utf-8", "replace")) if raw is not None else None
        except (ValueError, RecursionError):
            continue  # an old or partial bundle: the run just knows less
        if not isinstance(env, dict):
            continue
        gpus, tools = recorded(env, "gpus"), recorded(env, "tools")
        driver = driver or next((str(g["driver"]) for g in gpus if g.get("driver")), None)
        ncu = ncu or next((str(t["version"]) for t in tools if t.get("name") == "ncu" and t.get("version")), None)
    return driver, ncu


def _version() -> str | None:
    try:
        return metadata.version("wsperf")
    except metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------
# reading runs


def launch_ids_for_run(con: duckdb.DuckDBPyConnection, label: str) -> list[int]:
    """The launches of the reports the run `label` loaded, in id order. Raises
    InputError naming the newest recorded labels when no run has that label."""
    _require_runs(con)
    found = con.execute("SELECT run_id FROM runs WHERE label = ?", [label]).fetchall()
    if not found:
        newest = [r[0] for r in con.execute("SELECT label FROM runs ORDER BY run_id DESC LIMIT 5").fetchall()]
        raise InputError(f"no run labelled {label!r} in this store; newest runs: {', '.join(newest)} "
                         "(`wsperf history --db FILE` lists them)")
    return [r[0] for r in con.execute(
        """SELECT l.launch_id FROM run_reports AS rr JOIN launches AS l USING (report_id)
           WHERE rr.run_id = ? ORDER BY l.launch_id""", [found[0][0]]).fetchall()]


_HISTORY_SQL = """
WITH tagged AS (
    -- Runs carrying every requested tag; `newest` = 1 for the latest recorded.
    SELECT run_id, label, git_commit, git_branch, started_at, tags,
           row_number() OVER (ORDER BY run_id DESC) AS newest
    FROM runs
    WHERE list_has_all(tags, $tags::VARCHAR[])
),
picked AS (
    SELECT * FROM tagged WHERE $last IS NULL OR newest <= $last
),
sel AS (
    SELECT p.run_id, l.launch_id,
           coalesce(l.kernel_function, l.kernel_demangled, l.kernel_mangled) AS kernel,
           coalesce(l.kernel_demangled, l.kernel_mangled) AS demangled,
           l.duration_ns
    FROM picked AS p
    JOIN run_reports AS rr USING (run_id)
    JOIN launches AS l USING (report_id)
    WHERE $kernel IS NULL
       OR regexp_matches(l.kernel_function, $kernel)
       OR regexp_matches(l.kernel_demangled, $kernel)
       OR regexp_matches(l.kernel_mangled, $kernel)
),
{values}
SELECT p.run_id, p.label, p.git_commit, p.git_branch, p.started_at, p.tags, v.kernel, v.demangled,
       count(*) AS n, median(v.value) AS median, min(v.value) AS low, max(v.value) AS high
FROM v JOIN picked AS p USING (run_id)
GROUP BY ALL
ORDER BY p.run_id, v.kernel, v.demangled
"""

# The figure per selected launch: the launch row's own duration, or the aggregate row
# (instance NULL) of an ncu metric. A launch without the metric counts in `n` with a
# NULL value, which median/min/max skip.
_VALUES_DURATION = "v AS (SELECT *, duration_ns AS value FROM sel)"
_VALUES_METRIC = """m AS (
    SELECT launch_id, max(value_double) AS value
    FROM metrics
    WHERE name = $metric AND instance IS NULL AND launch_id IN (SELECT launch_id FROM sel)
    GROUP BY launch_id
),
v AS (SELECT sel.*, m.value FROM sel LEFT JOIN m USING (launch_id))"""
# A figure of the per-architecture mapping (collectors/metrics.py): whichever metric
# measures it on each launch's GPU, through the store's `figures` view.
_VALUES_FIGURE = """m AS (
    SELECT launch_id, max(value) AS value
    FROM figures
    WHERE figure = $metric AND launch_id IN (SELECT launch_id FROM sel)
    GROUP BY launch_id
),
v AS (SELECT sel.*, m.value FROM sel LEFT JOIN m USING (launch_id))"""


def history(
    con: duckdb.DuckDBPyConnection,
    kernel: str | None = None,
    metric: str = "duration_ns",
    tags: Iterable[str] = (),
    last: int | None = None,
) -> list[HistoryPoint]:
    """One point per (run, kernel) over the recorded runs, oldest run first: the
    median, min and max of `metric` over the kernel's launches in the run. `kernel` is
    a regular expression (RE2) on the function, demangled or mangled name; `tags` keeps runs that
    carry all of them; `last` keeps the newest N of those runs. `metric` is
    'duration_ns' (launches.duration_ns), a figure of the per-architecture mapping
    (collectors/metrics.py, e.g. tensor_pipe_pct: the metric that measures it on each
    launch's GPU), or any ncu metric name (its aggregate value)."""
    tags = list(tags)
    if last is not None and last < 1:
        raise InputError(f"--last {last}: give a number of runs >= 1")
    if not metric or _CONTROL.search(metric):
        raise InputError(f"--metric {metric!r}: give an ncu metric name, e.g. gpu__time_duration.sum, or duration_ns")
    _require_runs(con)
    check_kernel_regex(kernel)
    figure = metric in FIGURE_NAMES
    if figure and not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'figures'").fetchone()[0]:
        raise InputError(f"--metric {metric!r} is a figure, and this store predates the figures view: record a "
                         "run into it once (`wsperf analyze REPORT --db ...`), or give the metric's ncu name")
    sql = _HISTORY_SQL.format(values=_VALUES_DURATION if metric == "duration_ns" else
                              _VALUES_FIGURE if figure else _VALUES_METRIC)
    params: dict[str, object] = {"tags": tags, "last": last, "kernel": kernel}
    if metric != "duration_ns":
        params["metric"] = metric
    try:
        rows = con.execute(sql, params).fetchall()
    except duckdb.Error as e:
        raise StoreError(f"reading the runs failed: {str(e).strip().splitlines()[0]}; the store may be damaged: "
                         "check it with `wsperf sql \"SELECT count(*) FROM runs\" --db FILE`") from None
    points = [HistoryPoint(run_id, label, commit, branch, started, tuple(tg), k, d, metric, n, med, lo, hi)
              for run_id, label, commit, branch, started, tg, k, d, n, med, lo, hi in rows]
    if not points:
        _explain_empty(con, kernel, tags)
    if metric != "duration_ns" and all(p.median is None for p in points):
        like = [r[0] for r in con.execute(
            """SELECT DISTINCT name FROM metrics WHERE instance IS NULL AND contains(lower(name), lower($m))
               ORDER BY name LIMIT 5""", {"m": metric.split(".")[0]}).fetchall()]
        raise InputError(f"no launch of the selected runs has metric {metric!r} (an aggregate ncu value)"
                         + (f"; similar names in the store: {', '.join(like)}" if like else
                            "; give a metric name as `wsperf sql \"SELECT DISTINCT name FROM metrics\"` lists them, "
                            "or duration_ns"))
    return points


def _require_runs(con: duckdb.DuckDBPyConnection) -> None:
    try:
        ((n,),) = con.execute("SELECT count(*) FROM runs").fetchall()
    except duckdb.CatalogException:
        n = 0  # a store written before runs were recorded
    except duckdb.Error as e:
        raise StoreError(f"the store cannot be read: {str(e).strip().splitlines()[0]}") from None
    if not n:
        raise InputError("no runs are recorded in this store: record one with `wsperf analyze REPORTS --db FILE` "
                         "(add --label NAME --tag nightly to name it)")


def _explain_empty(con: duckdb.DuckDBPyConnection, kernel: str | None, tags: list[str]) -> None:
    if tags and not con.execute("SELECT 1 FROM runs WHERE list_has_all(tags, $t::VARCHAR[])", {"t": tags}).fetchall():
        known = [r[0] for r in con.execute("SELECT DISTINCT unnest(tags) AS t FROM runs ORDER BY t LIMIT 10").fetchall()]
        raise InputError(f"no recorded run has tag(s) {', '.join(tags)}; tags in this store: "
                         f"{', '.join(known) if known else 'none'}")
    names = [r[0] for r in con.execute(
        """SELECT DISTINCT coalesce(l.kernel_function, l.kernel_demangled, l.kernel_mangled) AS k
           FROM run_reports JOIN launches AS l USING (report_id) ORDER BY k LIMIT 10""").fetchall()]
    raise InputError(f"no kernel launch matches --kernel {kernel!r} in the recorded runs; kernels in them: "
                     f"{', '.join(map(str, names)) if names else 'none'}")


# ---------------------------------------------------------------------------------------
# Parquet export


def export_parquet(con: duckdb.DuckDBPyConnection, out_dir: Path, overwrite: bool = False) -> ExportResult:
    """Write the store as Parquet for a warehouse: `runs`, `reports` and `run_reports`
    whole (DIR/<table>.parquet), and each per-launch table joined with its run, Hive-
    partitioned by the run's UTC date (DIR/<table>/run_date=YYYY-MM-DD/*.parquet) with a
    `run_id` column. A launch of a report that two runs loaded is written once per run;
    launches of reports no run loaded (stores from before runs were recorded, `inspect`)
    get run_id NULL and the partition `run_date=__HIVE_DEFAULT_PARTITION__` (Hive's NULL).
    Refuses a non-empty `out_dir` unless `overwrite`, which replaces only these tables."""
    out = Path(out_dir)
    what = "the Parquet export (--parquet)"
    if check_output_dir(out, what=what) and any(out.iterdir()) and not overwrite:
        raise InputError(f"{out}: directory is not empty; give a new or empty directory, or --overwrite to replace "
                         "the tables wsperf writes there")
    try:
        con.execute("SELECT 1 FROM runs LIMIT 0")
    except duckdb.CatalogException:
        raise InputError("this store predates recorded runs; open it once with `wsperf analyze REPORTS --db FILE` "
                         "to add the run tables") from None
    rows: dict[str, int] = {}
    # Written into a private directory inside `out`, then renamed over these tables' names
    # (never through a link planted there); a failed or interrupted export leaves the
    # previous one, not a partial file.
    with staged_into(out, what=what) as stage:
        # From here on the connection writes into the stage and nowhere else, for good.
        sandbox(con, writable=stage)
        try:
            for t in EXPORT_WHOLE:
                ((rows[t],),) = con.execute(f"COPY (SELECT * FROM {t} ORDER BY ALL) TO $p (FORMAT PARQUET)",
                                            {"p": str(stage / f"{t}.parquet")}).fetchall()
            for t in EXPORT_PARTITIONED:
                # Table names come from the fixed tuple above, never from the user.
                ((rows[t],),) = con.execute(
                    f"""COPY (
                            SELECT x.*, rr.run_id, CAST(ru.started_at AS DATE) AS run_date
                            FROM {t} AS x
                            {'' if t == 'launches' else 'JOIN launches AS l USING (launch_id)'}
                            LEFT JOIN run_reports AS rr ON rr.report_id = {'x' if t == 'launches' else 'l'}.report_id
                            LEFT JOIN runs AS ru USING (run_id)
                        ) TO $p (FORMAT PARQUET, PARTITION_BY (run_date))""",
                    {"p": str(stage / t)}).fetchall()
        except duckdb.Error as e:
            raise StoreError(f"writing Parquet to {out} failed: {str(e).strip().splitlines()[0]}") from None
    files = len(EXPORT_WHOLE) + sum(1 for t in EXPORT_PARTITIONED for _ in (out / t).rglob("*.parquet"))
    partitions = len({p.name for t in EXPORT_PARTITIONED for p in (out / t).glob("run_date=*")})
    return ExportResult(out, rows, files, partitions)
