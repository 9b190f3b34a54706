"""Hostile and broken inputs, for every kind of file wsperf reads (tests/corpus.py makes
them from the real fixtures): Nsight Compute reports (.ncu-rep and .ncu-rep.gz),
compute-sanitizer XML, cuda-gdb captures and cuobjdump SASS (in bundles), PTX, cubins,
config TOML, bundle manifests and DuckDB stores.

Each must end as one `Error:` line and exit 2 (or, for a hang or a broken kernel, the
report with exit 4 or 3, saying what it could not read), or load and say what is
missing: never a traceback, a hang or a crashed interpreter. Most cases go through the
library in this process (the report loader's readers are started once for all of
them); a sample of each kind goes through the real CLI. Every test has a time limit
(SIGALRM) and so has every CLI run. The last test prints how many inputs of each kind
were tried.

Untrusted text (kernel names, sanitizer messages, file names) must reach the terminal
and Markdown inert: no escape sequence, no Rich markup interpreted, no Markdown syntax.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
import shutil

import sqlite3
import subprocess
from pathlib import Path

import duckdb
import pytest

import corpus
from bundles import deadlock_bundle, sanitizer_bundle
from support import ENV, REPORTS, ROOT, assert_one_error_line, time_limit, wsperf, wsperf_exe
from wsperf.analyses.config import load_config
from wsperf.analyses.evidence import gather
from wsperf.analyses.worksheet import worksheet
from wsperf.collectors import ncu
from wsperf.collectors.bundle import MANIFEST, BundleError, read_bundle
from wsperf.collectors.cudagdb import map_waits, parse_cudagdb, parse_cuobjdump_sass
from wsperf.collectors.disasm import load_static
from wsperf.collectors.errors import InputError, ReportError, WsperfError
from wsperf.collectors.ncu import load_report
from wsperf.collectors.sanitizer import parse_sanitizer_xml
from wsperf.collectors.store import open_store, table_counts

TEST_LIMIT_S = 240  # per test (SIGALRM): a hang fails the test instead of stalling CI
CLI_LIMIT_S = 120  # per CLI run
TRIED: collections.Counter = collections.Counter()  # (kind, how) -> inputs tried

@pytest.fixture(autouse=True)
def limit():
    with time_limit(TEST_LIMIT_S, f"the test ran past {TEST_LIMIT_S} s: an input hangs wsperf"):
        yield


def cli(kind: str, *args: str | Path, codes: tuple[int, ...] = (2,)) -> subprocess.CompletedProcess:
    """Run wsperf as a user does; the exit code must be one of `codes`, stderr must hold
    no traceback, and an exit 2 exactly one `Error:` line."""
    p = subprocess.run([wsperf_exe(), *map(str, args)], capture_output=True, timeout=CLI_LIMIT_S, env=ENV)
    err = p.stderr.decode("utf-8", "replace")
    TRIED[(kind, "CLI")] += 1
    assert "Traceback" not in err, (args, err[-3000:])
    assert p.returncode in codes, (args, p.returncode, err[-2000:])
    if p.returncode == 2:
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, (args, err)
    return p

def _one_line(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    return msg

# -- Nsight Compute reports --------------------------------------------------------------

def test_broken_reports_are_one_report_error_each_and_keep_the_store(tmp_path):
    con = open_store(None)
    load_report(con, corpus.BASIC)
    outcomes: collections.Counter = collections.Counter()
    for label, data in corpus.report_cases():
        path = tmp_path / "bad.ncu-rep"
        path.write_bytes(data)
        before = table_counts(con)
        try:
            r = load_report(con, path, timeout_s=60)
        except ReportError as e:
            assert _one_line(e).startswith(f"{path}: "), (label, str(e))
            assert table_counts(con) == before, label
            outcomes["report error"] += 1
        else:
            # Changed bytes the report does not depend on, or a name that is still text.
            assert r.launches >= 1 and not label.startswith(("empty", "cut", "no source counters, cut")), label
            outcomes["loaded"] += 1
        TRIED[("ncu report", "library")] += 1
    # Every wrong kind, cut and random file fails; changed bytes may or may not matter.
    assert outcomes["report error"] >= 55, outcomes
    con.close()

def test_broken_gzip_reports_are_report_errors_and_a_bomb_is_refused(tmp_path, monkeypatch):
    con = open_store(None)
    for label, data in corpus.gzip_cases():
        path = tmp_path / "bad.ncu-rep.gz"
        path.write_bytes(data)
        with pytest.raises(ReportError) as e:
            load_report(con, path, timeout_s=60)
        assert _one_line(e.value).startswith(f"{path}: "), label
        TRIED[("ncu report .gz", "library")] += 1
    # A decompression bomb: the real limit is 8 GiB; lowered here so the test writes 4 MiB.
    monkeypatch.setattr(ncu, "MAX_GUNZIP_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.ncu-rep.gz"
    bomb.write_bytes(gzip.compress(ncu.REPORT_MAGIC + b"\0" * (4 << 20)))
    with pytest.raises(ReportError, match="expands to more than"):
        load_report(con, bomb)
    TRIED[("ncu report .gz", "library")] += 1
    assert table_counts(con)["reports"] == 0
    con.close()

def test_reports_through_the_cli(tmp_path):
    cases = dict(corpus.report_cases())
    for label in ("empty", "text", "zip", "ELF cubin", "compute-sanitizer XML", "kernel name with invalid UTF-8"):
        path = tmp_path / f"{label.replace(' ', '_')}.ncu-rep"
        path.write_bytes(cases[label])
        cli("ncu report", "analyze", path)
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(corpus.WITH_SASS.read_bytes()[:700_000])
    p = cli("ncu report", "analyze", cut)
    assert "truncated" in p.stderr.decode()
    gz = tmp_path / "cut.ncu-rep.gz"
    gz.write_bytes(corpus.GZ.read_bytes()[:50_000])
    assert "damaged or truncated gzip" in cli("ncu report .gz", "analyze", gz).stderr.decode()
    cli("ncu report", "analyze", tmp_path / "absent.ncu-rep")
    (tmp_path / "dir").mkdir()
    cli("ncu report", "analyze", tmp_path / "dir")

def test_a_compressed_report_says_how_to_expand_it(tmp_path):
    # torch_step.ncu-rep.xz as committed: "not an Nsight Compute report (it does not start
    # like one)" sent a user looking for a damaged file
    xz = ROOT / "fixtures" / "reports" / "torch_step.ncu-rep.xz"
    assert_one_error_line(wsperf("analyze", xz), 2, f"{xz}: is xz-compressed", f"`xz -d {xz}`")
    # zstd is how Nsight Compute 2025.4 compresses (.ncu-repz): read whatever the name, and
    # a damaged one says so (tests/test_ncu_repz.py has the rest)
    zst = tmp_path / "gemm_ffma.ncu-rep.zst"
    zst.write_bytes(bytes.fromhex("28b52ffd") + (REPORTS / "gemm_ffma.ncu-rep").read_bytes()[:4096])
    assert_one_error_line(wsperf("analyze", zst), 2, "is a damaged or truncated zstd file")


def test_a_report_without_source_counters_says_what_to_collect():
    p = cli("ncu report", "analyze", corpus.BASIC, codes=(0,))
    text = p.stdout.decode()
    assert "no_data" in text and "SourceCounters" in text and "rejected" not in text.split("producer-bound")[1][:40]

def test_a_report_of_many_launches_built_from_real_data(tmp_path):
    """60 launches (19 MB; `benchmarks/fuzz_loaders.py --launches 1000` loads 1,000)."""
    path = tmp_path / "many.ncu-rep"
    path.write_bytes(corpus.concatenated_report(60))
    p = cli("ncu report (huge)", "analyze", path, "--format", "json", codes=(0,))
    kernels = json.loads(p.stdout)["kernels"]
    assert len(kernels) == 60 and len({k["launch_id"] for k in kernels}) == 60

def test_a_file_name_that_is_not_utf8_loads(tmp_path):
    path = tmp_path / os.fsdecode(b"r\xff\x1b[31m.ncu-rep")
    shutil.copyfile(corpus.BASIC, path)
    # with a second report, each launch's summary names the report it came from
    p = cli("ncu report", "analyze", path, REPORTS / "ws_stream_healthy.ncu-rep", codes=(0,))
    out = p.stdout.decode()
    assert "\x1b" not in out and "r\\xff[31m.ncu-rep" in out

# -- compute-sanitizer XML ---------------------------------------------------------------

def test_broken_sanitizer_xml_is_one_input_error_each():
    for label, data in corpus.xml_cases():
        try:
            out = parse_sanitizer_xml(data, source="bad.xml")
        except InputError as e:
            assert _one_line(e).startswith("bad.xml: "), label
            assert "root:" not in str(e)  # /etc/passwd was never read into a message
        else:
            # Bytes changed inside text, or a newer schema read as far as it is understood.
            assert "cut" not in label and label not in ("billion laughs", "external entity"), label
            assert all("root:x" not in f.message for f in out.findings)
        TRIED[("sanitizer XML", "library")] += 1

def test_a_newer_schema_is_read_as_far_as_it_is_understood():
    out = parse_sanitizer_xml(corpus.newer_schema())
    assert out.records == 3 and out.tool == "memcheck"
    future = [f for f in out.findings if f.kind == "QuantumCheck"]
    assert len(future) == 1 and future[0].classification is None
    assert sum(f.classification is not None for f in out.findings) == 1

def test_entities_are_never_expanded_through_the_cli(tmp_path):
    for label in ("billion laughs", "billion laughs in UTF-16", "external entity", "external entity in UTF-16",
                  "parameter entity", "unknown encoding", "deeply nested"):
        path = tmp_path / "bad.xml"
        path.write_bytes(dict(corpus.xml_cases())[label])
        # Deep nesting without records is well-formed output with nothing in it.
        p = cli("sanitizer XML", "analyze", "--sanitizer", path, codes=(0,) if label == "deeply nested" else (2,))
        assert b"root:" not in p.stdout + p.stderr, label

def test_a_sanitizer_file_of_100000_errors_is_read_whole(tmp_path):
    path = tmp_path / "huge.xml"
    path.write_bytes(corpus.many_records(100_000))  # 185 MB
    p = cli("sanitizer XML (huge)", "analyze", "--sanitizer", path, "--format", "json", codes=(3,))
    (run,) = json.loads(p.stdout)["sanitizer_runs"]
    assert run["records"] == 100_000 and run["errors"] == 100_000

# -- cuda-gdb captures and SASS (a hang's bundle) ----------------------------------------

def test_broken_captures_are_input_errors_or_read(tmp_path):
    sass = parse_cuobjdump_sass(corpus.SASS.read_text())
    for label, data in corpus.capture_cases():
        try:
            cap = parse_cudagdb(data.decode("utf-8", "replace"), source="bad.txt")
            map_waits(cap, sass)
        except InputError as e:
            _one_line(e)
        TRIED[("cuda-gdb capture", "library")] += 1
    for label, data in corpus.sass_cases():
        try:
            parse_cuobjdump_sass(data.decode("utf-8", "replace"), source="bad.sass")
        except InputError as e:
            _one_line(e)
        TRIED[("cuobjdump SASS", "library")] += 1

def test_a_hang_bundle_with_a_damaged_capture_or_sass_still_says_deadlock(tmp_path):
    captures = dict(corpus.capture_cases())
    for i, label in enumerate(("empty", "4096 random bytes", "invalid UTF-8",
                               "SASS listing as a capture", next(k for k in captures if k.startswith("cut")))):
        root = deadlock_bundle(tmp_path / f"c{i}")
        (root / "hang" / "cudagdb.txt").write_bytes(captures[label])
        p = cli("cuda-gdb capture", "analyze", root, codes=(4,))
        assert "Deadlock" in p.stdout.decode(), label
    root = deadlock_bundle(tmp_path / "s")
    (root / "hang" / "sass.txt").write_bytes(b"\x7fELF garbage")
    p = cli("cuobjdump SASS", "analyze", root, "--format", "json", codes=(4,))
    assert "not a `cuobjdump -sass` listing" in p.stdout.decode()

# -- PTX (wsperf worksheet) --------------------------------------------------------------

def test_broken_ptx_is_an_input_error_or_a_worksheet(tmp_path):
    for label, data in corpus.ptx_cases():
        path = tmp_path / "bad.ptx"
        path.write_bytes(data)
        try:
            ws = worksheet([path])
        except InputError as e:
            _one_line(e)
        else:
            assert ws.kernels, label
        TRIED[("PTX", "library")] += 1

def test_ptx_through_the_cli(tmp_path):
    cases = dict(corpus.ptx_cases())
    for label, codes in (("empty", (2,)), ("NUL bytes", (2,)), ("unclosed comments", (2,)),
                         ("unbalanced braces", (2,)), ("an empty kernel", (0,)),
                         ("mbarrier statements without operands", (0,)), ("60 copies of its kernels", (0,))):
        path = tmp_path / "bad.ptx"
        path.write_bytes(cases[label])
        p = cli("PTX", "worksheet", path, codes=codes)
        if label == "mbarrier statements without operands":
            assert p.stdout.decode().count("could not read") == 7

def test_worksheet_output_is_inert(tmp_path):
    path = tmp_path / os.fsdecode(b"k\x1b[31m.ptx")
    path.write_bytes(dict(corpus.ptx_cases())["invalid UTF-8 and ESC in statements"])
    for fmt in ("text", "markdown"):
        out = cli("PTX", "worksheet", path, "--format", fmt, codes=(0,)).stdout
        assert b"\x1b" not in out, fmt

# -- binaries and cubins (wsperf inspect) ------------------------------------------------

def test_broken_binaries_are_input_errors(tmp_path):
    con = open_store(None)
    for label, data in corpus.binary_cases():
        path = tmp_path / "bad.cubin"
        path.write_bytes(data)
        try:
            load_static(con, path)
        except WsperfError as e:  # InputError, or ToolError when cuobjdump itself fails
            _one_line(e)
        TRIED[("cubin / binary", "library")] += 1
    con.close()
    for label in ("text", "zip", "100 random bytes", "cubin cut at 7 of %d" % corpus.CUBIN.stat().st_size):
        path = tmp_path / "bad.cubin"
        path.write_bytes(dict(corpus.binary_cases())[label])
        cli("cubin / binary", "inspect", path)
    (tmp_path / "empty.cubin").write_bytes(b"")
    cli("cubin / binary", "inspect", tmp_path / "empty.cubin")

# -- config TOML ---------------------------------------------------------------------------

def test_broken_configs_are_input_errors(tmp_path):
    for label, data in corpus.config_cases():
        path = tmp_path / "wsperf.toml"
        path.write_bytes(data)
        with pytest.raises(InputError) as e:
            load_config(path)
        _one_line(e.value)
        TRIED[("config TOML", "library")] += 1
    for label in ("invalid UTF-8", "not TOML", "unknown hypothesis"):
        path = tmp_path / "wsperf.toml"
        path.write_bytes(dict(corpus.config_cases())[label])
        cli("config TOML", "analyze", corpus.BASIC, "--config", path)

@pytest.mark.parametrize("label, data", corpus.CONFIG_CRASHES, ids=[c[0] for c in corpus.CONFIG_CRASHES])
def test_configs_that_crash_the_loader(tmp_path, label, data):
    path = tmp_path / "wsperf.toml"
    path.write_bytes(data)
    cli("config TOML", "analyze", corpus.BASIC, "--config", path)

@pytest.mark.parametrize("value", ['"0.2"', "true", "[1]"])
def test_a_threshold_that_is_not_a_number_is_refused(tmp_path, value):
    """A typo'd threshold must not silently become a string compared in SQL."""
    path = tmp_path / "wsperf.toml"
    path.write_text(f"[thresholds.serialized-roles]\nmin_consumer_wait_share = {value}\n")
    with pytest.raises(InputError, match=r"thresholds\.serialized-roles\.min_consumer_wait_share must be a number"):
        load_config(path)
    TRIED[("config TOML", "library")] += 1

