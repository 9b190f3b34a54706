"""`wsperf doctor`: the environment a debugging session verifies first."""

from __future__ import annotations

import sys

import typer

from wsperf.cli import render
from wsperf.cli.common import error_boundary, out
from wsperf.cli.render import OutputFormat
from wsperf.collectors import environment


def doctor(
    fmt: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text or json."),
) -> None:
    """Print what a debugging session must verify first: Python and package versions,
    NVIDIA tools (ncu, compute-sanitizer, nvcc, cuda-gdb), the GPUs, torch/triton/TVM."""
    with error_boundary():
        env = environment.probe()
        if fmt is OutputFormat.json:
            sys.stdout.write(render.environment_json(env) + "\n")
        else:
            render.environment_text(env, out)
