"""What the server loads before it serves: every gpuan module a command on the CPU imports, and the
machine code of every numba function that numba's on-disk cache holds for the code as it is.

It runs nothing and starts nothing: no kernel, no numba thread pool (its parallel functions are left to
load in the child), no GPU, no thread of its own (numpy's OpenBLAS and pyarrow's jemalloc each start one
as they are imported, and both prepare for a fork). A child forked from the server therefore starts
with no thread that fork would have lost and with CUDA untouched, so that a command may still pick the
GPU (``--device gpu``) in the child."""

from __future__ import annotations

import importlib
import sys
import time
from dataclasses import dataclass

from gpuan.jit_cache import index_matches, lighter_numba_start
from gpuan.jit_functions import cached_functions, import_cpu_modules

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
    start = time.perf_counter()
    lighter_numba_start()
    failed: list[str] = []
    import_cpu_modules(failed)
    for name in LAZY_LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            failed.append(f"{name}: {e}")
    functions, signatures = load_cached()
    modules = sum(1 for name in sys.modules if name == "gpuan" or name.startswith("gpuan."))
    return Warmth(modules, functions, signatures, time.perf_counter() - start, tuple(failed))


def load_cached() -> tuple[int, int]:
    """Load every signature that numba's cache on disk holds, and this process has not loaded, of the
    cached functions of the gpuan modules imported; returns how many functions there are and how many
    signatures were loaded. The server calls it again after its children end: what a child compiled
    (a trace of new types, a first run after an install) is then loaded in the server too."""
    functions = signatures = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("gpuan.") and module is not None:
            for dispatcher in cached_functions(module, parallel=False):
                functions += 1
                signatures += _load_cached(dispatcher)
    return functions, signatures


def loaded() -> int:
    """Return how many compiled signatures of gpuan's cached functions this process holds."""
    return sum(
        len(dispatcher.overloads)
        for name, module in list(sys.modules.items())
        if name.startswith("gpuan.") and module is not None
        for dispatcher in cached_functions(module, parallel=False)
    )


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
        if not index_matches(index_key, cache, codegen):
            continue  # another machine, or an older version of the function's code
        try:
            dispatcher.compile(sig)
        except Exception:
            continue
        loaded += 1
    return loaded
