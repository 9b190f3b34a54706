"""Markdown text from untrusted and from wsperf's own strings: escaped where it must be,
code spans kept where wsperf writes them, never a backslash shown inside a code span."""

from __future__ import annotations

import re

from support import REPORTS, wsperf
from wsperf.cli.render import md, md_code


def test_a_code_span_in_evidence_stays_code():
    # pipeline-bubbles says `wsperf trace-include` in its no_data evidence: a command to run
    p = wsperf("analyze", REPORTS / "gemm_wgmma_tma.ncu-rep", "-f", "markdown")
    assert p.returncode == 0, p.stderr
    assert "`wsperf trace-include`" in p.stdout and "\\`" not in p.stdout


def test_text_outside_code_spans_is_escaped():
    s = md("<script>x</script> [a](http://e) a_b *c* | d ~e~ #f")
    assert "<script>" not in s and "](" not in s.replace("\\]", "") and re.search(r"(?<!\\)[|*_~#]", s) is None


def test_code_spans_are_inert_and_keep_tables_whole():
    s = md("see `a|b <img src=x>` then <b>")
    # the span's pipe is escaped (GitHub tables split cells on it even in code); outside, <b> is escaped
    assert s == "see `a\\|b <img src=x>` then \\<b\\>"
    assert md("one ` tick_x") == "one \\` tick\\_x"  # an unpaired backtick is no span


def test_md_code_shows_no_backslash_for_markdown_characters():
    assert md_code("full_bar*[0]") == "`full_bar*[0]`"
    assert md_code("a`b|c\x1b") == "`a'b\\|c`"


def test_identical_launches_are_named_under_the_launch_they_repeat():
    p = wsperf("analyze", REPORTS / "multi_launch.ncu-rep")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for first, others in (("1", "4, 7"), ("2", "5, 8"), ("3", "6, 9")):
        head = next(i for i, l in enumerate(lines) if re.match(rf"launch {first}\s", l))
        same = next(i for i, l in enumerate(lines) if l.startswith(f"launches {others}: the same kernel"))
        assert head < same < head + 20, (head, same)
