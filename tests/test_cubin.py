"""The SASS of a report from its embedded cubins by nvdisasm (collectors/cubin.py), as the
report reader uses it: placed in the launch, cached by content, refused where ambiguous.
(tests/test_loader.py compares the text with ncu_report's on every PC of every fixture.)"""

from __future__ import annotations

import hashlib
import os
import random
import struct
import subprocess
import time
from pathlib import Path

import pytest

from wsperf.collectors import cubin, reader_sass
from wsperf.collectors.files import find_binary
from wsperf.collectors.ncu import load_report
from wsperf.collectors.readers import pool
from wsperf.collectors.store import open_store

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
GEMM = REPORTS / "gemm_wgmma_tma.ncu-rep"
KERNEL = "_Z7gemm_wsILb1EEv14CUtensorMap_stS0_PK13__nv_bfloat16S3_Pf"

pytestmark = pytest.mark.skipif(find_binary("nvdisasm") is None, reason="needs nvdisasm (nvidia-cuda-nvdisasm wheel)")


def test_the_report_embeds_its_module_and_nvdisasm_lists_every_instruction():
    (module,) = cubin.find_cubins(GEMM.read_bytes())
    assert set(module.code) == {KERNEL, KERNEL.replace("ILb1E", "ILb0E"), "_Z9gemm_ffmaPK13__nv_bfloat16S1_Pf"}
    assert module.sha256 == hashlib.sha256(module.data).hexdigest()
    listing = cubin.Disassembly(module, module.code, find_binary("nvdisasm")).listing()
    assert set(listing) == set(module.code)
    kernel = listing[KERNEL]
    # 16-byte instructions from offset 0 to the end of the .text section, none missing.
    assert sorted(kernel) == list(range(0, 16 * len(kernel), 16)) and len(kernel) == 28672 // 16
    opcodes = {text.split()[1 if text.startswith("@") else 0].split(".")[0] for text in kernel.values()}
    assert {"HGMMA", "UTMALDG", "SYNCS", "EXIT"} <= opcodes
    assert not any("(*" in t or t.endswith(";") for t in kernel.values())  # annotations and ';' dropped


def test_without_dataflow_analysis_nvdisasm_lists_the_same_instructions(tmp_path):
    # nvdisasm runs with -ndf (cubin.NVDISASM_ARGS: ~0.15 s less of its start). What the
    # dataflow analysis adds is annotations, dropped by `parse`: an sm_90 kernel that
    # spills (SpillRefill), the sm_100a tcgen05 cubin (the same) and the wgmma GEMM list the
    # same instructions either way.
    tool = find_binary("nvdisasm")
    modules = [*cubin.find_cubins((REPORTS / "ws_stream_healthy.ncu-rep").read_bytes()),
               *cubin.find_cubins(GEMM.read_bytes()),
               cubin.find_cubins((REPORTS.parent / "cubins" / "tcgen05.sm_100a.cubin").read_bytes())[0]]
    assert "-ndf" in cubin.NVDISASM_ARGS and len(modules) == 3
    annotated = 0
    for m in modules:
        src = tmp_path / f"{m.sha256}.cubin"
        src.write_bytes(m.data)
        full, fast = (subprocess.run([tool, *args, str(src)], capture_output=True, check=True, text=True).stdout
                      for args in (["-c"], cubin.NVDISASM_ARGS))
        annotated += "SpillRefill" in full and "SpillRefill" not in fast
        listing = cubin.parse(fast)
        assert listing == cubin.parse(full) and set(listing) == set(m.code)
    assert annotated == 2  # the flag changes the text; the listing stays the same


def test_a_kernel_compiled_twice_into_different_code_is_left_to_ncu_report():
    (module,) = cubin.find_cubins(GEMM.read_bytes())
    assert cubin.functions([module, module])[KERNEL] is module  # the same module twice: one code
    # The same module with one instruction byte of the kernel changed: which one ran is unknown.
    data = bytearray(module.data)
    at = data.find(_text_of(module, KERNEL))
    data[at + 16 * 40] ^= 0x01
    (other,) = cubin.find_cubins(bytes(data))
    assert other.code[KERNEL] != module.code[KERNEL]
    found = cubin.functions([module, other])
    assert found[KERNEL] is None and found["_Z9gemm_ffmaPK13__nv_bfloat16S1_Pf"] is module


