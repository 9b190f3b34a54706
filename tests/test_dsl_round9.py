"""The worksheet on a ninth set of DSL kernels, compiled without a GPU: CuTe DSL 4.8.1
(fixtures/src/cute/round9: sm_90a wgmma GEMMs whose consumers store C through TMA from their own
staging buffers, one per warpgroup of two that take alternate tiles, or one or two shared by a
cooperative pair indexed by the tile counter; a sm_90a K loop fully unrolled on a 3-stage ring;
sm_100a tcgen05 GEMMs whose epilogue drains one accumulator in four column slices, through a
2-stage ring to a TMA-store warp or through one staging buffer it stores itself) and Gluon /
Triton 3.6 (fixtures/src/gluon/round9: the same slice-by-slice epilogues, and a loader and MMA
warp fully unrolled with `gl.static_range`). The staging buffers are reused across bulk stores,
guarded by `cp.async.bulk.wait_group.read`. Each folder's README holds the designs' partition
and barrier tables. Correct kernels raise no evidence flag; each planted bug the worksheet finds
raises exactly its own flag; the ones it misses are strict xfails that say which PTX fact it
would need."""

from __future__ import annotations

import pytest

from support import assert_planted, evidence_flags, ptx_sheet, xfail_case
from support import case as _case

D = "__dynamic_shmem__0+"
G = "global_smem+"

CORRECT = ["c9_pp", "c9_db", "c9_db1", "c9_unroll", "c9_tcring", "c9_tcself", "g9_ring", "g9_sub", "g9_unroll"]


PLANTED = [
    # CuTe DSL, sm_90a: the next tile's st.shared into a staging buffer with no wait for the
    # previous bulk store's reads of it
    # (one buffer per warpgroup: the store's source is +99328 for thread 128, +132096 for 256)
    _case("c9_pp_noread", [14], "bar.sync %r12, 128 (line 551)"),
    # (two buffers picked by the tile counter, n % 2 compiled with `and.b32 ..., 131070`)
    _case("c9_db_noread", [14], "bar.sync 1, 256 (line 521)"),
    _case("c9_db1_noread", [14], "bar.sync 1, 256 (line 518)"),
    # 8 unrolled k-blocks on 3 stages, every full[s] wait for parity 0; the release between two
    # visits is lane-guarded (`@%p7 bra` around the arrive, line 656): one flag a stage
    _case("c9_unroll_noflip", [12, 12, 12], "__dynamic_shmem__0 for parity 0 at line 859 as it did at line 511"),
    # CuTe DSL, sm_100a: acc_empty arrived, then the wait for a free store slot, then the last slice's load
    _case("c9_tcring_relearly", [14], D + "72 (arrive, line 924)"),
    _case("c9_tcself_noread", [14], "bar.sync 2, 128 (line 649)"),
    # Gluon
    _case("g9_ring_relearly", [14], G + "114992 (arrive, line 684)"),
    _case("g9_ring_enoflip", [12], G + "{114960,114968} for parity 1 on every trip of its loop (line 207"),
    _case("g9_ring_snoflip", [12], G + "{114944,114952} for parity 0 on every trip of its loop (line 1078"),
    # two staging buffers in one tile: slice 0's store (line 341) and slice 2's rewrite of its
    # buffer (line 632) are two named-barrier intervals apart
    _case("g9_sub_nowait", [14], "bar.sync 0, 128 (line 631)"),
    _case("g9_unroll_rph0", [12], G + "131184 for parity 0 at line 1162 as it did at line 1023"),
    _case("g9_unroll_eph1", [12], G + "131216 for parity 1 at line 866 as it did at line 768"),
    # missed now: strict xfails with the PTX fact the worksheet would need
    xfail_case("c9_pp_read1", [14], D + "99328", reason=(
        "one staging buffer per warpgroup (sC[wg] at +99328 / +132096), and thread 0 of the warpgroup waits "
        "`cp.async.bulk.wait_group.read 1` (line 553) before bar.sync %r12, 128 (line 558) and the st.shared "
        "into the same buffer (line 560): the previous tile's bulk store of it (line 622) may still be reading. "
        "Any wait_group on the path ends the walk; N is not set against the number of buffers the store's "
        "source cycles through (one)")),
    xfail_case("c9_db_read2", [14], D + "99328", reason=(
        "two staging buffers (+99328, +132096, picked by the tile counter), and the elected lane of warp 4 "
        "waits `cp.async.bulk.wait_group.read 2` (line 522) before bar.sync 1, 256 (line 525) and the "
        "st.shared (line 536): the store of the same buffer two tiles back (line 596) may still be reading "
        "it; N is not set against the two buffers")),
    xfail_case("g9_sub_wait2", [14], G + "98304", reason=(
        "`cp.async.bulk.wait_group.read 2` (lines 200, 355, 511, 671) with two staging buffers (+98304, "
        "+106496): at slice 2 slice 0's store of +98304 (line 345) may still be pending when bar.sync 0, 128 "
        "(line 512) lets the threads rewrite it; N is not set against the two buffers")),
    xfail_case("c9_pp_noturn", [10], "line 411", reason=(
        "without turn barriers warpgroup 1's ring state is advanced 16 times (n_k) before its first wait, "
        "`mbarrier.try_wait.parity [%r27], %r125` (line 411) with %r125 = 0 (line 328): parity 0 on full[0] "
        "is meant for the stage's 5th fill and passes after the 1st (warpgroup 0's k-block 0), whose parity "
        "is the same: a wait four phases ahead is not derived. Flag 2 is raised instead, with a false claim "
        "(the test below)")),
]


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_raises_no_evidence_flag(name):
    assert evidence_flags(ptx_sheet(name)) == []


