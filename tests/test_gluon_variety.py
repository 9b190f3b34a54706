"""The worksheet on Gluon kernels of varied shapes (Triton 3.6, `triton.experimental.gluon`),
compiled without a GPU (fixtures/src/gluon/gluon_{pgemm,two_cons,quad_gemm,cgemm,tworeg,
pvt_bias,wide90,mmadef,gather_gemm}.py): a persistent GEMM with a double-buffered tensor-memory
accumulator, two consumer partitions, two loaders, loop-carried phases, two warp_specialize
regions in one kernel, a barrier initialized inside a partition and one re-initialized after
the region, a multi-warp loader beside a storer, the MMA issued by the default partition, and
TMA gather4. The truth is each design, as fixtures/src/gluon/README.md states it: correct
kernels raise no evidence flag, get their partitions named with their warps (from the
dispatch tables), and each barrier gets the arrivals its design gives it; each planted bug
raises exactly its own flag."""

from __future__ import annotations

import re
import shutil

import pytest

from support import ROOT
from wsperf.analyses.correctness import Basis
from wsperf.analyses.worksheet import worksheet
from wsperf.analyses.worksheet_model import phase_arrivals

PTX = ROOT / "fixtures" / "ptx"

# The design's roles, as the worksheet names them ("<role> (warps a-b)"): the TMA loader is a
# producer, the MMA issuer a consumer, the partition that drains the accumulator or C the
# epilogue, Triton's padding warps idle. A tuple: any one of its labels (the design leaves the
# name open: a default partition that also issues its own TMA load, an epilogue that hands C
# to another partition's TMA store; Triton issues the default partition's tcgen05.mma from its
# warp 0 only).
PGEMM_ROLES = {"epilogue (warps 0-3)", "idle (warps 4-5)", "producer (warp 6)", "consumer (warp 7)"}
PVT_ROLES = {("consumer (warps 0-3)", "producer+consumer (warps 0-3)"), "idle (warps 4-5)", "producer (warp 6)",
             "idle (warp 7)"}
TRUE_ROLES = {
    "gluon_pgemm": PGEMM_ROLES,
    "gluon_two_cons": {"consumer (warps 0-3)", "consumer (warps 4-7)", "idle (warps 8-9)", "producer (warp 10)",
                       "idle (warp 11)"},
    "gluon_quad_gemm": {"epilogue (warps 0-3)", "producer (warp 4)", "producer (warp 5)", "consumer (warp 6)",
                        "idle (warp 7)"},
    "gluon_cgemm": {"epilogue (warps 0-7)", "idle (warps 8-9)", "producer (warp 10)", "consumer (warp 11)"},
    # region 1: 0-3 epilogue, 4-5 idle, 6 loader, 7 MMA; region 2: 0-3 bias add, 4-5 the io
    # worker (TMA load of the bias, TMA store of C), 6-7 idle
    "gluon_tworeg": {("epilogue (warps 0-3)", "consumer (warps 0-3)"), "producer (warps 4-5)", "producer (warp 6)",
                     "consumer (warp 7)", "idle (warps 6-7)"},
    "gluon_pvt_bias": PVT_ROLES,
    "gluon_reinit_bias": PVT_ROLES,
    "gluon_wide90": {"consumer (warps 0-7)", "producer (warps 8-9)", "epilogue (warp 10)", "idle (warp 11)"},
    "gluon_mmadef": {("consumer (warps 0-3)", "consumer (warp 0)"), "epilogue (warps 4-7)", "idle (warps 8-9)",
                     "producer (warp 10)", "idle (warp 11)"},
    "gluon_gather_gemm": PGEMM_ROLES,
}
# Labels a sheet may add beside the design's partitions: the warps that allocate tensor
# memory (mmadef's default partition), a worker's warps idle in another region (tworeg).
OPTIONAL_ROLES = {"gluon_mmadef": ("tensor-memory owner (warp 0)", "tensor-memory owner (warps 0-3)"),
                  "gluon_tworeg": ("idle (warps 4-5)",)}