def _text_of(module: cubin.Cubin, name: str) -> bytes:
    """The bytes of a function's .text section, found by its digest."""
    shoff, = struct.unpack_from("<Q", module.data, 0x28)
    shnum, = struct.unpack_from("<H", module.data, 0x3C)
    for k in range(shnum):
        _n, typ, _f, _a, off, size, *_ = struct.unpack_from("<IIQQQQIIQQ", module.data, shoff + k * 64)
        body = module.data[off:off + size]
        if typ == 1 and hashlib.sha256(body).hexdigest() == module.code[name]:
            return body
    raise AssertionError(name)


def load_fresh(path: Path) -> list[tuple]:
    """The sass rows of `path` loaded into a new store by new reader processes (a reader
    keeps what it disassembled for its lifetime; these are to read the cache)."""
    pool().close()
    con = open_store(None)
    try:
        load_report(con, path)
        return sass_rows(con)
    finally:
        con.close()
        pool().close()


def sass_rows(con) -> list[tuple]:
    return con.execute("SELECT pc, sass, opcode, guard FROM sass ORDER BY launch_id, pc").fetchall()


def test_the_cache_serves_the_same_text_and_a_damaged_entry_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    stores = []
    for _ in range(3):
        stores.append(load_fresh(GEMM))
        (entry,) = (tmp_path / "cache" / "sass").iterdir()
        if len(stores) == 2:  # damage the entry: one byte of an instruction's text
            data = bytearray(entry.read_bytes())
            at = data.find(b"HGMMA")
            data[at] = ord("X")
            entry.write_bytes(bytes(data))
    assert stores[0] == stores[1] == stores[2]
    assert any("HGMMA" in r[1] for r in stores[0])
    assert b"XGMMA" not in entry.read_bytes()  # written again, whole


def test_without_the_cache_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WSPERF_NO_CACHE", "1")
    assert len(load_fresh(GEMM)) > 1000
    assert not (tmp_path / "cache").exists()


def test_nothing_in_the_bytes_is_trusted():
    blob = GEMM.read_bytes()
    at = blob.find(cubin.ELF_MAGIC)
    for cut in (at + 8, at + 0x40, at + 1000, at + 100_000):
        assert cubin.find_cubins(blob[:cut]) == []  # a cut ELF is no cubin
    assert cubin.find_cubins(b"\x7fELF" + os.urandom(4096)) == []


def test_another_process_may_run_nvdisasm_for_the_reader(tmp_path, monkeypatch):
    # What prestart does for a small report before the reader has even imported: the
    # reader waits for the file, reads it, and keeps it in the cache.
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    (module,) = cubin.find_cubins(GEMM.read_bytes())
    tool = find_binary("nvdisasm")
    out = tmp_path / f"{module.sha256}.sass"
    assert cubin.uncached(module, tool, [KERNEL]) == [KERNEL]
    assert cubin.start_output(module, [KERNEL], tool, out)
    listing = cubin.Disassembly(module, [KERNEL], tool, ready=out).listing()
    assert set(listing) == {KERNEL} and len(listing[KERNEL]) == 28672 // 16
    assert cubin.load_cached(module.sha256, tool, KERNEL) == listing[KERNEL]
    assert cubin.uncached(module, tool, module.code) == sorted(set(module.code) - {KERNEL})  # in the cache now
    assert not cubin.start_output(module, cubin.uncached(module, tool, [KERNEL]), tool, tmp_path / "again.sass")
    # A disassembler that fails leaves an empty file: no listing (the reader asks ncu_report).
    monkeypatch.setenv("WSPERF_NO_CACHE", "1")
    failed = tmp_path / "failed.sass"
    assert cubin.start_output(module, [KERNEL], "/bin/false", failed)
    assert cubin.Disassembly(module, [KERNEL], tool, timeout_s=60, ready=failed).listing() == {}
    assert failed.read_bytes() == b""


