"""wsperf's sitecustomize for Python repros (collectors/pyhook/): TVM's in-memory CUDA
modules kept in the bundle, the repro's kernels named from them, and a repro that does not
use TVM left as it was (the sitecustomize it shadows still runs).

The kept sources are what the hook wrote on the H200 when TVM TIRx (apache-tvm-tirx
0.1.0a4) built fixtures/src/tvm/tvm_block_sum_mix.py's kernel, with and without its planted
race (the bundles fixtures/evidence/tvm_block_sum and tvm_block_sum_race). The test that
runs TVM itself, without a GPU (`--compile-only`), needs an interpreter with TVM
(WSPERF_TVM_PYTHON, or this one) and is skipped without one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT
from wsperf.collectors import generated
from wsperf.collectors.scope import ScopeMode, choose_scope, jit_kernels

KEPT = sorted((ROOT / "fixtures" / "evidence").glob("tvm_block_sum*/generated/tvm/tvm_*.cu"))
REPRO = ROOT / "fixtures" / "src" / "tvm" / "tvm_block_sum_mix.py"


def _python(code: str, tmp_path: Path, *, dump: Path | None, extra_path: list[Path] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WSPERF_TVM_DUMP")}
    env["PYTHONPATH"] = os.pathsep.join(map(str, [generated.PYHOOK, *extra_path]))
    if dump is not None:
        env["WSPERF_TVM_DUMP"] = str(dump)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


def test_the_sitecustomize_it_shadows_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nopen(os.environ['MARK'], 'w').write('ran')\n")
    for dump in (None, tmp_path):
        mark = tmp_path / f"mark-{dump is None}"
        os.environ["MARK"] = str(mark)
        try:
            p = _python("import sys; print(sys.modules['sitecustomize'].__file__)", tmp_path, dump=dump,
                        extra_path=[theirs])
        finally:
            del os.environ["MARK"]
        assert p.returncode == 0, p.stderr
        assert mark.read_text() == "ran"  # the user's own sitecustomize ran once
        assert Path(p.stdout.strip()) == theirs / "sitecustomize.py"


def test_a_repro_without_tvm_is_left_alone(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    p = _python("import json, email.mime.text, xml.dom.minidom; print('ok')", tmp_path, dump=dump)
    assert p.returncode == 0 and p.stderr == "" and p.stdout == "ok\n", p.stderr
    assert list(dump.iterdir()) == []
    # without collect's dump directory the hook installs nothing at all
    p = _python("import sys; print(sum(type(f).__name__ == '_Finder' for f in sys.meta_path))", tmp_path, dump=None)
    assert p.stdout.strip() == "0"
    p = _python("import sys; print(sum(type(f).__name__ == '_Finder' for f in sys.meta_path))", tmp_path, dump=dump)
    assert p.stdout.strip() == "1"


def test_tvm_modules_kept_name_the_repro_kernels(tmp_path):
    root = tmp_path / "bundle"
    (root / generated.TVM_DUMP).mkdir(parents=True)
    for f in KEPT:
        shutil.copyfile(f, root / generated.TVM_DUMP / f.name)

    class St:  # the part of collect's state keep_tvm_dump writes to
        def __init__(self):
            self.root, self.runs, self.generated, self.warnings = root, [], {}, []

        def flush(self):
            pass

    st = St()
    generated.keep_tvm_dump(st)
    assert sorted(k for k in st.generated if k.startswith("source:tvm/")) == sorted(
        f"source:tvm/{f.name}" for f in KEPT)
    names, odd = jit_kernels(root, st.generated)
    assert names == ("tvm_block_sum_kernel",) and odd == ()  # both modules hold the one kernel
    scope = choose_scope(None, False, root, st.generated)
    assert scope.mode is ScopeMode.USER and "TVM's CUDA modules" in scope.why
    assert scope.sanitizer_args(None) == ["--kernel-name", "kne=tvm_block_sum_kernel"]
    if shutil.which("nvcc"):  # each source is compiled to PTX here for the worksheet
        ptx = [k for k in st.generated if k.startswith("ptx:tvm/")]
        assert len(ptx) == 2 and all("tvm_block_sum_kernel" in (root / st.generated[k]).read_text() for k in ptx)
    else:
        assert any("not compiled to PTX" in w for w in st.warnings)


def _tvm_python() -> str | None:
    for exe in filter(None, (os.environ.get("WSPERF_TVM_PYTHON"), sys.executable)):
        if subprocess.run([exe, "-c", "import tvm_tirx"], capture_output=True).returncode == 0:
            return exe
    return None


@pytest.mark.skipif(_tvm_python() is None, reason="needs TVM TIRx (apache-tvm-tirx; WSPERF_TVM_PYTHON names a "
                                                  "Python that has it)")
def test_tvm_itself_under_the_hook_writes_the_committed_sources(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    env = {**os.environ, "PYTHONPATH": str(generated.PYHOOK), "WSPERF_TVM_DUMP": str(dump)}
    for bug in ([], ["--bug", "race"]):
        p = subprocess.run([_tvm_python(), str(REPRO), "--compile-only", *bug], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, p.stderr
    # the same sources, byte for byte, as the H200 runs kept
    assert sorted(f.name for f in dump.iterdir()) == sorted(f.name for f in KEPT)
    for f in KEPT:
        assert (dump / f.name).read_bytes() == f.read_bytes()
