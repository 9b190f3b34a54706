"""Whose finding is it: the user's kernel, a library kernel, or the sanitizer's own
kernel filter. `collect` (whether to stop) and the correctness report (what to list)
decide it here, the same way.

Kernels that ship in NVIDIA's and PyTorch's libraries are recognised by name.

compute-sanitizer reports races and uninitialized reads inside production
warp-specialized kernels that a user did not write: on the H200 (compute-sanitizer
2025.3.1), racecheck names cuBLAS's `nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT`
(from a bf16 `torch.matmul`, 6 records, ~96,000 hazards) and cuDNN's
`cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_*` (from
`scaled_dot_product_attention`, 4 records). Such a finding is listed as a
`vendor-kernel` finding, with the library, and does not stop a repro whose own kernel is
clean, unless `--kernel` targets that kernel.

The sanitizer's XML names the kernel, not its module, so the name decides. The patterns
are the libraries' own naming schemes; a user kernel named like them is taken as a
library's (say so with `--kernel`).
"""

from __future__ import annotations

import re
from enum import StrEnum

from wsperf.collectors.sanitizer import Handoff, SanitizerFinding, is_error

# (library, pattern on the demangled or mangled name); first match wins.
_LIBRARIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((lib, re.compile(p)) for lib, p in (
    ("cuBLAS", r"^(nvjet_|sm\d+_xmma_|cublas|cublasLt|gemv2[NT]_kernel|gemvNSP_kernel|gemmk1_kernel|"
               r"(void )?gemmSN_|splitKreduce_kernel|dot_kernel|reduce_1Block_kernel)"),
    ("cuDNN", r"^(cudnn|void cudnn|sm\d+_cudnn|cutlass_cudnn|xmma_cudnn)"),
    ("NCCL", r"^(void )?nccl(Dev)?Kernel"),
    ("FlashAttention", r"(^|[ :])(flash_fwd_|flash_bwd_|pytorch_flash::|flash::)"),
    ("CUTLASS library", r"^(void )?cutlass_\d+_"),
    ("PyTorch ATen", r"(^|[ <])at::native::|^(void )?at_cuda_detail::|(^|[ <])at::cuda::"),
))
# A mangled name: the same schemes inside the Itanium encoding.
_MANGLED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("PyTorch ATen", re.compile(r"^_ZN2at6native|^_ZN2at4cuda|^_ZN\d*at_cuda_detail")),
    ("FlashAttention", re.compile(r"^_Z\w*flash_(fwd|bwd)_|^_ZN\d*pytorch_flash")),
    ("NCCL", re.compile(r"^_Z\d+nccl")),
)


def vendor_library(kernel: str | None) -> str | None:
    """The library whose kernel `kernel` is, or None for the user's own."""
    if not kernel:
        return None
    name = kernel.strip()
    for lib, pat in _LIBRARIES:
        if pat.search(name):
            return lib
    for lib, pat in _MANGLED:
        if pat.search(name):
            return lib
    return None


class Scope(StrEnum):
    USER = "user"  # the user's kernel: an error stops the repro short of a profile
    VENDOR = "vendor-kernel"  # inside a library kernel --kernel does not target: listed, not judged
    FILTER = "filter-artifact"  # caused by the sanitizer's kernel filter itself: listed, not counted


def finding_scope(f: SanitizerFinding, kernel_filter: str | None) -> Scope:
    """Where an error finding `f` belongs, for a sanitizer run under `kernel_filter` (the
    repro's --kernel, or None). Under --kernel-name, initcheck does not track what the
    kernels it leaves unchecked write, so a host read of that memory (a cudaMemcpy after
    them: a finding with no kernel, kind InitcheckApiError) is reported uninitialized:
    measured on the H200 with compute-sanitizer 2025.3.1 (fixtures/evidence/torch_filter)."""
    lib = vendor_library(f.kernel)
    if lib is not None and not _targets(kernel_filter, f.kernel):
        return Scope.VENDOR
    if kernel_filter and not f.kernel and (f.classification is Handoff.UNINITIALIZED or f.tool == "initcheck"
                                           or f.kind.startswith("Initcheck")):
        # e.g. kind InitcheckApiError, "Host API uninitialized memory access ... by
        # cudaMemcpy source": a copy out of memory an unchecked kernel wrote.
        return Scope.FILTER
    return Scope.USER


def stops(f: SanitizerFinding, kernel_filter: str | None) -> bool:
    """An error of the user's kernel: the repro gets the correctness report, no profile."""
    return is_error(f) and finding_scope(f, kernel_filter) is Scope.USER


def _targets(pattern: str | None, name: str | None) -> bool:
    """Whether --kernel `pattern` names `name` (a library kernel named so is judged as
    the user's own). Names are short; the pattern was accepted by --kernel's check."""
    if not pattern or not name:
        return False
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
