"""The one contract (architecture.md, "Interfaces"): every analysis is ``analyse(inputs, *, engine=None,
**options) -> Result``, takes inputs that ``gpuan/trace/`` loaded, and never reads or writes a file nor
prints. Checked by walking the source of every module of every analysis package."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuan"
ANALYSES = ("info", "cycles", "compare", "sol", "streams", "tensors", "replay")

# what an analysis may use of gpuan/trace/: the table and its model, never a reader
TRACE_MODEL = {
    "gpuan.trace",  # the package itself, for `from gpuan.trace import <model module>`
    "gpuan.trace.schema",
    "gpuan.trace.table",
    "gpuan.trace.launch",
    "gpuan.trace.launch_dims",
    "gpuan.trace.nesting",
    "gpuan.trace.gguf_names",
    "gpuan.trace.gguf_map",  # the ModelMap type; an analysis is handed a loaded one
    "gpuan.trace.inputs",  # the loaded inputs' types (tensors, replay sources, cycle tables)
}
FORBIDDEN_PACKAGES = ("gpuan.cli", "gpuan.outputs", "gpuan.synth")
# modules whose only use here would be to read or write files, or to print
FORBIDDEN_MODULES = {
    "sqlite3", "gzip", "mmap", "tempfile", "shutil", "glob", "csv", "isal", "rich", "xlsxwriter", "plotly",
    "pyarrow.parquet", "pyarrow.csv", "pyarrow.json", "pyarrow.feather", "pickle",
}  # fmt: skip
FORBIDDEN_CALLS = {"open", "print", "input"}
FORBIDDEN_METHODS = {
    "write_text", "write_bytes", "read_text", "read_bytes", "mkdir", "makedirs", "unlink", "to_csv", "to_parquet",
    "to_excel", "to_json", "write_table", "read_table", "write_html", "write_image", "savefig", "memmap",
    "fromfile", "tofile", "savez",
}  # fmt: skip
FORBIDDEN_QUALIFIED = {"json.dump", "json.load", "np.load", "np.save", "numpy.load", "numpy.save", "sys.stdout.write",
                       "sys.stderr.write", "os.listdir", "os.scandir", "os.walk", "os.remove", "os.rename"}  # fmt: skip


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _gpuan_module(name: str) -> bool:
    return name == "gpuan" or name.startswith("gpuan.")


def problems(source: str, module: str) -> list[str]:
    """Return what in `source` (the text of `module`) breaks the contract, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = f"{module}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the module's package
                base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
            # `from gpuan.trace import kineto` imports the module gpuan.trace.kineto
            names = [base] + ([f"{base}.{a.name}" for a in node.names] if base == "gpuan.trace" else [])
        elif isinstance(node, ast.Call):
            callee = _dotted(node.func)
            last = callee.rsplit(".", 1)[-1]
            if callee in FORBIDDEN_CALLS or callee in FORBIDDEN_QUALIFIED or (
                isinstance(node.func, ast.Attribute) and last in FORBIDDEN_METHODS
            ):
                found.append(f"{line}: calls {callee}()")
            continue
        else:
            continue
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
    ],
)
def test_the_checker_allows(source):
    assert problems(source, "gpuan.sol.example") == []
