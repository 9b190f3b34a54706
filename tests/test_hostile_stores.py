"""A store is a user's file, and a DuckDB file carries SQL of its own (views, macros,
defaults). Every command that opens one checks that it holds only what wsperf defines
(collectors/catalog.py) and refuses anything else with one Error line, before any query
runs; history and export query with external access off. Each case is a real store,
written by `wsperf analyze --db` from a real report, then changed as an attacker would."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from support import REPORTS, ROOT, assert_one_error_line, wsperf
from wsperf.analyses.sql import sandbox
from wsperf.collectors.catalog import catalog, expected_catalog, foreign_objects
from wsperf.collectors.errors import StoreError
from wsperf.collectors.store import open_store

REPORT = REPORTS / "gemm_ffma.ncu-rep"
SECRET = "wsperf-secret-token-7f3a"

# What an attacker writes into a store, and what the refusal names. Each reads a local file
# (the secret) or breaks a query: none of them may run.
ATTACKS = {
    "runs-as-view": ("CREATE TABLE r2 AS SELECT * FROM runs; DROP TABLE run_reports; DROP TABLE runs; "
                     "CREATE VIEW runs AS SELECT r2.* REPLACE ((SELECT content FROM read_text('{secret}')) AS label) "
                     "FROM r2", "'runs' is a view where wsperf defines a table"),
    "median-macro": ("CREATE MACRO median(x) AS (SELECT length(content) FROM read_text('{secret}'))",
                     "macro or function 'median'"),
    "column-type": ("ALTER TABLE runs ALTER started_at TYPE VARCHAR", "table 'runs' with other columns"),
    "default-expression": ("ALTER TABLE reports ALTER kind SET DEFAULT 'x'", "table 'reports' with other columns"),
    "view-changed": ("CREATE OR REPLACE VIEW roles AS SELECT content AS x FROM read_text('{secret}')",
                     "view 'roles' with other definition"),
    "extra-view": ("CREATE VIEW leak AS SELECT content FROM read_text('{secret}')", "view 'leak'"),
    "extra-table": ("CREATE TABLE notes (x INTEGER)", "table 'notes', which wsperf does not define"),
    "schema": ("CREATE SCHEMA evil; CREATE TABLE evil.runs (x INTEGER)", "schema 'evil'"),
    "type": ("CREATE TYPE mood AS ENUM ('a')", "type 'mood'"),
    "sequence": ("CREATE SEQUENCE s1", "sequence 's1'"),
    "index": ("CREATE INDEX ix ON runs(label)", "index 'ix'"),
}


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("store")
    db = d / "runs.duckdb"
    p = wsperf("analyze", REPORT, "--db", db, "--label", "night-1")
    assert p.returncode == 0, p.stderr
    return db


def _hostile(clean: Path, tmp_path: Path, attack: str) -> tuple[Path, Path]:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    db = tmp_path / "hostile.duckdb"
    shutil.copy(clean, db)
    with duckdb.connect(str(db)) as con:
        con.execute(ATTACKS[attack][0].format(secret=secret))
    return db, secret


def test_the_clean_store_holds_only_what_wsperf_defines(clean_store):
    with duckdb.connect(str(clean_store), read_only=True) as con:
        assert foreign_objects(catalog(con)) == []
    # and the expected catalog is the whole DDL: the lazy tables are in it
    assert {"runs", "nsys_kernels", "sanitizer_findings", "timeline_events", "ws_barriers"} <= set(
        expected_catalog()["table"])


def test_every_command_reads_the_clean_store(clean_store, tmp_path):
    for args in (("history", "--db", clean_store), ("export", "--db", clean_store, "--parquet", tmp_path / "pq"),
                 ("sql", "SELECT count(*) FROM runs", "--db", clean_store),
                 ("analyze", REPORT, "--db", clean_store)):
        p = wsperf(*args)
        assert p.returncode == 0, (args, p.stderr)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_store_with_sql_of_its_own_is_refused_by_every_command(clean_store, tmp_path, attack):
    db, secret = _hostile(clean_store, tmp_path, attack)
    before = db.read_bytes()
    needle = ATTACKS[attack][1]
    for args in (("history", "--db", db), ("history", "--db", db, "--format", "json"),
                 ("export", "--db", db, "--parquet", tmp_path / "pq"),
                 ("sql", "SELECT label FROM runs", "--db", db),
                 ("analyze", REPORT, "--db", db),
                 ("compare", "night-1", "night-1", "--db", db)):
        p = wsperf(*args)
        assert_one_error_line(p, 2, str(db), needle)
        assert SECRET not in p.stdout + p.stderr, args
    assert not (tmp_path / "pq").exists()  # the export wrote nothing
    assert db.read_bytes() == before  # refused before anything was written


def test_the_python_api_refuses_it_too(clean_store, tmp_path):
    import wsperf as api

    db, _ = _hostile(clean_store, tmp_path, "median-macro")
    with pytest.raises(StoreError, match="macro or function 'median'"):
        api.load([REPORT], db=db)


def test_history_and_export_reach_nothing_outside_the_store(clean_store, tmp_path):
    """The second wall: even a connection to a sound store cannot read or write outside it
    once history or export holds it, and cannot switch that back on."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    stage = tmp_path / "stage"
    stage.mkdir()
    con = sandbox(open_store(clean_store, read_only=True), writable=stage)
    try:
        con.execute(f"COPY (SELECT 1 AS x) TO '{stage / 'ok.parquet'}' (FORMAT PARQUET)")
        for sql in (f"SELECT * FROM read_text('{secret}')",
                    f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
                    "SET enable_external_access = true",
                    "SET allowed_directories = ['/']",
                    f"ATTACH '{tmp_path / 'other.duckdb'}' AS o"):
            with pytest.raises(duckdb.Error):
                con.execute(sql).fetchall()
    finally:
        con.close()
    assert (stage / "ok.parquet").is_file() and not (tmp_path / "out.csv").exists()


