"""`wsperf worksheet`: the handoff worksheet from PTX, without a GPU. Registered on the
app in cli/main.py; its error boundary is main's (imported when it runs)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Optional

import typer

from wsperf.analyses.worksheet import Worksheet, worksheet as build
from wsperf.cli.common import error_boundary
from wsperf.cli.render import OutputFormat as Format, fold_name, md, plain
from wsperf.collectors.disasm import demangle


def worksheet(
    paths: list[Path] = typer.Argument(..., help=".ptx files, .cu files (nvcc -ptx for --arch), or binaries / "
                                       "cubins / fatbins with embedded PTX (cuobjdump -ptx).", show_default=False),
    arch: Optional[str] = typer.Option(None, "--arch", "-a", help="Architecture, e.g. sm_90a or sm_100a. Default: "
                                       "sm_90a for .cu files; every embedded PTX module otherwise."),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Only kernels whose name matches this regular "
                                         "expression."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown."),
) -> None:
    """Print, per kernel, the handoff worksheet read from PTX: roles, shared and tensor
    memory, every mbarrier (init count, who arrives, who waits), fences, lifetimes, and
    the mistakes visible statically (flags 1-15), each marked evidence or assumption, and
    what it could not check."""
    with error_boundary():
        ws = build(paths, arch=arch, kernel=kernel)
        if fmt is Format.json:
            sys.stdout.write(json.dumps(dataclasses.asdict(ws), indent=2, default=str) + "\n")
        else:
            text = render(ws, markdown=fmt is Format.markdown)
            width = _width()
            sys.stdout.write(_wrap(text, width) if width and fmt is Format.text else text)


def _width() -> int | None:
    """The terminal's width, or COLUMNS when set; None for a pipe without COLUMNS (a log or a
    grep gets each item on one line)."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) >= 40:
        return int(cols)
    return os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else None


def _wrap(text: str, width: int) -> str:
    """Each line wrapped between words, continued under its item's text (never cut)."""
    out = []
    for ln in text.splitlines():
        body = ln.lstrip(" ")
        lead = " " * (len(ln) - len(body) + 2)
        out += textwrap.wrap(ln, width, subsequent_indent=lead, break_long_words=False, break_on_hyphens=False,
                             drop_whitespace=True) or [""]
    return "\n".join(out) + "\n"


def _where(site) -> str:
    return f"line {site.line}" + (f" via call at line {site.via}" if site.via else "")


def render(ws: Worksheet, markdown: bool = False) -> str:
    """Text or Markdown. Kernel names, symbols and the PTX lines the parser could not read
    come from the input: each line's text is escaped for its output (render.md for
    Markdown; control characters dropped for the terminal)."""
    h1, h2, li = ("## ", "### ", "- ") if markdown else ("", "  ", "    ")
    esc = md if markdown else (lambda t: plain(t).plain)
    out: list[str] = []

    def line(prefix: str, text: str) -> None:
        out.append(prefix + esc(text))

    names = demangle([k.kernel for k in ws.kernels])
    for k in ws.kernels:
        title = fold_name(names.get(k.kernel, k.kernel))
        line(h1, f"{title}  ({k.source}, {k.target}, {k.threads or '?'} threads)")
        if title != k.kernel:
            line(h2, f"symbol: {k.kernel}")
        line(h2, "flags: " + ("none" if not k.flags else str(len(k.flags)))
             + (f"; {len(k.unchecked)} thing(s) not checked (below)" if k.unchecked else ""))
        for f in k.flags:
            line(li, f"[{f.code} {f.name}] ({f.basis}) {f.text}")
        if k.unchecked:
            line(h2, "not checked")
            for u in k.unchecked:
                line(li, u)
        for title, items in (("roles", k.roles), ("storage", k.storage), ("fences", k.fences),
                             ("lifetime", k.lifetime), ("assumptions", k.notes)):
            if items:
                line(h2, title)
                for i in items:
                    line(li, f"({i.basis}) {i.text}")
        line(h2, "handoffs")
        for b in k.barriers:
            counts = sorted({c for _, c in b.inits}, key=str)
            line(li, f"mbarrier {b.name}: init count {', '.join(map(str, counts)) or 'not seen'} "
                     f"({len(b.inits)} init(s))")
            for a in b.arrivers:
                tx = f", tx {a.tx_bytes}" if a.tx_bytes else ""
                line(li, f"  arrive: {a.kind} by {a.site.role}, {a.site.threads} thread(s), "
                         f"{a.arrivals} arrival(s){tx} [{_where(a.site)}, {a.site.address}]")
            for w in b.waiters:
                line(li, f"  wait: {w.site.instruction.split('.shared')[0]} by {w.site.role}, "
                         f"{w.site.threads} thread(s), parity {w.parity} [{_where(w.site)}]")
        out.append("")
    return "\n".join(out) + "\n"