def test_nvdisasm_lists_only_the_functions_asked_for_and_each_as_in_the_whole_cubin(tmp_path, monkeypatch):
    # A report embeds the whole module of its kernel: a library's holds dozens of
    # instantiations (sglang's flash-attention module: 20 functions, 1 launched, 2.4 s of
    # nvdisasm for all of it). nvdisasm -fun lists the launched ones only; each parses to
    # what the whole cubin's listing holds for it (checked on the 68 functions of the 22
    # fixture and public cubins when -fun was adopted).
    monkeypatch.setenv("WSPERF_NO_CACHE", "1")
    tool = find_binary("nvdisasm")
    (gemm,) = cubin.find_cubins(GEMM.read_bytes())
    (tcgen05,) = cubin.find_cubins((REPORTS.parent / "cubins" / "tcgen05.sm_100a.cubin").read_bytes())
    for module in (gemm, tcgen05):
        assert set(module.symbols) == set(module.code)
        whole = cubin.Disassembly(module, module.code, tool).listing()
        assert cubin.selection(module, module.code) == []  # all of them: no -fun
        names = sorted(module.code)
        for asked in ([names[0]], names[1:]):
            assert cubin.selection(module, asked)[0] == "-fun"
            listing = cubin.Disassembly(module, asked, tool).listing()
            assert listing == {f: whole[f] for f in asked}
    # The symbol indices are the ELF symbol table's (readelf -s: 16, 17, 18 for the GEMM).
    assert sorted(gemm.symbols.values()) == [16, 17, 18]
    assert gemm.symbols[KERNEL] == 16
    # A function without a symbol: the whole cubin, the functions asked for among it.
    bare = cubin.Cubin(gemm.data, gemm.sha256, gemm.code)
    assert cubin.selection(bare, [KERNEL]) == []
    assert set(cubin.Disassembly(bare, [KERNEL], tool).listing()) == set(gemm.code)


def test_the_cache_keeps_each_function_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    tool = find_binary("nvdisasm")
    (module,) = cubin.find_cubins(GEMM.read_bytes())
    first = cubin.Disassembly(module, [KERNEL], tool).listing()
    files = sorted((tmp_path / "cache" / "sass").iterdir())
    assert len(files) == 1 and cubin.load_cached(module.sha256, tool, KERNEL) == first[KERNEL]
    # Another function of the same cubin: its own file; the first is not listed again.
    other = sorted(set(module.code) - {KERNEL})[0]
    both = cubin.Disassembly(module, [KERNEL, other], tool)
    assert both._proc is not None and both.listing()[KERNEL] == first[KERNEL] and other in both.listing()
    assert len(list((tmp_path / "cache" / "sass").iterdir())) == 2
    # A damaged file, or one of another function, is not a listing.
    damaged = files[0].read_bytes().replace(b"HGMMA", b"HFMA2", 1)
    files[0].write_bytes(damaged)
    assert cubin.load_cached(module.sha256, tool, KERNEL) is None
    again = cubin.Disassembly(module, [KERNEL], tool)
    assert again._proc is not None and again.listing()[KERNEL] == first[KERNEL]
    assert cubin.load_cached(module.sha256, tool, other) is not None
    assert cubin.load_cached(module.sha256, tool, "_Znosuch") is None


def test_damaged_elf_headers_never_raise():
    # Bytes changed anywhere in the ELF and section headers of the report's cubin (where a
    # changed byte made ncu_report's sass_by_pc crash): a cubin found or not, never an error.
    blob = bytearray(GEMM.read_bytes())
    at = blob.find(cubin.ELF_MAGIC)
    shoff, = struct.unpack_from("<Q", blob, at + 0x28)
    shnum, = struct.unpack_from("<H", blob, at + 0x3C)
    spots = [*range(at, at + 0x40), *range(at + shoff, at + shoff + 64 * shnum)]
    rng = random.Random(15)
    for _ in range(300):
        damaged = bytearray(blob)
        for k in rng.sample(spots, rng.randint(1, 8)):
            damaged[k] = rng.randrange(256)
        found = cubin.find_cubins(bytes(damaged))
        assert all(isinstance(c, cubin.Cubin) for c in found)
        cubin.functions(found)


def test_what_an_early_start_listed_for_nothing_is_kept_for_next_time(tmp_path, monkeypatch):
    # prestart lists every function named in the report; one whose launch has no per-PC
    # metrics is never asked for by the load. The reader keeps it in the cache once the
    # load has its answer, so that the next command on the same report does not list it.
    monkeypatch.setenv("WSPERF_CACHE_DIR", str(tmp_path / "cache"))
    tool = find_binary("nvdisasm")
    (module,) = cubin.find_cubins(GEMM.read_bytes())
    out = tmp_path / f"{module.sha256}.sass"
    assert cubin.start_output(module, [KERNEL], tool, out)
    sass = reader_sass.SassListings()
    sass.external[module.sha256] = (out, [KERNEL])
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        sass.settle()  # nothing to keep while nvdisasm still runs
        assert sass.external and cubin.uncached(module, tool, [KERNEL]) == [KERNEL]
        time.sleep(0.01)
    sass.settle()
    assert not sass.external and cubin.uncached(module, tool, module.code) == sorted(set(module.code) - {KERNEL})
    assert len(cubin.load_cached(module.sha256, tool, KERNEL)) == 28672 // 16
