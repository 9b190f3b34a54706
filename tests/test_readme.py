"""The documentation's examples show what wsperf really prints. Every `$ wsperf ...` line
inside a fenced block of README.md or of a page in docs/ is run (in this process, each once
per module, in page order, from a scratch directory of the page's own whose `fixtures` is
the repository's), and the lines under it, up to the next `$ ` line or the end of the
block, must be its output, stdout and stderr as a terminal shows them. Output is COLUMNS=100 wide unless the command line starts with `COLUMNS=N`;
the command exits 0 unless its line ends with a comment `# exit N`.

Allowed differences: a line whose text starts with `…` is a declared cut and stands for
any number of lines (exactly N when it says `N lines`); the time of day in run labels and
dates, the scratch directory and the version string are normalised; trailing spaces are
ignored.

The README's set-up commands are the ones CI runs: `.ci/run` builds its environment and
runs the tests with exactly those lines."""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

import wsperf
from support import ROOT
from wsperf.cli import common
from wsperf.cli.main import app

README = ROOT / "README.md"
# The README first, then docs/ by name: the order examples run in, a scratch directory per page.
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
CI = ROOT / ".ci" / "run"
DEFAULT_COLUMNS = 100
CUT = "…"


@dataclass(frozen=True)
class Example:
    page: str                # README.md or docs/<topic>.md
    line: int                # of the `$ wsperf` line in that page
    columns: int
    exit_code: int
    argv: tuple[str, ...]    # after `wsperf`
    expected: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.page}:L{self.line}-{self.argv[0]}"


def examples(text: str, page: str = "README.md") -> list[Example]:
    """Each `$ wsperf ...` of the fenced blocks with the lines shown under it."""
    found: list[Example] = []
    fence, current = None, None
    for no, line in enumerate(text.splitlines(), 1):
        if fence is None:
            m = re.match(r"\s*(```+)", line)
            fence = m.group(1) if m else None
            continue
        if line.strip() == fence:
            fence, current = None, None
            continue
        if line.startswith("$ "):
            words = shlex.split(line[2:], comments=True)
            code = re.search(r"#\s*exit (\d+)\s*$", line)
            columns = DEFAULT_COLUMNS
            if words and words[0].startswith("COLUMNS="):
                columns = int(words.pop(0).split("=", 1)[1])
            current = None
            if words and words[0] == "wsperf":
                current = Example(page, no, columns, int(code.group(1)) if code else 0, tuple(words[1:]), ())
                found.append(current)
            continue
        if current is not None:
            found[-1] = current = Example(current.page, current.line, current.columns, current.exit_code, current.argv,
                                          (*current.expected, line))
    return found


def _normalise(line: str, scratch: str) -> str:
    line = line.replace(scratch + "/", "").replace(f"{ROOT}/", "").replace(wsperf.version(), "<version>")
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # a CI that forces colour (FORCE_COLOR)
    line = re.sub(r"\d{8}T\d{6}", "<yyyymmddThhmmss>", line)
    line = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "<yyyy-mm-dd hh:mm>", line)
    return line.rstrip()


def mismatch(expected: tuple[str, ...], actual: list[str]) -> str | None:
    """None when `actual` is `expected` with its cut lines standing for what they cut;
    else where they part."""
    @functools.cache
    def match(e: int, a: int) -> bool:
        if e == len(expected):
            return a == len(actual)
        head = expected[e].strip()
        if head.startswith(CUT):
            n = re.search(r"\b(\d+) (?:more )?lines?\b", head)
            ends = [a + int(n.group(1))] if n else range(a, len(actual) + 1)
            return any(end <= len(actual) and match(e + 1, end) for end in ends)
        return a < len(actual) and expected[e] == actual[a] and match(e + 1, a + 1)

    if match(0, 0):
        return None
    # Where they part: the first shown line not printed where the page puts it.
    at, after_cut = 0, False
    for e, line in enumerate(expected):
        if line.strip().startswith(CUT):
            after_cut = True
            continue
        found = (actual.index(line, at) if line in actual[at:] else None) if after_cut else \
            (at if at < len(actual) and actual[at] == line else None)
        if found is None:
            got = "" if after_cut else f"\n  actual: {actual[at] if at < len(actual) else '<end>'!r}"
            return f"block line {e + 1}:\n  shown:  {line!r}{got}\nactual output:\n" + "\n".join(actual)
        at, after_cut = found + 1, False
    return ("the block ends before the output does (no cut marker at its end)\nactual output:\n"
            + "\n".join(actual))


def _page(path) -> str:
    return path.relative_to(ROOT).as_posix()


EXAMPLES = [ex for path in PAGES for ex in examples(path.read_text(encoding="utf-8"), _page(path))]

