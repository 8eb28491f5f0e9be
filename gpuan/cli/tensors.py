"""``gpuan tensors LOG --gguf MODEL``: which parts of a model file an instrumented llama.cpp touched, per
tensor, layer, component, expert and token, with the tables, an HTML report and the checks."""

from __future__ import annotations

import json

from gpuan.cli.arguments import between, count, nonempty

MAX_POINTS = 500_000  # points of one scatter or 3-D view: WebGL fails beyond this


def add_parser(sub) -> None:
    from gpuan.outputs.files import TABLE_FORMATS
    from gpuan.trace.tensorlog import FORMATS

    p = sub.add_parser(
        "tensors",
        help="tensor-access logs of an instrumented llama.cpp, joined to the GGUF model: hot/cold views",
        description="Analyse a tensor-access log (64-byte seed/packed entries or 256/1024-byte per-operation "
        "entries; read memory-mapped) against its GGUF model file: accesses and bytes per tensor, layer, "
        "component, expert and token, the share of the file never touched, and correctness checks.",
    )
    p.add_argument("log", metavar="LOG", nargs="?", help="the binary tensor-access log")
    p.add_argument("--gguf", metavar="MODEL.gguf", help="the model file the log was recorded with")
    p.add_argument("--names", metavar="TABLE.csv", help="tensor name table (tensor_idx,tensor_name,data_ptr,...)")
    p.add_argument("--buffers", metavar="EVENTS.jsonl", help="buffer alloc/dealloc events (JSON lines)")
    p.add_argument(
        "--format",
        dest="log_format",
        choices=(*FORMATS, "auto"),
        default="auto",
        help="log entry layout (default: auto, by plausibility of the fields)",
    )
    p.add_argument("-o", "--output", type=nonempty, metavar="OUTDIR", help="directory for the tables (and report.html)")
    p.add_argument("--table-format", choices=TABLE_FORMATS, default="csv", help="format of the tables (default: csv)")
    p.add_argument(
        "--html", type=nonempty, metavar="FILE.html", help="write the HTML report here (default: OUTDIR/report.html)"
    )
    p.add_argument(
        "--max-points",
        type=between(1, MAX_POINTS, " (WebGL fails beyond)"),
        default=200_000,
        help=f"accesses sampled for the scatter and 3-D views (1 to {MAX_POINTS:,}; default 200,000)",
    )
    p.add_argument("--top", type=count, default=10, help="hottest tensors to list (default: 10; 0: none)")
    p.add_argument("--json", action="store_true", help="print the summary numbers and checks as JSON")
    p.add_argument(
        "--c-header", action="store_true", help="print the path of gpuan_tensor_log.h (the C/C++ log writer) and exit"
    )
    p.set_defaults(run=run)


def run(args) -> int:
    from gpuan.errors import TraceError

    if args.c_header:
        from gpuan.trace.tensorlog import c_header_path

        print(c_header_path())
        return 0
    if not args.log or not args.gguf:
        raise TraceError(args.log or "LOG", "gpuan tensors needs a log and --gguf MODEL.gguf")
    from gpuan.tensors import Options, analyze
    from gpuan.tensors.report import never_touched, summary, write_html, write_tables

    options = Options(max_points=args.max_points)
    a = analyze(args.log, args.gguf, names=args.names, buffers=args.buffers, format=args.log_format, options=options)
    if args.output:
        write_tables(a, args.output, args.table_format)
    html = args.html or (f"{args.output}/report.html" if args.output else None)
    if html:
        write_html(a, html)
    if args.json:
        s = a.scanned
        cold, data = never_touched(a)
        out = {
            "log": s.log.path,
            "format": s.log.format,
            "entries": s.log.entries,
            "capacity": s.log.capacity,
            "accesses": s.accesses,
            "tokens": len(a.tables["tokens"]),
            "never_touched_bytes": cold,
            "data_bytes": data,
            "hottest": a.tables["tensors"].head(args.top)[["name", "accesses", "bytes_accessed"]].to_dict("records"),
            "checks": [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in a.checks],
        }
        print(json.dumps(out, indent=1, default=int))
    else:
        print(summary(a, args.top))
    return 0
