"""What `wsperf collect` adds to a Python repro's interpreter: TVM's generated CUDA, kept.

TVM (apache-tvm with CUDA, apache-tvm-tirx) generates CUDA source and compiles it in
memory; it writes nothing to disk by default, so the bundle could not name the repro's own
kernels nor keep their code. collect puts this folder first on PYTHONPATH and sets
WSPERF_TVM_DUMP to a folder of the bundle. Python imports this file at start-up; it does
nothing else until TVM's `nvcc` module is imported (TVM does so while it loads), and then
registers two of TVM's own callback hooks (global functions its C++ code calls):

- `tvm_callback_cuda_postproc(code, target)`: TVM's code generator passes each CUDA module's
  source through it when the module is built (on a machine without a GPU too). The source
  is written to `<dump>/tvm_<sha1>.cu` and returned unchanged (a postproc the repro or TVM
  registered first is run first, and its result kept).
- `tvm_callback_cuda_compile(code, ...)`: TVM's CUDA runtime compiles a module with it when
  the module is first loaded on the GPU. The compiler TVM chose (nvrtc, nvcc) runs as
  before; its binary is written beside the source (`.cubin`, `.fatbin` or `.ptx`, by its
  content) and returned unchanged.

A file is written once per distinct source (the name is its hash), atomically, so the
sanitizer and profiler runs of the same repro add nothing. A failure to write never
reaches the repro. A hook the repro registers later (override=True) replaces wsperf's:
then that module's code is not kept. After this, the `sitecustomize` this file shadows (a
later one on sys.path), if any, is imported as Python would have.
"""

import hashlib
import importlib.abc
import os
import sys

_DUMP = os.environ.get("WSPERF_TVM_DUMP")
# TVM's module that registers tvm_callback_cuda_compile, per package and version.
_NVCC_MODULES = frozenset({"tvm.support.nvcc", "tvm.contrib.nvcc", "tvm_tirx.support.nvcc"})
_MAX_BYTES = 256 << 20


def _write(name, data):
    path = os.path.join(_DUMP, name)
    if os.path.exists(path) or len(data) > _MAX_BYTES:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _stem(code):
    text = code if isinstance(code, str) else str(code)
    return "tvm_" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16], text


def _binary(result):
    """The compiled bytes in a compile callback's result: bytes, or a list whose first item
    is (TVM TIRx returns [binary, format])."""
    items = [result]
    try:
        items += list(result) if not isinstance(result, (bytes, bytearray, str)) else []
    except TypeError:
        pass
    for item in items:
        if isinstance(item, (bytes, bytearray, memoryview)):
            return bytes(item)
    return None


def _suffix(data):
    if data[:4] == b"\x7fELF":
        return ".cubin"
    if data[:4] == b"\x50\xed\x55\xba":
        return ".fatbin"
    return ".ptx"


def _install(module):
    import tvm_ffi  # TVM's FFI, loaded by then

    get = tvm_ffi.get_global_func
    before = get("tvm_callback_cuda_postproc", allow_missing=True)
    # The module's own Python function where it has one: its result stays a Python value.
    compile_ = getattr(module, "tvm_callback_cuda_compile", None)
    if not callable(compile_):
        compile_ = get("tvm_callback_cuda_compile", allow_missing=True)

    def postproc(code, *args):
        if before is not None:
            code = before(code, *args)
        try:
            stem, text = _stem(code)
            _write(stem + ".cu", text.encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - never break the repro over a copy
            pass
        return code

    tvm_ffi.register_global_func("tvm_callback_cuda_postproc", postproc, override=True)
    if compile_ is None:
        return

    def compiled(code, *args):
        result = compile_(code, *args)
        try:
            data = _binary(result)
            if data:
                stem, text = _stem(code)
                _write(stem + ".cu", text.encode("utf-8", "replace"))
                _write(stem + _suffix(data), data)
        except Exception:  # noqa: BLE001
            pass
        return result

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compiled, override=True)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            _install(module)
        except Exception:  # noqa: BLE001
            pass

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _NVCC_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def _chain():
    """Import the sitecustomize this one shadows, with this folder off sys.path meanwhile."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    mine = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        if mine is not None:
            sys.modules["sitecustomize"] = mine
    finally:
        sys.path[:] = saved


if _DUMP and os.path.isdir(_DUMP):
    sys.meta_path.insert(0, _Finder())
_chain()
