"""argparse types shared by the subcommands: a bad value is refused in one line, before any work."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gpuan.options import ENGINES


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def count(text: str) -> int:
    """Return `text` as a non-negative integer (a number of rows to show; 0 shows none)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def positive(text: str) -> int:
    """Return `text` as an integer of at least 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return value


def between(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """Return an argparse type: `text` as an integer from `low` to `high` (`why` says where the limit
    comes from)."""

    def integer(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}{why}, not {text}")
        return value

    return integer


def engine_choice(text: str) -> str:
    """Return `text` as an engine name (auto, cpu, gpu); a GPU model given here is pointed to ``--gpu``."""
    if text.lower() in ENGINES:
        return text.lower()
    raise argparse.ArgumentTypeError(
        f"{text!r} is not an engine (choose from {', '.join(ENGINES)}); a GPU model is named with --gpu {text}"
    )


def nonempty(text: str) -> str:
    """Return `text` (a path or a name) if it is not empty: an empty one would silently mean the current
    directory or the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text