# -- bundles --------------------------------------------------------------------------------

def test_broken_manifests_are_bundle_errors(tmp_path):
    root = sanitizer_bundle(tmp_path, "oob_write")
    for label, data in corpus.manifest_cases((root / MANIFEST).read_bytes()):
        (root / MANIFEST).write_bytes(data)
        with pytest.raises(InputError) as e:
            gather(open_store(None), [root])
        _one_line(e.value)
        TRIED[("bundle manifest", "library")] += 1
    for i, label in enumerate(("empty", "an output path out of the bundle", "argv not a list",
                               "nested 100,000 deep", "a run that is null")):
        r = sanitizer_bundle(tmp_path / f"cli{i}", "oob_write")
        valid = (r / MANIFEST).read_bytes()
        (r / MANIFEST).write_bytes(dict(corpus.manifest_cases(valid))[label])
        cli("bundle manifest", "analyze", r)

def test_links_out_of_a_bundle_are_refused(tmp_path):
    root = sanitizer_bundle(tmp_path, "oob_write")
    xml = root / "sanitizer" / "memcheck.xml"
    xml.unlink()
    xml.symlink_to("/etc/passwd")
    p = cli("bundle manifest", "analyze", root)
    assert "leads out of the bundle" in p.stderr.decode() and b"root:" not in p.stdout + p.stderr
    loop = tmp_path / "loop"
    root2 = sanitizer_bundle(loop, "oob_write")
    (root2 / "sanitizer" / "memcheck.xml").unlink()
    (root2 / "sanitizer" / "memcheck.xml").symlink_to(root2 / "sanitizer" / "memcheck.xml")
    with pytest.raises(BundleError):
        read_bundle(root2).files("sanitizer", "xml")
    TRIED[("bundle manifest", "library")] += 1
    zero = sanitizer_bundle(tmp_path / "zero", "oob_write")
    (zero / MANIFEST).unlink()
    (zero / MANIFEST).symlink_to("/dev/zero")  # not a regular file: not a bundle, never read
    cli("bundle manifest", "analyze", zero)

