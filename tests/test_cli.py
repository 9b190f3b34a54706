"""The `wsperf` command as a user runs it: a real process, real fixture reports, the
exit code and what lands on stdout/stderr."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support import ALL_REPORTS, REPORTS, assert_one_error_line, kernels, wsperf
from wsperf.cli.main import _COMMANDS, command


def test_every_fixture_report_analyzes_to_valid_json():
    ks = kernels(*ALL_REPORTS)
    assert {Path(k["report"]).name for k in ks} == {r.name for r in ALL_REPORTS}
    # Single-launch reports, the 9-launch report and graph_workload's two graph launches.
    assert len(ks) == len(ALL_REPORTS) - 2 + 9 + 2
    for k in ks:
        assert k["arch"] == "sm_90" and k["device"] == "NVIDIA H200" and k["duration_ns"] > 0
        # a range or graph result has no launch shape of its own
        assert k["workload"] in ("range", "graph") or all(v >= 1 for v in k["grid"] + k["block"])


# Each fixture's design decides what its SASS must contain (see fixtures/README.md).
@pytest.mark.parametrize(
    "report, tensor, copies, mbarrier, setmaxnreg, local_memory",
    [
        ("gemm_wgmma_tma", "wgmma", ["tma", "ld/st"], True, True, False),
        ("gemm_wgmma_cpasync", "wgmma", ["cp.async", "ld/st"], True, True, False),
        ("gemm_ffma", "none", ["ld/st"], False, False, False),
        ("ws_stream_healthy", "none", ["tma", "ld/st"], True, False, False),
        ("ws_stream_producer", "none", ["ld/st"], True, False, False),
        ("ws_stream_spill", "none", ["tma", "ld/st"], True, False, True),
    ],
)
def test_instruction_families_match_the_kernel_design(report, tensor, copies, mbarrier, setmaxnreg, local_memory):
    (k,) = kernels(REPORTS / f"{report}.ncu-rep")
    f = k["families"]
    assert f["tensor"] == tensor
    assert f["copies"] == copies
    assert (f["mbarrier"], f["setmaxnreg"], f["local_memory"]) == (mbarrier, setmaxnreg, local_memory)


def test_launch_shape_and_cluster_dims():
    (healthy,) = kernels(REPORTS / "ws_stream_healthy.ncu-rep")
    (cluster,) = kernels(REPORTS / "ws_stream_cluster.ncu-rep")
    (gemm,) = kernels(REPORTS / "gemm_wgmma_tma.ncu-rep")
    assert healthy["block"] == [160, 1, 1] and healthy["grid"] == [396, 1, 1]
    assert cluster["cluster"] == [2, 1, 1] and max(healthy["cluster"]) <= 1
    assert gemm["grid"] == [32, 32, 1] and gemm["block"] == [384, 1, 1]
    assert gemm["dynamic_smem_bytes"] == 4 * (128 * 64 * 2 * 2) + 1024 + 256
    assert gemm["registers_per_thread"] == 168


def test_text_output_names_each_launch():
    p = wsperf("analyze", REPORTS / "gemm_wgmma_tma.ncu-rep")
    assert p.returncode == 0, p.stderr
    for needle in ("gemm_ws", "32x32x1 / 384x1x1", "wgmma", "tma"):
        assert needle in p.stdout


def test_roles_table_counts_have_thousands_separators():
    # samples read 3,518 beside top stalls that read 2027: every count groups its digits
    p = wsperf("analyze", REPORTS / "ws_stream_serialized.ncu-rep", env={"COLUMNS": "250"})
    assert p.returncode == 0, p.stderr
    producer = next(ln for ln in p.stdout.splitlines() if "│ producer (warp 0)" in ln)
    assert "3,518" in producer and "branch_resolving 2,027" in producer
    consumer = next(ln for ln in p.stdout.splitlines() if "│ consumer (warps 1-4)" in ln)
    assert "wait 6,256" in consumer and "long_scoreboard 2,283" in consumer


def test_markdown_output_is_a_table_per_launch_and_per_hypothesis():
    p = wsperf("analyze", REPORTS / "multi_launch.ncu-rep", "--format", "markdown")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    overview = lines[: lines.index("")]
    assert len(overview) == 2 + 9 and sum("transpose\\_naive" in r for r in overview) == 3
    # One section per distinct launch (three kernels, three identical launches each), each
    # a table with one row per hypothesis and a line naming the identical launches.
    assert sum(l.startswith("### launch ") for l in lines) == 3
    assert sum(l.startswith("| serialized-roles |") for l in lines) == 3
    assert sum("the same kernel, launch shape and verdicts as launch" in l for l in lines) == 3
    # reduce_sum's grid-stride loop waits on each load: serialized, with its remedy.
    assert "| 2 | reduce\\_sum |" in p.stdout and "*Remedy for serialized-roles:*" in p.stdout


def test_kernel_filter_is_a_regex_and_no_match_is_an_error():
    ks = kernels(REPORTS / "multi_launch.ncu-rep", extra=("--kernel", "^(saxpy|reduce)"))
    assert sorted({k["name"] for k in ks}) == ["reduce_sum", "saxpy"] and len(ks) == 6
    p = wsperf("analyze", REPORTS / "multi_launch.ncu-rep", "--kernel", "no_such_kernel")
    assert_one_error_line(p, 2, "no_such_kernel")


def test_sql_over_a_report_in_memory_json_and_csv():
    q = "SELECT opcode, executed FROM opcodes WHERE opcode = 'HGMMA'"
    p = wsperf("sql", q, "--report", REPORTS / "gemm_wgmma_tma.ncu-rep", "--format", "json")
    assert p.returncode == 0, p.stderr
    # 1024 CTAs x 2 consumer warpgroups x 4 warps x 64 k-blocks x 4 wgmma each
    assert json.loads(p.stdout) == [{"opcode": "HGMMA", "executed": 1024 * 8 * 64 * 4}]
    p = wsperf("sql", q, "--report", REPORTS / "gemm_wgmma_tma.ncu-rep", "--format", "csv")
    assert p.stdout.splitlines() == ["opcode,executed", f"HGMMA,{1024 * 8 * 64 * 4}"]


def test_db_persists_appends_and_is_idempotent(tmp_path):
    db = tmp_path / "runs.duckdb"
    assert wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", "--db", db).returncode == 0
    assert wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--db", db).returncode == 0
    copy = tmp_path / "same-content.ncu-rep"
    shutil.copy(REPORTS / "gemm_ffma.ncu-rep", copy)
    assert wsperf("analyze", copy, "--db", db).returncode == 0
    p = wsperf("sql", "SELECT count(*) AS n FROM reports", "--db", db, "--format", "json")
    assert json.loads(p.stdout) == [{"n": 2}]
    p = wsperf("sql", "SELECT kernel_function FROM launches ORDER BY launch_id", "--db", db, "--format", "csv")
    assert p.stdout.splitlines() == ["kernel_function", "ws_stream", "gemm_ffma"]


def test_db_store_exposes_every_documented_table_without_writing_it(tmp_path):
    # A store written by `analyze --db` holds no timeline, nsys, sanitizer or worksheet
    # table; `sql --db` still finds each (empty), reads the stored rows, and leaves the file as it was.
    db = tmp_path / "runs.duckdb"
    assert wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--db", db).returncode == 0
    before = db.read_bytes()
    q = ("SELECT (SELECT count(*) FROM launches) AS launches, (SELECT count(*) FROM timeline_events) AS t, "
         "(SELECT count(*) FROM timeline_overlap) AS o, (SELECT count(*) FROM nsys_kernels) AS n, "
         "(SELECT count(*) FROM sanitizer_findings) AS s, (SELECT count(*) FROM ws_flags) AS w, "
         "(SELECT count(*) > 0 FROM pm_samples) AS pm")
    p = wsperf("sql", q, "--db", db, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [{"launches": 1, "t": 0, "o": 0, "n": 0, "s": 0, "w": 0, "pm": True}]
    assert db.read_bytes() == before


def test_bad_sql_is_one_error_line(tmp_path):
    p = wsperf("sql", "SELECT nope FROM launches", "--report", REPORTS / "gemm_ffma.ncu-rep")
    assert_one_error_line(p, 2, "query failed")
    p = wsperf("sql", "SELECT 1")
    assert_one_error_line(p, 2, "--db")
    p = wsperf("sql", "SELECT 1", "--db", tmp_path / "absent.duckdb")
    assert_one_error_line(p, 2, "no such database")


def _bad_inputs(tmp: Path) -> dict[str, Path]:
    good = (REPORTS / "ws_stream_healthy.ncu-rep").read_bytes()
    files = {
        "missing": tmp / "missing.ncu-rep",
        "empty": tmp / "empty.ncu-rep",
        "text": tmp / "text.ncu-rep",
        "truncated-head": tmp / "trunc-head.ncu-rep",
        "truncated-middle": tmp / "trunc-middle.ncu-rep",
        "directory": tmp / "dir.ncu-rep",
    }
    files["empty"].write_bytes(b"")
    files["text"].write_text("==PROF== this is ncu's console output, not a report\n")
    files["truncated-head"].write_bytes(good[:4096])
    files["truncated-middle"].write_bytes(good[: len(good) // 2])
    files["directory"].mkdir()
    return files


@pytest.mark.parametrize("kind", ["missing", "empty", "text", "truncated-head", "truncated-middle", "directory"])
def test_bad_input_is_one_error_line_and_keeps_the_db(tmp_path, kind):
    db = tmp_path / "keep.duckdb"
    assert wsperf("analyze", REPORTS / "gemm_ffma.ncu-rep", "--db", db).returncode == 0
    before = wsperf("sql", "SELECT (SELECT count(*) FROM reports), (SELECT count(*) FROM metrics)", "--db", db,
                    "--format", "csv").stdout
    bad = _bad_inputs(tmp_path)[kind]
    p = wsperf("analyze", bad, "--db", db)
    assert_one_error_line(p, 2, bad.name)
    after = wsperf("sql", "SELECT (SELECT count(*) FROM reports), (SELECT count(*) FROM metrics)", "--db", db,
                   "--format", "csv").stdout
    assert before == after and before.splitlines()[1] != "0,0"


def test_doctor_reports_versions():
    p = wsperf("doctor", "--format", "json")
    assert p.returncode == 0, p.stderr
    env = json.loads(p.stdout)
    assert env["packages"]["ncu-report"] and env["packages"]["duckdb"]
    assert env["python"].startswith("3.")
    assert {t["name"] for t in env["tools"]} >= {"ncu", "compute-sanitizer", "nvcc", "cuda-gdb"}
    p = wsperf("doctor")
    assert p.returncode == 0 and "ncu-report" in p.stdout
    # every package JSON lists is a row of the text and Markdown too; one JSON gives null
    # (torch, triton, TVM, CuTe DSL absent) reads "not installed", not nothing
    rows = {ln.strip("│ ").split("│")[0].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("│")}
    md = wsperf("doctor", "--format", "markdown").stdout
    for name, version in env["packages"].items():
        assert name in rows and f"| {name} |" in md, name
        if version is None:
            assert "not installed" in rows[name] and f"| {name} | not installed |" in md, name


def test_report_without_instruction_data_says_unknown_not_none():
    (k,) = kernels(REPORTS / "gemm_wgmma_tma_basic.ncu-rep")
    f = k["families"]
    assert f["known"] is False and f["tensor"] == "unknown"
    assert f["copies"] is None and f["mbarrier"] is None
    p = wsperf("analyze", REPORTS / "gemm_wgmma_tma_basic.ncu-rep")
    assert p.returncode == 0 and "unknown" in p.stdout and "SourceCounters" in p.stdout


@pytest.mark.parametrize("report, tensor, copies", [
    ("triton_matmul", "wgmma", ["tma"]),  # operands by TMA, epilogue STSM + TMA store: no LDG/STS staging
    ("torch_mm", "wgmma", ["tma", "ld/st"]),
])
def test_third_party_kernels(report, tensor, copies):
    (k,) = kernels(REPORTS / f"{report}.ncu-rep")
    assert (k["families"]["tensor"], k["families"]["copies"]) == (tensor, copies)
    if report == "torch_mm":  # cuBLAS: persistent grid of 1x2 clusters, setmaxnreg, cluster barriers
        assert k["grid"] == [2, 66, 1] and k["cluster"] == [2, 1, 1]
        assert k["families"]["setmaxnreg"] and k["families"]["cluster_barrier"]


def test_version_and_a_help_list_of_whole_sentences():
    p = wsperf("--version")
    assert p.returncode == 0 and p.stdout.startswith("wsperf ") and p.stdout.split()[1][0].isdigit()
    h = wsperf("--help")
    assert h.returncode == 0
    commands = h.stdout.split("Commands")[1]
    for cmd in ("analyze", "collect", "compare", "nsys", "worksheet"):
        assert f" {cmd} " in commands
    # each summary is its docstring's first sentence, reflowed: no line of it breaks where
    # the source did (a short "duration, the" line, then "instruction paths ...")
    lines = [line.strip("│ ") for line in commands.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("analyze "))
    end = next(i for i, line in enumerate(lines) if line.startswith("chart "))
    summary = lines[start:end]
    assert "(exit 3)" not in " ".join(summary)  # the first sentence only
    assert all(len(line) > 50 for line in summary[:-1]), summary


@pytest.mark.parametrize("args, values", [
    (("collect", "--help"), ["memcheck,racecheck,initcheck,synccheck", "warp-synced-single-lane-release.",
                             "<format>"]),
    (("compare", "--help"), ["[thresholds.<hypothesis>]", "<format>"]),
    (("analyze", "--help"), ["[thresholds.<hypothesis>]"]),
])
def test_help_at_80_columns_cuts_no_value(args, values):
    """At 80 columns (and narrower) no default, value or placeholder ends in "…" or is split
    mid-word: a choice option's placeholder names the value, the help lists the choices."""
    for width in ("80", "60"):
        p = wsperf(*args, env={"COLUMNS": width})
        assert p.returncode == 0 and "…" not in p.stdout, p.stdout
    lines = [line.strip("│ ") for line in wsperf(*args, env={"COLUMNS": "80"}).stdout.splitlines()]
    for v in values:
        assert any(v in line for line in lines), (v, lines)


