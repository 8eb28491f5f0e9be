"""The ceilings file: the peak rates and bandwidths ``gpuan sol calibrate`` measured on this machine, by
device name (``"cpu"`` for this machine's CPU), kept at ``$GPUAN_CEILINGS`` or
``~/.cache/gpuan/ceilings.json``. Together with the datasheet tables of this package they are the
hardware facts roofline scoring takes.

Scoring never reads this file: :func:`read_ceilings` loads it (the command, the live tracker or a notebook
call it) and hands the :class:`gpuan.devices.model.Ceilings` to :func:`gpuan.sol.analyse` as its ``ceilings``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuan.devices.model import Ceilings
from gpuan.errors import UsageError

ENVIRONMENT = "GPUAN_CEILINGS"


def ceilings_path(path: str | os.PathLike | None = None) -> Path:
    """Return the ceilings file: `path` if given (``--ceilings-file``), else ``$GPUAN_CEILINGS``, else
    ``~/.cache/gpuan/ceilings.json``."""
    if path:
        return Path(path)
    env = os.environ.get(ENVIRONMENT)
    return Path(env) if env else Path.home() / ".cache" / "gpuan" / "ceilings.json"


def named_by(path: str | os.PathLike | None = None) -> str:
    """Return how the user named the ceilings file, for messages: ``--ceilings-file F``,
    ``GPUAN_CEILINGS=F`` or the default path."""
    if path:
        return f"--ceilings-file {path}"
    env = os.environ.get(ENVIRONMENT)
    return f"{ENVIRONMENT}={env}" if env else str(ceilings_path())


def read_ceilings(path: str | os.PathLike | None = None) -> Ceilings:
    """Return the loaded ceilings file (no devices if there is no file yet); `path` as for
    :func:`ceilings_path`. A file that is not a ceilings file is a :class:`UsageError` naming the option or
    environment variable that pointed at it."""
    target = ceilings_path(path)
    if not target.exists():
        return Ceilings({}, target, named_by(path))
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"{named_by(path)}: not a ceilings file ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{named_by(path)}: not a ceilings file (expected an object keyed by device)")
    return Ceilings(data, target, named_by(path))
