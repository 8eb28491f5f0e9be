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
