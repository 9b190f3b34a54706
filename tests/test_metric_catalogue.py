"""Every metric wsperf requests or reads exists on every architecture it claims to support.

The reference is ncu's own catalogue of each chip (`ncu --query-metrics --chip CHIP`,
fixtures/metrics/, PROVENANCE.md there), read without the chip: no Blackwell GPU was
used. Names the catalogue does not list (launch and device attributes, SASS-instrumented
and PC-sampling metrics, section-computed ones) are checked against the `.section` files
of the same ncu (their MinArch/MaxArch filters), and on Hopper against real H200 reports.
What none of that can prove on Blackwell is listed in UNVERIFIED_ON_BLACKWELL, and the
test fails when an entry there turns out provable, or a name outside it is unprovable.
"""

from __future__ import annotations

import csv
import gzip
import re
import tarfile
from functools import cache

import ncu_report
import pytest

from support import ROOT
from wsperf.collectors import metrics
from wsperf.collectors.collect import NCU_METRICS, ncu_profile_args
from wsperf.collectors.ncu import load_report
from wsperf.collectors.store import open_store

CATALOGUES = ROOT / "fixtures" / "metrics"
# Real H200 reports: collect's own section set, and a --set full one.
H200_REPORTS = (ROOT / "fixtures" / "compare" / "cmp_healthy_a.ncu-rep.gz",
                ROOT / "fixtures" / "reports" / "gemm_wgmma_tma.ncu-rep")
BLACKWELL = ("sm_100", "sm_120")
# A metric name as code writes it; one ending in '_' is a prefix (a family of names).
_NAME = re.compile(r"\b[a-z][a-z0-9]*__[a-z0-9_]+(?:\.[a-z0-9_]+)*")
# Code that names metrics directly. collectors/metrics.py is the mapping, checked figure by
# figure below (its docstring names Blackwell-only counters on purpose).
SCANNED = (sorted((ROOT / "queries").glob("*.sql")) + sorted((ROOT / "analyses").glob("*.py"))
           + [ROOT / "collectors" / "collect.py", ROOT / "collectors" / "ncu.py", ROOT / "collectors" / "ncu_reader.py"])

# Names no catalogue or section lists for sm_100/sm_120: ncu records launch and device
# attributes and timestamps for every profiled launch, and computes the SASS-patched and
# PC-sampling instances itself. Each was seen in the H200 reports; on Blackwell each waits
# for a real report (docs/blackwell.md).
UNVERIFIED_ON_BLACKWELL = {
    "device__attribute_compute_capability_major": "device attribute",
    "device__attribute_compute_capability_minor": "device attribute",
    "device__attribute_multiprocessor_count": "device attribute",
    "device__attribute_display_name": "device attribute",
    "launch__block_dim_x": "launch attribute", "launch__block_dim_y": "launch attribute",
    "launch__block_dim_z": "launch attribute",
    "launch__cluster_dim_x": "launch attribute", "launch__cluster_dim_y": "launch attribute",
    "launch__cluster_dim_z": "launch attribute",
    "launch__device_id": "launch attribute", "launch__stream_id": "launch attribute",
    "launch__function_pcs": "launch attribute (function start addresses)",
    "launch__grid_dim_x": "launch attribute", "launch__grid_dim_y": "launch attribute",
    "launch__grid_dim_z": "launch attribute",
    "profiler__timestamp_workload_start_": "timestamp",
    "sass__thread_inst_executed_true_per_opcode": "SASS-patched, per opcode instance",
}
# Names the code matches with startswith (ncu numbers them: profiler__timestamp_workload_start_0).
USED_AS_PREFIX = {"profiler__timestamp_workload_start"}


def _cc(arch: str) -> int:
    return int(arch.removeprefix("sm_"))


@cache
def catalogue(chip: str) -> frozenset[str]:
    """Every metric name ncu lists for `chip`, rollups and submetrics included."""
    with gzip.open(CATALOGUES / f"{chip}.all-names.txt.gz", "rt") as f:
        return frozenset(line.strip() for line in f if line.strip())