def test_damaged_files_inside_a_bundle(tmp_path):
    root = sanitizer_bundle(tmp_path / "x", "oob_write")
    (root / "sanitizer" / "memcheck.xml").write_bytes(corpus.XML.read_bytes()[:900])
    # damaged sanitizer evidence: correctness unverified (exit 5), saying why
    assert "not complete XML" in cli("bundle manifest", "analyze", root, codes=(5,)).stdout.decode()
    root = sanitizer_bundle(tmp_path / "r", "clean", report="gemm_wgmma_tma_basic")
    (root / "profile" / "report.ncu-rep").write_bytes(corpus.BASIC.read_bytes()[:4096])
    assert "truncated" in cli("bundle manifest", "analyze", root).stderr.decode()

# -- stores (--db) --------------------------------------------------------------------------

def test_stores_that_are_not_wsperf_stores(tmp_path):
    text = tmp_path / "text.duckdb"
    text.write_text("not a database\n" * 100)
    lite = tmp_path / "lite.duckdb"
    with sqlite3.connect(lite) as c:
        c.execute("CREATE TABLE launches (id INTEGER)")
    foreign = tmp_path / "foreign.duckdb"
    with duckdb.connect(str(foreign)) as c:
        c.execute("CREATE TABLE orders (id INTEGER)")
    for db in (text, lite, foreign, tmp_path):
        before = db.read_bytes() if db.is_file() else None
        cli("DuckDB store", "analyze", corpus.BASIC, "--db", db)
        cli("DuckDB store", "sql", "SELECT count(*) FROM launches", "--db", db)
        assert before is None or db.read_bytes() == before  # left as it was

