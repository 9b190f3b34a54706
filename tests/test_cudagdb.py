"""cuda-gdb's view of a hung warp-specialized kernel, mapped onto its SASS, on the real
capture in fixtures/correctness: ws_deadlock (full[] initialized for 64 arrivals, only
the producer's 32 arrive) hung on an H200, cuda-gdb attached by PID
(fixtures/collect_correctness.sh; fixtures/CORRECTNESS.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsperf.collectors.cudagdb import (
    CudaGdbOutputError,
    WaitKind,
    map_waits,
    parse_cudagdb,
    parse_cuobjdump_sass,
    read_cudagdb,
    read_cuobjdump_sass,
    wait_sites,
)
from wsperf.collectors.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fixtures" / "correctness"
CAPTURE = OUT / "ws_deadlock.cudagdb.txt"
SASS = OUT / "ws_deadlock.sass.txt"
SOURCE = ROOT / "fixtures" / "src" / "broken" / "pipeline.cuh"
KERNEL = "_Z11ws_pipelineIL3Bug5EEvPKfS2_Pfi"  # ws_pipeline<Bug::full_count>


@pytest.fixture(scope="module")
def waits():
    return map_waits(read_cudagdb(CAPTURE), read_cuobjdump_sass(SASS))


def test_capture_tables_are_read():
    c = read_cudagdb(CAPTURE)
    (k,) = c.kernels
    assert (k.invocation, k.grid_dim, k.block_dim, k.status) == ("ws_pipeline<(Bug)5>()", (2, 1, 1), (96, 1, 1),
                                                                 "Active")
    assert [(b.first, b.last, b.count, b.state) for b in c.blocks] == [((0, 0, 0), (1, 0, 0), 2, "running")]
    # Two SMs, three warps each (mask 0xe): the 2 CTAs x 3 warps of the launch.
    assert len(c.sms) == 2 and set(c.sms.values()) == {0xE} and c.resident_warps() == 6
    assert len(c.warps()) == 6
    assert {(w.sm, w.warp) for w in c.warps()} == {(sm, hw) for (_, sm) in c.sms for hw in (1, 2, 3)}
    # Every lane of every warp, all active, all at their warp's PC.
    lanes = c.lanes()
    assert len(lanes) == 6 * 32 and {l.state for l in lanes} == {"active"} and {l.exception for l in lanes} == {"None"}
    pc_of = {(w.sm, w.warp): w.pc for w in c.warps()}
    assert all(l.pc == pc_of[(l.sm, l.warp)] for l in lanes)
    # `info cuda threads`, uncoalesced: 192 threads with device, SM, warp, lane and line.
    single = [t for t in c.threads if t.count == 1]
    assert len(single) == 192 and {t.source_line for t in single} == {37}


def test_every_resident_warp_of_the_hung_kernel_is_mapped(waits):
    assert len(waits) == read_cudagdb(CAPTURE).resident_warps() == 6
    assert {(w.block, w.warp_in_block) for w in waits} == {((b, 0, 0), r) for b in (0, 1) for r in (0, 1, 2)}
    assert {w.function for w in waits} == {KERNEL} and all(w.active_lanes == 32 for w in waits)


def test_every_warp_spins_in_an_mbarrier_try_wait(waits):
    for w in waits:
        assert w.wait is WaitKind.MBARRIER
        assert w.wait_instruction.opcode == "SYNCS.PHASECHK.TRANS64.TRYWAIT"
        # cuda-gdb stops each warp on the predicated branch right after its try-wait.
        assert w.instruction.opcode == "BRA" and w.instruction.guard == "@!P0"
        assert w.offset == w.wait_instruction.offset + 0x10
        # The try-wait is inlined from common.cuh's mbar_wait.
        assert Path(w.source_file).name == "common.cuh" and w.call_file == "pipeline.cuh"


def test_producer_and_consumers_wait_at_two_different_barriers(waits):
    producer = [w for w in waits if w.warp_in_block == 0]
    consumers = [w for w in waits if w.warp_in_block > 0]
    assert len(producer) == 2 and len(consumers) == 4
    lines = SOURCE.read_text().splitlines()
    (p_line,) = {w.call_line for w in producer}
    (c_line,) = {w.call_line for w in consumers}
    # The producer waits for the consumers to free a stage, the consumers for it to fill one.
    assert "mbar_wait(&empty[s]" in lines[p_line - 1]
    assert "mbar_wait(&full[s]" in lines[c_line - 1]
    sites = wait_sites(waits)
    assert [(len(s.warps), s.call_line) for s in sites] == [(4, c_line), (2, p_line)]
    assert len({s.offset for s in sites}) == 2 and all(s.wait is WaitKind.MBARRIER for s in sites)


def test_sass_listing_is_read():
    sass = read_cuobjdump_sass(SASS)
    assert list(sass) == [KERNEL]
    ins = sass[KERNEL]
    tries = [i for i in ins.values() if i.opcode == "SYNCS.PHASECHK.TRANS64.TRYWAIT"]
    assert len(tries) >= 2 and all(i.offset % 16 == 0 for i in ins.values())
    assert ins[0].opcode == "LDC" and ins[0].text == "LDC R1, c[0x0][0x28]"


def test_a_sass_dump_of_another_binary_is_refused():
    other = read_cuobjdump_sass(SASS)
    renamed = {"_Z5otherv": other[KERNEL]}
    with pytest.raises(CudaGdbOutputError, match="no function whose load address"):
        map_waits(read_cudagdb(CAPTURE), renamed)
    shifted = {KERNEL: {o + 8: i for o, i in other[KERNEL].items()}}
    with pytest.raises(CudaGdbOutputError, match="no instruction"):
        map_waits(read_cudagdb(CAPTURE), shifted)


def _damage(old: str, new: str) -> str:
    text = CAPTURE.read_text()
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("text, needle", [
    ("", "holds no `==== <command>` sections"),
    ("Thread 1 stopped.\n(cuda-gdb) info cuda warps\n", "holds no `==== <command>` sections"),
    ("==== info cuda warps\nFocus not set on any active CUDA kernel.\n", "'Focus not set on any active CUDA kernel.'"),
    ("==== info cuda kernels\n", "printed 'nothing' where the table header belongs"),
    (None, "neither a row of the table nor a group header"),
    ("==== info cuda lanes\n  Ln  State         PC         ThreadIdx Exception \n"
     "*  0 active 0x00007f47ff7a1160   (0,0,0)    None   \n", "comes before the line that says which"),
    ("==== info line *$pc\nLine 37 of \"a.cu\" starts at address 0x10 <f+16> and ends at 0x20.\n",
     "before any `x/i $pc`"),
    ("==== x/2i $pc\n=> garbage\n", "not a disassembled instruction"),
])
def test_bad_capture_is_one_clear_input_error(text, needle):
    if text is None:  # a real capture with one warp row cut short
        text = _damage("0x00000000 0x00007f4bcf7a1540      0  (0,0,0)", "0x00000000 0x00007f4bcf7a1540")
    with pytest.raises(CudaGdbOutputError) as e:
        parse_cudagdb(text, source="capture.txt")
    assert isinstance(e.value, InputError)
    msg = str(e.value)
    assert needle in msg and "capture.txt" in msg and "\n" not in msg


def test_missing_or_foreign_files_are_input_errors(tmp_path):
    with pytest.raises(CudaGdbOutputError, match="no such file"):
        read_cudagdb(tmp_path / "absent.txt")
    with pytest.raises(CudaGdbOutputError, match="not a `cuobjdump -sass` listing"):
        parse_cuobjdump_sass(CAPTURE.read_text(), source="capture.txt")


def test_attach_probe_from_collect_ends_with_gdb_notice():
    # What `wsperf collect` captured on the H200 (scripts/gpu-e2e.sh): the first attach's
    # probe, whose last table is followed by gdb's "[Inferior 1 (process N) detached]".
    text = (OUT / "ws_deadlock.collect-probe.txt").read_text()
    assert text.rstrip().endswith("detached]")
    cap = parse_cudagdb(text, source="probe")
    assert [k.grid_dim for k in cap.kernels] == [(2, 1, 1)]
    # 2 blocks x (1 producer warp + 2 consumer warps): 32 threads at one PC, 64 at another.
    assert sorted((t.count, t.first_thread[0]) for t in cap.threads) == [(32, 0), (32, 0), (64, 32), (64, 32)]
    assert len({t.pc for t in cap.threads}) == 2