# Every correct variant, and the kernel whose roles it shares.
CORRECT = {"gluon_pgemm": "gluon_pgemm", "gluon_pgemm_cnt128": "gluon_pgemm", "gluon_pgemm_thr128": "gluon_pgemm",
           "gluon_pgemm_thr128b": "gluon_pgemm", "gluon_pgemm_predcommit": "gluon_pgemm",
           "gluon_pgemm_2exp": "gluon_pgemm", **{k: k for k in TRUE_ROLES if k != "gluon_pgemm"}}

# Each planted bug: its flag, its name, the barrier it is on (an offset in global_smem) and a
# piece of its cause.
PLANTED = [
    ("gluon_pgemm_count2", 2, "163920", "count 2"),  # acc_empty count 2, 1 arrival a phase
    ("gluon_pgemm_over", 2, "163920", "count 1"),  # acc_empty count 1, one arrive of 128
    ("gluon_pgemm_thr128_count1", 2, "163920", "count 1"),  # acc_empty count 1, 128 threads arrive
    ("gluon_pgemm_thr128b_count1", 2, "163920", "count 1"),
    ("gluon_pgemm_predcommit_all", 2, "163904", "count 1"),  # acc_ready: 64 commits a phase on count 1
    ("gluon_pgemm_empty_phase", 7, "163920", "parity 0"),  # the MMA's first acc_empty wait, parity 0
    ("gluon_pgemm_ready_phase", 10, "163904", ""),  # the epilogue's first acc_ready wait passes at once
    ("gluon_mmadef_accphase", 10, "131136", ""),  # the epilogue's acc_bar wait with parity 1
    ("gluon_two_cons_count1", 2, "131104", "count 1"),  # empty: one arrive from each consumer on count 1
    ("gluon_quad_gemm_count1", 2, "98304", "count 1"),  # ready: an expect_tx from each loader on count 1
    ("gluon_quad_gemm_tx", 8, "98304", "expects 32768 bytes a phase (expect_tx) but its copies deliver 16384"),
    ("gluon_cgemm_phase", 7, "98352", "parity 0"),  # the MMA's acc_empty wait without ^ 1
    ("gluon_cgemm_ldphase", 7, "98320", "parity 0"),  # the loader's empty wait without ^ 1
    ("gluon_tworeg_bias2", 2, "131232", "count 2"),  # bias_bar count 2, one expect_tx
    ("gluon_pvt_bias_count2", 2, "131072", "count 2"),  # bias_bar (init in the partition) count 2
    ("gluon_reinit_bias_count2", 2, "98400", "count 2"),  # ready[0] re-initialized count 2 as the bias barrier
    ("gluon_wide90_cfull2", 2, "262336", "count 2"),  # c_full count 2, one arrive
    ("gluon_gather_gemm_tx", 8, "98304", "expects 16384 bytes a phase (expect_tx) but its copies deliver 32768"),
]
FLAG_NAMES = {2: "init-count", 7: "phase-deadlock", 8: "tx-bytes", 10: "premature-pass"}

# The design's partitions (warp ranges, from the dispatch tables) and barriers: name ->
# (init count, arrivals a phase, arriving partitions, waiting partitions).
PARTS = {"gluon_pgemm": [(0, 3), (4, 5), (6, 6), (7, 7)],
         "gluon_two_cons": [(0, 3), (4, 7), (8, 9), (10, 10), (11, 11)],
         "gluon_quad_gemm": [(0, 3), (4, 4), (5, 5), (6, 6), (7, 7)],
         "gluon_cgemm": [(0, 7), (8, 9), (10, 10), (11, 11)], "gluon_tworeg": [(0, 3), (4, 5), (6, 6), (7, 7)],
         "gluon_pvt_bias": [(0, 3), (4, 5), (6, 6), (7, 7)], "gluon_wide90": [(0, 7), (8, 9), (10, 10), (11, 11)],
         "gluon_mmadef": [(0, 3), (4, 7), (8, 9), (10, 10), (11, 11)],
         "gluon_gather_gemm": [(0, 3), (4, 5), (6, 6), (7, 7)]}