def test_every_choice_options_help_names_its_choices():
    for name in _COMMANDS:
        for p in command(name).params:
            for choice in getattr(p.type, "choices", None) or ():
                assert choice in (p.help or ""), (name, p.opts, choice)


def test_piped_output_keeps_the_width_columns_asks_for():
    wide = wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep")
    narrow = wsperf("analyze", REPORTS / "ws_stream_healthy.ncu-rep", env={"COLUMNS": "100"})
    assert wide.returncode == narrow.returncode == 0
    assert max(map(len, narrow.stdout.splitlines())) <= 100 < max(map(len, wide.stdout.splitlines()))


@pytest.mark.parametrize("args, said", [
    (("analyze", REPORTS / "gemm_ffma.ncu-rep", "--format", "xml"), "Invalid value for '--format'"),
    (("analyze", REPORTS / "gemm_ffma.ncu-rep", "--lock-timeout", "abc"), "is not a valid float"),
    (("no-such-command",), "No such command 'no-such-command'"),
    (("worksheet", "--no-such-option", "x.ptx"), "No such option: --no-such-option"),
])
def test_a_usage_error_is_one_error_line_and_the_hint(args, said):
    p = wsperf(*args)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "╭" not in p.stderr, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and said in lines[0], p.stderr
    assert lines[1].startswith("Try 'wsperf") and lines[1].endswith("--help' for help.")


@pytest.mark.parametrize("args, placeholders", [
    (("analyze", "--help"), ["<branch>@<commit>:<UTC", "[thresholds.<hypothesis>]"]),
    (("collect", "--help"), ["wsperf-bundle-<time>"]),
    (("compare", "--help"), ["[thresholds.<hypothesis>]"]),
    (("--help",), ["DIR/<table>/run_date="]),
])
def test_help_keeps_its_placeholders(args, placeholders):
    """The help renders as Markdown, which drops <word> as a tag and [a.<b>] as a link: the
    placeholders are code spans, so a reader sees what to type."""
    p = wsperf(*args, env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    for ph in placeholders:
        assert ph in p.stdout, (ph, p.stdout)
