"""What the commands need to know about numba's compiled code."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any


def compiled_on_disk(dispatcher, *, unknown: bool = True) -> bool:
    """Return whether numba's on-disk cache already holds compiled code of `dispatcher` (an
    ``@njit(cache=True)`` function) for its source as it is now and for this machine's CPU target; if not,
    its first call compiles it (an index written for older source, as after an upgrade, holds nothing; one
    written on another CPU holds code this machine does not load). A function counts as compiled when any of
    its signatures is. Returns `unknown` where it cannot tell (numba's private cache API changed, an
    unreadable index)."""
    try:
        cache = dispatcher._cache
        index = cache._cache_file._load_index()  # {} where missing, of another numba, or for other source
        if not index:
            return False
        codegen = dispatcher.targetctx.codegen()
        return any(index_matches(key, cache, codegen) for key in index)
    except Exception:  # (private methods numba may change)
        return unknown


def index_matches(index_key, cache, codegen) -> bool:
    """Return whether `index_key`, a key of a numba cache index, is one this process would load: the
    function's code as it is now, on this machine's CPU target (`codegen`'s)."""
    return index_key == cache._index_key(index_key[0], codegen)


@contextmanager
def compiled_beside(dispatchers: Sequence[Any], entry: str) -> Iterator[subprocess.Popen | None]:
    """Compile, in a process of its own, what `entry` ("module:function", called without arguments)
    compiles, while the block goes on; yields that process, or None where none was started.

    Where numba's on-disk cache lacks the code of any of `dispatchers` (numba functions) and the command may
    use two threads or more (:func:`gpuan.trace.threads.thread_count`), the process starts here: a command's
    first run then compiles its analysis' kernels on one core while it reads its trace (which compiles the
    JSON scanner) on the other. Inside the block, the first compile asked of one of `dispatchers` waits for
    the process to end, then loads what it wrote to the cache (or compiles, as without it, if it failed).
    Leaving the block stops the process if it still runs: the block raised (bad input is reported at once)
    or never needed the kernels. A process that cannot be started is no error: nothing starts."""
    from gpuan.trace.threads import thread_count

    if all(compiled_on_disk(d) for d in dispatchers) or thread_count() < 2 or not sys.executable:
        yield None
        return
    module, function = entry.split(":")
    try:
        child = subprocess.Popen(
            python_running(f"import importlib; importlib.import_module({module!r}).{function}()"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError:
        yield None
        return
    try:
        for d in dispatchers:
            d.compile = _after(child, d.compile)  # shadows the method, for this block only
        yield child
    finally:
        for d in dispatchers:
            vars(d).pop("compile", None)
        if child.poll() is None:
            child.kill()
        child.wait()


def python_running(statements: str) -> list[str]:
    """Return the command line of a new Python process that runs `statements` with this gpuan importable
    (this checkout's, not whatever the working directory holds: ``-c`` puts the working directory first,
    unless Python runs with safe paths) and numba started as a command starts it
    (:func:`lighter_numba_start`: among other things, its saves to the cache under a lock)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = f"import sys; sys.path[: 0 if getattr(sys.flags, 'safe_path', 0) else 1] = [{root!r}]; "
    start = "from gpuan.jit_cache import lighter_numba_start; lighter_numba_start(); "
    return [sys.executable, "-c", path + start + statements]


#: seconds a compile waits for the other process before stopping it and compiling itself (a first compile of
#: the stream simulator's event loop takes about 21 s on a 2-core machine)
WAIT_S = 300


def _after(child: subprocess.Popen, compile_: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Return numba's `compile_` (a dispatcher's bound method) made to wait for `child` to end first (stopped
    after :data:`WAIT_S` seconds: the compile then happens here)."""

    def compile(sig):
        try:
            child.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return compile_(sig)

    return compile


#: numba modules whose import :func:`lighter_numba_start` changes: two of the registries that numba's first
#: compile or cache load imports, each with what its import does that no gpuan command needs, and the cache
_ARRAYMATH = "numba.np.arraymath"  # asks whether BLAS is there by importing scipy.linalg
_CFFI_UTILS = "numba.core.typing.cffi_utils"  # imports cffi and pycparser, to type cffi functions
_CACHING = "numba.core.caching"  # whose loads first refresh (import and install) every registry


class _LighterNumbaStart(importlib.abc.MetaPathFinder):
    """Import numba's array-math and cffi registries without scipy.linalg and cffi, and its cache with loads
    that refresh no registry (see :func:`lighter_numba_start`); every other import goes on to the next
    finder."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        self.names.discard(name)
        if not self.names:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = getattr(getattr(spec, "loader", None), "exec_module", None)
        if run is not None:
            wrapped = {_ARRAYMATH: _without_blas_probe, _CFFI_UTILS: _without_cffi, _CACHING: _loads_unrefreshed}
            spec.loader.exec_module = lambda module: wrapped[name](run, module)  # this spec's own loader only
        return spec


def _without_blas_probe(run, module) -> None:
    """Run numba.np.arraymath's import with its BLAS probe answering yes without importing scipy.linalg;
    numba's own probe again after it (for what compiles BLAS calls)."""
    import numba.np.linalg as linalg

    probe = getattr(linalg, "ensure_blas", None)
    linalg.ensure_blas = _blas_later
    try:
        run(module)
    finally:
        if probe is not None:
            linalg.ensure_blas = probe
            if getattr(module, "ensure_blas", None) is _blas_later:
                module.ensure_blas = probe


def _blas_later() -> None:
    """Say that BLAS is there (it is: scipy is installed) without importing it: numba's linear algebra
    imports scipy.linalg when it compiles a function that calls it, as it does anyway."""


class _NoCffi(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "cffi" or name.startswith("cffi."):
            raise ImportError("cffi is not loaded for numba in a gpuan command")
        return None


def _without_cffi(run, module) -> None:
    """Run numba's cffi registry's import as if cffi were not installed (numba then types no cffi
    function in this process; gpuan hands numba none)."""
    hide = _NoCffi()
    sys.meta_path.insert(0, hide)
    try:
        run(module)
    finally:
        sys.meta_path.remove(hide)


def _loads_unrefreshed(run, module) -> None:
    """Run numba.core.caching's import, then make its cache files save one process at a time
    (:func:`_saves_one_at_a_time`) and its function cache load CPU code without first refreshing numba's
    registries (see :func:`lighter_numba_start`)."""
    run(module)
    _saves_one_at_a_time(module)
    cache, function_cache = getattr(module, "Cache", None), getattr(module, "FunctionCache", None)
    needs = ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")
    if cache is None or function_cache is None or not all(hasattr(cache, n) for n in needs):
        return  # not the numba this was written for: its own loads
    if "load_overload" in vars(function_cache):
        return
    refreshed = cache.load_overload

    def load_overload(self, sig, target_context):
        from numba.core.cpu import CPUContext
        from numba.core.runtime import rtsys

        if not isinstance(target_context, CPUContext):
            return refreshed(self, sig, target_context)
        try:
            rtsys.initialize(target_context)  # the runtime the machine code calls
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:  # (a symbol only a registry defines, say): as numba loads it
            return refreshed(self, sig, target_context)

    function_cache.load_overload = load_overload


#: the file, in each folder of numba's cache, whose lock a process holds while it saves compiled code there
SAVE_LOCK = "gpuan-save.lock"


def _saves_one_at_a_time(module) -> None:
    """Make numba.core.caching's cache files save under an exclusive lock of the cache folder's
    :data:`SAVE_LOCK`. numba saves a signature's code by reading the function's index, naming a data file
    after the entries it holds, and writing both back, with no lock: two processes that compile different
    signatures of one function at once (ranks of an ``mpirun`` on a cold node, a home folder's cache shared
    by nodes of different CPUs) can both take the first free name, and the index can then point one
    signature at the other's machine code. Under the lock each save reads the index as the last one left
    it. Where the lock cannot be taken (a read-only folder, a file system without locks) the save goes on
    as numba's own."""
    index_file = getattr(module, "IndexDataCacheFile", None)
    save = vars(index_file).get("save") if index_file is not None else None
    if save is None or getattr(save, "one_at_a_time", False):
        return

    def locked_save(self, key, data):
        with _held(os.path.join(self._cache_path, SAVE_LOCK)):
            return save(self, key, data)

    locked_save.one_at_a_time = True
    index_file.save = locked_save


@contextmanager
def _held(path: str) -> Iterator[None]:
    """Hold an exclusive lock of the file `path` (made if missing) within the block; where it cannot be
    taken, go on without it."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # made by another user: a lock needs no write access
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            yield
            return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def lighter_numba_start() -> None:
    """Make numba's cache loads in this process skip what loading compiled code does not need.

    numba imports and installs all its typing and lowering registries before its first compile or cache
    load: half a second of a command on a small trace on a 2-core machine, for code that is loaded as
    machine code and neither typed nor lowered again. A cache load of CPU code now initialises the runtime
    that the code calls (NRT) and loads it; only where that fails are the registries refreshed first, as
    numba does (a compile, on a cache miss, refreshes them itself). And where the registries are imported,
    two of them no longer do what no gpuan kernel needs: ``numba.np.arraymath`` asks whether BLAS is there
    by importing ``scipy.linalg`` (numpy.f2py and scipy's array API layer with it), for ``np.dot`` and
    ``np.linalg`` inside numba code: where scipy is installed (where the probe would say yes) it says yes
    without the import, and numba still imports scipy.linalg when it compiles a function that calls BLAS;
    ``numba.core.typing.cffi_utils`` imports cffi (and pycparser) to type cffi functions: it is imported
    as if cffi were absent. Its cache files save under a lock, one process at a time
    (:func:`_saves_one_at_a_time`). Nothing is done to a module already imported, nor to the probe where
    scipy is not installed. For the command line: a process that imports gpuan as a library keeps numba's
    own behaviour."""
    names = set() if _CACHING in sys.modules else {_CACHING}
    if _ARRAYMATH not in sys.modules and importlib.util.find_spec("scipy") is not None:
        names.add(_ARRAYMATH)
    if _CFFI_UTILS not in sys.modules and "cffi" not in sys.modules:
        names.add(_CFFI_UTILS)
    if names and not any(isinstance(f, _LighterNumbaStart) for f in sys.meta_path):
        sys.meta_path.insert(0, _LighterNumbaStart(names))