G = "global_smem+"
PGEMM_BARS = {G + "{163840,163848,163856,163864}": (1, 1, {"6"}, {"7"}),  # ready[4]: expect_tx + 32768 B
              G + "{163872,163880,163888,163896}": (1, 1, {"7"}, {"6"}),  # empty[4]: tcgen05.commit
              G + "{163904,163912}": (1, 1, {"7"}, {"0-3"}),  # acc_ready[2]: tcgen05.commit
              G + "{163920,163928}": (1, 1, {"0-3"}, {"7"})}  # acc_empty[2]: one thread's arrive
ACC128 = {**PGEMM_BARS, G + "{163920,163928}": (128, 128, {"0-3"}, {"7"})}
TRUE_BARRIERS = {
    "gluon_pgemm": PGEMM_BARS,
    "gluon_pgemm_cnt128": ACC128,  # one thread's `mbarrier.arrive ..., 128`
    "gluon_pgemm_thr128": ACC128,  # each of the 128 epilogue threads arrives once
    "gluon_pgemm_thr128b": ACC128,
    "gluon_pgemm_predcommit": PGEMM_BARS,  # acc_ready: the last k-step's predicated commit
    "gluon_pgemm_2exp": {**PGEMM_BARS, G + "{163840,163848,163856,163864}": (2, 2, {"6"}, {"7"})},
    "gluon_two_cons": {G + "{131072,131080,131088}": (1, 1, {"10"}, {"0-3", "4-7"}),
                       G + "{131104,131112,131120}": (2, 2, {"0-3", "4-7"}, {"10"})},
    "gluon_quad_gemm": {G + "{98304,98312}": (2, 2, {"4", "5"}, {"6"}), G + "{98320,98328}": (1, 1, {"6"}, {"4"}),
                        G + "{98336,98344}": (1, 1, {"6"}, {"5"}), G + "98352": (1, 1, {"6"}, {"0-3"})},
    "gluon_cgemm": {G + "{98304,98312}": (1, 1, {"10"}, {"11"}), G + "{98320,98328}": (1, 1, {"11"}, {"10"}),
                    G + "{98336,98344}": (1, 1, {"11"}, {"0-7"}), G + "{98352,98360}": (1, 1, {"0-7"}, {"11"})},
    "gluon_tworeg": {G + "{131184,131192}": (1, 1, {"6"}, {"7"}), G + "{131200,131208}": (1, 1, {"7"}, {"6"}),
                     G + "131216": (1, 1, {"7"}, {"0-3"}), G + "131232": (1, 1, {"4-5"}, {"0-3"}),
                     G + "131248": (1, 1, {"0-3"}, {"4-5"})},
    "gluon_pvt_bias": {G + "{131088,131096,131104}": (1, 1, {"6"}, {"0-3"}),
                       G + "{131120,131128,131136}": (1, 1, {"0-3"}, {"6"}), G + "131072": (1, 1, {"0-3"}, {"0-3"})},
    "gluon_wide90": {G + "{262272,262280,262288,262296}": (1, 1, {"8-9"}, {"0-7"}),
                     G + "{262304,262312,262320,262328}": (1, 1, {"0-7"}, {"8-9"}),
                     G + "262336": (1, 1, {"0-7"}, {"10"})},
    "gluon_mmadef": {G + "{131072,131080,131088}": (1, 1, {"10"}, {"0-3"}),
                     G + "{131104,131112,131120}": (1, 1, {"0-3"}, {"10"}), G + "131136": (1, 1, {"0-3"}, {"4-7"})},
    "gluon_gather_gemm": {G + "{98304,98312}": (1, 1, {"6"}, {"7"}), G + "{98320,98328}": (1, 1, {"7"}, {"6"}),
                          G + "98336": (1, 1, {"7"}, {"0-3"})},
}


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _roles(k) -> list[str]:
    return [r.text.split(":")[0] for r in k.roles if "statements" in r.text]


def _part(family: str, role: str) -> str:
    """The design partition holding a role's first warp, as "a-b" (or "a")."""
    m = re.search(r"\(warps? (\d+)", role)
    assert m, role
    w = int(m.group(1))
    (lo, hi), = [p for p in PARTS[family] if p[0] <= w <= p[1]]
    return f"{lo}-{hi}" if hi > lo else f"{lo}"


@pytest.mark.parametrize("name", list(CORRECT))
def test_no_evidence_flag_on_a_correct_kernel(name):
    k = _sheet(name)
    assert [f for f in k.flags if f.basis is Basis.EVIDENCE] == [], (name, k.flags)


