"""The loader on the real fixture reports: what lands in DuckDB is what ncu_report reads
from the same file, row for row; bad input is one ReportError that leaves the store as
it was, even when ncu_report itself crashes."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shutil
import struct
import subprocess
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path

import duckdb
import pytest

from wsperf.collectors.errors import QueryError, ReportError, StoreError
from wsperf.collectors.ncu import load_report, load_reports
from wsperf.collectors.store import SCHEMA_VERSION, open_store, table_counts
from wsperf.queries import query_names, read_query, schema_sql

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
ALL = sorted(REPORTS.glob("*.ncu-rep"))
BY_SIZE = sorted(ALL, key=lambda p: p.stat().st_size)
each_report = pytest.mark.parametrize("report", ALL, ids=lambda p: p.stem)

STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def launches(con, report: Path, results: dict, ncu_actions) -> list[tuple[int, object]]:
    """(launch_id, IAction) of every launch of a loaded report, in report order."""
    ids = con.execute("SELECT launch_id FROM launches WHERE report_id = ? ORDER BY range_idx, action_idx",
                      [results[report].report_id]).fetchall()
    acts = ncu_actions(report)
    assert len(ids) == len(acts)
    return [(i, a) for (i,), (_, _, a) in zip(ids, acts)]


def stored_value(value_double, value_string):
    return value_string if value_string is not None else value_double


def same(stored, expected) -> bool:
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(stored, float) and math.isnan(stored)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return stored == float(expected)
    return stored == expected


# -- what a report holds -------------------------------------------------------------


@each_report
def test_one_launch_row_per_action_with_its_names(store, ncu_actions, report):
    con, results = store
    got = con.execute(
        "SELECT range_idx, action_idx, kernel_mangled, kernel_demangled, kernel_function FROM launches "
        "WHERE report_id = ? ORDER BY range_idx, action_idx", [results[report].report_id]).fetchall()
    want = [(ri, ai, a.name(a.NameBase_MANGLED), a.name(a.NameBase_DEMANGLED), a.name(a.NameBase_FUNCTION))
            for ri, ai, a in ncu_actions(report)]
    assert got == want
    ((num_launches,),) = con.execute("SELECT num_launches FROM reports WHERE report_id = ?",
                                     [results[report].report_id]).fetchall()
    assert results[report].launches == num_launches == len(want) == results[report].rows["launches"]


@each_report
def test_metric_rows_are_every_metric_and_every_instance(store, ncu_actions, report):
    con, results = store
    total = 0
    for launch_id, a in launches(con, report, results, ncu_actions):
        names = a.metric_names()
        ((rows, aggregates),) = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE instance IS NULL) FROM metrics WHERE launch_id = ?",
            [launch_id]).fetchall()
        assert aggregates == len(names)
        assert rows == len(names) + sum(a.metric_by_name(n).num_instances() for n in names)
        total += rows
    assert results[report].rows["metrics"] == total


@each_report
def test_metric_values_and_correlation_ids_equal_ncu_report(store, ncu_actions, report):
    con, results = store
    pick = random.Random(report.stem)
    for launch_id, a in launches(con, report, results, ncu_actions):
        names = list(a.metric_names())
        # A sample of every metric, and every instanced launch__/sass__ metric.
        sample = pick.sample(names, min(80, len(names))) + [n for n in names if n.startswith(("launch__", "sass__"))]
        for name in sample:
            m = a.metric_by_name(name)
            stored = {inst: row for inst, *row in con.execute(
                "SELECT instance, correlation_id, correlation_name, value_double, value_string, metric_type "
                "FROM metrics WHERE launch_id = ? AND name = ?", [launch_id, name]).fetchall()}
            k = m.num_instances()
            assert len(stored) == k + 1, name
            value = m.value()
            expected = None if not value and not m.has_value() else value  # held without a value: NULL
            _, _, vd, vs, mtype = stored[None]
            assert same(stored_value(vd, vs), expected), name
            assert mtype == {0: "other", 1: "counter", 2: "ratio", 3: "throughput"}[m.metric_type()]
            ids = m.correlation_ids() if k else None
            for j in sorted({0, k - 1, pick.randrange(k)} if k else ()):
                cid, cname, vd, vs, _ = stored[j]
                assert same(stored_value(vd, vs), m.value(j)), (name, j)
                assert (cname if cname is not None else cid) == ids.value(j), (name, j)


UNITS_IN_REPORT_ORDER = """
import json, sys, ncu_report
ctx = ncu_report.load_report(sys.argv[1])
rng = ctx.range_by_idx(0)
units = {}
for ai in range(rng.num_actions()):
    a = rng.action_by_idx(ai)
    units.update((name, a.metric_by_name(name).unit()) for name in a.metric_names() if name not in units)
