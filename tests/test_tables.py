"""No table cuts the value a reader needs next: at 80 and 120 columns every command on the
bundled fixtures prints its values whole (wrapped between words, or stacked as
`header: value` when not even that fits), and names that fold alike keep what tells them
apart. Before cli/table.py, `compare` printed "regressi…" and "33,554,4…" at 80 columns and
`history` cut its run labels at 120."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import sqlite3
import tempfile

import pytest
from rich.console import Console

from support import PUBLIC, ROOT, wsperf
from wsperf.cli.render import distinct_names, fold_name
from wsperf.cli.table import Table

FIX = ROOT / "fixtures"
LABELS = ("main@110f7b3c9d2e:2026-12-01T10:00:00Z", "feature/very-long-branch-name@abcdef123456:2026-12-02T10:00:00Z")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("tables") / "runs.duckdb"
    for report, label in zip(("gemm_wgmma_tma.ncu-rep", "gemm_ffma.ncu-rep"), LABELS):
        p = wsperf("analyze", FIX / "reports" / report, "--db", db, "--label", label)
        assert p.returncode == 0, p.stderr
    return db


COMMANDS = {
    "analyze": ("analyze", FIX / "reports" / "gemm_wgmma_tma.ncu-rep"),
    "analyze-bundle": ("analyze", FIX / "evidence" / "gluon_count2"),
    "compare": ("compare", FIX / "compare" / "cmp_healthy_a.ncu-rep.gz", FIX / "compare" / "cmp_serialized.ncu-rep.gz"),
    "inspect": ("inspect", FIX / "cubins" / "gemm.sm_90a.cubin"),
    "doctor": ("doctor",),
    "nsys": ("nsys", PUBLIC / "nsys" / "cloverleaf_cuda_a100_nsys2024.5.sqlite.gz"),
}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", [*COMMANDS, "history"])
def test_no_value_is_cut(name, width, store, public_data):
    args = ("history", "--db", store) if name == "history" else COMMANDS[name]
    p = wsperf(*args, env={"COLUMNS": str(width)})
    assert p.returncode in (0, 1, 4), p.stderr
    out = p.stdout + p.stderr
    assert "\u2026" not in out, [line for line in out.splitlines() if "\u2026" in line][:5]
    if name == "compare":  # the values the old table cut at 80 columns, whole
        for v in ("regression", "33,554,432", "+619.8%"):
            assert v in out
    if name == "history":  # the identifiers `compare --db` takes, each on one line
        for label in LABELS:
            assert label in out


def _render(t: Table, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, highlight=False, color_system=None).print(t)
    return buf.getvalue()


@pytest.mark.parametrize("width", [30, 50, 80, 120, 200])
def test_every_cell_whole_at_any_width(width):
    """Words are never split: each single-word value appears whole at every width, whether
    Rich lays the table out, the columns are shared by their narrowest, or rows stack."""
    t = Table(title="figures")
    for c in ("figure", "base", "candidate", "verdict", "note"):
        t.add_column(c, no_wrap=c == "figure")
    rows = [("achieved_occupancy_pct", "22.2%", "22.9%", "unchanged", "significant but below the 5% threshold"),
            ("executed:ffma", "33,554,432", "33,554,432", "regression", "p = 0.00216 < 0.01, beyond 20%")]
    for r in rows:
        t.add_row(*r)
    out = _render(t, width)
    assert all(len(line) <= width for line in out.splitlines())
    words = {w for r in rows for cell in r for w in cell.split()}
    found = set(re.findall(r"[^\s│┃]+", out))
    assert words <= found, words - found


def test_stacked_only_when_nothing_else_fits():
    t = Table()
    for c in ("a", "b"):
        t.add_column(c)
    t.add_row("alpha-value", "beta-value")
    assert "┃" in _render(t, 40)  # fits as a table
    stacked = _render(t, 20)  # 11 + 10 + borders and padding is 28 > 20
    assert "┃" not in stacked and "alpha-value" in stacked and "b: beta-value" in stacked


def test_names_that_fold_alike_keep_what_tells_them_apart(public_data):
    """CloverLeaf's lambdas: one template, names identical once folded; the part that
    differs (the enclosing function, the lambda's instance) is kept."""
    with tempfile.NamedTemporaryFile(suffix=".sqlite") as tmp:
        with gzip.open(public_data / "nsys" / "cloverleaf_cuda_a100_nsys2024.5.sqlite.gz") as f:
            shutil.copyfileobj(f, tmp)
        tmp.flush()
        con = sqlite3.connect(tmp.name)
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName")]
        con.close()
    folded = [fold_name(n) for n in names]
    assert len(set(folded)) < len(names)  # the case: folding alone makes them identical
    shown = distinct_names(names)
    assert len(set(shown)) == len(names)
    assert all(len(s) < 160 for s in shown), max(shown, key=len)
    adv = [s for n, s in zip(names, shown) if "advec_mom_kernel" in n and "(instance 7)" in n]
    assert adv and all("advec_mom_kernel" in s and "instance 7" in s for s in adv)


def test_distinct_names_leaves_unique_names_alone():
    names = ["void gemm_ws<true>(const float *, float *, int)", "void gemm_ws<false>(const float *, float *, int)"]
    assert distinct_names(names) == names
    assert distinct_names([None]) == ["?"]


def test_hung_warps_are_grouped_by_block():
    """gluon_phase (a real H200 hang, 8 CTAs of 8 warps): each wait's warps read as block
    and warp ranges, not 32 items of 'block (x,y,z) warp w'."""
    p = wsperf("analyze", FIX / "evidence" / "gluon_phase", env={"COLUMNS": "120"})
    assert p.returncode == 4, p.stderr
    assert "blocks 0-7: warps 0-3 (32 warps)" in p.stdout and "blocks 0-7: warp 6 (8 warps)" in p.stdout
    assert "block (1,0,0) warp" not in p.stdout


def test_worksheet_titles_a_kernel_by_its_demangled_name():
    p = wsperf("worksheet", FIX / "ptx" / "gemm.ptx")
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.splitlines()[:2]
    assert first.startswith("gemm_ffma(") and "_Z9" not in first
    assert second.strip() == "symbol: _Z9gemm_ffmaPK13__nv_bfloat16S1_Pf"  # what --kernel and ncu match


def test_worksheet_titles_a_cutlass_kernel_by_its_folded_demangled_name():
    """CUTLASS's names nest past c++filt's default recursion limit: the title is still the
    demangled name, folded as `inspect` folds it; JSON keeps the whole symbol."""
    ptx = FIX / "ptx" / "cutlass_builder_gemm.ptx"
    p = wsperf("worksheet", ptx, env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("void cutlass::device_kernel<...>(cutlass::gemm::kernel::GemmUniversal<...>::Params)  (")
    (k,) = json.loads(wsperf("worksheet", ptx, "--format", "json").stdout)["kernels"]
    assert k["kernel"].startswith("_ZN7cutlass13device_kernel") and len(k["kernel"]) > 1000


@pytest.mark.parametrize("width", [80, 120])
def test_worksheet_wraps_at_columns_between_words(width):
    """With COLUMNS the text wraps under its item; piped without it, one item a line."""
    ptx = FIX / "ptx" / "gluon_ws_gemm.ptx"
    wide = wsperf("worksheet", ptx).stdout
    narrow = wsperf("worksheet", ptx, env={"COLUMNS": str(width)}).stdout
    assert max(map(len, wide.splitlines())) > width
    assert all(len(ln) <= width for ln in narrow.splitlines() if " " in ln.strip())
    assert wide.split() == narrow.split()  # the same words, in the same order: nothing cut


def test_piped_messages_are_not_wrapped(tmp_path):
    """A piped stderr (a CI log) keeps each message on one line, its path whole (it was
    wrapped at 80 columns, the path on a line of its own and split at its slashes)."""
    out_dir = tmp_path / "charts-in-a-directory-with-a-long-name" / "and-a-long-subdirectory-name" / "out"
    p = wsperf("analyze", FIX / "reports" / "gemm_ffma.ncu-rep", "--charts", out_dir)
    assert p.returncode == 0, p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if "charts" in ln]
    assert line.endswith(str(out_dir)) and len(line) > 80


def test_compare_of_an_export_with_itself_is_one_table(public_data):
    """CloverLeaf against itself: 102 kernels, nothing moved. They share one table (it was
    922 lines, a table and 'verdicts: no hypothesis changed' per kernel), and it says once
    that no hypothesis runs on Nsight Systems data."""
    x = public_data / "nsys" / "cloverleaf_cuda_a100_nsys2024.5.sqlite.gz"
    p = wsperf("compare", x, x)
    assert p.returncode == 0, p.stderr
    assert "102 kernels unchanged" in p.stdout and p.stdout.count("no hypothesis changed") == 0
    assert p.stdout.count("verdicts: none compared") == 1
    assert len(p.stdout.splitlines()) < 300