@pytest.mark.parametrize("name, codes, piece", PLANTED)
def test_each_planted_bug_raises_its_own_flag(name, codes, piece):
    assert_planted(name, codes, piece)


@pytest.mark.xfail(strict=True, reason=(
    "flag 2 (evidence): empty[] at +{32,40,48,56}, init count 4 (line 76), is said to get 8 arrivals a "
    "phase (line 496). Each stage's phase is consumed and released by ONE warpgroup: the other skips those "
    "k-blocks (its ring state advances n_k per foreign tile), so lane 0 of that warpgroup's 4 warps is 4 "
    "arrivals, as initialized; without the turn barriers the sheet sums both warpgroups"))
def test_alternating_warpgroups_without_turns_raise_no_false_count_flag():
    """c9_pp_noturn's defect is a phase alias (the strict xfail above), not its empty[] count."""
    assert not [f for f in evidence_flags(ptx_sheet("c9_pp_noturn")) if f.code == 2]


ROLES = {
    "c9_unroll": ["producer (warp 0): TMA load", "idle (warps 1-3)",
                  "consumer (warps 4-11): MMA issue (wgmma), global stores"],
    # warp 0 is an epilogue warp that also allocates the tensor memory
    "c9_tcring": ["tensor-memory owner (warp 0)", "producer (warp 4): TMA load", "consumer (warp 5): MMA issue (tcgen05)",
                  "epilogue (warp 6): TMA store", "epilogue (warps 0-3): tensor-memory load"],
    "c9_tcself": ["tensor-memory owner (warp 0)", "producer (warp 4): TMA load", "consumer (warp 5): MMA issue (tcgen05)",
                  "epilogue (warps 0-3): tensor-memory load, TMA store"],
    "g9_ring": ["epilogue (warps 0-3): tensor-memory load", "epilogue (warp 6): TMA store", "producer (warp 4): TMA load",
                "idle (warp 7)", "consumer (warp 5): MMA issue (tcgen05)"],
    "g9_sub": ["epilogue (warps 0-3): tensor-memory load, TMA store", "idle (warps 4-5)", "producer (warp 6): TMA load",
               "consumer (warp 7): MMA issue (tcgen05)"],
    "g9_unroll": ["epilogue (warps 0-3): tensor-memory load, TMA store", "idle (warps 4-5)",
                  "producer (warp 6): TMA load", "consumer (warp 7): MMA issue (tcgen05)"],
}

# the consumers store C themselves (st.shared, bar.sync 1, 256); the elected lane of warp 4 issues
# their TMA store: the consumers' epilogue, not a role of its own
_COOP = ["producer (warp 0): TMA load", "idle (warps 1-3)", "consumer (warps 4-11): MMA issue (wgmma), TMA store"]
ROLES.update({"c9_db": _COOP, "c9_db1": _COOP})

ROLES_MISSED = [
    xfail_case("c9_pp", ["producer (warp 0): TMA load", "idle (warps 1-3)",
                         "consumer (warps 4-7): MMA issue (wgmma), TMA store",
                         "consumer (warps 8-11): MMA issue (wgmma), TMA store"], reason=(
        "the two warpgroups take alternate tiles (turn mbarriers +64 / +72, named barriers 1 and 2, staging "
        "buffers +99328 / +132096) and run the same code: one role, 'consumer (warps 4-11)'")),
]


@pytest.mark.parametrize("name, want", [_case(n, w) for n, w in sorted(ROLES.items())] + ROLES_MISSED)
def test_each_partition_is_named_with_its_warps_and_job(name, want):
    """The READMEs' partition tables: every partition by its warps and by what it issues (the
    elect.sync note left out)."""
    texts = [r.text for r in ptx_sheet(name).roles if not r.text.startswith("elect.sync")]
    assert [w for w in want if not any(t.startswith(w) for t in texts)] == [], texts
    assert len(texts) == len(want), texts
