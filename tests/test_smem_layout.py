"""The shared-window addresses of a kernel's mbarriers (analyses/smem_layout.py), checked
against what ptxas made of the same source: the addresses the SASS's mbarrier inits
(`SYNCS.EXCH.64`) compute, and the size of the cubin's `.nv.shared.<kernel>` section.
Both kernels are compiled here by nvcc (sm_90a), as collect's hang capture would meet
them in a C++ repro: one with static variables only (ring, tile_scale, full, empty), one
with static barriers and dynamic memory after them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support import ROOT
from wsperf.analyses.handoffs import sheets
from wsperf.analyses.smem_layout import WINDOW_BASE, layouts
from wsperf.collectors.disasm import find_tool

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def _build(src: Path, out: Path) -> tuple[Path, Path]:
    ptx, cubin = out / (src.stem + ".ptx"), out / (src.stem + ".cubin")
    for flag, dest in (("-ptx", ptx), ("-cubin", cubin)):
        subprocess.run(["nvcc", "-gencode", "arch=compute_90a,code=sm_90a", "-O3", flag, "-o", str(dest), str(src)],
                       check=True, capture_output=True, timeout=600)
    return ptx, cubin


def _sass_inits(cubin: Path) -> dict[str, set[int]]:
    """Per function, the shared addresses its `SYNCS.EXCH.64` (mbarrier.init) instructions
    write, following the uniform registers of the prologue (UMOV, UIADD3, the ULEA that
    adds the CTA's cluster rank above bit 24)."""
    text = subprocess.run([find_tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                          text=True, timeout=120).stdout
    out: dict[str, set[int]] = {}
    for part in re.split(r"^\s*Function : ", text, flags=re.M)[1:]:
        name = part.split(None, 1)[0]
        ur: dict[str, int] = {}
        hits: set[int] = set()
        for line in part.splitlines():
            m = re.search(r"\*/\s+(\S+) ([^;]*);", line)
            if not m:
                continue
            op, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
            if op == "UMOV" and re.fullmatch(r"0x[0-9a-f]+", args[1]):
                ur[args[0]] = int(args[1], 16)
            elif op == "UIADD3" and args[1] in ur and re.fullmatch(r"0x[0-9a-f]+", args[2]) and args[3] == "URZ":
                ur[args[0]] = ur[args[1]] + int(args[2], 16)
            elif op == "ULEA" and args[2] in ur and args[3] == "0x18":
                ur[args[0]] = ur[args[2]]
            elif op == "SYNCS.EXCH.64":
                a = re.fullmatch(r"\[(UR\d+)(?:\+(0x[0-9a-f]+))?\]", args[1])
                if a and a.group(1) in ur:
                    hits.add(ur[a.group(1)] + int(a.group(2) or "0", 16))
        out[name] = hits
    return out


def _section_sizes(cubin: Path) -> dict[str, int]:
    import struct

    data = cubin.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sect = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sect[shstrndx][4]
    out = {}
    for s in sect:
        name = data[names + s[0]:data.index(b"\0", names + s[0])].decode()
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            out[name[len(".nv.shared."):]] = s[5]
    return out


@pytest.mark.parametrize("src", ["fixtures/src/broken/ws_deadlock.cu", "fixtures/src/ws_stream.cu"])
def test_barrier_addresses_are_those_the_sass_initializes(tmp_path, src):
    ptx, cubin = _build(ROOT / src, tmp_path)
    text = ptx.read_text()
    lay = layouts(text)
    inits = _sass_inits(cubin)
    sizes = _section_sizes(cubin)
    gs, _ = sheets([("ptx", ptx)], tmp_path)
    assert gs and set(lay) == {g.sheet.kernel for g in gs}
    checked = 0
    for g in gs:
        k = lay[g.sheet.kernel]
        mine = {k.address(b.name.split("+", 1)[0]) + off for b in g.sheet.barriers for off in b.slots}
        assert None not in mine and mine == inits[g.sheet.kernel], (g.sheet.kernel, sorted(map(hex, mine)))
        extern = [a for n, a in k.addresses.items() if re.search(rf"\.extern\s+\.shared\b[^;]*\b{n}\[", text)]
        assert sizes[g.sheet.kernel] == (extern[0] if extern else WINDOW_BASE + k.static_bytes)
        checked += 1
    assert checked >= 1


def test_the_static_layout_follows_the_declarations():
    # fixtures/ptx/ws_deadlock.ptx: ring 8192 B, tile_scale, full, empty; no dynamic memory
    text = (ROOT / "fixtures" / "ptx" / "ws_deadlock.ptx").read_text()
    (lay,) = layouts(text).values()
    assert [(n.rsplit("E", 1)[-1], hex(a)) for n, a in lay.addresses.items()] == [
        ("4ring", "0x400"), ("10tile_scale", "0x2400"), ("4full", "0x2408"), ("5empty", "0x2418")]
    assert lay.address("full", 8) == 0x2410 and lay.address("nothing") is None
    # Triton's global_smem is the whole dynamic window
    (tri,) = layouts((ROOT / "fixtures" / "ptx" / "gluon_ws_gemm.ptx").read_text()).values()
    assert tri.addresses == {"global_smem": WINDOW_BASE} and tri.static_bytes == 0
