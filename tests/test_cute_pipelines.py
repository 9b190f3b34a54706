"""The worksheet and the SASS partitions on CuTe DSL kernels built on the package's pipeline
abstractions (`cutlass.pipeline`: PipelineTmaAsync, PipelineAsync, PipelineCpAsync,
PipelineOrder, PipelineTmaUmma, PipelineUmmaAsync, PipelineClcFetchAsync; and
`cutlass.memory.TmemAllocator`), compiled by CuTe DSL 4.8.1 without a GPU
(fixtures/src/cute/cute_pipe_*.py). The truth is each design, as fixtures/src/cute/README.md
states it: correct kernels raise no evidence flag and get their roles named with their warps;
each planted bug raises exactly its own flag."""

from __future__ import annotations

import pytest

from support import ROOT
from wsperf.analyses.correctness import Basis
from wsperf.analyses.static import inspect
from wsperf.analyses.worksheet import worksheet
from wsperf.collectors.store import open_store

PTX = ROOT / "fixtures" / "ptx"
CUBINS = ROOT / "fixtures" / "cubins"

# The design's roles, as the worksheet names them ("<role> (warps a-b)"). Two consumer
# warpgroups that run the same code are one role (as in cutlass_ws_gemm); an allocator warp
# that also belongs to the epilogue is "tensor-memory owner" beside the epilogue's warps.
TRUE_ROLES = {
    "cute_pipe_wgmma2": {"producer (warp 0)", "idle (warps 1-3)", "consumer (warps 4-11)"},
    "cute_pipe_wgmma2_cluster": {"producer (warp 0)", "idle (warps 1-3)", "consumer (warps 4-11)"},
    "cute_pipe_pingpong": {"producer (warp 0)", "idle (warps 1-3)", "consumer (warps 4-11)"},
    "cute_pipe_pingpong_named": {"producer (warp 0)", "idle (warps 1-3)", "consumer (warps 4-11)"},
    "cute_pipe_tmastore": {"producer (warp 0)", "epilogue (warp 1)", "idle (warps 2-3)", "consumer (warps 4-11)"},
    "cute_pipe_umma_persistent": {"tensor-memory owner (warp 0)", "epilogue (warps 0-3)", "producer (warp 4)",
                                  "consumer (warp 5)"},
    "cute_pipe_umma_cluster": {"tensor-memory owner (warp 0)", "epilogue (warps 0-3)", "producer (warp 4)",
                               "consumer (warp 5)"},
    "cute_pipe_2cta": {"tensor-memory owner (warp 0)", "epilogue (warps 0-3)", "producer (warp 4)",
                       "consumer (warp 5)"},
}
CORRECT = [*TRUE_ROLES, "cute_pipe_cpasync", "cute_pipe_clc"]

# The jobs the roles issue (the role's text after its name, up to the statement count).
TRUE_JOBS = {
    "cute_pipe_wgmma2": {"producer (warp 0)": "TMA load", "consumer (warps 4-11)": "MMA issue (wgmma)"},
    "cute_pipe_wgmma2_cluster": {"producer (warp 0)": "TMA load (multicast)",
                                 "consumer (warps 4-11)": "MMA issue (wgmma)"},
    "cute_pipe_tmastore": {"producer (warp 0)": "TMA load", "epilogue (warp 1)": "TMA store",
                           "consumer (warps 4-11)": "MMA issue (wgmma)"},
    "cute_pipe_umma_persistent": {"producer (warp 4)": "TMA load", "consumer (warp 5)": "MMA issue (tcgen05)",
                                  "epilogue (warps 0-3)": "tensor-memory load"},
    "cute_pipe_2cta": {"producer (warp 4)": "TMA load", "consumer (warp 5)": "MMA issue (tcgen05)",
                       "epilogue (warps 0-3)": "tensor-memory load"},
    "cute_pipe_cpasync": {"producer (warps 0-1)": "cp.async load"},
}

