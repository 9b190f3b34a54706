"""The import contract: each layer imports only the layers below it.

    collectors + queries (input, files, processes, the store and its packaged SQL)
        <-  analyses (hypotheses, worksheet, verdicts)
        <-  cli (commands, rendering) and the Python API (api/, the `wsperf` package)

Read from the source with an AST pass, so an import inside a function (the lazy ones that
keep start-up fast) counts as much as one at the top. `queries/` holds data only. The one
edge upward that is allowed: the CLI asks the package for its version (`wsperf.version()`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import ROOT

# package directory -> the wsperf packages its modules may import
ALLOWED = {
    "collectors": {"wsperf.collectors", "wsperf.queries"},
    # the packaged SQL and the collectors are one bottom layer: the store's schema is packaged
    # SQL, and its figure views are made from collectors.metrics' mapping
    "queries": {"wsperf.queries", "wsperf.collectors"},
    "analyses": {"wsperf.collectors", "wsperf.queries", "wsperf.analyses"},
    "cli": {"wsperf.collectors", "wsperf.queries", "wsperf.analyses", "wsperf.cli", "wsperf"},
    "api": {"wsperf.collectors", "wsperf.queries", "wsperf.analyses", "wsperf.cli", "wsperf"},
}
# `wsperf` itself (api/) for the CLI: only its version
CLI_FROM_PACKAGE = {"version"}


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every wsperf import in a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = {"api": "wsperf"}.get(path.parent.name, f"wsperf.{path.parent.name}")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "wsperf"]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([mod] if mod else []))
            if mod.split(".")[0] == "wsperf":
                out.append((node.lineno, mod, [a.name for a in node.names]))
    return out


def _layer(module: str, names: list[str]) -> str:
    """The package an import reaches: `wsperf.analyses.x` -> wsperf.analyses; `from wsperf
    import cli` -> wsperf.cli; `wsperf` / `wsperf.session` (the API) -> wsperf."""
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED:
        return f"wsperf.{parts[1]}"
    if module == "wsperf" and names and all(n in ALLOWED for n in names):
        return f"wsperf.{names[0]}"
    return "wsperf"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below(package):
    bad = []
    for path in sorted((ROOT / package).glob("*.py")):
        for line, module, names in _imports(path):
            reach = _layer(module, names)
            if reach not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {module} ({', '.join(names) or 'module'})")
            elif package == "cli" and reach == "wsperf" and module == "wsperf" and names and \
                    not set(names) <= CLI_FROM_PACKAGE:
                bad.append(f"{path.relative_to(ROOT)}:{line}: the CLI takes {names} from the API package")
    assert not bad, "\n".join(bad)


def test_the_cli_reaches_the_api_package_only_for_its_version():
    uses = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "wsperf":
                uses.append(node.attr)
    assert set(uses) <= CLI_FROM_PACKAGE, uses


def test_the_contract_catches_an_import_upward(tmp_path):
    """The pass itself: a collectors module that imports the analyses (or, lazily, the CLI) is
    caught, relative imports included."""
    bad = tmp_path / "collectors" / "x.py"
    bad.parent.mkdir()
    bad.write_text("def f():\n    from wsperf.cli import render\n    from ..analyses import sql\n", encoding="utf-8")
    reach = [_layer(m, n) for _, m, n in _imports(bad)]
    assert reach == ["wsperf.cli", "wsperf.analyses"]
    assert not set(reach) & ALLOWED["collectors"]
