"""Record single-stream and N-stream runs of the same work on this GPU with the PyTorch profiler: the
validation data of ``gpuan streams``. Needs only torch and a CUDA GPU (not gpuan), so it runs on a bare
GPU machine.

    python bench/record_streams.py OUT_DIR [--streams 2,4,8] [--orders breadth,depth]

Two kinds of per-stream work, each copy from or to pinned host memory:

- ``copy``: a 64 MiB H2D copy, one elementwise kernel over it, a 64 MiB D2H copy. The copies dominate,
  so the N-stream runs test the copy engines: one direction at a time, the two directions at once.
- ``compute``: a 1 MiB H2D copy, eight 512x512 matrix products in a chain, a 1 MiB D2H copy. The
  products' grids fill a fraction of the GPU, so the N-stream runs test concurrent kernels.

For each kind: one 1-stream run, then for each N and launch order an N-stream run (``breadth``: the
H2D copies of every stream, then the kernels of every stream, then the D2H copies; ``depth``: stream
by stream). Each run is warmed up (allocator, cuBLAS handles, kernels loaded), then profiled for one
step after a warm-up step of the profiler itself, and saved as ``<kind>_<N>stream[_<order>].json.gz``.
``manifest.json`` lists the runs: which 1-stream trace predicts which N-stream trace, with which order.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

KINDS = ("copy", "compute")
COPY_ELEMENTS = 1 << 24  # 64 MiB of float32
COMPUTE_SIDE = 512  # the compute work's matrices, 1 MiB of float32
PRODUCTS = 8


def work(kind: str, n: int):
    """Return (h2d, kernels, d2h): per-stream callables of one kind of work for `n` streams, holding
    their buffers."""
    import torch

    size = COPY_ELEMENTS if kind == "copy" else COMPUTE_SIDE * COMPUTE_SIDE
    host = [torch.randn(size).pin_memory() for _ in range(n)]
    back = [torch.empty(size).pin_memory() for _ in range(n)]
    dev = [torch.empty(size, device="cuda") for _ in range(n)]
    res = [torch.empty(size, device="cuda") for _ in range(n)]
    weight = torch.randn(COMPUTE_SIDE, COMPUTE_SIDE, device="cuda") / COMPUTE_SIDE**0.5

    def h2d(s: int) -> None:
        dev[s].copy_(host[s], non_blocking=True)

    def kernels(s: int) -> None:
        if kind == "copy":
            torch.mul(dev[s], 2.0, out=res[s])
            return
        x = dev[s].view(COMPUTE_SIDE, COMPUTE_SIDE)
        for _ in range(PRODUCTS - 1):
            x = x @ weight
        torch.mm(x, weight, out=res[s].view(COMPUTE_SIDE, COMPUTE_SIDE))

    def d2h(s: int) -> None:
        back[s].copy_(res[s], non_blocking=True)

    return h2d, kernels, d2h


def issue(streams, steps, order: str) -> None:
    """Issue every stream's steps in `order` from this one host thread."""
    import torch

    if order == "breadth":
        for step in steps:
            for s, stream in enumerate(streams):
                with torch.cuda.stream(stream):
                    step(s)
    else:
        for s, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                for step in steps:
                    step(s)


def record_one(out: Path, kind: str, n: int, order: str) -> Path:
    """Run `n` streams of `kind` work issued in `order` under the profiler; return the gzipped trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    streams = [torch.cuda.Stream() for _ in range(n)]
    steps = work(kind, n)
    for _ in range(3):  # warm-up outside the profiler
        issue(streams, steps, order)
    torch.cuda.synchronize()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=0, warmup=1, active=1)
    ) as prof:
        for _ in range(2):  # the profiler's own warm-up step, then the recorded one
            issue(streams, steps, order)
            torch.cuda.synchronize()
            prof.step()
    name = f"{kind}_{n}stream" + (f"_{order}" if n > 1 else "")
    plain = out / f"{name}.json"
    prof.export_chrome_trace(str(plain))
    with open(plain, "rb") as src, gzip.open(f"{plain}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    return Path(f"{plain}.gz")


def record(out: Path, counts: list[int], orders: list[str]) -> dict:
    """Record every run into `out` and write its manifest; return the manifest."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    runs = []
    for kind in KINDS:
        one = record_one(out, kind, 1, "breadth")
        for n in counts:
            for order in orders:
                many = record_one(out, kind, n, order)
                runs.append({"kind": kind, "one": one.name, "many": many.name, "n": n, "order": order})
                print(f"recorded {many.name}", flush=True)
    manifest = {
        "gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
        "cuda": torch.version.cuda, "copy_elements": COPY_ELEMENTS, "compute_side": COMPUTE_SIDE,
        "products": PRODUCTS, "runs": runs,
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="directory for the traces and manifest.json")
    ap.add_argument("--streams", default="2,4,8", help="stream counts (default 2,4,8)")
    ap.add_argument("--orders", default="breadth,depth", help="launch orders (default breadth,depth)")
    args = ap.parse_args(argv)
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # kernels loaded before the profiled step
    try:
        import torch
    except ImportError:
        print("record_streams: needs torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("record_streams: no CUDA GPU here", file=sys.stderr)
        return 2
    record(Path(args.out), [int(x) for x in args.streams.split(",")], args.orders.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
