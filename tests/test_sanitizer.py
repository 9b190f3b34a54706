"""compute-sanitizer XML -> typed findings and the sanitizer tables, on the real outputs
in fixtures/correctness (collected on an H200 by fixtures/collect_correctness.sh from the
kernels in fixtures/src/broken; see fixtures/CORRECTNESS.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wsperf.collectors.errors import InputError
from wsperf.collectors.sanitizer import (
    MESSAGE_CAP,
    Handoff,
    SanitizerOutputError,
    load_sanitizer_xml,
    parse_sanitizer_xml,
    read_sanitizer_xml,
    sanitizer_schema_sql,
)
from wsperf.collectors.store import open_store

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fixtures" / "correctness"
SOURCE = ROOT / "fixtures" / "src" / "broken" / "pipeline.cuh"
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
FIXTURES = ("clean", "oob_write", "smem_race", "uninit_read", "barrier_misuse")
# The one tool that finds each planted bug, and what it classifies it as.
FINDS = {"oob_write": ("memcheck", Handoff.OUT_OF_BOUNDS), "smem_race": ("racecheck", Handoff.RACE),
         "uninit_read": ("initcheck", Handoff.UNINITIALIZED), "barrier_misuse": ("synccheck", Handoff.BARRIER)}


def xml(fixture: str, tag: str) -> Path:
    return OUT / f"{fixture}.{tag}.xml"


def source_line(n: int) -> str:
    return SOURCE.read_text().splitlines()[n - 1]


def summary_errors(fixture: str, tag: str) -> int:
    """The error count in the tool's own text summary (the XML holds at most 20 records)."""
    text = (OUT / f"{fixture}.{tag}.stdout.txt").read_text()
    m = re.search(r"RACECHECK SUMMARY: .*\((\d+) errors", text) or re.search(r"ERROR SUMMARY: (\d+) error", text)
    assert m, text[-300:]
    return int(m.group(1))


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("tool", TOOLS)
def test_each_bug_is_found_by_its_tool_and_classified_as_the_handoff_it_breaks(fixture, tool):
    out = read_sanitizer_xml(xml(fixture, tool), tool=tool)
    assert out.tool == tool
    classes = {f.classification for f in out.findings} - {None}
    if FINDS.get(fixture, (None,))[0] == tool:
        assert classes == {FINDS[fixture][1]}
    else:
        # The clean kernel, and every other tool on a broken one: nothing at all.
        assert out.records == 0 and out.findings == ()


def test_oob_write_is_one_global_write_one_element_past_the_output():
    out = read_sanitizer_xml(xml("oob_write", "memcheck"))
    assert out.tool == "memcheck"  # inferred from the records
    (oob,) = [f for f in out.findings if f.classification is Handoff.OUT_OF_BOUNDS]
    assert (oob.kind, oob.severity, oob.error_type) == ("Precise", "error", "out of bounds")
    assert (oob.memory_space, oob.access, oob.access_size) == ("__global__", "write", 4)
    assert oob.kernel == "ws_pipeline" and Path(oob.source_file).name == "pipeline.cuh"
    assert "base + j <= n" in source_line(oob.source_line) and oob.pc_offset == 0x8E0
    # One consumer thread of the CTA that owns the partial last tile (tile 5 of 6: CTA 1).
    assert oob.block == (1, 0, 0) and oob.thread[0] >= 32
    # memcheck then stops the kernel: an API error follows, which breaks no handoff.
    (api,) = [f for f in out.findings if f.kind == "Api"]
    assert api.classification is None and api.api_call == "cudaDeviceSynchronize"
    assert api.error_type == "cudaErrorLaunchFailure" and api.block is None
    assert summary_errors("oob_write", "memcheck") == 2


def test_race_pairs_consumer_reads_with_producer_writes_of_the_same_stage():
    out = read_sanitizer_xml(xml("smem_race", "racecheck"), tool="racecheck")
    assert out.records == 5 and {f.kind for f in out.findings} == {"Analysis"}
    for f in out.findings:
        assert (f.memory_space, f.access, f.other_access) == ("__shared__", "read", "write")
        # Reads are the consumers' (the stage and its scale), writes the producer's.
        assert "ring[s][j]" in source_line(f.source_line) or "tile_scale[s]" in source_line(f.source_line)
        assert "= in[base + j]" in source_line(f.other_source_line) or "tile_scale[s] =" in source_line(
            f.other_source_line)
        assert f.hazard_count > 0 and f.pc_offset != f.other_pc_offset
    # One row per (read, write) pair; 5 records as the tool counted them, and their
    # hazards add up to what the hazard report of the same program counts one by one.
    assert len({(f.record_idx, f.part_idx) for f in out.findings}) == len(out.findings)
    assert summary_errors("smem_race", "racecheck") == 5
    assert sum(f.hazard_count for f in out.findings) == summary_errors("smem_race", "racecheck-hazards") == 8188