@cache
def descriptions(chip: str) -> dict[str, str]:
    with gzip.open(CATALOGUES / f"{chip}.base.csv.gz", "rt", newline="") as f:
        return {r["Metric name"]: r["Metric description"] for r in csv.DictReader(f)}


# --- the .section files: protobuf text format, parsed into nested (key, value) lists ---

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|#[^\n]*|[{}:,]|[^\s{}:,"#]+')


def _parse(tokens: list[str], i: int = 0) -> tuple[list, int]:
    node: list = []
    while i < len(tokens):
        key = tokens[i]
        if key == "}":
            return node, i + 1
        i += 1
        if tokens[i] == ":":
            i += 1
        if tokens[i] == "{":
            child, i = _parse(tokens, i + 1)
            node.append((key, child))
        else:
            node.append((key, tokens[i].strip('"')))
            i += 1
        if i < len(tokens) and tokens[i] == ",":
            i += 1
    return node, i


def _admits(flt: list, cc: int) -> bool:
    """A section Filter: MinArch/MaxArch (CC_90, CC_100, ...), or Items of them, any one."""
    lo = [int(v.removeprefix("CC_")) for k, v in flt if k == "MinArch"]
    hi = [int(v.removeprefix("CC_")) for k, v in flt if k == "MaxArch"]
    items = [v for k, v in flt if k == "Items"]
    return (all(cc >= x for x in lo) and all(cc <= x for x in hi)
            and (not items or any(_admits(it, cc) for it in items)))


@cache
def section_names() -> dict[str, list[tuple[list, list]]]:
    """metric name -> [(its block's own Filters, the section's top-level Filters)]."""
    out: dict[str, list[tuple[list, list]]] = {}
    with tarfile.open(CATALOGUES / "sections.tar.gz") as tar:
        for m in tar.getmembers():
            text = tar.extractfile(m).read().decode()
            tokens = [t for t in _TOKEN.findall(text) if not t.startswith("#")]
            root, _ = _parse(tokens)
            top = [v for k, v in root if k == "Filter"]

            def walk(node: list) -> None:
                for k, v in node:
                    if k == "Name" and isinstance(v, str):
                        out.setdefault(v, []).append(([f for kk, f in node if kk == "Filter"], top))
                    elif isinstance(v, list):
                        walk(v)
            walk(root)
    return out


def in_sections(name: str, arch: str) -> bool:
    """A section collects `name` (or a name of the family `name_`) on `arch`."""
    cc = _cc(arch)
    return any((n == name or (name.endswith("_") and n.startswith(name)))
               and all(_admits(f, cc) for f in own + top)
               for n, uses in section_names().items() for own, top in uses)


@pytest.fixture(scope="module")
def h200_names(tmp_path_factory) -> frozenset[str]:
    """Every metric name the real H200 reports hold, as NVIDIA's reader lists them."""
    names: set[str] = set()
    for r in H200_REPORTS:
        if r.suffix == ".gz":
            plain = tmp_path_factory.mktemp("h200") / r.stem
            plain.write_bytes(gzip.decompress(r.read_bytes()))
            r = plain
        ctx = ncu_report.load_report(str(r))
        for i in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(i)
            for j in range(rng.num_actions()):
                a = rng.action_by_idx(j)
                assert a.metric_by_name("device__attribute_compute_capability_major").as_uint64() == 9
                names |= set(a.metric_names())
    return frozenset(names)


def in_catalogue(name: str, arch: str) -> bool:
    cat = catalogue(metrics.CHIPS[arch])
    return name in cat or (name.endswith("_") and any(n.startswith(name) for n in cat))


def provable(name: str, arch: str, h200: frozenset[str]) -> bool:
    """The catalogue lists it, a section collects it on this arch, or (Hopper) a real
    H200 report holds it."""
    if in_catalogue(name, arch) or in_sections(name, arch):
        return True
    return arch == "sm_90" and (name in h200 or (name.endswith("_") and any(n.startswith(name) for n in h200)))


def scanned_names() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in SCANNED:
        for n in _NAME.findall(p.read_text(encoding="utf-8")):
            n = n + "_" if n in USED_AS_PREFIX else n
            out.setdefault(n, set()).add(str(p.relative_to(ROOT)))
    return out