print(json.dumps(units))
"""


@pytest.mark.parametrize("report", [BY_SIZE[0], BY_SIZE[-1]], ids=lambda p: p.stem)
def test_units_equal_ncu_report_asked_in_report_order(store, report):
    # IMetric.unit() of a few derived__* and value-less metrics depends on which units
    # the process asked for before (e.g. derived__sm__sass_thread_inst_executed_op_
    # ffma_pred_on_x2 is 'thread' in report order, 'inst' after others), so the
    # reference is a fresh process asking in report order, as the readers do.
    con, results = store
    out = subprocess.run([sys.executable, "-c", UNITS_IN_REPORT_ORDER, str(report)], capture_output=True, text=True,
                         check=True).stdout
    stored = dict(con.execute("SELECT DISTINCT name, unit FROM metrics JOIN launches USING (launch_id) "
                              "WHERE report_id = ?", [results[report].report_id]).fetchall())
    assert stored == json.loads(out)


@each_report
def test_launch_shape_equals_the_launch_metrics(store, ncu_actions, report):
    con, results = store
    for launch_id, a in launches(con, report, results, ncu_actions):
        cols = [f"{what}_{axis}" for what in ("grid", "block", "cluster") for axis in "xyz"]
        (row,) = con.execute(f"SELECT {', '.join(cols)}, registers_per_thread, dynamic_smem_bytes, duration_ns "
                             "FROM launches WHERE launch_id = ?", [launch_id]).fetchall()
        metrics = [f"launch__{what}_dim_{axis}" for what in ("grid", "block", "cluster") for axis in "xyz"]
        metrics += ["launch__registers_per_thread", "launch__shared_mem_per_block_dynamic"]
        # a metric the result lacks (a graph result has no cluster dims) is NULL
        assert list(row[:-1]) == [None if a.metric_by_name(m) is None else a.metric_by_name(m).value()
                                  for m in metrics]
        duration = a.metric_by_name("gpu__time_duration.sum")
        assert duration.unit() == "ns" and row[-1] == duration.value()


@each_report
def test_opcode_counts_equal_the_per_opcode_instances(store, ncu_actions, report):
    con, results = store
    for launch_id, a in launches(con, report, results, ncu_actions):
        got = dict(con.execute("SELECT opcode, executed FROM opcodes WHERE launch_id = ? AND source = 'ncu'",
                               [launch_id]).fetchall())
        m = a.metric_by_name("sass__inst_executed_per_opcode")
        if m is None or not m.num_instances():
            assert got == {}
            continue
        ids = m.correlation_ids()
        want = {ids.value(j): m.value(j) for j in range(m.num_instances())}
        assert got == want
        assert sum(got.values()) == m.value()


@each_report
def test_stall_samples_add_up_to_the_instanced_stall_metrics(store, ncu_actions, report):
    con, results = store
    for launch_id, a in launches(con, report, results, ncu_actions):
        got = {reason: (s, ni) for reason, s, ni in con.execute(
            "SELECT reason, sum(samples), sum(samples_not_issued) FROM stalls WHERE launch_id = ? GROUP BY reason",
            [launch_id]).fetchall()}
        want: dict[str, list[int]] = {}
        for name in a.metric_names():
            m = a.metric_by_name(name)
            if not name.startswith(STALL_PREFIX) or not m.num_instances():
                continue
            reason = name[len(STALL_PREFIX):]
            col = 1 if reason.endswith("_not_issued") else 0
            total = sum(m.value(j) for j in range(m.num_instances()))
            assert total == m.value(), name  # the aggregate is the sum over PCs
            want.setdefault(reason.removesuffix("_not_issued"), [0, 0])[col] += total
        assert got == {r: tuple(v) for r, v in want.items() if any(v)}


def instruction(text: str) -> tuple:
    """What two disassemblers' versions agree on: guard, opcode and the set of operands.
    Apart: CUDA 13's nvdisasm marks more operands `.reuse` and writes `R24, gsb0` for
    `R24.gsb0`; ncu_report 2026.3 writes a kernel's closing self-loop "BRA `(.L_x_0) 0x..."
    (2025.3 and nvdisasm: "BRA 0x..."); 2025.3 orders LDGSTS's operands the other way. wsperf
    appends to a BRX the jump table it read from the cubin's constant bank (` (*"c[0x2] ..."*)`,
    collectors/cubin.jump_tables), which sass_by_pc does not print; nvdisasm writes `BRX R2 -0x1c0`
    where sass_by_pc writes `BRX R2, -0x1c0`."""
    text = re.sub(r'\s*\(\*"c\[0x2\] [0-9a-fA-Fx,]*"\*\)', "", text)
    text = re.sub(r", (gsb\d)", r".\1", re.sub(r"`\(\.L_x_\d+\) ", "", text).replace(".reuse", ""))
    n = 2 if text.lstrip().startswith("@") else 1  # guard and opcode, or the opcode
    tokens = text.split(None, n)
    if len(tokens) > n and tokens[n - 1] == "BRX":
        return tuple(tokens[:n]), sorted(tokens[n].replace(",", " ").split())
    return tuple(tokens[:n]), sorted(tokens[n].split(", ")) if len(tokens) > n else []


@each_report
def test_sass_rows_are_the_instructions_ncu_report_disassembles(store, ncu_actions, report):
    con, results = store
    pick = random.Random(report.stem)
    for launch_id, a in launches(con, report, results, ncu_actions):
        rows = con.execute("SELECT pc, sass, opcode, opcode_full, guard, inst_executed, pcsamp_samples, source_file, "
                           "source_line FROM sass WHERE launch_id = ? ORDER BY pc", [launch_id]).fetchall()
        # Per-PC counters: instructions executed and PC samples. A graph result has
        # samples without instruction counts (graph_workload).
        per_pc = {}
        for name in ("inst_executed", "smsp__pcsamp_sample_count"):
            m = a.metric_by_name(name)
            ids = m.correlation_ids() if m is not None and m.num_instances() else None
            per_pc[name] = {ids.value(j): m.value(j) for j in range(m.num_instances())} if ids is not None else {}
        executed, sampled = per_pc["inst_executed"], per_pc["smsp__pcsamp_sample_count"]
        if not executed and not sampled:
            assert rows == []
            continue
        assert set(executed) | set(sampled) <= {r[0] for r in rows}
        # The text, for every PC: nvdisasm's (collectors/cubin.py) is ncu_report's but for
        # what differs between the disassemblers' versions.
        for pc, text, *_ in rows:
            theirs = a.sass_by_pc(pc)
            assert text == theirs or instruction(text) == instruction(theirs), (pc, text, theirs)
        for pc, text, opcode, full, guard, n, s, file, line in [rows[0], rows[-1], *pick.sample(rows, min(25, len(rows)))]:
            assert (n, s) == (executed.get(pc, 0 if executed else None), sampled.get(pc, 0))
            info = a.source_info(pc)
            assert (file, line) == ((info.file_name(), info.line()) if info is not None else (None, None))
            tokens = text.split()
            assert guard == (tokens.pop(0) if tokens[0].startswith("@") else None)
            assert full == tokens[0].rstrip(";") and opcode == full.split(".")[0]


def test_warp_specialized_gemm_sass_has_its_tensor_copy_and_barrier_instructions(store):
    con, results = store
    report = REPORTS / "gemm_wgmma_tma.ncu-rep"
    assert report in results, "the committed fixture gemm_wgmma_tma.ncu-rep must load"
    rows = dict(con.execute(
        "SELECT opcode, list(DISTINCT opcode_full ORDER BY opcode_full) FROM sass JOIN launches USING (launch_id) "
        "WHERE report_id = ? GROUP BY opcode", [results[report].report_id]).fetchall())
    assert {"HGMMA", "UTMALDG", "SYNCS"} <= set(rows)
    assert all(f.startswith("HGMMA.") for f in rows["HGMMA"])
    assert any(f.startswith("SYNCS.PHASECHK") for f in rows["SYNCS"])


@each_report
def test_one_rule_row_per_rule_result(store, ncu_actions, report):
    con, results = store
    for launch_id, a in launches(con, report, results, ncu_actions):
        got = con.execute("SELECT rule_id, section_id, name, message, estimated_speedup FROM ncu_rules "
                          "WHERE launch_id = ? ORDER BY rule_idx", [launch_id]).fetchall()
        want = [(r.rule_identifier(), r.section_identifier(), r.name(),
                 r.rule_message()["message"] if r.has_rule_message() else None,
                 r.speedup_estimation()["speedup"] if r.has_speedup_estimation() else None)
                for r in a.rule_results()]
        assert got == want


@each_report
def test_report_row_identifies_file_device_and_collection_time(store, ncu_actions, report):
    con, results = store
    ((path, sha256, size, device, cc, arch, ncu_version, collected_at),) = con.execute(
        "SELECT path, sha256, size_bytes, device_name, compute_capability, arch, ncu_version, collected_at "
        "FROM reports WHERE report_id = ?", [results[report].report_id]).fetchall()
    assert (path, sha256, size) == (str(report.resolve()), hashlib.sha256(report.read_bytes()).hexdigest(),
                                    report.stat().st_size)
    assert re.fullmatch(r"\d+\.\d+", cc) and arch == "sm_" + cc.replace(".", "")
    assert ncu_version is None  # ncu_report does not say which ncu wrote the report
    provenance = report.with_name(report.stem + ".provenance.json")
    if provenance.exists():
        p = json.loads(provenance.read_text())
        assert (device, cc) == (p["gpu"], p["compute_capability"])
        if collected_at is None:  # only when no launch has a start timestamp (e.g. ncu's default sections)
            assert not any(n.startswith("profiler__timestamp_workload_start")
                           for _, _, a in ncu_actions(report) for n in a.metric_names())
        else:
            written = datetime.fromisoformat(p["collected_at"]).replace(tzinfo=None)
            assert abs((written - collected_at).total_seconds()) < 30 * 60


# -- loading again, appending --------------------------------------------------------


def test_a_load_without_units_differs_only_in_the_units_it_leaves_null():
    # analyze and chart without --db load so (their output never shows a unit): every
    # table is the same row for row, but metrics.unit, NULL except the duration's,
    # which scales launches.duration_ns. The multi-launch report: units asked once.
    report = REPORTS / "multi_launch.ncu-rep"
    full, bare = open_store(None), open_store(None)
    load_report(full, report)
    load_report(bare, report, units=False)
    for table in ("reports", "launches", "metrics", "sass", "stalls", "opcodes", "ncu_rules"):
        cols = [c for (c,) in full.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                                           "AND column_name NOT IN ('unit', 'loaded_at')", [table]).fetchall()]
        # Every row's every value, as text (NaN equals NaN), hashed: the same multiset of rows.
        query = f"SELECT count(*), sum(hash({', '.join(f'{c}::VARCHAR' for c in cols)})::HUGEINT) FROM {table}"
        assert full.execute(query).fetchall() == bare.execute(query).fetchall(), table
    units = "SELECT DISTINCT name, unit FROM metrics WHERE unit IS NOT NULL ORDER BY ALL"
    assert bare.execute(units).fetchall() == [("gpu__time_duration.sum", "ns")]
    assert ("gpu__time_duration.sum", "ns") in full.execute(units).fetchall()
    assert full.execute("SELECT count(*) FILTER (WHERE unit IS NULL) FROM metrics").fetchone() == (0,)
    assert bare.execute("SELECT count(*) FROM launches WHERE duration_ns > 0").fetchone()[0] >= 2


def test_loading_the_same_content_again_adds_nothing(store, tmp_path):
    con, results = store
    report = BY_SIZE[0]
    before = table_counts(con)
    again = load_report(con, report)
    copy = tmp_path / "same-content-other-name.ncu-rep"
    shutil.copy(report, copy)
    moved = load_report(con, copy)
    assert again.already_present and moved.already_present
    assert again.report_id == moved.report_id == results[report].report_id
    assert set(again.rows.values()) == set(moved.rows.values()) == {0}
    assert table_counts(con) == before


def test_a_store_file_grows_across_connections(tmp_path):
    db = tmp_path / "runs.duckdb"
    first, second = BY_SIZE[:2]
    con = open_store(db)
    a = load_report(con, first)
    con.close()
    con = open_store(db)
    assert table_counts(con)["launches"] == a.launches
    b = load_report(con, second)
    con.close()

    con = open_store(db, read_only=True)
    assert con.execute("SELECT report_id, num_launches FROM reports ORDER BY report_id").fetchall() == [
        (1, a.launches), (2, b.launches)]
    assert [r[0] for r in con.execute("SELECT launch_id FROM launches ORDER BY launch_id").fetchall()] == list(
        range(1, a.launches + b.launches + 1))
    assert table_counts(con) == {t: a.rows[t] + b.rows[t] for t in a.rows}
    con.close()


def test_progress_is_reported_per_launch(tmp_path):
    report = BY_SIZE[-1]
    calls = []
    con = open_store(None)
    (result,) = load_reports(con, [report], progress=lambda *call: calls.append(call))
    n = result.launches
    assert [c[0] for c in calls] == list(range(1, n + 1)) and {c[1] for c in calls} == {n}
    assert all(label.startswith(report.name + ": ") for *_, label in calls)
    con.close()


# -- bad input -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A store file holding one report, that failed loads must leave as it is."""
    con = open_store(tmp_path_factory.mktemp("kept") / "kept.duckdb")
    load_report(con, BY_SIZE[0])
    yield con
    con.close()