def test_race_hazards_are_each_between_a_producer_thread_and_a_consumer_thread():
    out = read_sanitizer_xml(xml("smem_race", "racecheck-hazards"))
    assert out.tool == "racecheck" and len(out.findings) == 20  # --print-limit 20
    for f in out.findings:
        assert f.kind == "Hazard" and f.classification is Handoff.RACE and f.hazard_count == 1
        assert f.error_type in ("RAW", "WAR", "WAW") and f.memory_space == "__shared__"
        roles = {"producer" if t[0] < 32 else "consumer" for t in (f.thread, f.other_thread)}
        assert roles == {"producer", "consumer"}
        assert f.grid_id is not None and f.address is not None


def test_uninitialized_scale_is_read_once_per_tile_by_the_producer():
    out = read_sanitizer_xml(xml("uninit_read", "initcheck"))
    assert out.tool == "initcheck" and len(out.findings) == 6 == summary_errors("uninit_read", "initcheck")
    assert {f.classification for f in out.findings} == {Handoff.UNINITIALIZED}
    assert {f.thread for f in out.findings} == {(0, 0, 0)}  # the producer's lane 0
    assert {f.block for f in out.findings} == {(0, 0, 0), (1, 0, 0)}
    assert {f.memory_space for f in out.findings} == {"__global__"} and {f.access_size for f in out.findings} == {4}
    assert all("scale[t]" in source_line(f.source_line) for f in out.findings)
    # Six consecutive floats: the whole scale table, one entry per tile.
    addresses = sorted(f.address for f in out.findings)
    assert [a - addresses[0] for a in addresses] == [0, 4, 8, 12, 16, 20]


def test_role_branch_syncthreads_is_a_divergent_barrier():
    out = read_sanitizer_xml(xml("barrier_misuse", "synccheck"))
    assert out.tool == "synccheck" and len(out.findings) == 20  # of 128 (--print-limit 20)
    assert summary_errors("barrier_misuse", "synccheck") == 128  # 2 CTAs x 64 consumer threads
    assert {(f.message, f.error_type) for f in out.findings} == {("Barrier error", "Divergent thread(s) in block")}
    assert {f.classification for f in out.findings} == {Handoff.BARRIER}
    (line,) = {f.source_line for f in out.findings}
    assert "__syncthreads()" in source_line(line) and "BUG(role_syncthreads)" in source_line(line)
    assert all(f.thread[0] >= 32 for f in out.findings)


def test_clean_output_names_no_tool_unless_told():
    assert read_sanitizer_xml(xml("clean", "memcheck")).tool is None
    assert read_sanitizer_xml(xml("clean", "memcheck"), tool="memcheck").tool == "memcheck"


def test_load_writes_runs_and_findings_queryable_by_handoff():
    con = open_store(None)
    loads = [load_sanitizer_xml(con, xml(f, t), tool=t, command=f"compute-sanitizer --tool {t} {f}")
             for f in FIXTURES for t in TOOLS]
    assert [l.run_id for l in loads] == list(range(1, 21))
    rows = dict(con.execute("SELECT classification, count(*) FROM sanitizer_findings "
                            "WHERE classification IS NOT NULL GROUP BY ALL").fetchall())
    assert rows == {"out-of-bounds-or-misaligned": 1, "race-between-roles": 48, "barrier-misuse": 20,
                    "uninitialized-read": 6}
    clean = con.execute("SELECT count(*) FROM sanitizer_findings JOIN sanitizer_runs USING (run_id) "
                        "WHERE sanitizer_runs.path LIKE '%/clean.%'").fetchall()
    assert clean == [(0,)]
    ((runs, tools),) = con.execute("SELECT count(*), count(DISTINCT tool) FROM sanitizer_runs").fetchall()
    assert (runs, tools) == (20, 4)
    # Identical bytes (every clean output) still load as separate runs.
    load_sanitizer_xml(con, xml("clean", "memcheck"), tool="memcheck")
    assert con.execute("SELECT max(run_id) FROM sanitizer_runs").fetchall() == [(21,)]
    con.close()


