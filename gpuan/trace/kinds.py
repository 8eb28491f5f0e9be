"""The kinds of event in the event table (the ``kind`` column), apart from its Arrow schema so that
the command line lists them without loading pyarrow."""

#: The kinds of event, in the order of the dictionary used for the ``kind`` column.
KINDS: tuple[str, ...] = (
    "kernel",
    "memcpy",
    "memset",
    "runtime",
    "driver",
    "cpu_op",
    "annotation",
    "gpu_annotation",
    "comm",
    "python",
    "other",
)
KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(KINDS)}

#: Kinds that run on a GPU (they carry a device and a stream).
GPU_KINDS: frozenset[str] = frozenset({"kernel", "memcpy", "memset", "gpu_annotation"})
