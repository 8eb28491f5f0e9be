"""What the commands need to know about numba's compiled code."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


def compiled_on_disk(dispatcher) -> bool:
    """Return whether numba's on-disk cache already holds the compiled code of `dispatcher` (an
    ``@njit(cache=True)`` function); if not, its first call compiles it. Best effort: True when it
    cannot tell."""
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except AttributeError:
        return True


#: the numba module whose import probes for BLAS by importing scipy.linalg (a quarter to a third of a
#: second on a 2-core machine: scipy.linalg pulls in numpy.f2py), and the probe it calls
_ARRAYMATH = "numba.np.arraymath"


class _ArraymathWithoutScipy(importlib.abc.MetaPathFinder):
    """Import numba's array-math registry with its BLAS probe deferred (see :func:`defer_blas_probe`)."""

    def find_spec(self, name, path=None, target=None):
        if name != _ARRAYMATH:
            return None
        sys.meta_path.remove(self)  # once; the finders after this one find the module
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module):
            import numba.np.linalg as linalg

            probe = getattr(linalg, "ensure_blas", None)
            linalg.ensure_blas = _blas_later
            try:
                run(module)
            finally:
                if probe is not None:  # numba's own probe again, for what compiles BLAS calls
                    linalg.ensure_blas = probe
                    if getattr(module, "ensure_blas", None) is _blas_later:
                        module.ensure_blas = probe

        loader.exec_module = exec_module  # this spec's own loader object: nothing else is patched
        return spec


def _blas_later() -> None:
    """Say that BLAS is there (it is: scipy is installed) without importing it: numba's linear algebra
    imports scipy.linalg when it compiles a function that calls it, as it does anyway."""


def defer_blas_probe() -> None:
    """Make numba's first compile or cache load of this process skip importing scipy.linalg.

    numba loads its array-math registry (``numba.np.arraymath``) on its first compile or cache load,
    and that module's import asks whether BLAS is there by importing ``scipy.linalg`` (numpy.f2py and
    scipy's array API layer with it): most of the time a command on a small trace spends loading the
    compiled scanner, for an answer that only ``np.dot`` and ``np.linalg`` inside numba code need, and no
    gpuan kernel calls them. Where scipy is installed (where the probe would say yes), this makes the
    probe say yes without the import; numba still imports scipy.linalg when it compiles a function that
    calls BLAS. Does nothing where scipy is not installed, where array-math is already imported, or
    where numba has changed so that the probe is not there. For the command line: a process that
    imports gpuan as a library keeps numba's own behaviour."""
    if _ARRAYMATH in sys.modules or importlib.util.find_spec("scipy") is None:
        return
    if not any(isinstance(f, _ArraymathWithoutScipy) for f in sys.meta_path):
        sys.meta_path.insert(0, _ArraymathWithoutScipy())
