"""examples/notebook.ipynb executed headless in a real Jupyter kernel (nbclient and
ipykernel, the test extra), as a kernel engineer runs it: every cell must run, and what
the cells display must be what `wsperf analyze --format json` says of the same reports
(one code path, one answer)."""

from __future__ import annotations

import ast
import re
from html import escape

import nbformat
import pytest
from nbclient import NotebookClient

from support import ROOT, kernels, wsperf

NOTEBOOK = ROOT / "examples" / "notebook.ipynb"
REPORTS = [ROOT / "fixtures" / "reports" / "gemm_ffma.ncu-rep", ROOT / "fixtures" / "reports" / "gemm_wgmma_tma.ncu-rep"]


@pytest.fixture(scope="module")
def run():
    """The executed notebook: {cell id: outputs}, with the notebook's own cell sources."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # CellExecutionError (with the cell and its traceback) if any cell raises
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return {c.id: c for c in nb.cells if c.cell_type == "code"}


@pytest.fixture(scope="module")
def cli():
    return kernels(*REPORTS)


def _cell(run, needle: str, exact: bool = False):
    """The one code cell whose source holds `needle` (is `needle`, with `exact`): the test
    names cells by their code."""
    found = [c for c in run.values() if (c.source.strip() == needle if exact else needle in c.source)]
    assert len(found) == 1, (needle, [c.source for c in found])
    return found[0]


def _result(cell, mime: str) -> str:
    data = [o["data"] for o in cell.outputs if o.output_type == "execute_result"]
    assert len(data) == 1 and mime in data[0], (cell.source, [list(d) for d in data])
    return data[0][mime]


def _stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_the_notebook_is_kept_without_outputs():
    # what is committed is the code; outputs come from running it (no stale numbers)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")


def test_every_cell_runs_and_no_error_is_shown(run):
    assert run, "no code cell ran"
    for cell in run.values():
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source


def test_the_session_cell_shows_each_launch_as_the_cli_does(run, cli):
    cell = _cell(run, "wsperf.load([")
    page = _result(cell, "text/html")
    text = _result(cell, "text/plain")
    assert page.startswith('<div class="wsperf">')
    for k in cli:
        assert f"<b>launch {k['launch_id']}: {escape(k['name'])}</b>" in page
        assert f"launch {k['launch_id']} {k['name']}: {k['headline']}" in text
        for f in k["findings"]:  # every verdict in the summary table, in its colour class
            assert re.search(rf"<td><code>{re.escape(f['id'])}</code></td><td><span class=\"{f['status']}\">{f['status']}</span>", page), \
                (k["launch_id"], f["id"], f["status"])


def test_the_verdicts_frame_has_the_cli_verdicts_row_for_row(run, cli):
    page = _result(_cell(run, "s.verdicts()"), "text/html")
    rows = re.findall(r"<tr>\s*<th>\d+</th>\s*<td>(\d+)</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>", page)
    want = [(str(k["launch_id"]), k["name"], f["id"], f["status"]) for k in cli for f in k["findings"]]
    assert sorted(rows) == sorted(want)
    assert ("1", "gemm_ffma", "missing-specialized-instructions", "confirmed") in rows  # the FFMA twin is found out


def test_the_frames_of_launches_roles_and_sql_are_displayed(run, cli):
    launches = _result(_cell(run, "s.launches()"), "text/plain")
    for k in cli:
        assert k["name"] in launches
    roles = _result(_cell(run, "s.roles()"), "text/plain")
    assert "producer" in roles and "consumer" in roles  # gemm_ws's roles, recovered from its code
    top = _result(_cell(run, "FROM opcodes"), "text/plain").splitlines()
    assert top[1].split()[1:3] == ["1", "FFMA"]  # the FFMA GEMM's most executed opcode


def test_the_charts_display_inline_as_vega_lite(run, cli):
    names = ast.literal_eval(_result(_cell(run, "sorted(charts)"), "text/plain"))  # the list of chart names
    assert {f"launch-{k['launch_id']}-families" for k in cli} <= set(names)
    page = _result(_cell(run, 'charts["launch-1-families"]'), "text/html")
    assert "vegaEmbed" in page and "https://vega.github.io/schema/vega-lite/" in page


def test_one_launch_is_its_json_object(run, cli):
    ws = next(k for k in cli if k["launch_id"] == 2)
    shown = _result(_cell(run, "launch = s[2].to_dict()"), "text/plain")
    confirmed = [f["id"] for f in ws["findings"] if f["status"] == "confirmed"]
    assert shown == repr((ws["name"], ws["headline"], confirmed))
    page = _result(_cell(run, "s[2]", exact=True), "text/html")
    assert f"<b>launch 2: {escape(ws['name'])}</b>" in page and "launch 1:" not in page


def test_bad_input_is_the_error_line_the_cli_prints(run, tmp_path):
    shown = _stdout(_cell(run, "except WsperfError")).strip()
    p = wsperf("analyze", "no-such-report.ncu-rep", cwd=tmp_path)
    assert p.returncode == 2
    assert shown == p.stderr.strip()
