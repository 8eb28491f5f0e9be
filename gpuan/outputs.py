"""Writing output files so that a failed run never leaves half a file, nor corrupts the one it replaces."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gpuan.errors import TraceError


def replace_atomic(path: str | os.PathLike, write: Callable[[Path], None], errors: tuple = ()) -> None:
    """Run `write` on a temporary file beside `path`, then move it over `path`; on an OSError (or one of
    `errors`) remove the temporary file and raise :class:`TraceError` naming `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, *errors) as e:
        tmp.unlink(missing_ok=True)
        # writers that wrap the OSError (xlsxwriter: its first argument) report the OS reason, not the
        # temporary file's name
        cause = next((x for x in (e, *e.args) if isinstance(x, OSError)), e)
        raise TraceError(str(path), f"cannot write: {getattr(cause, 'strerror', None) or cause}") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically (:func:`replace_atomic`)."""
    replace_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


TABLE_FORMATS = ("csv", "parquet")


def write_frames(tables: dict, out: str | os.PathLike, fmt: str = "csv") -> list[Path]:
    """Write each DataFrame of `tables` to OUT/<name>.<fmt> (csv or parquet; atomically; OUT is created)
    and return the paths written."""
    if fmt not in TABLE_FORMATS:
        raise TraceError(str(out), f"unknown table format {fmt!r}; use {' or '.join(TABLE_FORMATS)}")
    d = Path(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceError(str(out), f"cannot create the output directory: {e.strerror}") from None
    written = []
    for name, df in tables.items():
        path = d / f"{name}.{fmt}"
        if fmt == "csv":
            replace_atomic(path, lambda tmp, df=df: df.to_csv(tmp, index=False))
        else:
            replace_atomic(path, lambda tmp, df=df: df.to_parquet(tmp, index=False))
        written.append(path)
    return written
