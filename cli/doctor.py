"""`wsperf doctor`: the environment a debugging session verifies first."""

from __future__ import annotations

import typer

from wsperf.cli import render
from wsperf.cli.common import emit, error_boundary
from wsperf.cli.render import OutputFormat
from wsperf.collectors import environment


def doctor(
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text, json or markdown."),
) -> None:
    """Print what a debugging session must verify first: Python and package versions,
    NVIDIA tools (ncu, compute-sanitizer, nvcc, cuda-gdb), the GPUs, torch/triton/TVM."""
    with error_boundary():
        env = environment.probe()
        emit(fmt, env, render.environment_text, render.environment_json, render.environment_markdown)