def test_the_catalog_check_is_what_refuses(clean_store, tmp_path, monkeypatch):
    """Without the check, the runs-as-view store prints the secret through history: the
    attack is real, and the check is what stops it."""
    db, _ = _hostile(clean_store, tmp_path, "runs-as-view")
    code = ("import sys; import wsperf.collectors.catalog as c; c.check_catalog = lambda con, where: None; "
            "import wsperf.collectors.store as s; s.check_catalog = c.check_catalog; "
            "from wsperf.collectors.store import open_store; "
            f"con = open_store({str(db)!r}, read_only=True); print(con.execute('SELECT label FROM runs').fetchall())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert SECRET in p.stdout, (p.stdout, p.stderr)


def test_a_command_that_fails_before_it_writes_leaves_the_store_byte_identical(clean_store, tmp_path):
    """Opening a whole store of this layout writes nothing (its DDL is not run again): a
    command that fails on its input, or only reads, leaves the file as it was (before, a
    failed `analyze missing.ncu-rep --db s` rewrote ~84 KB of it)."""
    db = tmp_path / "s.duckdb"
    shutil.copy(clean_store, db)
    before = db.read_bytes()
    assert_one_error_line(wsperf("analyze", tmp_path / "missing.ncu-rep", "--db", db), 2, "no such file")
    assert wsperf("history", "--db", db).returncode == 0
    assert wsperf("sql", "SELECT count(*) FROM runs", "--db", db).returncode == 0
    assert db.read_bytes() == before
    # and a command that does write still records its run
    assert wsperf("analyze", REPORT, "--db", db).returncode == 0 and db.read_bytes() != before


def test_side_files_that_would_hang_or_never_end_are_treated_as_absent(tmp_path, monkeypatch):
    """A bundle whose environment.json is a FIFO hung `analyze B --db s`; a disassembly
    cache entry that is a FIFO hung every analyze, one linked to /dev/zero read until the
    out-of-memory killer. These, and an entry nested 100,000 deep with the right digest,
    are now as if absent: the same verdicts, in seconds."""
    import os

    cache = tmp_path / "cache"
    env = {"WSPERF_CACHE_DIR": str(cache), "WSPERF_NO_PRESTART": "1"}
    first = wsperf("analyze", REPORT, "--format", "json", env=env)
    assert first.returncode == 0
    for kind in ("FIFO", "/dev/zero", "nested"):
        entries = sorted(p for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
        assert entries  # written again after each miss
        for p in entries:
            if kind == "nested":  # 100,000 deep under a head whose digest is right
                head = json.loads(p.read_bytes().split(b"\n", 1)[0])
                body = b"[" * 100_000 + b"]" * 100_000
                p.write_bytes(json.dumps({**head, "digest": hashlib.sha256(body).hexdigest()}).encode() + b"\n" + body)
                continue
            p.unlink()
            if kind == "FIFO":
                os.mkfifo(p)
            else:
                p.symlink_to("/dev/zero")
        again = wsperf("analyze", REPORT, "--format", "json", env=env)  # would block or read forever before
        assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout), kind
    bundle = tmp_path / "b"
    shutil.copytree(ROOT / "fixtures" / "evidence" / "triton_plain_desc", bundle)
    (bundle / "environment.json").unlink()
    os.mkfifo(bundle / "environment.json")
    p = wsperf("analyze", bundle, "--db", tmp_path / "s.duckdb")
    assert p.returncode == 0 and "Traceback" not in p.stderr


def test_comparing_stored_runs_only_reads_the_store(clean_store, tmp_path):
    """`compare A B --db s` with two run labels has nothing to load: it opens the store
    read-only, so it runs beside another reader of the file and leaves it byte-identical
    (before, it opened it read-write and could not start while a reader held the file)."""
    db = tmp_path / "s.duckdb"
    shutil.copy(clean_store, db)
    assert wsperf("analyze", REPORT, "--db", db, "--label", "night-2").returncode == 0
    before = db.read_bytes()
    with duckdb.connect(str(db), read_only=True) as reader:
        p = wsperf("compare", "night-1", "night-2", "--db", db, "--format", "json")
        assert reader.execute("SELECT count(*) FROM runs WHERE label IN ('night-1', 'night-2')").fetchone()[0] == 2
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["base"] == "night-1"
    assert db.read_bytes() == before


def test_a_query_that_spills_past_the_bound_ends_in_one_error_line(clean_store, tmp_path):
    # DuckDB's own spill bound is 90% of the free disk: a sort bigger than its memory limit
    # could fill the disk beside the store. wsperf bounds it (WSPERF_MAX_SPILL, default 4 GiB);
    # here 1 MiB under a 3 GiB address-space limit (a 1 GiB memory limit), on a 1.2 GB sort
    import hashlib
    import resource

    db = tmp_path / "runs.duckdb"
    shutil.copy(clean_store, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    query = "SELECT count(*) FROM (SELECT i, repeat('x', 300) s FROM range(4000000) t(i) ORDER BY s, i DESC)"
    from support import ENV, wsperf_exe

    p = subprocess.run([wsperf_exe(), "sql", "--db", str(db), query], capture_output=True, text=True, timeout=600,
                       env={**ENV, "WSPERF_MAX_SPILL": "1MiB"},
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)))
    assert_one_error_line(p, 2, "Out of Memory", "failed to offload")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not any(x.name.endswith(".tmp") and any(x.iterdir()) for x in tmp_path.iterdir() if x.is_dir())
