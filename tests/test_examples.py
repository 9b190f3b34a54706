"""The CI recipes under examples/ only use commands and options wsperf has: every
`wsperf <command> --option` in the workflows is checked against the real CLI."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from support import ROOT
from wsperf.cli.main import _COMMANDS, command

WORKFLOWS = sorted((ROOT / "examples" / "github").glob("*.yml"))


def _commands() -> dict[str, set[str]]:
    # The app is a lazy group (cli/main.py): each command built for real, as `wsperf CMD` builds it.
    cmds = {name: command(name) for name in _COMMANDS}
    return {name: {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} for name, cmd in cmds.items()}


def _run_steps(doc: dict) -> list[str]:
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def _invocations(script: str) -> list[list[str]]:
    """Each `wsperf ...` command line of a shell step, continuation lines joined."""
    text = script.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        for m in re.finditer(r"(?:^|[\s;(&|])(?:\S*/)?wsperf\s+(.*)", line):
            rest = re.split(r"\s(?:\||&&|;|>>?|2>)\s?", m.group(1))[0]
            try:
                found.append(shlex.split(rest))
            except ValueError:  # a $(...) spanning the line: take the words up to it
                found.append(rest.split())
    return found


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_uses_real_commands_and_options(workflow):
    doc = yaml.safe_load(workflow.read_text())
    commands = _commands()
    calls = [c for script in _run_steps(doc) for c in _invocations(script)]
    assert calls, "the workflow runs wsperf"
    for argv in calls:
        cmd, *args = argv
        assert cmd in commands, f"{workflow.name}: wsperf {cmd} does not exist"
        for a in args:
            if a == "--":
                break
            if a.startswith("--"):
                assert a.split("=")[0] in commands[cmd], f"{workflow.name}: wsperf {cmd} has no option {a}"


def test_both_recipes_are_there():
    assert {p.name for p in WORKFLOWS} == {"nightly.yml", "pr.yml"}
    nightly = (ROOT / "examples" / "github" / "nightly.yml").read_text()
    assert "wsperf compare --db" in nightly and "--format junit" in nightly
    assert "--format markdown" in (ROOT / "examples" / "github" / "pr.yml").read_text()
