"""Every GPU kernel has a CPU twin and a test that the two agree.

The kernels are found in the sources, not listed by hand: numba ``@cuda.jit`` kernels (device functions
aside) and CuPy ``ElementwiseKernel`` / ``ReductionKernel`` / ``RawKernel`` objects in ``gpuan/``, and the
``extern "C" __global__`` functions of ``cuda_kernels/*.cu``. A twin test names its kernel with
``@pytest.mark.gpu_twin("path::name")``; a numba kernel's twin tests must include one that runs in numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), so that CI, which has no GPU, runs the kernel itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CUPY_KERNELS = {"ElementwiseKernel", "ReductionKernel", "RawKernel"}
# `extern "C" __global__ void name(` or `extern "C" { ... __global__ void name(`: the entry points
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(")
_EXTERN_C = re.compile(r'extern\s+"C"')


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _is_numba_kernel(decorator: ast.AST) -> bool:
    """A ``@cuda.jit`` / ``@numba.cuda.jit(...)`` decorator that does not make a device function."""
    if not _dotted(decorator).endswith("cuda.jit"):
        return False
    if isinstance(decorator, ast.Call):
        for kw in decorator.keywords:
            if kw.arg == "device" and isinstance(kw.value, ast.Constant) and kw.value.value:
                return False
    return True


def python_kernels(source: str, path: str) -> dict[str, str]:
    """Return {"path::name": "numba" | "cupy"} for the GPU kernels defined in one Python module."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(_is_numba_kernel(d) for d in node.decorator_list):
            found[f"{path}::{node.name}"] = "numba"
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if _dotted(node.value.func).rsplit(".", 1)[-1] in _CUPY_KERNELS:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[f"{path}::{target.id}"] = "cupy"
    return found


def cuda_c_kernels(source: str, path: str) -> dict[str, str]:
    """Return {"path::name": "cuda"} for the ``__global__`` functions of one .cu file (all must be
    ``extern "C"``, so that CuPy finds them by their plain names)."""
    return {f"{path}::{name}": "cuda" for name in _GLOBAL.findall(source)}


def all_kernels() -> dict[str, str]:
    """Every GPU kernel of gpuan, by "path::name", with its kind (numba, cupy, cuda)."""
    kernels = {}
    for path in sorted((ROOT / "gpuan").rglob("*.py")):
        kernels.update(python_kernels(path.read_text(), path.relative_to(ROOT).as_posix()))
    for path in sorted((ROOT / "cuda_kernels").glob("*.cu")):
        kernels.update(cuda_c_kernels(path.read_text(), path.relative_to(ROOT).as_posix()))
    return kernels


def _function_sources(tree: ast.Module, source: str) -> dict[str, str]:
    return {n.name: ast.get_source_segment(source, n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


def twin_tests(source: str) -> dict[str, list[bool]]:
    """Return {kernel: [whether each of its twin tests runs in the simulator]} for one test module.

    A test runs in the simulator when its body, or a function of the same module that it calls, sets
    NUMBA_ENABLE_CUDASIM."""
    tree = ast.parse(source)
    functions = _function_sources(tree, source)
    found: dict[str, list[bool]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        body = functions[node.name]
        called = {_dotted(c) for c in ast.walk(node) if isinstance(c, ast.Call)}
        in_sim = "NUMBA_ENABLE_CUDASIM" in body or any(
            "NUMBA_ENABLE_CUDASIM" in functions[f] for f in called if f in functions
        )
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and _dotted(d.func).endswith("mark.gpu_twin"):
                for arg in d.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.setdefault(arg.value, []).append(in_sim)
    return found


def all_twin_tests() -> dict[str, list[bool]]:
    tests: dict[str, list[bool]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for kernel, sims in twin_tests(path.read_text()).items():
            tests.setdefault(kernel, []).extend(sims)
    return tests


def test_every_kernel_has_a_twin_test():
    kernels, tests = all_kernels(), all_twin_tests()
    assert kernels, "no GPU kernel found: the search itself is broken"
    missing = sorted(k for k in kernels if k not in tests)
    assert not missing, f"GPU kernels without a twin test (@pytest.mark.gpu_twin('path::name')): {missing}"


def test_every_numba_kernel_runs_in_the_simulator():
    kernels, tests = all_kernels(), all_twin_tests()
    missing = sorted(k for k, kind in kernels.items() if kind == "numba" and not any(tests.get(k, [])))
    assert not missing, f"numba-CUDA kernels with no twin test under NUMBA_ENABLE_CUDASIM=1: {missing}"


def test_every_twin_test_names_a_kernel_that_exists():
    kernels = all_kernels()
    stale = sorted(k for k in all_twin_tests() if k not in kernels)
    assert not stale, f"gpu_twin marks naming no kernel (renamed or removed?): {stale}"


def test_every_cuda_c_kernel_is_extern_c_and_loaded():
    """CuPy looks kernels up by their plain names, and a .cu that no module loads is dead code."""
    python = "\n".join(p.read_text() for p in (ROOT / "gpuan").rglob("*.py"))
    for path in sorted((ROOT / "cuda_kernels").glob("*.cu")):
        source = path.read_text()
        if _GLOBAL.search(source):
            assert _EXTERN_C.search(source), f'{path.name}: its __global__ functions must be extern "C"'
        assert path.name in python, f"{path.name}: no module of gpuan loads it (cupy.RawModule)"


# the search itself, on code it must find and code it must pass over


def test_the_search_finds_numba_kernels_but_not_device_functions():
    source = (
        "from numba import cuda\nimport numba\n"
        "@cuda.jit\ndef a(x): pass\n"
        "@numba.cuda.jit('void(int32[:])')\ndef b(x): pass\n"
        "@cuda.jit(device=True)\ndef helper(x): return x\n"
        "@numba.njit\ndef cpu(x): return x\n"
        "k = cupy.ElementwiseKernel('T x', 'T y', 'y = x', 'copy')\n"
        "r = cp.RawKernel(code, 'f')\n"
    )
    assert python_kernels(source, "m.py") == {
        "m.py::a": "numba", "m.py::b": "numba", "m.py::k": "cupy", "m.py::r": "cupy"
    }  # fmt: skip


def test_the_search_finds_cuda_c_entry_points():
    source = (
        'extern "C" __global__ void lengths(const int* a, int n) {}\n'
        "__device__ int helper(int x) { return x; }\n"
        'extern "C" {\n__global__ __launch_bounds__(256) void other(float* x) {}\n}\n'
    )
    assert cuda_c_kernels(source, "k.cu") == {"k.cu::lengths": "cuda", "k.cu::other": "cuda"}


def test_a_twin_test_counts_as_simulated_through_a_helper_it_calls():
    source = (
        "import pytest\n"
        "def _sim(code):\n    env = dict(NUMBA_ENABLE_CUDASIM='1')\n    return env\n"
        "@pytest.mark.gpu_twin('m.py::a')\ndef test_sim():\n    _sim('x')\n"
        "@pytest.mark.gpu_twin('m.py::a')\ndef test_gpu():\n    pass\n"
        "@pytest.mark.gpu_twin('m.py::b')\ndef test_other():\n    pass\n"
    )
    assert twin_tests(source) == {"m.py::a": [True, False], "m.py::b": [False]}
