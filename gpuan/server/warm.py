"""What the server loads before it serves: every gpuan module a command on the CPU imports, and the
machine code of every numba function that numba's on-disk cache holds for the code as it is.

It runs nothing and starts nothing: no kernel, no numba thread pool (its parallel functions are left to
load in the child), no GPU, no thread of its own (numpy's OpenBLAS and pyarrow's jemalloc each start one
as they are imported, and both prepare for a fork). A child forked from the server therefore starts
with no thread that fork would have lost and with CUDA untouched, so that a command may still pick the
GPU (``--device gpu``) in the child."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from dataclasses import dataclass

#: the modules the server does not import, by a part of their dotted name: what reaches a GPU at import
#: (``*_cuda``, ``*_gpu``, ``gpu`` packages), the live tracker (torch), the server itself and
#: ``__main__`` (which runs the command line)
_SKIPPED_PARTS = ("gpu", "capture", "server", "__main__")
_SKIPPED_SUFFIXES = ("_cuda", "_gpu")
#: libraries that commands import only when they need them (reports, progress bars, gzip, Parquet,
#: spreadsheets, HTML views, GGUF files): each missing one is skipped
LAZY_LIBRARIES = (
    "rich.console", "rich.table", "rich.markup", "rich.progress", "isal.isal_zlib", "isal.igzip",
    "pyarrow.compute", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.pandas_compat", "multiprocessing",
    "xlsxwriter", "gguf", "plotly.graph_objects", "plotly.subplots",
)  # fmt: skip
#: modules whose presence after the warm-up would make a fork unsafe or a GPU command fail
FORBIDDEN = ("cupy", "torch", "mpi4py.MPI", "numba.cuda", "ucxx")


def fork_safe() -> list[str]:
    """Return what in this process would make a forked child fail: FORBIDDEN modules imported, numba's
    thread pool started (empty when a fork is safe)."""
    unsafe = [name for name in FORBIDDEN if name in sys.modules]
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and getattr(parallel, "_is_initialized", False):
        unsafe.append("numba's thread pool")
    return unsafe


@dataclass(frozen=True)
class Warmth:
    """What :func:`warm` loaded: modules imported, numba functions and compiled signatures loaded from
    the cache, and the seconds it took; `failed` names the modules that did not import (with why)."""

    modules: int
    functions: int
    signatures: int
    seconds: float
    failed: tuple[str, ...]


def warm() -> Warmth:
    """Import gpuan's CPU modules and the libraries its commands import lazily, and load numba's cached
    machine code for each of gpuan's functions; returns what was loaded (:class:`Warmth`)."""
    from gpuan.jit_cache import lighter_numba_start

    start = time.perf_counter()
    lighter_numba_start()
    import gpuan

    failed: list[str] = []
    _import_tree(gpuan, failed)
    for name in LAZY_LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            failed.append(f"{name}: {e}")
    functions, signatures = load_cached()
    modules = sum(1 for name in sys.modules if name == "gpuan" or name.startswith("gpuan."))
    return Warmth(modules, functions, signatures, time.perf_counter() - start, tuple(failed))


def _import_tree(package, failed: list[str]) -> None:
    """Import every module under `package` but the skipped ones and what is under them (unlike
    pkgutil.walk_packages, which imports every package to look inside); `failed` gets each failure."""
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if _skipped(info.name):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as e:  # a module for an optional extra that is not installed, say
            failed.append(f"{info.name}: {type(e).__name__}: {e}")
            continue
        if info.ispkg:
            _import_tree(module, failed)


def load_cached() -> tuple[int, int]:
    """Load every signature that numba's cache on disk holds, and this process has not loaded, of the
    cached functions of the gpuan modules imported; returns how many functions there are and how many
    signatures were loaded. The server calls it again after its children end: what a child compiled
    (a trace of new types, a first run after an install) is then loaded in the server too."""
    functions = signatures = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("gpuan.") and module is not None:
            for dispatcher in _cached_functions(module):
                functions += 1
                signatures += _load_cached(dispatcher)
    return functions, signatures


def loaded() -> int:
    """Return how many compiled signatures of gpuan's cached functions this process holds."""
    return sum(
        len(dispatcher.overloads)
        for name, module in list(sys.modules.items())
        if name.startswith("gpuan.") and module is not None
        for dispatcher in _cached_functions(module)
    )


def _skipped(name: str) -> bool:
    parts = name.split(".")[1:]
    return any(p in _SKIPPED_PARTS or p.endswith(_SKIPPED_SUFFIXES) for p in parts)


def _cached_functions(module) -> list:
    """Return the ``@njit(cache=True)`` functions that `module` defines."""
    from numba.core.registry import CPUDispatcher

    return [
        value
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher)
        and getattr(value, "__module__", None) == module.__name__
        and getattr(value, "_cache", None) is not None
        and getattr(value._cache, "_enabled", False)
        # loading a parallel function starts numba's thread pool, which a forked child cannot use
        and not value.targetoptions.get("parallel")
    ]


def _load_cached(dispatcher) -> int:
    """Load every signature of `dispatcher` that numba's cache holds for its current code and this
    machine; returns how many it loaded. What the cache holds for older code is left alone: loading it
    would compile."""
    cache = dispatcher._cache
    try:
        index = cache._cache_file._load_index()
    except Exception:  # an unreadable index: the child compiles or loads on first call, as ever
        return 0
    codegen = dispatcher.targetctx.codegen()
    loaded = 0
    for index_key in index:
        sig = index_key[0]
        if sig in dispatcher.overloads:
            continue
        if index_key != cache._index_key(sig, codegen):
            continue  # another machine, or an older version of the function's code
        try:
            dispatcher.compile(sig)
        except Exception:
            continue
        loaded += 1
    return loaded