@pytest.fixture(scope="module")
def store_bytes(tmp_path_factory) -> bytes:
    db = tmp_path_factory.mktemp("store") / "s.duckdb"
    cli("DuckDB store", "analyze", corpus.BASIC, "--db", db, codes=(0,))
    return db.read_bytes()

def test_truncated_and_damaged_stores_through_analyze(tmp_path, store_bytes):
    db = tmp_path / "s.duckdb"
    for label, data in [*corpus.cuts(store_bytes, 8), *corpus.flips(store_bytes[12288:], 16, 4)]:
        db.write_bytes(data if label.startswith("cut") else store_bytes[:12288] + data)
        cli("DuckDB store", "analyze", corpus.BASIC, "--db", db, codes=(0, 2))

def test_truncated_and_damaged_stores_through_sql(tmp_path, store_bytes):
    db = tmp_path / "s.duckdb"
    for label, data in [*corpus.cuts(store_bytes, 4), *corpus.flips(store_bytes[12288:], 17, 2)]:
        db.write_bytes(data if label.startswith("cut") else store_bytes[:12288] + data)
        cli("DuckDB store", "sql", "SELECT count(*), sum(length(sass)) FROM sass", "--db", db, codes=(0, 2))

# -- untrusted text in the output ------------------------------------------------------------

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EVIL = "[bold red]MARK[/bold red]\u009b2J\u009d0;title\u202eevil\u0085x"

