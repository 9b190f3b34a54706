"""Checks one bundle of scripts/gpu-evidence.sh against what its fixture is built to show,
from the bundle and `wsperf analyze BUNDLE --format json`. Prints one line: what was
found, starting with FAIL when a check fails."""

from __future__ import annotations

import json
import sys
from pathlib import Path


# `wsperf collect` on a Triton or Gluon repro, all four tools and the profile: at most this
# many seconds on the H200 (the 4096^3 two-launch TMA matmul is row `triton`, run alone).
TIME_TARGET_S = 180


def main(name: str, bundle: Path, analyze_json: Path, seconds: float | None = None) -> str:
    manifest = json.loads((bundle / "bundle.json").read_text())
    try:
        doc = json.loads(analyze_json.read_text() or "null")
    except ValueError:
        doc = None
    runs = manifest["runs"]
    gen = sorted(k for r in runs if r["phase"] == "generated" for k in r["outputs"])
    san = {r["tool"]: ("timed out" if r["timed_out"] else f"{r['seconds']:.0f}s") for r in runs
           if r["phase"] == "sanitizer"}
    fails: list[str] = []
    # analyze's caveats are objects ({"kind", "text", ...}); their texts and kinds
    caveat_objs = [c if isinstance(c, dict) else {"kind": None, "text": str(c)} for c in (doc or {}).get("caveats", [])]
    texts = [str(c.get("text") or "") for c in caveat_objs]
    scope = manifest.get("scope") or {}
    attempts = [r["tool"] for r in runs if r["phase"] == "sanitizer-attempt"]
    seen: list[str] = [f"sanitizer {san}", f"scope {scope.get('mode')} {scope.get('kernels') or scope.get('pattern')}"
                       + (f" (retried: {attempts})" if attempts else ""), f"generated {len(gen)}"]
    if not (bundle / "REPORT.md").is_file():
        fails.append("no REPORT.md")
    if name in ("deadlock_nolines", "gluon_count2_nolines", "gluon_phase_nolines"):
        # no .loc in the PTX: the cause still named, with how the wait was joined to it; since
        # the barriers are read live during the hang, that read (evidence) comes first
        causes = (doc or {}).get("causes", [])
        first = causes[0] if causes else {}
        want = {"deadlock_nolines": "init with 32", "gluon_count2_nolines": "count 2"}.get(name, "parity")
        named = [c for c in causes if want in str(c.get("text")) and "joined" in str(c.get("text"))]
        seen.append(f"first cause [{first.get('basis')}]: {str(first.get('text'))[:200]}; named "
                    f"[{named[0].get('basis') if named else None}]")
        if (bundle / "hang" / "mbarriers.txt").is_file() and first.get("basis") != "evidence":
            fails.append("the barriers were read live and the first cause is not evidence")
        if not (bundle / "hang" / "mbarriers.txt").is_file() and first not in named:
            fails.append(f"the first cause does not name {want!r} with its join")
        if not named:
            fails.append(f"no cause names {want!r} with its join")
    elif name in ("gluon_count2", "gluon_phase"):
        causes = (doc or {}).get("causes", [])
        first = causes[0] if causes else {}
        want = "count 2" if name == "gluon_count2" else "parity"
        sass = [r for r in runs if r["phase"] == "hang" and r["tool"] == "cuobjdump"]
        seen.append(f"outcome {manifest.get('outcome')}; jit sass runs {len(sass)}; first cause "
                    f"{first.get('basis')}: {str(first.get('text'))[:160]}")
        if first.get("basis") != "evidence" or not any(
                want in str(c.get("text")) and c.get("basis") == "evidence" for c in causes):
            fails.append(f"the first cause is not evidence, or no evidence names the {want}")
        live = [c for c in causes if str(c.get("text", "")).startswith("live state")]
        seen.append(f"live states {len(live)}: {[str(c.get('text'))[:220] for c in live]}")
        if not (bundle / "hang" / "mbarriers.txt").is_file() or not live:
            fails.append("no live barrier state read during the hang")
        # each hung warp's wait read from its registers: the producer's wrong first parity
        waits = [str(c.get("text")) for c in causes if "read from their registers" in str(c.get("text"))]
        seen.append(f"live waits {[w[:160] for w in waits]}")
        if not waits or (name == "gluon_phase" and not any("the wrong parity is this wait's" in w for w in waits)):
            fails.append("no live wait read from the warps' registers (or, for the phase bug, not named)")
    elif name in ("triton_split", "triton_split_ok"):
        causes = (doc or {}).get("causes", [])
        seen.append(f"outcome {manifest.get('outcome')}; causes "
                    f"{[(c.get('basis'), str(c.get('text'))[:160]) for c in causes[:3]]}")
        # both builds answer right on the H200: the split copy is two elected lanes' boxes
        if manifest.get("outcome") != "clean":
            fails.append("a correct build was not clean")
    elif name in ("bulk_missing_tx", "bulk_collective"):
        # deadlocks of a bulk-copy ring whose barriers are static shared variables: their
        # words read live, at the addresses of the PTX's shared layout
        causes = (doc or {}).get("causes", [])
        first = causes[0] if causes else {}
        live = [c for c in causes if str(c.get("text", "")).startswith("live state")]
        seen.append(f"first cause [{first.get('basis')}]: {str(first.get('text'))[:200]}; live states "
                    f"{[str(c.get('text'))[:220] for c in live]}")
        if not (bundle / "hang" / "mbarriers.txt").is_file() or not live:
            fails.append("no live barrier state read during the hang")
    elif name in ("deadlock_ptx", "phase_source"):
        causes = (doc or {}).get("causes", [])
        first = causes[0] if causes else {}
        seen.append(f"first cause [{first.get('basis')}]: {first.get('text', '')[:160]}")
        want = "init with 32" if name == "deadlock_ptx" else "parity"
        # the live state of the barriers leads when it was read; the worksheet's cause follows
        if first.get("basis") != "evidence" or not any(
                want in str(c.get("text")) and c.get("basis") == "evidence" for c in causes):
            fails.append(f"the first cause is not evidence, or no evidence names {want!r}")
        roles = {g.get("role_basis") for g in (doc or {}).get("groups", [])}
        if roles != {"evidence"}:
            fails.append(f"role bases {roles}")
        live = [c for c in causes if str(c.get("text", "")).startswith("live state")]
        seen.append(f"live states {[str(c.get('text'))[:220] for c in live]}")
        if not live:
            fails.append("no live barrier state (static shared barriers)")
        if name == "deadlock_ptx" and not any("read from their registers" in str(c.get("text")) for c in causes):
            fails.append("no live wait read from the warps' registers")
    elif name.startswith("release_"):
        rel = sorted({r["release"] for r in (doc or {}).get("releases", [])})
        caveats = texts
        seen.append(f"releases {rel}; caveats {[c[:80] for c in caveats]}")
        want = {"release_warp_synced": "warp-synced-single-lane-release",
                "release_unsynced": "unsynced-single-lane-release",
                # no PTX: the converged __syncwarp() is a NOP in the SASS, which cannot tell it from padding
                "release_warp_synced_sass": "single-lane-release-unsure",
                "release_unsynced_sass": "unsynced-single-lane-release"}.get(name)
        if want and want not in rel:
            fails.append(f"no {want}")
        if name == "release_warp_synced_accepted" and not any("accepted" in c for c in caveats):
            fails.append("no acceptance caveat")
    elif name == "triton":
        if sorted(san) != ["initcheck", "memcheck", "racecheck", "synccheck"] or "timed out" in san.values():
            fails.append("not every sanitizer tool finished")
        if scope.get("mode") != "user-kernels" or scope.get("kernels") != ["matmul_tma"]:
            fails.append("the sanitizer was not scoped to the repro's own kernel")
        if seconds is not None and seconds > TIME_TARGET_S:
            fails.append(f"collect took {seconds:.0f} s, over the {TIME_TARGET_S} s target")
        if not (bundle / "profile" / "report.ncu-rep").is_file():
            fails.append("no profile")
        if not any(k.startswith("ptx:") for k in gen) or not any(k.startswith("ttgir:") for k in gen):
            fails.append("Triton's .ptx/.ttgir not kept")
        ks = [k.get("name") for k in (doc or {}).get("kernels", [])]
        seen.append(f"kernels {ks[:4]}")
    elif name == "triton_ws_race":
        # a wrong answer (the repro's own check, exit 1) stops it; racecheck's partition-table
        # records are Triton's protocol, a caveat beside it
        bad = [r.get("tool") for r in (doc or {}).get("sanitizer_runs", []) if r.get("errors")]
        proto = (doc or {}).get("toolchain_protocol", [])
        seen.append(f"outcome {manifest.get('outcome')}; errors from {bad}; toolchain-protocol {len(proto)}; "
                    f"generated {[k.split(':')[0] for k in gen][:6]}")
        if manifest.get("outcome") != "correctness" or "repro" not in bad:
            fails.append("the repro's wrong answer is not the correctness outcome")
        if not any(k.startswith("ttgir:") for k in gen):
            fails.append("Triton's .ttgir not kept")
    elif name in ("gluon_ws_rowsum", "triton_ws4"):
        # correct warp-specialized kernels: clean, racecheck's partition-table records a caveat
        caveats = texts
        proto = [c.get("text") for c in caveat_objs if c.get("kind") == "toolchain-protocol"
                 or str(c.get("text")).startswith("toolchain-protocol")]
        kernels = (doc or {}).get("kernels", [])
        seen.append(f"outcome {manifest.get('outcome')}; toolchain-protocol caveats {len(proto)}; "
                    f"verdict launches {len(kernels)}; other caveats {[c[:80] for c in caveats if c not in proto]}")
        if manifest.get("outcome") != "clean":
            fails.append("a correct kernel was not clean")
        if name == "gluon_ws_rowsum" and not kernels:
            fails.append("no verdicts for the profiled kernel")
    elif name in ("gluon_3part", "gluon_3part_slow"):
        # three partitions, correct: clean, profiled, each partition named with its job
        caveats = texts
        kernels = [k for k in (doc or {}).get("kernels", []) if k.get("name") == "gluon_ws_3part"]
        parts = {p.get("partition"): p.get("job") for k in kernels for p in k.get("partitions") or []}
        seen.append(f"outcome {manifest.get('outcome')}; partitions {parts}; verdicts "
                    f"{[(f.get('id'), f.get('status')) for k in kernels for f in k.get('findings', [])]}")
        if manifest.get("outcome") != "clean":
            fails.append("a correct kernel was not clean")
        if not kernels or not any("TMA store" in str(j) for j in parts.values()) \
                or not any("TMA load" in str(j) for j in parts.values()):
            fails.append("the TMA load and TMA store partitions are not named")
    elif name == "triton_plain_desc":
        caveats = texts
        seen.append(f"outcome {manifest.get('outcome')}; caveats {[c[:120] for c in caveats]}")
        if manifest.get("outcome") != "clean" or not any("atomic exchange" in c for c in caveats):
            fails.append("not clean with the tensor-map exchanges set apart")
    elif name in ("torch_gluon", "torch_gluon_kernel"):
        # a PyTorch program around the Gluon kernel: scoped to it (racecheck, failing inside
        # itself under a filter there, is run again unscoped); clean with the scope as a caveat
        caveats = texts
        seen.append(f"outcome {manifest.get('outcome')}; caveats {[c[:110] for c in caveats]}")
        want = "user-kernels" if name == "torch_gluon" else "kernel"
        if manifest.get("outcome") != "clean":
            fails.append("the correct kernel in a PyTorch program was not clean")
        if scope.get("mode") != want:
            fails.append(f"scope {scope.get('mode')}, not {want}")
        if not any("compute-sanitizer checked" in c for c in caveats):
            fails.append("no caveat says what the sanitizer checked")
        if attempts and not any("the run that decides checked" in c for c in caveats):
            fails.append("a tool ran again under another scope and no caveat says what that run checked")
        # the measured fallback (scripts/gpu-filter-probe.sh): the Gluon kernel with the
        # libraries' kernels beside it decides, not a run of every kernel
        deciding = [r for r in runs if r["phase"] == "sanitizer" and r.get("tool") == "racecheck"]
        if attempts and name == "torch_gluon" and not any("kns=nvjet" in r.get("argv", []) for r in deciding):
            fails.append("racecheck's deciding run is not the user's kernel with the libraries' beside it")
        seen.append(f"attempts {attempts}")
    elif name == "gluon_early_release":
        # a real race on a ring stage: racecheck names only the partition table (a caveat),
        # but the repro's own check fails under the tools (right in its plain run): a stop
        bad = [r.get("tool") for r in (doc or {}).get("sanitizer_runs", []) if r.get("errors")]
        other = (doc or {}).get("other_errors", [])
        wrong = [r["tool"] for r in runs if r["phase"] == "sanitizer" and "under the tool" in r.get("note", "")]
        seen.append(f"outcome {manifest.get('outcome')}; errors from {bad}; wrong answers under {wrong}; "
                    f"{[o[:100] for o in other]}")
        if manifest.get("outcome") != "correctness" or not any("under compute-sanitizer" in o for o in other):
            fails.append("the race on the stage buffer did not stop the repro")
    elif name in ("torch_ext", "torch_ext_race"):
        # the repro's own kernel is a torch extension built in the bundle: scoped to it
        bad = [r.get("tool") for r in (doc or {}).get("sanitizer_runs", []) if r.get("errors")]
        seen.append(f"outcome {manifest.get('outcome')}; errors from {bad}; torch_ext listings "
                    f"{[k for k in gen if 'torch_ext/' in k]}")
        if scope.get("mode") != "user-kernels" or not any("block_rowsum" in k for k in scope.get("kernels") or []):
            fails.append("not scoped to the extension's kernel")
        want = "correctness" if name == "torch_ext_race" else "clean"
        if manifest.get("outcome") != want:
            fails.append(f"outcome {manifest.get('outcome')}, not {want}")
        if name == "torch_ext_race" and "racecheck" not in bad:
            fails.append("racecheck did not report the planted race")
        if name == "torch_ext" and not (bundle / "profile" / "report.ncu-rep").is_file():
            fails.append("no profile of the extension's kernel")
        if name == "torch_ext":
            tools = sorted(r["tool"] for r in runs if r["phase"] == "sanitizer")
            retried = [r["tool"] for r in runs if r["phase"] == "sanitizer-attempt"]
            seen.append(f"tools {tools}; initcheck retried unscoped: {'initcheck' in retried}")
            if tools != ["initcheck", "memcheck", "racecheck", "synccheck"]:
                fails.append(f"not all four tools ran: {tools}")
    elif name in ("tvm_block_sum", "tvm_block_sum_race", "cute_ring"):
        # a JIT module of TVM (kept by wsperf's sitecustomize) or CuTe DSL (its dump), inside
        # a PyTorch program for TVM: scoped to the repro's kernel, PyTorch's own not checked
        bad = [r.get("tool") for r in (doc or {}).get("sanitizer_runs", []) if r.get("errors")]
        prefix = "tvm/" if name.startswith("tvm") else "cute/"
        kernel = "tvm_block_sum_kernel" if name.startswith("tvm") else "kernel_cutlass_ring_kernel"
        seen.append(f"outcome {manifest.get('outcome')}; errors from {bad}; kept {[k for k in gen if prefix in k]}")
        if scope.get("mode") != "user-kernels" or not any(kernel in k for k in scope.get("kernels") or []):
            fails.append(f"not scoped to {kernel}")
        if not any(k.startswith("cubin:" + prefix) for k in gen) or not any(k.startswith("ptx:" + prefix) for k in gen):
            fails.append("the module's cubin or PTX was not kept")
        want = "correctness" if name.endswith("_race") else "clean"
        if manifest.get("outcome") != want:
            fails.append(f"outcome {manifest.get('outcome')}, not {want}")
        if name.endswith("_race") and "racecheck" not in bad:
            fails.append("racecheck did not report the planted race")
        if want == "clean":
            tools = sorted(r["tool"] for r in runs if r["phase"] == "sanitizer")
            seen.append(f"tools {tools}")
            if tools != ["initcheck", "memcheck", "racecheck", "synccheck"]:
                fails.append(f"not all four tools ran: {tools}")
            if not (bundle / "profile" / "report.ncu-rep").is_file():
                fails.append("no profile of the kernel")
    elif name in ("cute_ring_count", "cute_ring_phase"):
        # a CuTe DSL deadlock: the waits mapped with the cubin the DSL's dump kept
        causes = (doc or {}).get("causes", [])
        first = causes[0] if causes else {}
        want = "count" if name == "cute_ring_count" else "parity"
        sass = [r for r in runs if r["phase"] == "hang" and r["tool"] == "cuobjdump"]
        live = [c for c in causes if str(c.get("text", "")).startswith("live state")]
        seen.append(f"outcome {manifest.get('outcome')}; jit sass runs {len(sass)}; first cause "
                    f"{first.get('basis')}: {str(first.get('text'))[:200]}; live states "
                    f"{[str(c.get('text'))[:200] for c in live]}")
        if manifest.get("outcome") != "hang" or not sass:
            fails.append("not a hang mapped with the DSL's cubin")
        if not any(want in str(c.get("text")) and c.get("basis") == "evidence" for c in causes):
            fails.append(f"no evidence names the {want}")
    elif name.startswith("torch_"):
        caveats = texts
        seen.append(f"outcome {manifest.get('outcome')}; caveats {[c[:110] for c in caveats]}")
    return ("FAIL: " + "; ".join(fails) + " | " if fails else "") + "; ".join(seen)


if __name__ == "__main__":
    try:
        print(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else None))
    except Exception as e:  # a checker that cannot read the bundle is a failed row, not a pass
        print(f"FAIL: the check itself failed: {type(e).__name__}: {e}")