# Each barrier (array) of the design by its offset in __dynamic_shmem__0 -> its init count.
D = "__dynamic_shmem__0"
TRUE_INITS = {
    "cute_pipe_wgmma2": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 8},
    "cute_pipe_wgmma2_cluster": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 16},
    "cute_pipe_tmastore": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 8, f"{D}+64": 256, f"{D}+72": 32},
    "cute_pipe_cpasync": {f"{D}+{{0,8,16,24}}": 64, f"{D}+{{32,40,48,56}}": 128},
    "cute_pipe_umma_persistent": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 1, f"{D}+{{64,72}}": 1,
                                  f"{D}+{{80,88}}": 128},
    "cute_pipe_umma_cluster": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 2, f"{D}+{{64,72}}": 1,
                               f"{D}+{{80,88}}": 128},
    "cute_pipe_2cta": {f"{D}+{{0,8,16,24}}": 1, f"{D}+{{32,40,48,56}}": 1, f"{D}+64": 1, f"{D}+72": 256,
                       f"{D}+80": 32},
    "cute_pipe_clc": {D: 1, f"{D}+8": 160},
}

# Planted: (variant, the flag that must fire, the bases it may have). The cluster's shape is a
# launch attribute, not in the PTX: which CTAs a `1 << (rank % 2)` commit mask reaches rests
# on it, so cute_pipe_umma_cluster_mask's flag may be said as an assumption. (cute_pipe_2cta's
# pair is fixed by `.cta_group::2` in the PTX itself.)
EVIDENCE = frozenset({Basis.EVIDENCE})
PLANTED = [
    ("cute_pipe_wgmma2_count", 2, EVIDENCE),           # empty init 256, 8 elected arrivals
    ("cute_pipe_wgmma2_phase", 7, EVIDENCE),           # producer's first wait on empty for parity 0
    # the same, the warpgroups ordered by bar.sync 3: the count rests on their taking turns
    ("cute_pipe_pingpong_named_count8", 2, (Basis.ASSUMPTION,)),
    ("cute_pipe_cpasync_count", 2, EVIDENCE),          # full init 1, 64 noinc arrivals
    ("cute_pipe_umma_acccount", 2, EVIDENCE),          # acc_empty init 4, 128 arrivals
    ("cute_pipe_umma_accphase", 7, EVIDENCE),          # MMA's first wait on acc_empty for parity 0
    ("cute_pipe_umma_multifree", 6, EVIDENCE),         # all 4 epilogue warps tcgen05.dealloc
    ("cute_pipe_umma_nopermit", 4, EVIDENCE),          # no tcgen05.relinquish_alloc_permit
    ("cute_pipe_umma_cluster_mask", 2, frozenset({Basis.EVIDENCE, Basis.ASSUMPTION})),  # 1 of 2 arrivals
    ("cute_pipe_2cta_acccount", 2, EVIDENCE),          # acc_empty init 128, 256 arrivals (both CTAs)
    ("cute_pipe_tmastore_nofence", 5, EVIDENCE),       # st.shared of sC, then the TMA store: no proxy fence
    ("cute_pipe_clc_count", 2, EVIDENCE),              # clc_empty init 128, 160 arrivals
]


def _sheet(name: str):
    (k,) = worksheet([PTX / f"{name}.ptx"]).kernels
    return k


def _roles(k) -> set[str]:
    return {r.text.split(":")[0] for r in k.roles if "statements" in r.text}


def _jobs(k) -> dict[str, str]:
    return {r.text.split(":")[0]: r.text.split(": ", 1)[1].split(";")[0] for r in k.roles if "statements" in r.text}


def _parts(cubin: str) -> tuple[bool, dict[str, str | None]]:
    (k,) = inspect(open_store(None), [CUBINS / cubin]).kernels
    return k.analysis.warp_specialized, {p.partition: p.job for p in k.analysis.partitions}


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_pipeline_kernel_raises_no_evidence_flag(name):
    k = _sheet(name)
    assert [f for f in k.flags if f.basis is Basis.EVIDENCE] == [], (name, k.flags)


