"""Nsight Compute reports made by other people, on GPUs and kernels the project never
collected: Turing, Ampere and an H800, default and full section sets, ncu 2022.3-2024.1.
They are not part of the repository: they are read from ../shared/public/ncu beside the
clone, where ORIGIN.md says where each came from (repository, commit, licence, GPU, ncu
version) and licences/ holds their licences.

The first tests need no public report: each reproduces, on a committed fixture, the shape
a public report showed (a metric it lacks, a limit it reports) and pins what wsperf does
with it."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

import wsperf
from wsperf.analyses.hypotheses import evaluate
from wsperf.cli import render

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "fixtures" / "reports"
NAMES = ("cudaCode__profile", "cuda_learning_mojo__profile", "IndexSpaces.jl__profile",
         "cutlass__report-s8", "sglang__profile")
STATUSES = {"confirmed", "rejected", "no_data"}


def _too_few(con, launch_id: int):
    (f,) = [f for f in evaluate(con, [launch_id])[launch_id].findings if f.id == "too-few-active-ctas"]
    return f


# -- shapes seen in public reports, on committed fixtures -------------------------------

def test_sm_activity_without_sm_elapsed_cycles_reads_gpc_elapsed_cycles():
    # The A10G, A40, RTX 2080 Ti and H800 reports hold sm__cycles_active.avg but not
    # sm__cycles_elapsed.avg; SpeedOfLight's "Elapsed Cycles" is gpc__cycles_elapsed.max.
    # Without the stand-in every one of their launches said no_data here.
    with wsperf.load(REPORTS / "gemm_wgmma_tma_basic.ncu-rep") as s:
        before = _too_few(s.con, 1)
        s.con.execute("DELETE FROM metrics WHERE name = 'sm__cycles_elapsed.avg'")
        after = _too_few(s.con, 1)
    assert before.status.value == "rejected" and before.evidence["sm_active"] > 0.9
    assert after.status.value == "rejected", after.summary
    assert after.evidence["sm_active"] == pytest.approx(before.evidence["sm_active"], abs=0.02)


def test_occupancy_limit_tied_with_the_cta_slots_is_named_cta_slots():
    # saxpy uses no shared memory: ncu reports its shared-memory limit equal to the CTA
    # slot limit (32 and 32 on the H200; 16 and 16 in the RTX 2080 Ti report). With its
    # register and warp limits lifted (the RTX 2080 Ti kernel's 64-thread blocks: 64 and
    # 16), the slots bind, and shrinking shared memory would fit no more CTAs.
    with wsperf.load(REPORTS / "multi_launch.ncu-rep", kernel="^saxpy") as s:
        lid = s.results[0].summary.launch_id
        s.con.execute("UPDATE launches SET occupancy_limit_registers = 64, occupancy_limit_warps = 64 "
                      "WHERE launch_id = $id", {"id": lid})
        f = _too_few(s.con, lid)
    assert f.evidence["occupancy_limiter"] == "CTA slots", f.summary
    assert f.evidence["ctas_per_sm"] == 32


def test_many_identical_launches_read_as_ranges():
    # A report of 105 launches of one kernel (spyinfer, A10) listed 104 ids and 104
    # durations on one line.
    with wsperf.load(REPORTS / "multi_launch.ncu-rep", kernel="^saxpy") as s:
        first = s.results[0]
    others = tuple(dataclasses.replace(first, summary=dataclasses.replace(
        first.summary, launch_id=i, duration_ns=1000.0 * i)) for i in [*range(2, 12), 14])
    line = render.same_as_line(first, others)
    assert line.startswith("launches 2-11, 14: the same kernel"), line
    assert "(durations 2.0 us to 14.0 us)" in line, line
    few = render.same_as_line(first, others[:2])
    assert few.startswith("launches 2-3:") and "(duration 2.0 us, 3.0 us)" in few, few


# -- the public reports ------------------------------------------------------------------

@pytest.fixture(scope="module")
def public(public_data):
    ncu = public_data / "ncu"
    paths = [ncu / f"{n}.ncu-rep" for n in NAMES]
    missing = [p.name for p in paths if not p.is_file()]
    assert not missing, f"public reports absent from {ncu}: {missing} (see its ORIGIN.md)"
    with wsperf.load(paths) as s:
        yield s


def _launches(s, name: str):
    return [a for a in s.results if Path(a.summary.report).name == f"{name}.ncu-rep"]


def _status(a, hypothesis: str) -> str:
    (f,) = [f for f in a.findings if f.id == hypothesis]
    return f.status.value


def _finding(a, hypothesis: str):
    (f,) = [f for f in a.findings if f.id == hypothesis]
    return f


def test_every_public_launch_is_valid_json_without_nan(public):
    for name in NAMES:
        assert _launches(public, name), name
    for a in public.results:
        text = json.dumps(render.analysis_dict(a), allow_nan=False)  # NaN/Infinity raise here
        assert json.loads(text)["findings"]
        assert {f.status.value for f in a.findings} <= STATUSES


def test_text_and_markdown_of_public_reports_show_no_nan(public):
    out = io.StringIO()
    render.analyses_text(list(public.results), Console(file=out, width=200, color_system=None))
    for shown in (out.getvalue(), render.analyses_markdown(list(public.results))):
        words = set(shown.replace("|", " ").replace(",", " ").split())
        assert not words & {"nan", "NaN", "None", "inf"}, words & {"nan", "NaN", "None", "inf"}


def test_turing_default_sections_get_an_occupancy_verdict(public):
    # yzwang2000/cudaCode main.cu: kernel_A and kernel_C launch 256000 CTAs of 64 threads
    # and no shared memory on a 68-SM RTX 2080 Ti: every SM has work, and Turing's 16 CTA
    # slots, not shared memory, cap residency. The report has ncu's default sections only.
    launches = _launches(public, "cudaCode__profile")
    assert [a.summary.name for a in launches] == ["kernel_A", "kernel_C"]
    for a in launches:
        f = _finding(a, "too-few-active-ctas")
        assert f.status.value == "rejected" and f.evidence["occupancy_limiter"] == "CTA slots", f.summary
        assert _status(a, "producer-bound") == "no_data"  # no source counters collected


def test_single_cta_launches_are_too_few(public):
    # josiahls/cuda_learning_mojo chapter_3 simpleDivergence: grid (64 + 63) / 64 = 1 CTA of
    # 64 threads on a 24-SM GTX 1660 Ti.
    launches = _launches(public, "cuda_learning_mojo__profile")
    assert [a.summary.name for a in launches] == ["warmingUp", "mathKernel1", "mathKernel2", "mathKernel3"]
    for a in launches:
        f = _finding(a, "too-few-active-ctas")
        assert f.status.value == "confirmed" and f.summary.startswith("1 CTA for 24 SMs"), f.summary


def test_ampere_mma_sync_kernels_are_on_their_best_path(public):
    # eschnett/IndexSpaces.jl's FRB beamformer (julia_frb_*) and the CUTLASS 2.x GEMM of
    # panjd123/cutlass run mma.sync (HMMA/IMMA), the best tensor path an A40 or an A100
    # has, with no mbarrier and no warp roles: no missing instructions, never producer-bound.
    ampere = [a for a in _launches(public, "IndexSpaces.jl__profile") if a.summary.name.startswith("julia_frb")]
    ampere += [a for a in _launches(public, "cutlass__report-s8") if a.summary.name == "Kernel"]
    assert len(ampere) == 2
    for a in ampere:
        assert a.summary.families.tensor == "mma.sync"
        assert _status(a, "missing-specialized-instructions") == "rejected"
        assert a.warp_specialized is False and _status(a, "producer-bound") == "rejected"
    # The GEMM's 6x6 grid of 128x128 tiles leaves 72 of the A100's 108 SMs idle.
    (gemm,) = [a for a in ampere if a.summary.name == "Kernel"]
    assert _status(gemm, "too-few-active-ctas") == "confirmed"


def test_h800_launch_ncu_could_not_measure_has_no_verdict(public):
    # sglang's profile: ncu recorded flash_fwd_kernel with every counter NaN (no launch
    # statistics either). Each verdict is no_data and its figures null, never NaN; the
    # PyTorch RNG kernels before it (no tensor work, no mbarrier) get verdicts.
    launches = _launches(public, "sglang__profile")
    (flash,) = [a for a in launches if a.summary.name == "flash_fwd_kernel"]
    assert {f.status.value for f in flash.findings} == {"no_data"}
    assert flash.summary.duration_ns is None and flash.summary.grid == (None, None, None)
    rng = [a for a in launches if a.summary.name != "flash_fwd_kernel"]
    assert len(rng) == 4
    for a in rng:
        assert a.summary.families.tensor == "none" and _status(a, "producer-bound") == "rejected"
    # One of them is launched with 8 CTAs on the H800's 132 SMs.
    assert sorted(_status(a, "too-few-active-ctas") for a in rng) == ["confirmed", "rejected", "rejected", "rejected"]
