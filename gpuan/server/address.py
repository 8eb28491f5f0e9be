"""Where the server of an environment listens: one Unix socket per user, interpreter, gpuan source
and import-time settings, so that a command never runs in a server that would run other code or other
settings than the command itself would.

Stdlib only and a millisecond's work: every ``gpuan`` command computes it before anything else."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys

#: environment variables read when modules are imported (numba's config, thread pools, Python's own,
#: the locale and time zone) or by gpuan: a server serves only the commands whose values are its own
_SETTINGS = (
    "GPUAN_", "NUMBA_", "PYTHON", "CUDA_", "OMP_", "MKL_", "OPENBLAS_", "ARROW_", "LD_", "LANG", "LC_", "TZ",
)  # fmt: skip
#: variables that say whether to use the server, not how a command runs
_NOT_SETTINGS = ("GPUAN_SERVER",)
#: the libraries a command runs: where each is installed is part of the key, and so is when that
#: directory last changed (an install, an upgrade or a removal there changes it)
_LIBRARIES = (
    "numpy", "pyarrow", "pandas", "numba", "llvmlite", "isal", "rich", "xlsxwriter", "plotly", "gguf", "msgspec",
    "cupy", "mpi4py",
)  # fmt: skip


class AddressError(OSError):
    """The socket directory is not one only this user can use; no server is used or started."""


def runtime_dir() -> str:
    """Return the directory of this user's server sockets (made, mode 0700, if missing): under
    ``$XDG_RUNTIME_DIR``, else ``/tmp/gpuan-<uid>``. Raises AddressError when it is not this user's
    alone."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = os.path.join(base, "gpuan") if base and os.path.isdir(base) else f"/tmp/gpuan-{os.getuid()}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise AddressError(f"{path} is not a directory of this user's alone (mode 0700); no gpuan server is used")
    return path


def key(environ: dict[str, str] | os._Environ = os.environ) -> str:
    """Return 16 hex digits that name the code and settings a command runs with: the interpreter (its
    prefix and flags), the gpuan package's source files (paths, sizes and modification times), where its
    libraries are installed and when those directories last changed, the process's settings that a
    child would otherwise take from the server (CPUs, groups, limits, priority, cgroup, mount namespace)
    and the import-time settings in `environ`."""
    h = hashlib.sha256()
    h.update(f"{os.getuid()}\0{os.path.realpath(sys.executable)}\0{sys.version}\0{sys.prefix}\0".encode())
    h.update(f"{sys.flags}\0{sys.warnoptions}\0{sys._xoptions}\0".encode())
    h.update(_process_settings().encode())
    package = package_dir()
    for top, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(top, name))
                h.update(f"{top}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for name in _LIBRARIES:
        spec = importlib.util.find_spec(name)  # finds, imports nothing
        where = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else "-"
        h.update(f"{name}\0{where}\0{os.stat(where).st_mtime_ns if where != '-' else 0}\0".encode())
    for name in sorted(environ):
        if name.startswith(_SETTINGS) and name not in _NOT_SETTINGS:
            h.update(f"{name}={environ[name]}\0".encode())
    return h.hexdigest()[:16]


def _process_settings() -> str:
    """Return what a process inherits that a forked child would take from the server instead of the
    client: CPU affinity (gpuan's and numba's thread counts follow it), groups, resource limits, niceness,
    cgroup (a batch job's CPUs and memory) and mount namespace (what paths mean)."""
    import resource

    parts = [
        sorted(os.sched_getaffinity(0)),
        sorted(os.getgroups()),
        [resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA, resource.RLIMIT_NOFILE,
                                          resource.RLIMIT_STACK, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE)],
        os.getpriority(os.PRIO_PROCESS, 0),
    ]  # fmt: skip
    for proc in ("/proc/self/cgroup",):
        try:
            with open(proc) as f:
                parts.append(f.read())
        except OSError:
            parts.append("-")
    try:
        parts.append(os.stat("/proc/self/ns/mnt").st_ino)
    except OSError:
        parts.append("-")
    return repr(parts)


def package_dir() -> str:
    """Return the directory of the gpuan package this process runs."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: the longest path a Unix socket may have (``sun_path`` less its NUL), less the ``.<pid>`` of the name a
#: server binds first (:func:`gpuan.server.serve.serve`)
MAX_SOCKET_PATH = 107 - 8


def socket_path(environ: dict[str, str] | os._Environ = os.environ) -> str:
    """Return the path of the socket of the server for `environ` (see :func:`key`). Raises AddressError
    as :func:`runtime_dir` does, and where the path is too long for a Unix socket (a long
    ``$XDG_RUNTIME_DIR``): no server could listen there."""
    path = os.path.join(runtime_dir(), f"server-{key(environ)}.sock")
    if len(path.encode()) > MAX_SOCKET_PATH:
        raise AddressError(f"{path} is too long for a Unix socket; no gpuan server is used")
    return path


def beside(path: str, suffix: str) -> str:
    """Return the path of the server's file `suffix` (".log", ".lock", ".failed") beside its socket `path`."""
    return path[: -len(".sock")] + suffix
