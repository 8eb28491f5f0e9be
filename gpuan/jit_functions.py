"""gpuan's cached numba functions, and what numba's on-disk cache holds of them: the modules a CPU command may
import, the ``@njit(cache=True)`` functions each defines, and a report for ``gpuan precompile`` and the server."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

from gpuan.jit_cache import compiled_on_disk

#: the modules a CPU command never imports, by a part of their dotted name: what reaches a GPU at import
#: (``*_cuda``, ``*_gpu``, ``gpu`` packages), the live tracker (torch), the server and ``__main__`` (which
#: runs the command line)
_SKIPPED_PARTS = ("gpu", "capture", "server", "__main__")
_SKIPPED_SUFFIXES = ("_cuda", "_gpu")


def import_cpu_modules(failed: list[str]) -> None:
    """Import every gpuan module a command on the CPU may import (not the GPU's, the live tracker's, the
    server's); `failed` gets each failure, with why (a module of an optional extra not installed, say)."""
    import gpuan

    _import_tree(gpuan, failed)


def _import_tree(package, failed: list[str]) -> None:
    """Import every module under `package` but the skipped ones and what is under them (unlike
    pkgutil.walk_packages, which imports every package to look inside)."""
    import pkgutil

    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        parts = info.name.split(".")[1:]
        if any(p in _SKIPPED_PARTS or p.endswith(_SKIPPED_SUFFIXES) for p in parts):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as e:
            failed.append(f"{info.name}: {type(e).__name__}: {e}")
            continue
        if info.ispkg:
            _import_tree(module, failed)


def cached_functions(module, *, parallel: bool = True) -> list:
    """Return the ``@njit(cache=True)`` functions that `module` defines; without `parallel`, not those
    compiled with ``parallel=True`` (loading one starts numba's thread pool, which a forked child cannot
    use)."""
    from numba.core.registry import CPUDispatcher

    return [
        value
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher)
        and getattr(value, "__module__", None) == module.__name__
        and getattr(value, "_cache", None) is not None
        and getattr(value._cache, "_enabled", False)
        and (parallel or not value.targetoptions.get("parallel"))
    ]


@dataclass(frozen=True)
class CacheReport:
    """What numba's on-disk cache holds of gpuan's CPU code (:func:`cache_report`): how many cached
    functions gpuan has, the names of those it lacks for this machine, where the cache lies, and the CPU
    target its code is for."""

    functions: int
    missing: tuple[str, ...]
    where: str
    target: str


def cache_report() -> CacheReport:
    """Import gpuan's CPU modules and return what numba's cache holds of their cached functions: a function
    whose cache cannot be read counts as missing. Raises ImportError naming the modules that do not import."""
    from numba.core import config

    failed: list[str] = []
    import_cpu_modules(failed)
    if failed:
        raise ImportError(f"gpuan modules that do not import: {'; '.join(failed)}")
    functions = [
        (name, f)
        for name, module in sorted(sys.modules.items())
        if name.startswith("gpuan.") and module is not None
        for f in cached_functions(module)
    ]
    missing = tuple(f"{name}.{f.__name__}" for name, f in functions if not compiled_on_disk(f, unknown=False))
    paths = [getattr(f._cache, "_cache_path", "?") for _, f in functions]
    where = os.path.commonpath(paths) if paths else "-"
    if functions and os.environ.get("NUMBA_CACHE_DIR"):
        where = f"NUMBA_CACHE_DIR, {where}"
    elif paths and all(p.endswith("__pycache__") for p in paths):
        where = f"beside the sources, {where}/**/__pycache__"
    if not config.CPU_NAME:
        target = f"CPU {_host_cpu()} (this machine's)"
    elif config.CPU_FEATURES is None:  # the name's, with this machine's features: code for this machine only
        target = f"CPU {config.CPU_NAME} (NUMBA_CPU_NAME) with this machine's features"
    else:
        features = repr(config.CPU_FEATURES) if config.CPU_FEATURES else "its own features"
        target = f"CPU {config.CPU_NAME} (NUMBA_CPU_NAME), {features}"
    return CacheReport(len(functions), missing, where, target)


def _host_cpu() -> str:
    """Return LLVM's name of this machine's CPU."""
    import llvmlite.binding as ll

    return ll.get_host_cpu_name()