def test_hostile_names_and_messages_render_inert(tmp_path):
    data = corpus.RACE_XML.read_bytes()
    data = re.sub(rb"<func>[^<]*</func>", b"<func>" + EVIL.encode() + b"</func>", data)
    data = re.sub(rb"<direction>[^<]*</direction>", b"<direction>[blink]w[/blink] | x</direction>", data, count=1)
    data = re.sub(rb"<path>[^<]*</path>", b"<path>/src/" + EVIL.encode() + b".cu</path>", data)
    path = tmp_path / "evil.xml"
    path.write_bytes(data)
    text = cli("sanitizer XML", "analyze", "--sanitizer", path, codes=(3,)).stdout.decode()
    assert not _UNSAFE.search(text)
    # Markup is shown as written, never applied (Rich would have removed the tags).
    assert "[bold red]MARK[/bold red]" in text and "[blink]w[/blink]" in text
    md = cli("sanitizer XML", "analyze", "--sanitizer", path, "--format", "markdown", codes=(3,)).stdout.decode()
    assert not _UNSAFE.search(md)
    assert r"\[bold red\]MARK" in md and r"\[blink\]w\[/blink\] \| x" in md
    # A kernel name with an escape character in a report.
    report = tmp_path / "esc.ncu-rep"
    report.write_bytes(dict(corpus.report_cases())["kernel name with ESC"])
    for fmt in ("text", "markdown"):
        assert not _UNSAFE.search(cli("ncu report", "analyze", report, "--format", fmt, codes=(0,)).stdout.decode())