def test_every_supported_architecture_has_its_catalogue():
    for arch, chip in metrics.CHIPS.items():
        assert len(catalogue(chip)) > 100_000, chip
        assert len(descriptions(chip)) > 3000, chip
    assert {"gh100", "gb100", "gb202"} <= set((CATALOGUES / "list-chips.txt").read_text().replace(",", " ").split())
    assert "ncu --query-metrics --chip" in (CATALOGUES / "PROVENANCE.md").read_text()


def test_the_catalogue_test_can_fail():
    """The checks below reject what the catalogues say is absent."""
    assert not in_catalogue("sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm_90")
    assert not in_catalogue("sm__mem_tensor_cycles_active.avg", "sm_120")
    assert not in_catalogue("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsd", "sm_100")
    assert in_catalogue("sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm_100")
    # Hopper's tensor-pipe counter is listed for sm_100 as well ("tensor pipe", all MMA kinds).
    assert in_catalogue("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm_100")
    # Section filters: the instruction-cache-miss stall is sampled up to CC 9.0 only.
    assert in_sections("smsp__pcsamp_warps_issue_stalled_imc_miss", "sm_90")
    assert not in_sections("smsp__pcsamp_warps_issue_stalled_imc_miss", "sm_100")


def test_every_mapped_metric_exists_on_its_architecture(h200_names):
    missing, unverified = [], set()
    for f in metrics.FIGURES:
        for arch, name in f.metrics.items():
            if provable(name, arch, h200_names):
                continue
            if arch in BLACKWELL and name in UNVERIFIED_ON_BLACKWELL:
                unverified.add(name)
                continue
            missing.append((f.name, arch, name))
    assert not missing, f"mapped to a metric the catalogue of that chip lacks: {missing}"


def test_collect_requests_only_names_of_the_gpu_it_runs_on(h200_names):
    assert NCU_METRICS == metrics.ncu_metrics("sm_90")
    for arch in metrics.CHIPS:
        names = metrics.ncu_metrics(arch)
        assert ",".join(names) == ncu_profile_args(arch)[-1]
        assert [n for n in names if not provable(n, arch, h200_names)] == [], arch
    # tcgen05 figures are requested on sm_100 only; an unmapped GPU gets the shared names.
    assert "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed" in metrics.ncu_metrics("sm_100")
    assert not [n for n in metrics.ncu_metrics("sm_90") + metrics.ncu_metrics("sm_120") if "_tc_" in n or "tmem" in n]
    assert metrics.ncu_metrics("sm_80") == metrics.ncu_metrics("sm_90", "sm_100", "sm_120")


def test_every_metric_the_code_names_exists_on_every_supported_architecture(h200_names):
    """collect, ncu's loader, the hypotheses and the analyses name metrics whatever the GPU:
    each must exist on every supported chip (an arch-specific one belongs in the mapping)."""
    names = scanned_names()
    assert "gpu__time_duration.sum" in names and "smsp__pcsamp_warps_issue_stalled_" in names
    missing = []
    for name, where in sorted(names.items()):
        for arch in metrics.CHIPS:
            if provable(name, arch, h200_names):
                continue
            if arch in BLACKWELL and name in UNVERIFIED_ON_BLACKWELL:
                continue
            missing.append((name, arch, sorted(where)))
    assert not missing, f"names absent from a supported chip's catalogue: {missing}"


def test_the_unverified_list_is_exact(h200_names):
    """Every entry is named by wsperf, seen in an H200 report, and not provable on Blackwell
    from ncu's files; a stale entry fails."""
    used = set(scanned_names()) | {n for f in metrics.FIGURES for n in f.metrics.values()}
    for name in UNVERIFIED_ON_BLACKWELL:
        assert name in used, name
        assert provable(name, "sm_90", h200_names), name
        assert not any(provable(name, a, h200_names) for a in BLACKWELL), name


