"""Run a golden case and describe what a user saw, as text: each step's exit code, stdout and stderr, then
every file it left behind (small text whole; workbooks by their cells; Parquet by schema and rows; large
or binary files by a digest of their normalised bytes)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
EXPECTED = Path(__file__).resolve().parent / "expected"
_WHOLE = 48_000  # text files up to this size are kept whole, larger ones by digest and head
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def environment(cache: Path) -> dict[str, str]:
    """The environment every step runs in: the CPU engine, no colour, a fixed width, a private cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAN_", "OMPI_", "PMI_", "MPI"))}
    env.update(GPUAN_DEVICE="cpu", GPUAN_CACHE_DIR=str(cache), COLUMNS="120", TERM="dumb", NO_COLOR="1")
    env.update(PYTHONHASHSEED="0", TZ="UTC")
    return env


def command(step: list[str], out: Path, mpi: int = 0) -> list[str]:
    """The argument list of one step, placeholders filled in."""
    args = [a.replace("{data}", str(DATA)).replace("{out}", str(out)) for a in step]
    if args[0] == "python":
        return [sys.executable, *args[1:]]
    launcher = ["mpiexec", "-n", str(mpi)] if mpi else []
    return [*launcher, sys.executable, "-m", "gpuan", *args]


def normalise(data: bytes, out: Path) -> bytes:
    """`data` with the case's directory and the data directory as placeholders (also where JSON escaped their
    slashes, so that a digest does not depend on where the checkout lies), and random ids fixed."""
    for path, name in ((str(out), b"{out}"), (str(DATA), b"{data}")):
        # plotly's JSON writes "/" as "\u002f", json.dumps may write "\/": the paths in either spelling
        for spelling in (path, path.replace("/", "\\u002f"), path.replace("/", "\\/")):
            data = data.replace(spelling.encode(), name)
    return _UUID.sub(b"00000000-0000-0000-0000-000000000000", data)


def run_case(steps: list[list[str]], out: Path, mpi: int = 0) -> str:
    """Run the steps of one case in `out` (made empty first) and return what they produced, as text."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out.parent / f"{out.name}.cache"
    cache.mkdir(exist_ok=True)
    parts = []
    for i, step in enumerate(steps):
        r = subprocess.run(command(step, out, mpi), capture_output=True, env=environment(cache), cwd=out)
        shown = " ".join(step[:2]) + (" ..." if step[0] == "python" else " " + " ".join(step[2:]))
        parts.append(f"=== step {i}: {shown}\n--- exit {r.returncode}\n")
        parts.append("--- stdout\n" + _stream(normalise(r.stdout, out)))
        parts.append("--- stderr\n" + _stream(normalise(r.stderr, out)))
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        parts.append(f"=== file {path.relative_to(out)}\n{describe(path, out)}")
    return "".join(parts)


def _stream(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if len(data) <= _WHOLE:
        return text
    head = "".join(text.splitlines(keepends=True)[:40])
    return f"{head}... {len(data):,} bytes, {text.count(chr(10)):,} lines, sha256 {hashlib.sha256(data).hexdigest()}\n"


def describe(path: Path, out: Path) -> str:
    """A text that changes when, and only when, what a user sees in the file changes."""
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix == ".xlsx":
        return _workbook(path)
    if suffix == ".parquet":
        return _parquet(path, out)
    data = normalise(path.read_bytes(), out)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"binary, {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}\n"
    if suffix == ".html" or len(data) > _WHOLE:
        head = "".join(text.splitlines(keepends=True)[:15]) if suffix != ".html" else ""
        lines = text.count("\n")
        return f"text, {len(data):,} bytes, {lines:,} lines, sha256 {hashlib.sha256(data).hexdigest()}\n{head}"
    return text if text.endswith("\n") else text + "\n(no newline at end)\n"


def _workbook(path: Path) -> str:
    import openpyxl

    book = openpyxl.load_workbook(path)
    parts = []
    for sheet in book.worksheets:
        parts.append(f"sheet {sheet.title!r} {sheet.dimensions} freeze={sheet.freeze_panes} "
                     f"filter={sheet.auto_filter.ref} rules={len(sheet.conditional_formatting)}\n")  # fmt: skip
        rows = ["\t".join("" if v is None else repr(v) for v in row) for row in sheet.iter_rows(values_only=True)]
        text = "\n".join(rows) + "\n"
        if len(text) > _WHOLE:
            digest = hashlib.sha256(text.encode()).hexdigest()
            text = "\n".join(rows[:15]) + f"\n... {len(rows):,} rows, sha256 {digest}\n"
        parts.append(text)
    return "".join(parts)


def _value(data: bytes) -> str:
    try:
        return data.decode("utf-8")[:2000]
    except UnicodeDecodeError:
        return f"binary, {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}"


def _parquet(path: Path, out: Path) -> str:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = table.schema.to_string(show_schema_metadata=False)
    meta = {k.decode(): v for k, v in (table.schema.metadata or {}).items() if k != b"pandas"}
    sink = io.BytesIO()
    pacsv.write_csv(table, sink)
    rows = normalise(sink.getvalue(), out)
    meta_text = "".join(f"meta {k}: {_value(normalise(v, out))}\n" for k, v in sorted(meta.items()))
    return (f"{table.num_rows:,} rows\n{schema}\n{meta_text}rows sha256 {hashlib.sha256(rows).hexdigest()}\n"
            + "\n".join(rows.decode().splitlines()[:6]) + "\n")  # fmt: skip
