"""The command line answers --version, --help and usage errors without loading numpy, pyarrow, pandas or
numba (they take most of a second to import; users run gpuan many times a day). Checked by what a fresh
interpreter has imported, not by timing it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pyarrow", "pandas", "numba", "rich", "plotly")

_PROBE = """
import json, sys
from gpuan.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))


def _run(*argv: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120)
    return json.loads(r.stdout.strip().splitlines()[-1])


COMMANDS = (
    "info", "convert", "cycles", "compare", "streams", "sol", "tensors", "replay", "fleet", "demo", "precompile",
)  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [("--version",), ("--help",), *[(c, "--help") for c in COMMANDS]],
    ids=lambda a: " ".join(a),
)
def test_help_and_version_load_no_array_library(argv):
    seen = _run(*argv)
    assert seen["code"] == 0 and seen["heavy"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ("info",),  # the trace is missing
        ("--device", "H100", "info", "t.json"),  # a GPU model where the engine goes
        ("streams", "t.json", "--streams", "0"),
        ("tensors", "t.log", "--format", "seed64"),  # the log layout where the output format goes
        ("cycles", "t.json", "--mode", "nope"),
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors_load_no_array_library(argv):
    seen = _run(*argv)
    assert seen["code"] == 2 and seen["heavy"] == []


def test_a_command_that_runs_does_load_them(tmp_path):
    # the probe can see them: the command line imports the analyses when it has work to do
    seen = _run("info", str(tmp_path / "missing.json"))
    assert seen["code"] == 2 and "numpy" in seen["heavy"]
