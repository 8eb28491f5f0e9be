"""The one contract (architecture.md, "Interfaces"): every analysis is ``analyse(inputs, *, engine=None,
**options) -> Result``, takes inputs that ``gpuan/trace/`` loaded, and never reads or writes a file, looks
at the file system or the environment, nor prints, warns or logs. Checked by walking the source of every
module of every analysis package.

The one way an analysis reaches data on disk is through the loaded-input objects of ``gpuan.trace.inputs``:
their types may load lazily (``RankSource.load`` reads one rank's trace, ``TensorInputs.windows`` streams a
tensor log in windows), so that a run bigger than memory is still handed over already opened, by the
caller. Everything else an analysis needs arrives as an argument: no ``os.environ``, no ``os.path.exists``,
no ceilings file (a loaded ``Ceilings`` comes in; ``gpuan.devices.model`` types are fine), no JIT cache."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuan"
ANALYSES = ("info", "cycles", "compare", "sol", "streams", "tensors", "replay", "fleet")

# what an analysis may use of gpuan/trace/: the table and its model, never a reader
TRACE_MODEL = {
    "gpuan.trace",  # the package itself, for `from gpuan.trace import <model module>`
    "gpuan.trace.schema",
    "gpuan.trace.kinds",
    "gpuan.trace.projection",  # what an analysis reads of the table: a declaration, no reading
    "gpuan.trace.table",
    "gpuan.trace.launch",
    "gpuan.trace.launch_dims",
    "gpuan.trace.nesting",
    "gpuan.trace.gguf_names",
    "gpuan.trace.gguf_map",  # the ModelMap type; an analysis is handed a loaded one
    "gpuan.trace.inputs",  # the loaded inputs' types (tensors, replay sources, cycle tables)
}
FORBIDDEN_PACKAGES = ("gpuan.cli", "gpuan.outputs", "gpuan.synth")
# modules whose only use here would be to read or write files, or to print or log
FORBIDDEN_MODULES = {
    "sqlite3", "gzip", "mmap", "tempfile", "shutil", "glob", "csv", "isal", "rich", "xlsxwriter", "plotly",
    "pyarrow.parquet", "pyarrow.csv", "pyarrow.json", "pyarrow.feather", "pickle", "logging",
}  # fmt: skip
# names, and everything inside them, that reach the disk, the environment or the user on the analysis's behalf:
# caught when imported (`from gpuan.devices import ceilings`, `from os import environ`) and when used
# (`os.environ.get(...)`, `os.path.isfile(p)`; all of os.path, since an analysis is handed no path to take apart)
REACHING_OUT = {
    "gpuan.devices.ceilings": "reads the ceilings file; take a loaded Ceilings",
    "gpuan.devices.calibrate": "measures this machine",
    "gpuan.jit_cache": "looks at the JIT cache on disk",
    "gpuan.jit_functions": "looks at the JIT cache on disk",
    "gpuan.capture": "captures a live process",
    **dict.fromkeys(("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv"),
                    "reads the environment; take an option"),
    "os.path": "looks at the file system; inputs come loaded",
    **dict.fromkeys(("warnings.warn", "warnings.warn_explicit"), "warns; say it in the Result's summary"),
}  # fmt: skip
FORBIDDEN_CALLS = {"open", "print", "input"}
FORBIDDEN_METHODS = {
    "write_text", "write_bytes", "read_text", "read_bytes", "mkdir", "makedirs", "unlink", "to_csv", "to_parquet",
    "to_excel", "to_json", "write_table", "read_table", "write_html", "write_image", "savefig", "memmap",
    "fromfile", "tofile", "savez", "exists", "is_file", "is_dir", "is_symlink", "stat", "lstat", "iterdir",
    "glob", "rglob",
}  # fmt: skip
FORBIDDEN_QUALIFIED = {"json.dump", "json.load", "np.load", "np.save", "numpy.load", "numpy.save", "sys.stdout.write",
                       "sys.stderr.write", "os.listdir", "os.scandir", "os.walk", "os.remove", "os.rename",
                       "os.access", "os.stat", "os.lstat"}  # fmt: skip


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _reaching_out(name: str) -> str | None:
    """Return why importing or using `name` breaks the contract (see REACHING_OUT), else None."""
    return next((why for what, why in REACHING_OUT.items() if name == what or name.startswith(what + ".")), None)


def problems(source: str, module: str) -> list[str]:
    """Return what in `source` (the text of `module`) breaks the contract, one line each."""
    found = []
    reported = set()  # (line, column) of expressions already reported, so that os.path.isfile(p) counts once
    for node in ast.walk(ast.parse(source)):  # outer nodes come before the ones inside them
        line = f"{module}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            names, members = [a.name for a in node.names], []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the module's package
                base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
            # what it names in that module, which may be modules too: `from gpuan.devices import ceilings`,
            # `from gpuan import jit_cache`, `from os import environ`
            members = [f"{base}.{a.name}" for a in node.names]
            # `from gpuan.trace import kineto` imports the module gpuan.trace.kineto
            names = [base] + (members if base == "gpuan.trace" else [])
        elif isinstance(node, ast.Call):
            callee = _dotted(node.func)
            last = callee.rsplit(".", 1)[-1]
            if (
                callee in FORBIDDEN_CALLS
                or callee in FORBIDDEN_QUALIFIED
                or (isinstance(node.func, ast.Attribute) and last in FORBIDDEN_METHODS)
            ):
                found.append(f"{line}: calls {callee}()")
                reported.add((node.func.lineno, node.func.col_offset))
            continue
        elif isinstance(node, ast.Attribute):
            dotted, where = _dotted(node), (node.lineno, node.col_offset)
            if why := _reaching_out(dotted):
                if where not in reported:
                    found.append(f"{line}: uses {dotted} ({why})")
                reported.add(where)  # the os.environ inside os.environ.get is the same use
            continue
        else:
            continue
        found += _import_problems(line, names, members)
    return found


def _import_problems(line: str, names: list[str], members: list[str]) -> list[str]:
    """Return what an import breaks: `names` are the modules it imports, `members` what it takes from one."""
    for name in names + members:
        if why := _reaching_out(name):  # once per import: the module, else the first member that is out
            return [f"{line}: imports {name} ({why})"]
    found = []
    for name in names:
        if name in FORBIDDEN_MODULES or name.split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"{line}: imports {name}")
        elif name.startswith(FORBIDDEN_PACKAGES):
            found.append(f"{line}: imports {name} (an analysis does not render, print or generate)")
        elif name.startswith("gpuan.trace") and name not in TRACE_MODEL and not _is_package_import(name):
            found.append(f"{line}: imports the reader {name} (inputs are loaded by gpuan/trace/)")
    return found


def _is_package_import(name: str) -> bool:
    # `from gpuan.trace import X` lists both gpuan.trace (allowed) and gpuan.trace.X (checked on its own)
    return name == "gpuan.trace"


def _modules():
    for package in ANALYSES:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            yield ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts), path


@pytest.mark.parametrize("package", ANALYSES)
def test_analysis_package_exists(package):
    assert (PACKAGE / package / "__init__.py").is_file(), f"gpuan/{package}/ is the package of `gpuan {package}`"


def test_no_analysis_module_reads_writes_or_prints():
    found = [p for module, path in _modules() for p in problems(path.read_text(), module)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("package", ANALYSES)
def test_every_analysis_has_the_one_signature(package):
    analyse = importlib.import_module(f"gpuan.{package}").analyse
    params = list(inspect.signature(analyse).parameters.values())
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, "the loaded inputs come first"
    engine = inspect.signature(analyse).parameters["engine"]
    assert engine.kind is inspect.Parameter.KEYWORD_ONLY and engine.default is None
    assert all(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[1:]), "options are keywords"
    assert "Result" in str(inspect.signature(analyse).return_annotation)


# the checker itself: each rule catches what it is for, so that a clean walk means something
@pytest.mark.parametrize(
    "source, what",
    [
        ("from gpuan.trace.load import load", "reader gpuan.trace.load"),
        ("from gpuan.trace import kineto", "reader gpuan.trace.kineto"),
        ("from ..trace import otf2", "reader gpuan.trace.otf2"),
        ("import gpuan.outputs.files", "imports gpuan.outputs.files"),
        ("from gpuan.cli.loading import load_trace", "imports gpuan.cli.loading"),
        ("import pyarrow.parquet as pq", "imports pyarrow.parquet"),
        ("def f(p):\n    with open(p) as fh:\n        return fh.read()", "calls open()"),
        ("def f(x):\n    print(x)", "calls print()"),
        ("def f(t, p):\n    t.to_pandas().to_csv(p)", "calls to_csv()"),
        ("import json\ndef f(x, fh):\n    json.dump(x, fh)", "calls json.dump()"),
        ("def f(p, s):\n    p.write_text(s)", "calls p.write_text()"),
        # the environment
        ("import os\ndef f():\n    return os.environ.get('GPUAN_MPI')", "uses os.environ.get"),
        ("import os\ndef f():\n    return os.environ['GPUAN_MPI']", "uses os.environ"),
        ("import os\ndef f():\n    return 'GPUAN_MPI' in os.environ", "uses os.environ"),
        ("import os\ndef f():\n    return os.getenv('GPUAN_MPI')", "uses os.getenv"),
        ("from os import environ", "imports os.environ"),
        ("from os import getenv", "imports os.getenv"),
        # the file system
        ("import os\ndef f(p):\n    return os.path.exists(p)", "calls os.path.exists()"),
        ("import os\ndef f(p):\n    return os.path.getsize(p)", "uses os.path.getsize"),
        ("import os.path", "imports os.path"),
        ("from os import path", "imports os.path"),
        ("from os.path import isfile", "imports os.path"),
        ("def f(p):\n    return p.exists()", "calls p.exists()"),
        ("from pathlib import Path\ndef f(p):\n    return Path(p).is_file()", "calls is_file()"),
        ("def f(p):\n    return p.stat().st_mtime", "calls p.stat()"),
        ("import os\ndef f(p):\n    return os.stat(p)", "calls os.stat()"),
        ("def f(d):\n    return list(d.iterdir())", "calls d.iterdir()"),
        ("def f(d):\n    return sorted(d.glob('*.json'))", "calls d.glob()"),
        ("def f(d):\n    return sorted(d.rglob('*.json'))", "calls d.rglob()"),
        # warnings and logs
        ("import warnings\ndef f():\n    warnings.warn('slow')", "uses warnings.warn"),
        ("from warnings import warn", "imports warnings.warn"),
        ("import logging", "imports logging"),
        ("from logging import getLogger", "imports logging"),
        # gpuan modules that read files, measure or capture on the analysis's behalf
        ("from gpuan.devices.ceilings import read_ceilings", "imports gpuan.devices.ceilings"),
        ("from gpuan.devices import ceilings", "imports gpuan.devices.ceilings"),
        ("import gpuan.devices.ceilings", "imports gpuan.devices.ceilings"),
        ("from ..devices import ceilings", "imports gpuan.devices.ceilings"),
        ("from gpuan.devices.calibrate import calibrate", "imports gpuan.devices.calibrate"),
        ("from gpuan.jit_cache import compiled_on_disk", "imports gpuan.jit_cache"),
        ("from gpuan import jit_cache", "imports gpuan.jit_cache"),
        ("from .. import jit_cache", "imports gpuan.jit_cache"),
        ("from gpuan.capture.live import capture", "imports gpuan.capture"),
        ("import gpuan.capture", "imports gpuan.capture"),
    ],
)
def test_the_checker_catches(source, what):
    assert any(what in p for p in problems(source, "gpuan.sol.example")), problems(source, "gpuan.sol.example")


@pytest.mark.parametrize(
    "source",
    [
        "from gpuan.trace.table import Trace",
        "from gpuan.trace import schema",
        "import json\ndef f(x):\n    return json.dumps(x)",
        "def f(src):\n    return src.load()",
        "def f(t):\n    return t.to_pandas()",
        # the types of the hardware model and of the loaded inputs, which may load lazily (see the docstring)
        "from gpuan.devices.model import GPU",
        "from gpuan.devices import lookup",
        "from gpuan.trace.inputs import RankSource, TensorInputs",
        "def f(source):\n    return source.load()",
        "def f(inputs):\n    return [w for _, w in inputs.windows(1 << 20)]",
        # an engine is resolved, never a path; catching warnings of numpy is not warning
        "from gpuan import engine\ndef f(e):\n    return engine.resolve(e)",
        "import warnings\ndef f(a):\n    with warnings.catch_warnings():\n        return a / 0",
        "import os\ndef f():\n    return os.cpu_count()",
    ],
)
def test_the_checker_allows(source):
    assert problems(source, "gpuan.sol.example") == []