def bad_file(tmp: Path, kind: str) -> Path:
    source = BY_SIZE[-1].read_bytes()  # the largest report: several launches
    path = tmp / f"{kind}.ncu-rep"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("==PROF== Connected to process 4242\n==PROF== Disconnected from process 4242\n")
    elif kind == "directory":
        path.mkdir()
    elif kind.startswith("truncated"):
        offset = {"truncated-header": 16, "truncated-4k": 4096, "truncated-half": len(source) // 2,
                  "truncated-last-byte": len(source) - 1}[kind]
        path.write_bytes(source[:offset])
    return path  # "missing": never written


# ncu_report 2026.x still reads the launches before the cut and names the broken one;
# 2025.3 finds no result in a cut report at all.
CUT_REPORT = ("truncated or damaged: action" if int(metadata.version("ncu-report").split(".")[0]) >= 2026
              else "truncated before its first result")


@pytest.mark.parametrize("kind, says", [
    ("missing", "no such file"),
    ("empty", "is empty"),
    ("text", "not an Nsight Compute report"),
    ("directory", "is a directory"),
    ("truncated-header", "truncated"),
    ("truncated-4k", "truncated"),
    ("truncated-half", CUT_REPORT),
    ("truncated-last-byte", CUT_REPORT),
])
def test_bad_input_is_one_report_error_and_keeps_the_store(kept, tmp_path, kind, says):
    path = bad_file(tmp_path, kind)
    before = table_counts(kept)
    with pytest.raises(ReportError) as e:
        load_report(kept, path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message
    assert table_counts(kept) == before


def corrupt_cubin_section_names(data: bytes) -> bytes:
    """Set the top byte of every section-name offset of the report's first embedded
    cubin (ELF64) to 0x73, far outside its string table. ncu_report 2026.3 then dies
    with SIGSEGV in IAction.sass_by_pc (found by fuzzing: one such byte sufficed)."""
    b = bytearray(data)
    elf = b.find(b"\x7fELF")
    (shoff,) = struct.unpack_from("<Q", b, elf + 0x28)
    entsize, count = struct.unpack_from("<HH", b, elf + 0x3A)
    for k in range(1, count):
        b[elf + shoff + k * entsize + 3] = 0x73
    return bytes(b)


def test_a_report_that_crashes_ncu_report_is_a_report_error(store, kept, tmp_path):
    con, results = store
    # The smallest report with source counters (the crash is in their disassembly).
    ((path,),) = con.execute("SELECT path FROM reports WHERE report_id IN (SELECT report_id FROM launches "
                             "JOIN sass USING (launch_id)) ORDER BY size_bytes LIMIT 1").fetchall()
    bad = tmp_path / "bad-cubin.ncu-rep"
    bad.write_bytes(corrupt_cubin_section_names(Path(path).read_bytes()))
    before = table_counts(kept)
    # Should ncu_report stop crashing here, this fails: then see whether the reader
    # processes (collectors/ncu.py) are still needed.
    with pytest.raises(ReportError, match=r"ncu_report crashed \(SIGSEGV\)"):
        load_report(kept, bad)
    assert table_counts(kept) == before
    fresh = open_store(None)  # and loading goes on, with new readers
    assert load_report(fresh, Path(path)).rows["sass"] > 0
    fresh.close()


def test_a_read_over_the_time_limit_is_stopped(kept):
    before = table_counts(kept)
    with pytest.raises(ReportError, match="took longer than"):
        load_report(kept, BY_SIZE[-1], timeout_s=0.001)
    assert table_counts(kept) == before


# -- the store and the packaged SQL --------------------------------------------------


@pytest.mark.parametrize("kind, says", [
    ("text", "is not a DuckDB database"),
    ("directory", "is a directory"),
    ("no-parent", "does not exist"),
    ("foreign", "not a wsperf store"),
    ("read-only-missing", "no such store"),
])
def test_bad_store_path_is_a_store_error(tmp_path, kind, says):
    path = tmp_path / "store.duckdb"
    read_only = kind == "read-only-missing"
    if kind == "text":
        path.write_text("not a database\n" * 100)
    elif kind == "directory":
        path.mkdir()
    elif kind == "no-parent":
        path = tmp_path / "absent" / "store.duckdb"
    elif kind == "foreign":
        with duckdb.connect(str(path)) as other:
            other.execute("CREATE TABLE orders (id INTEGER)")
    with pytest.raises(StoreError, match=says):
        open_store(path, read_only=read_only)


def test_schema_is_applied_idempotently(tmp_path):
    path = tmp_path / "store.duckdb"
    open_store(path).close()
    con = open_store(path)
    assert con.execute("SELECT value FROM wsperf_meta WHERE key = 'schema_version'").fetchall() == [(SCHEMA_VERSION,)]
    assert set(table_counts(con).values()) == {0}
    con.close()


def test_every_schema_column_is_documented_with_a_comment():
    con = open_store(None)
    columns = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                          "WHERE table_name IN (SELECT table_name FROM duckdb_tables())").fetchall()
    con.close()
    sql = schema_sql()
    for table, column in columns:
        block = sql[sql.index(f"CREATE TABLE IF NOT EXISTS {table} ("):]
        line = next(l for l in block.splitlines()[1:] if l.split() and l.split()[0] == column)
        assert "--" in line, (table, column)


