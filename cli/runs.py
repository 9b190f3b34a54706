"""Recording runs into a --db store, shared by the commands that load reports
(`wsperf analyze --db`, and its Nsight Systems path in cli/nsys.py): one run per command,
checked before anything is written and stored in the same transaction as its reports."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import duckdb

from wsperf.analyses.analyze import launch_ids_of_reports
from wsperf.analyses.history import RunMeta, check_label, describe_run, record_run
from wsperf.cli import render
from wsperf.cli.common import err
from wsperf.collectors.errors import InputError
from wsperf.collectors.store import transaction

LOCK_HELP = ("Seconds to wait while another wsperf holds the store (DuckDB allows one writing process per file); "
             "then exit 2.")


def begin_run(con: duckdb.DuckDBPyConnection, db: Path | None, label: str | None, tags: list[str],
              commit: str | None, branch: str | None, inputs: list[Path]) -> RunMeta | None:
    """The run `analyze` will record (None without --db), checked before anything is
    written: a duplicate --label stops here."""
    if db is None:
        if label is not None or tags or commit is not None or branch is not None:
            raise InputError("--label, --tag, --commit and --branch name a recorded run: give --db FILE to record it")
        return None
    meta = describe_run(label, tags, commit, branch, bundles=[p for p in inputs if p.is_dir()])
    check_label(con, meta.label)
    return meta


def load_run(con: duckdb.DuckDBPyConnection, meta: RunMeta | None, reports: list[Path],
             load: Callable[[duckdb.DuckDBPyConnection, list[Path]], list]) -> list[int]:
    """Load `reports` with `load` and, when recording, the run: one transaction, so a
    report that fails to load (or a killed process) leaves neither the run nor any of
    the command's reports behind. Returns the launch ids of the reports, loaded now or
    found by content hash: what analyze reports on."""
    with transaction(con, f"run {meta.label or meta.default_label()}") if meta is not None else nullcontext():
        loaded = load(con, reports)
        if meta is not None:
            run = record_run(con, meta, [r.report_id for r in loaded])
    if meta is not None:
        err.print(render.plain(f"wsperf analyze: recorded run {run.label!r} (run {run.run_id}, "
                               f"{run.reports} report(s))"), soft_wrap=True)
    return launch_ids_of_reports(con, [r.report_id for r in loaded])


def require_store(db: Path, hint: str = "record runs into it with `wsperf analyze REPORTS --db {db}`") -> None:
    """An InputError unless `db` is an existing regular file (what --db must name to be
    read): a missing path is no store yet, a directory or a device is none at all."""
    if not db.exists():
        raise InputError(f"{db}: no such store; " + hint.format(db=db))
    if not db.is_file():
        kind = "a directory" if db.is_dir() else "not a regular file"
        raise InputError(f"{db}: is {kind}, not a wsperf store (a DuckDB file written by `wsperf analyze --db`)")