def test_stall_reasons_named_in_the_queries_exist_on_every_architecture():
    """A reason the SQL names must be a PC-sampling reason ncu's SourceCounters section
    collects on the chip, and a warp-state counter its catalogue lists (the sampled reasons
    themselves are not in the catalogue)."""
    reasons = set()
    for p in SCANNED:
        text = p.read_text(encoding="utf-8")
        reasons |= set(re.findall(r"reason\s*=\s*'(\w+)'", text))
        for group in re.findall(r"reason\s+IN\s*\(([^)]*)\)", text):
            reasons |= set(re.findall(r"'(\w+)'", group))
    assert "long_scoreboard" in reasons
    for r in sorted(reasons):
        for arch, chip in metrics.CHIPS.items():
            assert in_sections(f"smsp__pcsamp_warps_issue_stalled_{r}", arch), (r, arch)
            assert f"smsp__warps_issue_stalled_{r}" in descriptions(chip), (r, chip)


def test_the_opcodes_the_catalogue_names_are_in_wsperfs_instruction_families():
    """The per-pipe counters' descriptions name the SASS opcodes they count (gb100: the TC
    pipe counts UTCBAR/UTCCP/UTCSHIFT/UTCMMA, the hmma subpipe UTCHMMA/UTCQMMA/UTCOMMA;
    gh100: HGMMA/QGMMA/IGMMA/BGMMA). Each must fall in the family wsperf gives that path
    (the instruction_families view), so `sass__inst_executed_per_opcode` instances of those
    names land in tcgen05 / wgmma."""
    schema = (ROOT / "queries" / "schema.sql").read_text()
    patterns = {fam: [p for p, f in re.findall(r"\('([^']+)', '([^']+)', '\w+'\)", schema) if f == fam]
                for fam in ("tcgen05", "wgmma")}
    named = {
        "tcgen05": {op for d in descriptions("gb100").values() for op in re.findall(r"\bUTC[A-Z]+\b", d)},
        "wgmma": {op for d in descriptions("gh100").values() for op in re.findall(r"\b[A-Z]GMMA\b", d)},
    }
    assert {"UTCBAR", "UTCCP", "UTCSHIFT", "UTCMMA", "UTCHMMA", "UTCQMMA", "UTCOMMA"} <= named["tcgen05"]
    assert {"HGMMA", "QGMMA", "IGMMA", "BGMMA"} <= named["wgmma"]
    for fam, ops in named.items():
        for op in sorted(ops):
            assert any(re.fullmatch(p, op) for p in patterns[fam]), (op, fam)
    # No catalogue of a chip without tcgen05 names UTC opcodes.
    for chip in ("gh100", "gb202"):
        assert not [d for d in descriptions(chip).values() if re.search(r"\bUTC[A-Z]*MMA\b", d)], chip


def test_blackwell_only_figures_are_no_data_on_hopper_with_a_reason():
    """On a real H200 report the tcgen05 figures are NULL with the reason, never an error;
    the shared ones carry the report's values."""
    con = open_store(None)
    load_report(con, H200_REPORTS[0])
    rows = {f: (v, why) for f, v, why in con.execute(
        "SELECT figure, value, no_data FROM figures WHERE launch_id = 1").fetchall()}
    con.close()
    assert set(rows) == set(metrics.BY_NAME)
    for f in ("tc_pipe_pct", "tc_pipe_instructions", "tmem_pct", "tmem_instructions"):
        value, why = rows[f]
        assert value is None and why.startswith("no tcgen05 on sm_90"), (f, why)
    assert rows["dram_throughput_pct"][0] > 0 and rows["dram_throughput_pct"][1] is None
    # In --set full only: the report (collect's set) does not hold it, and says so.
    assert rows["tensor_pipe_pct"][0] is None and "report holds no" in rows["tensor_pipe_pct"][1]


def test_the_mapping_rows_cover_every_figure_on_every_arch():
    rows = metrics.mapping_rows()
    assert len(rows) == len(metrics.FIGURES) * (len(metrics.CHIPS) + 1)
    for figure, arch, metric, absent in rows:
        assert (metric is None) != (absent is None), (figure, arch)
    assert dict(((f, a), m) for f, a, m, _ in rows)[("tc_pipe_pct", "*")] is None