@pytest.mark.parametrize("name", list(CORRECT))
def test_each_partition_is_named_with_its_warps(name):
    """The dispatch tables give each partition its warps (fixtures/src/gluon/README.md)."""
    family = CORRECT[name]
    labels = _roles(_sheet(name))
    left = list(labels)
    for want in TRUE_ROLES[family]:
        alts = want if isinstance(want, tuple) else (want,)
        hits = [x for x in left if x in alts]
        assert len(hits) == 1, (name, want, labels)
        left.remove(hits[0])
    assert [x for x in left if x not in OPTIONAL_ROLES.get(family, ())] == [], (name, labels)


def test_the_io_worker_of_the_second_region_loads_and_stores():
    (text,) = [r.text for r in _sheet("gluon_tworeg").roles if r.text.startswith("producer (warps 4-5)")]
    assert "TMA load" in text and "TMA store" in text


@pytest.mark.parametrize("name", list(TRUE_BARRIERS))
def test_each_barrier_gets_the_arrivals_its_design_gives_it(name):
    """Init count, arrivals a phase, and which partitions arrive on and wait on each barrier."""
    family = CORRECT[name]
    k = _sheet(name)
    got = {b.name: b for b in k.barriers}
    for bar, (count, arrivals, arrivers, waiters) in TRUE_BARRIERS[name].items():
        assert bar in got, (name, bar, sorted(got))
        b = got[bar]
        assert {c for _, c in b.inits} == {count}, (name, bar, b.inits)
        assert sum(phase_arrivals(b).values()) == arrivals, (name, bar, phase_arrivals(b))
        assert {_part(family, a.site.role) for a in b.arrivers if a.arrivals} == arrivers, (name, bar, b.arrivers)
        assert {_part(family, w.site.role) for w in b.waiters} == waiters, (name, bar, b.waiters)
    assert not any(b.name.startswith("%") for b in k.barriers), (name, [b.name for b in k.barriers])


@pytest.mark.parametrize("name, code, bar, cause", PLANTED)
def test_each_planted_bug_raises_exactly_its_flag(name, code, bar, cause):
    k = _sheet(name)
    flags = [f for f in k.flags if f.basis is Basis.EVIDENCE]
    assert [(f.code, f.name) for f in flags] == [(code, FLAG_NAMES[code])], (name, k.flags)
    assert bar in flags[0].text and cause in flags[0].text, flags[0].text


def test_gather4_copies_deliver_the_bytes_the_loader_expects():
    """gather_gemm's loader expects 32768 bytes a phase: 32 `tile::gather4` copies of 4 rows of
    a [1, 64] bf16 box (4 x 128 = 512 bytes each, 16384 in all) and one 128x64 box of B
    (16384)."""
    k = _sheet("gluon_gather_gemm")
    (ready,) = [b for b in k.barriers if b.name == G + "{98304,98312}"]
    assert [a.tx_bytes for a in ready.arrivers if a.kind == "arrive.expect_tx"] == ["32768"]
    copies = [a for a in ready.arrivers if a.kind == "complete_tx"]
    assert sum(".tile::gather4" in a.site.instruction for a in copies) == 32 and len(copies) == 33
    assert not [f for f in k.flags if f.code == 8], k.flags
    assert not any("expect_tx not checked" in u for u in k.unchecked)


def test_gather4_bytes_delivered_are_counted_four_rows_a_copy(tmp_path):
    """The same PTX expecting 65536 bytes: the flag names what the copies deliver, 32768."""
    text = (PTX / "gluon_gather_gemm.ptx").read_text()
    assert text.count("mbarrier.arrive.expect_tx.shared.b64 _, [%r38], 32768;") == 1
    (tmp_path / "k.ptx").write_text(text.replace("[%r38], 32768;", "[%r38], 65536;"))
    shutil.copy(PTX / "gluon_gather_gemm.json", tmp_path / "k.json")
    (k,) = worksheet([tmp_path / "k.ptx"]).kernels
    (f,) = [f for f in k.flags if f.code == 8]
    assert "expects 65536 bytes a phase (expect_tx) but its copies deliver 32768" in f.text, f.text
