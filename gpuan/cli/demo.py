"""``gpuan demo``: make the bundled sample trace and run gpuan's main job on it."""

from __future__ import annotations

import tempfile
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="generate a small sample trace and summarise it (CPU if there is no GPU)")
    p.add_argument("--dir", default=None, help="where to write the sample trace (default: a temp directory)")
    p.set_defaults(run=run)


def run(args) -> int:
    from gpuan.cli import info
    from gpuan.engine import current
    from gpuan.synth import sample_trace_path

    directory = Path(args.dir) if args.dir else Path(tempfile.gettempdir()) / "gpuan-demo"
    directory.mkdir(parents=True, exist_ok=True)
    path = sample_trace_path(directory)
    print(f"sample trace: {path}  (engine: {current().name})")
    return info.show(str(path))