# What each page shows at least: a page reorganised into a form the parser misses must not
# pass silently.
SHOWN = {
    "README.md": {"analyze", "compare", "sql", "inspect", "worksheet", "timeline"},
    "docs/charts.md": {"analyze"},
    "docs/compare.md": {"compare"},
    "docs/history.md": {"analyze", "history"},
    "docs/worksheet.md": {"worksheet"},
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every example run once, in page order (later ones may read what earlier ones of the
    same page stored), from the page's scratch directory:
    {(page, line): (exit code, normalised output lines)}."""
    runner, results, scratches = CliRunner(), {}, {}
    width = common.out.width
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        try:
            for ex in EXAMPLES:
                if ex.page not in scratches:
                    scratch = scratches[ex.page] = tmp_path_factory.mktemp("page")
                    (scratch / "fixtures").symlink_to(ROOT / "fixtures")
                scratch = scratches[ex.page]
                mp.chdir(scratch)
                common.out.width = ex.columns  # what COLUMNS gives a piped `wsperf` at start-up
                # `worksheet` reads COLUMNS itself, and a pipe without it is not wrapped: as the
                # page's command line says, whatever the test process inherited
                if ex.columns != DEFAULT_COLUMNS:
                    mp.setenv("COLUMNS", str(ex.columns))
                else:
                    mp.delenv("COLUMNS", raising=False)
                r = runner.invoke(app, list(ex.argv))
                assert r.exception is None or isinstance(r.exception, SystemExit), (ex.argv, r.output)
                results[ex.page, ex.line] = (r.exit_code,
                                             [_normalise(l, str(scratch)) for l in r.output.splitlines()])
        finally:
            common.out.width = width
    return results


@pytest.mark.parametrize("page", sorted(SHOWN))
def test_page_has_its_examples(page):
    commands = {ex.argv[0] for ex in EXAMPLES if ex.page == page}
    assert SHOWN[page] <= commands, (page, commands)


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda ex: ex.id)
def test_readme_example_is_real_output(ex: Example, outputs):
    code, actual = outputs[ex.page, ex.line]
    shown = f"{ex.page}:{ex.line} `wsperf {shlex.join(ex.argv)}`"
    assert code == ex.exit_code, f"{shown} exited {code}:\n" + "\n".join(actual)
    problem = mismatch(tuple(_normalise(l, "\0") for l in ex.expected), actual)
    assert problem is None, f"{shown} no longer prints what it shows; {problem}"


def test_a_changed_number_is_caught(outputs):
    # The comparison can fail: one digit changed in a real output, or a line dropped
    # without a cut marker, is a mismatch; a cut marker may stand for those lines.
    ex = next(ex for ex in EXAMPLES if ex.argv[0] == "compare")
    actual = outputs[ex.page, ex.line][1]
    i = next(i for i, l in enumerate(actual) if re.search(r"\d", l))
    changed = list(actual)
    changed[i] = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), changed[i], count=1)
    assert mismatch(tuple(actual), actual) is None
    assert mismatch(tuple(changed), actual) is not None
    assert mismatch(tuple(actual[:i] + actual[i + 1:]), actual) is not None
    assert mismatch((*actual[:i], f"{CUT} (1 line cut)", *actual[i + 1:]), actual) is None
    assert mismatch((*actual[:i], f"{CUT} (2 lines cut)", *actual[i + 1:]), actual) is not None
    assert mismatch((*actual[:i], f"{CUT} (the rest cut)"), actual) is None


def setup_commands(text: str) -> list[str]:
    """The command lines of the fenced blocks under the README's "Set up" heading, each
    without its trailing comment."""
    section = re.search(r"^## Set up\b.*?$(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, "the README has no \"## Set up\" section"
    commands, fence = [], None
    for line in section.group(1).splitlines():
        m = re.match(r"\s*(```+)", line)
        if fence is None:
            fence = m.group(1) if m else None
        elif line.strip() == fence:
            fence = None
        elif line.strip():
            commands.append(re.sub(r"\s+#\s.*$", "", line).strip())
    return commands


def test_setup_is_what_ci_runs():
    # CI builds a fresh environment "exactly as README.md says": the README's two set-up
    # commands (install and analyze a bundled report; run the tests) are lines of .ci/run.
    install, tests = setup_commands(README.read_text(encoding="utf-8"))
    ci = {line.strip() for line in CI.read_text(encoding="utf-8").splitlines()}
    assert "pip install" in install and "wsperf analyze fixtures/" in install, install
    assert "pytest" in tests, tests
    assert install in ci, f".ci/run does not run the README's set-up line {install!r}"
    assert tests in ci, f".ci/run does not run the README's test command {tests!r}"