def test_every_sanitizer_column_is_documented_with_a_comment():
    con = open_store(None)
    con.execute(sanitizer_schema_sql())
    sql = sanitizer_schema_sql()
    for table in ("sanitizer_runs", "sanitizer_findings"):
        cols = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?",
                                          [table]).fetchall()]
        block = sql[sql.index(f"CREATE TABLE IF NOT EXISTS {table} ("):]
        for col in cols:
            line = next(l for l in block.splitlines()[1:] if l.split() and l.split()[0] == col)
            assert "--" in line, (table, col)
    con.close()


BOMB = (b'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>\n'
        b"<ComputeSanitizerOutput><record><kind>Precise</kind><what><text>&b;</text></what></record>"
        b"</ComputeSanitizerOutput>")


@pytest.mark.parametrize("data, needle", [
    (b"", "is empty"),
    (b"  \n", "is empty"),
    (None, "not complete XML"),  # a real file cut in half
    (b"<html><body>not a sanitizer file</body></html>", "not compute-sanitizer output"),
    (b"========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", "not complete XML"),
    (BOMB, "DOCTYPE"),
    (b"<ComputeSanitizerOutput><record><what><text>x</text></what></record></ComputeSanitizerOutput>", "no <kind>"),
    (b"<ComputeSanitizerOutput><record><kind>Precise</kind><what><text>x</text><size>four</size></what>"
     b"</record></ComputeSanitizerOutput>", "not a number"),
])
def test_bad_xml_is_one_clear_input_error(tmp_path, data, needle):
    if data is None:
        whole = xml("oob_write", "memcheck").read_bytes()
        data = whole[: len(whole) // 2]
    p = tmp_path / "bad.xml"
    p.write_bytes(data)
    with pytest.raises(SanitizerOutputError) as e:
        read_sanitizer_xml(p)
    assert isinstance(e.value, InputError)
    msg = str(e.value)
    assert needle in msg and str(p) in msg and "\n" not in msg


def test_missing_file_and_contradicting_tool_are_input_errors(tmp_path):
    with pytest.raises(SanitizerOutputError, match="no such file"):
        read_sanitizer_xml(tmp_path / "absent.xml")
    with pytest.raises(SanitizerOutputError, match="not racecheck"):
        read_sanitizer_xml(xml("oob_write", "memcheck"), tool="racecheck")
    with pytest.raises(SanitizerOutputError, match="unknown tool"):
        parse_sanitizer_xml(b"<ComputeSanitizerOutput/>", tool="helgrind")


def test_a_failed_load_leaves_the_store_unchanged(tmp_path):
    con = open_store(None)
    load_sanitizer_xml(con, xml("uninit_read", "initcheck"))
    bad = tmp_path / "cut.xml"
    bad.write_bytes(xml("uninit_read", "initcheck").read_bytes()[:500])
    with pytest.raises(SanitizerOutputError):
        load_sanitizer_xml(con, bad)
    assert con.execute("SELECT (SELECT count(*) FROM sanitizer_runs), (SELECT count(*) FROM sanitizer_findings)"
                       ).fetchall() == [(1, 6)]
    con.close()


def test_a_huge_message_is_cut_where_it_is_read(tmp_path):
    """A hostile 4 MB message in a real initcheck record: read, it keeps its first
    MESSAGE_CAP characters and says how many more the XML holds, so reports render it in
    linear time (before: 4 MB took 5 s to render, 50 MB over 14 minutes)."""
    src = (ROOT / "fixtures/evidence/gluon_3part/sanitizer/initcheck.xml").read_text()
    big = "Host API uninitialized memory access " + "x" * (4 << 20)
    p = tmp_path / "big.xml"
    p.write_text(src.replace("<text>Host API uninitialized memory access</text>", f"<text>{big}</text>", 1))
    out = read_sanitizer_xml(p, tool="initcheck")
    (f,) = [f for f in out.findings if f.message.startswith("Host API") and "more characters" in f.message]
    assert len(f.message) < MESSAGE_CAP + 100
    assert f"{len(big) - MESSAGE_CAP:,} more characters" in f.message
    plain = read_sanitizer_xml(ROOT / "fixtures/evidence/gluon_3part/sanitizer/initcheck.xml", tool="initcheck")
    assert (f.kind, f.classification) == (plain.findings[0].kind, plain.findings[0].classification)