def test_sql_results_are_shown_as_written():
    p = cli("DuckDB store", "sql", "SELECT '[bold]x' AS \"[red]c\", chr(27) || '[2J' AS e", "--report",
            corpus.BASIC, codes=(0,))
    out = p.stdout.decode()
    assert "[bold]x" in out and "[red]c" in out and "\x1b" not in out

def test_an_error_message_is_one_line_whatever_the_path(tmp_path):
    weird = tmp_path / "a\nb\rc" / "x.ncu-rep"
    p = cli("ncu report", "analyze", weird)
    assert len(p.stderr.decode().strip().splitlines()) == 1

def test_kernel_filters_are_sql_parameters(tmp_path):
    db = tmp_path / "s.duckdb"
    cli("DuckDB store", "analyze", corpus.BASIC, "--db", db, codes=(0,))
    for hostile in ("'; DROP TABLE launches; --", "x') OR 1=1 --", "$kernel", "(((", "\\"):
        p = cli("DuckDB store", "analyze", corpus.BASIC, "--db", db, "--kernel", hostile, codes=(2,))
        assert "no kernel launch matches" in p.stderr.decode() or "not a regular expression" in p.stderr.decode()
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM launches").fetchall() == [(1,)]
    con.close()

def test_inspect_refuses_a_kernel_filter_that_is_not_a_regex():
    cli("cubin / binary", "inspect", corpus.CUBIN, "--kernel", "(((")

