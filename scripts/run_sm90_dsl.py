#!/usr/bin/env python3
"""Run the correct sm_90a Gluon and Triton warp-specialized fixture kernels on an H200 and check
their results against torch.

    python3 scripts/run_sm90_dsl.py             # every kernel, each in its own subprocess (120 s limit)
    python3 scripts/run_sm90_dsl.py --list      # list the kernels (no GPU, no torch needed)
    python3 scripts/run_sm90_dsl.py --compile-only   # compile each fixture as its generator does (no GPU)
    python3 scripts/run_sm90_dsl.py --only NAME [--only NAME ...]

The kernels are imported from their generators (fixtures/src/gluon/*.py,
fixtures/src/gluon/round6/gen_h6.py, fixtures/src/gluon/round7/gen_pp7.py,
fixtures/src/triton_tma/ws_variety.py and sweep_ws.py); nothing of them is copied here.
Each kernel is run twice:

1. "fixture": the committed binary, fixtures/cubins/<name>.sm_90a.cubin. The kernel is compiled
   exactly as its generator compiles it (the generator's own compile, with its typed signature
   and options: for the Gluon generators their main() with `write` replaced by a collector,
   for gen_h6 `run_variants(VARIANTS, [name], gluon_src)` with common6's `write` replaced by one,
   for gen_pp7 the same with common7's `write` (common7 wraps common6's run_variants),
   `ws_variety.build(name)`, `sweep_ws.compile_variant(name)`); that compile supplies Triton's
   launcher, its metadata must match the committed .json, and the committed cubin replaces its
   binary before the first launch. `recompiled_ptx=same|differs` says whether the recompile's PTX
   (code only: before the `.file` lines, without `//` comments) equals fixtures/ptx/<name>.ptx;
   Triton 3.6's sm_90 warp-specialized compile is not deterministic (shared-memory offsets of
   the tws_h_* kernels change from run to run), hence the committed binary.
2. "jit": the usual launch, `kernel[grid](..., num_warps=...)`, with the generator's constexprs
   and num_warps (num_stages left at Triton's default, as in the generators); timed with
   triton.testing.do_bench (for the 512^3 shapes the time may include host launch overhead).

Outputs are filled with NaN before each launch, so a tile the kernel never stores fails the check.
One line per kernel: `PASS name max_abs_err=... time_us=... ...`, `FAIL name reason` or
`HANG name ...` (the subprocess ran past the limit and was killed); last `N passed, M failed`.
Exit status 0 only if every kernel passed.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ in fixtures/src
ROOT = Path(__file__).resolve().parents[1]
GLUON_DIR = ROOT / "fixtures" / "src" / "gluon"
ROUND6_DIR = GLUON_DIR / "round6"
ROUND7_DIR = GLUON_DIR / "round7"
TRITON_DIR = ROOT / "fixtures" / "src" / "triton_tma"
PTX_DIR = ROOT / "fixtures" / "ptx"
TIMEOUT_S = 120

# name -> (generator module, kernel attribute, what it computes)
KERNELS = {
    "gluon_two_cons": ("gluon_two_cons", "two_cons",
                       "C = A @ B (A MxK, B KxN, bf16 in, fp32 acc, bf16 out); 128x128 tile, two 64-row consumers"),
    "gluon_wide90": ("gluon_wide90", "wide90",
                     "C = A @ B (A MxK, B KxN, bf16); 128x256 tile, 8-warp consumer, loader + storer workers"),
    # not a fixture: gluon_wide90's 4 stages need 262348 bytes of shared memory, more than an sm_90 block
    # may have (232448), so the fixture cannot launch there; the same design with 2 stages, JIT only.
    "gluon_wide90_s2": ("gluon_wide90", "wide90",
                        "as gluon_wide90 with STAGES=2 (not a fixture: JIT only, no committed binary)"),
    "gluon_pvt_bias": ("gluon_pvt_bias", "pvt_bias",
                       "C = A @ B + bias (bias MxN bf16, added in fp32); bias barrier inited in the partition"),
    "gluon_reinit_bias": ("gluon_pvt_bias", "pvt_bias",
                          "C = A @ B + bias, the bias barrier is ready[0] re-initialized after the region"),
    "gluon_ws_wgmma_sm90": ("sweep_ws", "ws_wgmma_gemm",
                            "C = A @ B (A MxK, B KxN, bf16); 1-warp TMA loader, wgmma in the default warpgroup"),
    "gluon_ws_3part_sm90": ("sweep_ws", "ws_rowcenter",
                            "Y = X - rowmax(X) per 64x64 bf16 tile (X R x 64), persistent, loader/compute/storer"),
    "tws_h_128x256_sm90": ("ws_variety", "h_gemm",
                           "C = A @ B^T (A MxK, B NxK, bf16), persistent, device descriptors, 128x256x64"),
    "tws_h_fp8_sm90": ("ws_variety", "h_gemm",
                       "C = A @ B^T (fp8e4nv in, fp32 acc, bf16 out), persistent, device descriptors, 128x128x128"),
    "tws_h_kloop_w4_sm90": ("ws_variety", "h_gemm_kloop",
                            "C = A @ B^T (bf16), one tile per program, specialized K loop, 128x128x64"),
    "h6_dual": ("gen_h6", "dual90",
                "h = silu(A@B1) * (A@B2) (A MxK, B1/B2 KxN, bf16 in, fp32 acc, bf16 out), persistent, "
                "64x64x64, 3-stage ring, TMA-store warp fed by a 2-deep smem ring"),
    "h6_ksplit": ("gen_h6", "ksplit90",
                  "C = A @ B (A MxK, B KxN, bf16), one 64x128 tile per program, even/odd k-steps split "
                  "between two consumer warpgroups, partial sums added through smem"),
    "e7_pp": ("gen_pp7", "pp90",
              "C = A @ B (A MxK, B KxN, bf16 in, fp32 acc, bf16 out), persistent, 128x128x64, one 4-stage ring, "
              "two wgmma consumer warpgroups on alternate tiles, ordered by an mbarrier token ring (ping-pong)"),
}

# Shapes: tile multiples of each design. The persistent kernels (h_gemm, h6_dual, e7_pp) get more tiles than an
# H200 has SMs (132), so every program runs several tiles (its rings wrap across tiles).
SHAPES = {
    "gluon_two_cons": (512, 512, 512),
    "gluon_wide90": (512, 512, 512),
    "gluon_wide90_s2": (512, 512, 512),
    "gluon_pvt_bias": (512, 512, 512),
    "gluon_reinit_bias": (512, 512, 512),
    "gluon_ws_wgmma_sm90": (512, 512, 512),
    "gluon_ws_3part_sm90": (64 * 2048, 64, 0),   # 2048 tiles of 64 rows: ~16 per program on 132 SMs
    "tws_h_128x256_sm90": (4096, 4096, 512),   # 32 x 16 = 512 tiles
    "tws_h_fp8_sm90": (2048, 2048, 512),       # 16 x 16 = 256 tiles
    "tws_h_kloop_w4_sm90": (512, 512, 1024),
    "h6_dual": (2048, 2048, 512),     # 32 x 32 = 1024 tiles of 64x64: ~7.8 per program on 132 SMs
    "h6_ksplit": (512, 512, 1024),    # 8 x 4 programs; 16 k-steps, 8 per consumer: each of 4 stages used 4 times
    # 32 x 32 = 1024 tiles of 128x128 on 132 SMs: 100 programs run 8 tiles (4 per consumer), 32 run 7 (4 + 3);
    # 8 k-steps per tile on the 4-stage ring: it wraps twice per tile, the token ring 3-4 times per consumer
    "e7_pp": (4096, 4096, 512),
}

NOT_FIXTURES = {"gluon_wide90_s2"}

REL_TOL = 2e-2  # max |out - ref| <= REL_TOL * max |ref|  (bf16 output rounding is ~4e-3 relative)


def _paths():
    for d in (GLUON_DIR, TRITON_DIR, ROUND6_DIR, ROUND7_DIR):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))


def _import(modname):
    _paths()
    import importlib
    return importlib.import_module(modname)


# ---------------------------------------------------------------------------------------------
# the fixture compile, exactly as the generator does it

_GLUON_CACHE: dict = {}


def fixture_compile(name):
    modname, _, _ = KERNELS[name]
    mod = _import(modname)
    if modname == "ws_variety":
        return mod.build(name)
    if modname == "sweep_ws":
        return mod.compile_variant(name)
    if modname in ("gen_h6", "gen_pp7"):
        return _round6_compile(mod, name)
    if modname not in _GLUON_CACHE:
        got = {}
        orig = mod.write
        mod.write = lambda k, n, arch, out: got.__setitem__(n, k)  # collect instead of writing fixtures/
        argv = sys.argv
        sys.argv = [argv[0]]
        try:
            mod.main()
        finally:
            mod.write = orig
            sys.argv = argv
        _GLUON_CACHE[modname] = got
    return _GLUON_CACHE[modname][name]


def _round6_compile(mod, name):
    """`gen_h6.py NAME` / `gen_pp7.py NAME`: run_variants(VARIANTS, [NAME], gluon_src) with the `write` of the
    generator's common module (fixtures/ptx, the .ttgir, the cubin) replaced by a collector: common6's for
    gen_h6; common7's for gen_pp7 (common7.run_variants is common6's, its output going to common7's `write`,
    looked up at the call). run_variants points TRITON_CACHE_DIR at a fresh temporary directory for the
    compile; it is put back (and that directory removed) afterwards."""
    key = (mod.__name__, name)
    if key not in _GLUON_CACHE:
        common = sys.modules[mod.run_variants.__module__]  # common6 / common7: their run_variants call their write
        got = {}
        orig, cache = common.write, os.environ.get("TRITON_CACHE_DIR")
        common.write = lambda k, n, arch: got.__setitem__(n, k)  # collect instead of writing fixtures/
        try:
            mod.run_variants(mod.VARIANTS, [name], mod.gluon_src)
        finally:
            common.write = orig
            fresh = os.environ.get("TRITON_CACHE_DIR")
            if cache is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = cache
            if fresh and fresh != cache and Path(fresh).name.startswith("tc6_"):
                import shutil
                shutil.rmtree(fresh, ignore_errors=True)
        if name not in got:
            raise RuntimeError(f"{mod.__name__} did not compile {name} (its error is on stderr)")
        _GLUON_CACHE[key] = got[name]
    return _GLUON_CACHE[key]


CUBIN_DIR = ROOT / "fixtures" / "cubins"
_META_KEYS = ("name", "num_warps", "num_ctas", "shared", "global_scratch_size", "global_scratch_align",
              "tensordesc_meta", "launch_cooperative_grid", "launch_pdl")


def use_committed_cubin(name, k):
    """Point the compiled kernel at the committed fixtures/cubins/<name>.sm_90a.cubin (before its first
    launch), so the binary that runs is the one in the repository even where Triton's recompile
    differs. The recompile supplies the launcher; its metadata must match the committed .json."""
    import json
    cub, meta = CUBIN_DIR / f"{name}.sm_90a.cubin", PTX_DIR / f"{name}.json"
    if not cub.exists() or not meta.exists():
        return "recompiled (no committed cubin)"
    want = json.loads(meta.read_text())
    have = k.metadata._asdict()
    diff = [x for x in _META_KEYS if x in want and json.loads(json.dumps(have.get(x), default=str)) != want[x]]
    if diff:
        return "recompiled (committed metadata differs: " + ",".join(diff) + ")"
    assert k.module is None, "the kernel was already loaded"
    k.kernel = cub.read_bytes()
    return "committed"


def _ptx_code(text):
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith(".file"):
            break
        out.append(line.split("//")[0].rstrip())  # .loc comments name the source file
    return "\n".join(out)


def ptx_same(name, k):
    p = PTX_DIR / f"{name}.ptx"
    if not p.exists():
        return "n/a"
    return "same" if _ptx_code(p.read_text()) == _ptx_code(k.asm["ptx"]) else "differs"


# ---------------------------------------------------------------------------------------------
# per-kernel setup: inputs, the reference, and the two launches


def setup(name):
    """Returns (fixture_launch(c), jit_launch(c), make_c(), ref)."""
    import torch
    import triton

    modname, attr, _ = KERNELS[name]
    mod = _import(modname)
    fn = getattr(mod, attr)
    M, N, K = SHAPES[name]
    dev = "cuda"
    torch.manual_seed(0)

    if modname.startswith("gluon_"):
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        _descs = {}

        def gdesc(t, block):
            # as the generator's _desc: NVMMASharedLayout.get_default_for(block, bf16), row-major
            key = (t.data_ptr(), tuple(t.shape), tuple(block))
            if key not in _descs:
                layout = gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16)
                _descs[key] = (t, TensorDescriptor.from_tensor(t, block, layout))  # t kept alive with it
            return _descs[key][1]

        a = torch.randn(M, K, device=dev, dtype=torch.float32).to(torch.bfloat16)
        b = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)  # B is K x N (wgmma B [BK, BN])
        ref = (a.double() @ b.double()).float()  # fp64 reference (no TF32 question)
        make_c = lambda: torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
        if name == "gluon_two_cons":
            HM, BN, BK, STAGES = mod.HM, mod.BN, mod.BK, mod.STAGES
            consts = dict(HM=HM, BN=BN, BK=BK, STAGES=STAGES, **mod.VARIANTS[name])
            num_warps = 4
            grid = (M // (2 * HM), N // BN)
            ad, bd = gdesc(a, [HM, BK]), gdesc(b, [BK, BN])

            def args(c):
                return [ad, bd, gdesc(c, [HM, BN]), K]
        elif name in ("gluon_wide90", "gluon_wide90_s2"):
            BM, BN, BK, STAGES = mod.BM, mod.BN, mod.BK, mod.STAGES
            if name == "gluon_wide90_s2":
                STAGES = 2
            consts = dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, **mod.VARIANTS["gluon_wide90"])
            num_warps = 8
            grid = (M // BM, N // BN)
            ad, bd = gdesc(a, [BM, BK]), gdesc(b, [BK, BN])

            def args(c):
                return [ad, bd, gdesc(c, [BM, BN]), K]
        else:  # gluon_pvt_bias, gluon_reinit_bias
            BM, BN, BK, STAGES = mod.BM, mod.BN, mod.BK, mod.STAGES
            consts = dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, **mod.VARIANTS[name])
            num_warps = 4
            grid = (M // BM, N // BN)
            bias = torch.randn(M, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            ref = ref + bias.float()  # the kernel adds the bf16 bias to its fp32 accumulator
            ad, bd, biasd = gdesc(a, [BM, BK]), gdesc(b, [BK, BN]), gdesc(bias, [BM, BN])

            def args(c):
                return [ad, bd, biasd, gdesc(c, [BM, BN]), K]
        assert M % grid[0] == 0 and N % grid[1] == 0
    elif modname == "sweep_ws":
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        def gdesc(t, block):  # as sweep_ws._gluon_desc
            return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16))

        _, _, consts, num_warps = mod.VARIANTS[name]
        consts = dict(consts)
        if attr == "ws_wgmma_gemm":
            BM, BN, BK = consts["BM"], consts["BN"], consts["BK"]
            a = torch.randn(M, K, device=dev, dtype=torch.float32).to(torch.bfloat16)
            b = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            ref = (a.double() @ b.double()).float()
            make_c = lambda: torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
            grid = (M // BM, N // BN)
            ad, bd = gdesc(a, [BM, BK]), gdesc(b, [BK, BN])
            cdescs = {}

            def args(c):
                if c.data_ptr() not in cdescs:
                    cdescs[c.data_ptr()] = (c, gdesc(c, [BM, BN]))
                return [ad, bd, cdescs[c.data_ptr()][1], K]
        else:  # ws_rowcenter: y = x - rowmax(x) over BM x BN tiles, x R x BN
            BM, BN = consts["BM"], consts["BN"]
            assert N == BN and M % BM == 0
            n_tiles = M // BM
            x = torch.randn(M, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            xf = x.float()
            ref = xf - xf.max(dim=1, keepdim=True).values
            make_c = lambda: torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (min(sms, n_tiles), )
            xd = gdesc(x, [BM, BN])
            ydescs = {}

            def args(c):
                if c.data_ptr() not in ydescs:
                    ydescs[c.data_ptr()] = (c, gdesc(c, [BM, BN]))
                return [xd, ydescs[c.data_ptr()][1], n_tiles]
    elif modname in ("gen_h6", "gen_pp7"):
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        def gdesc(t, block):  # as common6.gdesc (= common7's): get_default_for(block, bf16), row-major
            return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16))

        _, _, _, num_warps, consts = mod.VARIANTS[name]
        consts = dict(consts)
        BM, BN, BK = consts["BM"], consts["BN"], consts["BK"]
        assert M % BM == 0 and N % BN == 0 and K % BK == 0
        make_c = lambda: torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
        cdescs = {}

        def cdesc(c):  # C is M x N, stored in [BM, BN] boxes
            if c.data_ptr() not in cdescs:
                cdescs[c.data_ptr()] = (c, gdesc(c, [BM, BN]))
            return cdescs[c.data_ptr()][1]

        if attr == "dual90":
            # A is M x K, loaded in [BM, BK] boxes at [row, k*BK]; B1 and B2 are K x N, [BK, BN] boxes at
            # [k*BK, col] (wgmma B [BK, BN]). A is scaled by 1/sqrt(K) so that g and u are ~N(0, 1) and
            # silu's curve (not only its ReLU-like tails) is checked.
            a = (torch.randn(M, K, device=dev, dtype=torch.float32) / K ** 0.5).to(torch.bfloat16)
            b1 = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            b2 = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            g, u = a.double() @ b1.double(), a.double() @ b2.double()
            ref = (torch.nn.functional.silu(g) * u).float()  # the kernel: (g / (1 + exp(-g))) * u in fp32
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (min(sms, (M // BM) * (N // BN)), )  # persistent: tiles strided by num_programs
            ad, b1d, b2d = gdesc(a, [BM, BK]), gdesc(b1, [BK, BN]), gdesc(b2, [BK, BN])

            def args(c):
                return [ad, b1d, b2d, cdesc(c), M, N, K]
        elif attr == "pp90":
            # tma_gemm_sig: a [BM, BK] boxes at [row, k*BK] of A (M x K); b [BK, BN] boxes at [k*BK, col] of B
            # (K x N: wgmma B [BK, BN], no transpose); c [BM, BN] boxes of C (M x N, bf16). Each consumer's tile
            # is one plain fp32 accumulation over all of K (acc.to(bf16) then the TMA store); which consumer
            # takes which tile does not change the answer, so the reference is A @ B.
            a = torch.randn(M, K, device=dev, dtype=torch.float32).to(torch.bfloat16)
            b = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)
            ref = (a.double() @ b.double()).float()
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (min(sms, (M // BM) * (N // BN)), )  # persistent: consumer c of program p takes p + (2n+c)*nprog
            ad, bd = gdesc(a, [BM, BK]), gdesc(b, [BK, BN])

            def args(c):
                return [ad, bd, cdesc(c), M, N, K]
        else:  # ksplit90: one [BM, BN] tile per program at (program_id(0), program_id(1))
            a = torch.randn(M, K, device=dev, dtype=torch.float32).to(torch.bfloat16)
            b = torch.randn(K, N, device=dev, dtype=torch.float32).to(torch.bfloat16)  # [BK, BN] at [k*BK, col]
            ref = (a.double() @ b.double()).float()  # even k-steps + odd k-steps (fp32 partial via smem)
            grid = (M // BM, N // BN)
            ad, bd = gdesc(a, [BM, BK]), gdesc(b, [BK, BN])

            def args(c):
                return [ad, bd, cdesc(c), K]
    else:  # ws_variety: h_gemm / h_gemm_kloop, device descriptors (tl.make_tensor_descriptor)
        v = mod.VARIANTS[name]
        consts = dict(v["c"])
        num_warps = v["warps"]
        BM, BN, BK = consts["BM"], consts["BN"], consts["BK"]
        assert M % BM == 0 and N % BN == 0 and K % BK == 0
        # device-side descriptors need Triton's global scratch (the tensor maps live there)
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=dev))
        a = torch.randn(M, K, device=dev, dtype=torch.float32)
        b = torch.randn(N, K, device=dev, dtype=torch.float32)  # B is N x K; the kernel loads [BN, BK] and .T
        if v.get("dt", "bf16") == "fp8e4nv":
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        else:
            a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
        ref = (a.double() @ b.double().T).float()
        make_c = lambda: torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
        if attr == "h_gemm":  # persistent: one program per SM at most
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (min(sms, (M // BM) * (N // BN)), )
        else:
            grid = (M // BM, N // BN)

        def args(c):
            return [a, b, c, M, N, K]

    def fixture_launch(c, _k=[None]):
        if _k[0] is None:
            _k[0] = fixture_compile(name)
            _k[0].binary = use_committed_cubin(name, _k[0])
        k = _k[0]
        # a CompiledKernel takes every parameter positionally, constexprs included (its launcher skips them)
        runtime = [n for n in fn.arg_names if n not in consts]
        vals = dict(zip(runtime, args(c)), **consts)
        assert len(runtime) == len(args(c)) and set(vals) == set(fn.arg_names), (fn.arg_names, list(vals))
        k[(grid + (1, 1))[:3]](*[vals[n] for n in fn.arg_names])
        return k

    def jit_launch(c):
        fn[grid](*args(c), **consts, num_warps=num_warps)

    return fixture_launch, jit_launch, make_c, ref


def check(out, ref):
    import torch
    o = out.float()
    if torch.isnan(o).any():
        return float("nan"), False, f"{int(torch.isnan(o).sum())} NaN (unwritten) elements"
    err = float((o - ref).abs().max())
    tol = REL_TOL * float(ref.abs().max())
    return err, err <= tol, f"max_abs_err={err:.4g} > tol={tol:.4g}"


def stage(msg):
    print(f"STAGE {msg}", flush=True)


def run_one(name):
    """In the subprocess: prints the result line (and STAGE lines for the parent)."""
    try:
        import torch
        import triton.testing

        stage("setup")
        fixture_launch, jit_launch, make_c, ref = setup(name)
        if name in NOT_FIXTURES:
            fx_err, ptx = 0.0, "binary=jit-only"
        else:
            stage("fixture compile + launch")
            c = make_c()
            k = fixture_launch(c)
            torch.cuda.synchronize()
            fx_err, ok, why = check(c, ref)
            ptx = ptx_same(name, k)
            ptx = f"binary={k.binary} recompiled_ptx={ptx}"
            if not ok:
                print(f"FAIL {name} fixture binary: {why} ({ptx})", flush=True)
                return 1
        stage("jit launch")
        c = make_c()
        jit_launch(c)
        torch.cuda.synchronize()
        jit_err, ok, why = check(c, ref)
        if not ok:
            print(f"FAIL {name} jit launch: {why}", flush=True)
            return 1
        stage("do_bench")
        ms = triton.testing.do_bench(lambda: jit_launch(c))
        torch.cuda.synchronize()
        after_err, ok, why = check(c, ref)
        if not ok:
            print(f"FAIL {name} after do_bench: {why}", flush=True)
            return 1
        err = max(fx_err, jit_err, after_err)
        print(f"PASS {name} max_abs_err={err:.4g} time_us={ms * 1e3:.1f} fixture_err={fx_err:.4g} "
              f"jit_err={jit_err:.4g} {ptx} max_abs_ref={float(ref.abs().max()):.4g}", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:400]
        print(f"FAIL {name} {msg}", flush=True)
        return 1


def run_child(name, timeout):
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", name],
                             stdout=out, stderr=err, cwd=str(ROOT), start_new_session=True)
        t0 = time.time()
        try:
            rc = p.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            rc = None
        out.seek(0)
        err.seek(0)
        lines = out.read().splitlines()
        errtext = err.read()
    stages = [ln[6:] for ln in lines if ln.startswith("STAGE ")]
    result = [ln for ln in lines if ln.startswith(("PASS ", "FAIL "))]
    if hung:
        return False, f"HANG {name} no result in {timeout} s (last stage: {stages[-1] if stages else 'start'})"
    if result:
        line = result[-1]
        if line.startswith("FAIL ") and errtext.strip():
            sys.stderr.write(f"--- {name} stderr (tail) ---\n{errtext[-3000:]}\n")
        return line.startswith("PASS ") and rc == 0, line
    tail = " ".join(errtext.strip().splitlines()[-3:])[:400]
    return False, (f"FAIL {name} subprocess exited rc={rc} without a result after {time.time() - t0:.0f} s "
                   f"(last stage: {stages[-1] if stages else 'start'}): {tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the kernels and check they import (no GPU)")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile each fixture as its generator does and compare its PTX (no GPU)")
    ap.add_argument("--only", action="append", choices=sorted(KERNELS))
    ap.add_argument("--timeout", type=int, default=TIMEOUT_S)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child:
        return run_one(a.child)
    names = a.only or list(KERNELS)
    if a.list:
        for n in names:
            modname, attr, what = KERNELS[n]
            mod = _import(modname)
            getattr(mod, attr)  # the kernel object exists
            assert n in NOT_FIXTURES or n in mod.VARIANTS, n
            M, N, K = SHAPES[n]
            print(f"{n:22s} {modname}.{attr:13s} M={M} N={N} K={K}  {what}")
        return 0
    if a.compile_only:
        bad = 0
        for n in names:
            if n in NOT_FIXTURES:
                print(f"{n}: not a fixture (JIT only on the GPU)")
                continue
            try:
                k = fixture_compile(n)
                print(f"{n}: compiled, {k.metadata.num_warps} warps, recompiled_ptx={ptx_same(n, k)}, "
                      f"binary to launch={use_committed_cubin(n, k)}")
            except Exception as e:  # noqa: BLE001
                bad += 1
                print(f"{n}: FAILED {type(e).__name__}: {e}")
        return 1 if bad else 0

    passed = failed = 0
    for n in names:
        ok, line = run_child(n, a.timeout)
        print(line, flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