@pytest.mark.parametrize("name", sorted(TRUE_ROLES))
def test_the_roles_are_the_designs(name):
    k = _sheet(name)
    assert _roles(k) == TRUE_ROLES[name], (name, [r.text for r in k.roles])
    assert all(r.basis is Basis.EVIDENCE for r in k.roles if "statements" in r.text)


@pytest.mark.parametrize("name", sorted(TRUE_JOBS))
def test_each_role_issues_the_designs_job(name):
    jobs = _jobs(_sheet(name))
    for role, job in TRUE_JOBS[name].items():
        assert role in jobs and job in jobs[role], (name, role, jobs)


def test_cpasync_producer_and_consumer_warps():
    """Warps 0-1 copy with cp.async and arrive on full[s] with `cp.async.mbarrier.arrive.noinc`;
    warps 2-5 wait, add and release. Warp 0's elected lane also runs the pipeline's inits
    before the role branch: that is no role of producer, consumer or epilogue work."""
    roles = _roles(_sheet("cute_pipe_cpasync"))
    assert {"producer (warps 0-1)", "consumer (warps 2-5)"} <= roles, roles
    others = roles - {"producer (warps 0-1)", "consumer (warps 2-5)"}
    assert not [r for r in others if r.split(" (")[0] in ("producer", "consumer", "epilogue", "producer+consumer")]


def test_clc_scheduler_warp_is_not_a_plain_consumer():
    """Warp 0 is the Cluster Launch Control scheduler: it expects the 16-byte response on
    clc_full and issues `clusterlaunchcontrol.try_cancel`, which writes it and completes the
    bytes (the producer side of PipelineClcFetchAsync); it then reads its own response like the
    workers. Warps 1-4 are the workers (the tile's loads and stores, consumers of the response)."""
    roles = _roles(_sheet("cute_pipe_clc"))
    assert "consumer (warps 1-4)" in roles, roles
    assert "consumer (warp 0)" not in roles
    assert roles & {"producer (warp 0)", "producer+consumer (warp 0)", "scheduler (warp 0)"}, roles


@pytest.mark.parametrize("name", sorted(TRUE_INITS))
def test_the_barriers_init_counts_are_the_designs(name):
    names = {b.name: b for b in _sheet(name).barriers}
    for bar, count in TRUE_INITS[name].items():
        assert bar in names, (name, bar, sorted(names))
        assert {c for _, c in names[bar].inits} == {count}, (name, bar, names[bar].inits)


@pytest.mark.parametrize("name", ["cute_pipe_pingpong", "cute_pipe_pingpong_named"])
def test_pingpong_empty_barriers_count_one_warpgroup_or_are_said_unchecked(name):
    """Ping-pong: each phase of empty[s] is released by the 4 warps of ONE warpgroup (phases
    0-15 of each stage by warps 4-7, 16-31 by warps 8-11), so empty[] counts 4. If the sheet
    tells the barriers apart, that is what it must find; if it does not, it must say so."""
    k = _sheet(name)
    names = {b.name: b for b in k.barriers}
    empty = names.get(f"{D}+{{32,40,48,56}}")
    if empty is None:
        assert any("not decided by the PTX" in u or "not checked" in u for u in k.unchecked), k.unchecked
    else:
        assert {c for _, c in empty.inits} == {4}
        assert {c for _, c in names[f"{D}+{{0,8,16,24}}"].inits} == {1}


def test_pingpong_count8_ordered_by_mbarriers_is_flagged_as_an_assumption():
    """cute_pipe_pingpong_count8: empty[] init 8, one warpgroup's 4 arrivals a phase: a
    deadlock. The warpgroups take turns through PipelineOrder's mbarriers, addressed by
    `stage * 2 + group` with the group derived from %tid.x. Each warpgroup's ring index
    starts at its own stage and C's signed `% 2` of a never-negative counter decides the
    rest, so the ring is told apart and counted: one warpgroup a phase, taken as taking
    turns (an assumption), so flag 2 with the design's cause, as an assumption; no
    evidence flag (the named-barrier twin, cute_pipe_pingpong_named_count8, is flagged)."""
    k = _sheet("cute_pipe_pingpong_count8")
    assert not [f for f in k.flags if f.basis is Basis.EVIDENCE], k.flags
    (f,) = k.flags
    assert f.code == 2 and f.basis is Basis.ASSUMPTION and "init count 8" in f.text and "init with 4" in f.text, f


