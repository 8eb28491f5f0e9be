"""Writing output files so that a failed run never leaves half a file, nor corrupts the one it replaces;
and saying what was written, one line per file on stderr (stdout is the report, which may be JSON)."""

from __future__ import annotations

import contextlib
import csv
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from gpuan.errors import TraceError
from gpuan.outputs.numbers import size_text


@dataclass
class _Staged:
    """Files written inside :func:`all_or_none`, not yet in place, and the directories made for them."""

    moves: list[tuple[Path, Path, str | None]] = field(default_factory=list)  # (temporary file, final path, detail)
    made_dirs: list[Path] = field(default_factory=list)


_staged: ContextVar[_Staged | None] = ContextVar("gpuan_outputs_staged", default=None)
_serial = itertools.count()


@contextlib.contextmanager
def all_or_none() -> Iterator[None]:
    """Hold back every file this module writes inside the block: they are moved into place together when
    the block ends normally, and removed (with the directories made for them) when it raises. A command
    that writes several files thus never leaves some new and some old, nor half of its outputs."""
    staged = _Staged()
    token = _staged.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _, _ in staged.moves:
            _remove(tmp)
        for d in reversed(staged.made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()  # only if still empty: never a directory the user filled
        raise
    finally:
        _staged.reset(token)
    for tmp, path, _ in staged.moves:
        os.replace(tmp, path)
    for _, path, detail in staged.moves:
        announce(path, detail)


def announce(path: str | os.PathLike, detail: str | None = None) -> None:
    """Say on stderr that `path` was written: ``gpuan: wrote PATH (DETAIL)``, the detail being what the
    writer says it holds, else the rows of a table (CSV, Parquet) or the file's size. Every file a command
    writes is announced this way, once it is in place."""
    print(f"gpuan: wrote {path} ({detail or _contents(Path(path))})", file=sys.stderr)


def _contents(path: Path) -> str:
    """Return what a written file holds, in words: its rows for a table, else its size."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return _rows(pq.read_metadata(path).num_rows)
        if path.suffix == ".csv":
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                return _rows(max(sum(1 for _ in csv.reader(f)) - 1, 0))  # less the header
        return size_text(path.stat().st_size)
    except (OSError, ValueError, csv.Error):
        return "written"


def _rows(n: int) -> str:
    return f"{n:,} row{'s' * (n != 1)}"


def _remove(path: Path) -> None:
    # an unwritable place (a parent that is a file) fails again on unlink: nothing to remove there
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def replace_atomic(
    path: str | os.PathLike, write: Callable[[Path], None], errors: tuple = (), detail: str | None = None
) -> None:
    """Run `write` on a temporary file beside `path`, then move it over `path` (inside :func:`all_or_none`:
    when the block ends, which then announces it, with `detail` if given: see :func:`announce`); on an
    OSError (or one of `errors`) remove the temporary file and raise :class:`TraceError` naming `path`."""
    path = Path(path)
    # the suffix stays last: some writers pick the format from it
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}-{next(_serial)}{path.suffix}")
    # said here, before writing, in one way: not in each writer's words about the temporary file, nor only
    # when a staged file is moved at the end
    if not path.parent.is_dir():
        raise TraceError(str(path), f"cannot write: {_not_a_directory(path.parent)}")
    if path.is_dir():
        raise TraceError(str(path), "cannot write: Is a directory")
    staged = _staged.get()
    try:
        write(tmp)
        if staged is None:
            os.replace(tmp, path)
        else:
            staged.moves.append((tmp, path, detail))
    except (OSError, *errors) as e:
        _remove(tmp)
        # writers that wrap the OSError (xlsxwriter: its first argument) report the OS reason, not the
        # temporary file's name
        cause = next((x for x in (e, *e.args) if isinstance(x, OSError)), e)
        raise TraceError(str(path), f"cannot write: {getattr(cause, 'strerror', None) or cause}") from None
    except BaseException:
        _remove(tmp)
        raise


def _not_a_directory(d: Path) -> str:
    """Return why `d` is not a usable directory: the nearest of it and its parents that is a file, or
    that it does not exist."""
    for p in (d, *d.parents):
        if p.exists() and not p.is_dir():
            return f"{p} is a file, not a directory"
    return f"{d} does not exist"


def make_dir(path: str | os.PathLike) -> Path:
    """Create the output directory `path` (and its parents) and return it; inside :func:`all_or_none`, a
    directory made here is removed again if the block fails and leaves it empty. Raises
    :class:`TraceError` if it cannot be made."""
    d = Path(path)
    missing = [p for p in (d, *d.parents) if not p.exists()]
    try:
        d.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise TraceError(str(path), f"cannot create the output directory: {_not_a_directory(d)}") from None
    except OSError as e:
        raise TraceError(str(path), f"cannot create the output directory: {e.strerror}") from None
    staged = _staged.get()
    if staged is not None:
        staged.made_dirs.extend(reversed(missing))
    return d


def write_text(path: str | os.PathLike, text: str, detail: str | None = None) -> None:
    """Write `text` (UTF-8) to `path` atomically (:func:`replace_atomic`; `detail`: what it holds)."""
    replace_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), detail=detail)


TABLE_FORMATS = ("csv", "parquet")


def write_frames(tables: dict, out: str | os.PathLike, fmt: str = "csv") -> list[Path]:
    """Write each DataFrame of `tables` to OUT/<name>.<fmt> (csv or parquet; atomically; OUT is created)
    and return the paths written."""
    if fmt not in TABLE_FORMATS:
        raise TraceError(str(out), f"unknown table format {fmt!r}; use {' or '.join(TABLE_FORMATS)}")
    d = make_dir(out)
    written = []
    for name, df in tables.items():
        path = d / f"{name}.{fmt}"
        if fmt == "csv":
            replace_atomic(path, lambda tmp, df=df: df.to_csv(tmp, index=False), detail=_rows(len(df)))
        else:
            replace_atomic(path, lambda tmp, df=df: df.to_parquet(tmp, index=False), detail=_rows(len(df)))
        written.append(path)
    return written