def test_no_shell_strings_anywhere():
    """External programs run from argument lists; the SQL that wsperf builds with
    f-strings names only its own tables (user values are $parameters)."""
    sources = [p for d in ("collectors", "analyses", "cli") for p in (ROOT / d).glob("*.py")]
    for src in sources:
        text = src.read_text()
        assert not re.search(r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput", text), src

# -- the count ---------------------------------------------------------------------------------

def test_zz_inputs_tried_by_kind():
    """Runs last in this module: the corpus size by kind (shown with `-s` or `-rA`)."""
    kinds = sorted({k for k, _ in TRIED})
    lines = [f"{'kind':28} {'library':>8} {'CLI':>5}"]
    lines += [f"{k:28} {TRIED[(k, 'library')]:8} {TRIED[(k, 'CLI')]:5}" for k in kinds]
    lines.append(f"{'total':28} {sum(v for (_, h), v in TRIED.items() if h == 'library'):8} "
                 f"{sum(v for (_, h), v in TRIED.items() if h == 'CLI'):5}")
    print("\nbad inputs tried:\n" + "\n".join(lines))
    if len(kinds) >= 10:  # the whole module ran
        assert sum(TRIED.values()) >= 350, TRIED


def test_a_missing_ncu_report_module_is_one_error_line(tmp_path):
    """Without ncu_report importable in the reader processes, analyze said nothing useful:
    a RuntimeError around the reader's ModuleNotFoundError traceback, exit 1. A module that
    fails to import as a missing one does (raised where the import finds it first) stands for
    an environment without the package."""
    (tmp_path / "ncu_report.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ncu_report'\", name='ncu_report')\n")
    db = tmp_path / "s.duckdb"
    p = subprocess.run([wsperf_exe(), "analyze", str(REPORTS / "ws_stream_healthy.ncu-rep"), "--db", str(db)],
                       capture_output=True, text=True, timeout=300,
                       env={**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), ENV.get("PYTHONPATH")]))})
    assert_one_error_line(p, 2, "ncu_report cannot be imported", "pip install ncu-report")
    con = duckdb.connect(str(db), read_only=True) if db.exists() else None
    if con is not None:  # nothing stored for the report
        assert con.execute("SELECT count(*) FROM launches").fetchone() == (0,)


def test_a_5000_digit_literal_in_ptx_is_listed_not_read(tmp_path):
    """A literal past any PTX integer (5000 digits) made Python's int() raise past its digit
    limit: a traceback. The statement is now listed as not read, and the sheet goes on."""
    ptx = (ROOT / "fixtures" / "ptx" / "ws_stream.ptx").read_text()
    bad = re.sub(r"(mov\.u32 \t%r\d+, )1;", lambda m: m.group(1) + "9" * 5000 + ";", ptx, count=1)
    assert bad != ptx
    (tmp_path / "big.ptx").write_text(bad)
    p = wsperf("worksheet", tmp_path / "big.ptx")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-300:]
    assert "PTX line(s) not read" in p.stdout


def test_a_5000_digit_number_in_the_config_is_one_error_line(tmp_path):
    cfg = tmp_path / "big.toml"
    cfg.write_text("[thresholds.producer-bound]\nmin_consumer_wait_share = " + "9" * 5000 + "\n")
    p = wsperf("analyze", ROOT / "fixtures" / "reports" / "gemm_ffma.ncu-rep", "--config", cfg)
    assert_one_error_line(p, 2, "more than 4300 digits")
