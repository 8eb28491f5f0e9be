"""``gpuan demo``: make the bundled sample trace and run gpuan's main job on it."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from gpuan.cli.arguments import nonempty


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the command's parser to `sub` (the subcommands of ``gpuan``)."""
    p = sub.add_parser(
        "demo", help="generate a small sample trace, summarise it, find its cycles, score it (CPU if no GPU)"
    )
    p.add_argument(
        "--dir", type=nonempty, default=None,
        help="where to write the sample trace; the results go to DIR/out (default: a temp directory)",
    )  # fmt: skip
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the sample trace and show what gpuan info, cycles and sol make of it; returns the exit code."""
    from gpuan.cli import cycles, info
    from gpuan.cli.loading import load_trace
    from gpuan.engine import current
    from gpuan.outputs.files import make_dir
    from gpuan.synth.kineto import sample_trace_path

    directory = Path(args.dir) if args.dir else Path(tempfile.gettempdir()) / "gpuan-demo"
    make_dir(directory)
    path = sample_trace_path(directory)
    # results apart from the trace: DIR stays a directory of one trace, which gpuan info DIR reads
    out = make_dir(directory / "out")
    print(f"sample trace: {path}  (engine: {current().name})")
    code = info.show(str(path))
    if code:
        return code
    print()
    code = cycles.show(str(path), str(out / "gpuan_sample"))
    if code:
        return code
    print()
    from gpuan.outputs.sol import text
    from gpuan.sol import analyse, reads

    print(text(analyse(load_trace(str(path), projection=reads())), top=5), end="")
    return 0
