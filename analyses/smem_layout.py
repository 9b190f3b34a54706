"""Where a kernel's shared variables sit in the CTA's shared window, from its PTX: the
addresses cuda-gdb reads (`print *(@shared unsigned long long *)ADDR`) and the SASS
operands use, so that collect's hang capture can read each mbarrier's word.

The layout ptxas gives (nvcc 13.0, sm_90a), read from the SASS and the cubin of real
kernels (tests/test_smem_layout.py checks it against both, compiled there):

- the window's first 1 KB is reserved: the kernel's shared section starts at 0x400;
- the static `.shared` variables a kernel uses follow in the order the PTX declares them,
  each at its `.align` (fixtures/src/broken/ws_deadlock.cu: `ring` 8192 B at 0x400,
  `tile_scale` at 0x2400, `full` at 0x2408, `empty` at 0x2418; the SASS inits are
  `UIADD3 UR6, UR4, 0x2008` and `0x2018` over `UMOV UR4, 0x400`, and the cubin's
  `.nv.shared` section is 0x2428 bytes);
- the dynamic (`.extern .shared`) memory starts after them, at the largest alignment the
  kernel's shared variables ask for (fixtures/src/ws_stream.cu: `full`/`empty` at
  0x400/0x420, the section 0x480 bytes at 128-byte alignment, the extern `ring[]` at 0x480).

Not established: the layout on sm_100 (no such GPU here), and for a module whose device
functions (`.func`) use shared variables the kernel itself does not name (they are
counted as the kernel's). The hang capture checks each address it reads: a word whose
expected count is not the barrier's init count is not shown as its state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WINDOW_BASE = 0x400  # the reserved first 1 KB of the shared window (sm_90)

_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "b32": 4, "u32": 4, "s32": 4,
          "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16}
_DECL = re.compile(r"^[ \t]*(?:\.visible[ \t]+|\.global[ \t]+)?(\.extern[ \t]+)?\.shared[ \t]+(?:\.align[ \t]+(\d+)[ \t]+)?"
                   r"\.(\w+)[ \t]+([\w$]+)((?:[ \t]*\[[ \t]*\d*[ \t]*\])*)[ \t]*;", re.M)
_ENTRY = re.compile(r"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]+([\w$]+)", re.M)
_FUNC = re.compile(r"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.func[ \t]", re.M)


@dataclass(frozen=True)
class SharedLayout:
    """A kernel's shared variables and their window addresses."""

    kernel: str
    addresses: dict[str, int]  # variable -> address of its first byte
    static_bytes: int  # the static variables' extent past WINDOW_BASE

    def address(self, symbol: str, offset: int = 0) -> int | None:
        """The address of `symbol` + `offset`; `symbol` may be the worksheet's short name of
        a function-local variable (`full` for `_ZZ...E4full`) when it names one variable."""
        base = self.addresses.get(symbol)
        if base is None:
            from wsperf.analyses.worksheet_model import _local

            hits = [a for name, a in self.addresses.items() if _local(name) == symbol]
            base = hits[0] if len(hits) == 1 else None
        return None if base is None else base + offset


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _bodies(text: str) -> tuple[dict[str, str], str]:
    """Each kernel's text (from its `.entry` to the next entry or function) and the text of
    the module's device functions together."""
    starts = sorted([(m.start(), m.group(1)) for m in _ENTRY.finditer(text)]
                    + [(m.start(), None) for m in _FUNC.finditer(text)])
    kernels: dict[str, str] = {}
    funcs: list[str] = []
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        if name is None:
            funcs.append(text[at:end])
        else:
            kernels[name] = text[at:end]
    return kernels, "\n".join(funcs)


def layouts(text: str) -> dict[str, SharedLayout]:
    """Per kernel of the PTX module `text`, where its shared variables sit; a variable of a
    type whose size is not known here leaves that kernel out (its later addresses would be
    guesses)."""
    decls = [(bool(m.group(1)), int(m.group(2)) if m.group(2) else None, m.group(3), m.group(4),
              [int(d) if d else 0 for d in re.findall(r"\[\s*(\d*)\s*\]", m.group(5))]) for m in _DECL.finditer(text)]
    kernels, funcs = _bodies(text)
    out: dict[str, SharedLayout] = {}
    for kernel, body in kernels.items():
        used = [d for d in decls if re.search(rf"(?<![\w$]){re.escape(d[3])}(?![\w$])", body + funcs)]
        addresses: dict[str, int] = {}
        at, widest, known = WINDOW_BASE, 1, True
        for extern, align, kind, name, dims in used:
            if extern:
                continue
            size = _SIZES.get(kind)
            if size is None or any(d == 0 for d in dims):
                known = False
                break
            a = align or size
            at = _align(at, a)
            addresses[name] = at
            n = size
            for d in dims:
                n *= d
            at += n
            widest = max(widest, a)
        if not known:
            continue
        end = at
        for extern, align, kind, name, _dims in used:
            if extern:
                widest = max(widest, align or _SIZES.get(kind, 1))
        dynamic = _align(end, widest)
        for extern, _align_, _kind, name, _dims in used:
            if extern:
                addresses[name] = dynamic
        out[kernel] = SharedLayout(kernel, addresses, end - WINDOW_BASE)
    return out