def test_packaged_queries_are_read_by_name():
    assert "CREATE TABLE IF NOT EXISTS reports" in schema_sql()
    for name in query_names():
        assert read_query(name) == read_query(f"{name}.sql")
    for bad in ("no_such_query", "../collectors/ncu", "schema"):
        with pytest.raises(QueryError):
            read_query(bad)


# -- gzip-compressed reports ---------------------------------------------------------


def test_gzip_report_is_the_report_inside(tmp_path):
    """A .ncu-rep.gz (how CI artifacts and the compare fixtures are stored) loads as the
    report it holds: same identity, same rows, messages name the path given."""
    import gzip

    plain = BY_SIZE[0]
    packed = tmp_path / (plain.name + ".gz")
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    con = open_store()
    a = load_report(con, packed)
    assert a.sha256 == hashlib.sha256(plain.read_bytes()).hexdigest()
    assert not a.already_present and a.launches >= 1
    b = load_report(con, plain)
    assert b.already_present and b.report_id == a.report_id

    before = table_counts(con)
    cut = tmp_path / "cut.ncu-rep.gz"
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    with pytest.raises(ReportError, match=r"cut\.ncu-rep\.gz: is a damaged or truncated gzip file"):
        load_report(con, cut)
    inner = tmp_path / "inner.ncu-rep.gz"  # a valid gzip stream around a truncated report
    inner.write_bytes(gzip.compress(plain.read_bytes()[: plain.stat().st_size // 3]))
    with pytest.raises(ReportError) as e:
        load_report(con, inner)
    assert str(e.value).startswith(str(inner)) and "wsperf-ncu-" not in str(e.value)
    assert table_counts(con) == before