@pytest.mark.parametrize("name, code, bases", PLANTED, ids=[n for n, _, _ in PLANTED])
def test_each_planted_pipeline_bug_raises_its_own_flag(name, code, bases):
    k = _sheet(name)
    assert [f.code for f in k.flags if f.basis is Basis.EVIDENCE] in ([code], []), (name, k.flags)
    fired = [f for f in k.flags if f.code == code and f.basis in bases]
    assert len(fired) == 1, (name, k.flags)
    if bases == EVIDENCE:
        assert [f.code for f in k.flags if f.basis is Basis.EVIDENCE] == [code], (name, k.flags)


@pytest.mark.parametrize("variant, name", [
    ("cute_pipe_wgmma2_count", "cute_pipe_wgmma2"), ("cute_pipe_wgmma2_phase", "cute_pipe_wgmma2"),
    ("cute_pipe_pingpong_count8", "cute_pipe_pingpong"), ("cute_pipe_pingpong_named_count8", "cute_pipe_pingpong_named"),
    ("cute_pipe_tmastore_nofence", "cute_pipe_tmastore"), ("cute_pipe_umma_acccount", "cute_pipe_umma_persistent"),
    ("cute_pipe_umma_accphase", "cute_pipe_umma_persistent"), ("cute_pipe_umma_multifree", "cute_pipe_umma_persistent"),
    ("cute_pipe_umma_nopermit", "cute_pipe_umma_persistent"), ("cute_pipe_umma_cluster_mask", "cute_pipe_umma_cluster"),
    ("cute_pipe_2cta_acccount", "cute_pipe_2cta")])
def test_a_planted_variant_keeps_its_kernels_roles(variant, name):
    """A planted bug changes a count, a parity, a fence or a free, not who does what."""
    assert _roles(_sheet(variant)) == TRUE_ROLES[name], variant


def test_inspect_names_the_2cta_tma_warp_producer():
    """cute_pipe_2cta: warp 4 issues the 2-SM TMA loads (`UTMALDG` .2CTA) and waits on
    ab_empty; it does no math. Warp 5 issues the MMAs, warps 0-3 are the epilogue."""
    specialized, parts = _parts("cute_pipe_2cta.sm_100a.cubin")
    assert specialized is True
    assert "producer (warp 4)" in parts and "TMA load" in (parts["producer (warp 4)"] or ""), parts
    assert "consumer (warp 4)" not in parts
    assert (parts.get("consumer (warp 5)") or "").startswith("MMA issue (tcgen05)"), parts
    assert "tensor-memory load" in (parts.get("epilogue (warps 0-3)") or ""), parts


def test_inspect_names_the_umma_epilogue_warps_epilogue():
    """cute_pipe_umma_persistent: warps 0-3 wait on acc_full, read the accumulator from
    tensor memory (`tcgen05.ld`), release acc_empty and store to global memory: the
    epilogue, not a consumer of math."""
    specialized, parts = _parts("cute_pipe_umma_persistent.sm_100a.cubin")
    assert specialized is True
    assert "epilogue (warps 0-3)" in parts, parts
    assert "consumer (warps 0-3)" not in parts
    assert "tensor-memory load" in (parts["epilogue (warps 0-3)"] or "")
    assert parts.get("producer (warp 4)") == "TMA load"
    assert (parts.get("consumer (warp 5)") or "").startswith("MMA issue (tcgen05)"), parts


def test_inspect_reads_the_clc_kernel_as_warp_specialized():
    """cute_pipe_clc: warp 0 is the scheduler (`UGETNEXTWORKID.BROADCAST`, its own response
    read back), warps 1-4 the workers; warp 0 is not idle."""
    specialized, parts = _parts("cute_pipe_clc.sm_100a.cubin")
    assert specialized is True, parts
    assert parts and "idle (warp 0)" not in parts, parts
