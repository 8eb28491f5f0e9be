"""The choices of the commands' options, in one module that imports nothing: the analyses and readers
check their arguments against them and the command line lists them, so ``gpuan --help`` or a usage error needs neither
numpy, pyarrow nor numba (importing an analysis package loads them all)."""

#: every command: the engines (--device, $GPUAN_DEVICE)
ENGINES = ("auto", "cpu", "gpu")

#: every command: what MPI launchers put in the environment of the processes they start (such a process
#: runs its command itself, never in a server: see gpuan.engine.procs and gpuan.server.client)
MPI_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD")

#: cycles: which patterns a Result names as its files: every distinct one, or the LLM prefill/decode phases
CYCLES_MODES = ("all", "llm")
#: cycles: which CPU operators make a thread's sequence: top-level ones, leaves, or all
CYCLES_OPS = ("top", "leaf", "all")
#: cycles: how a device's GPU streams make sequences: one per stream, one per stream group (compute apart
#: from communication), or one for all of them
CYCLES_SEQUENCES = ("stream", "group", "merged")

#: compare: best rotation + longest common subsequence of signatures, or pairing by signature alone
COMPARE_MODES = ("align", "match")

#: streams: the order in which N streams' copies of the work are issued
STREAMS_LAUNCH_ORDERS = ("breadth", "depth")
#: streams: what a kernel without launch dimensions (grid or block size missing) is taken to be
STREAMS_UNDIMENSIONED = {
    "device": "fills the device: one wave of blocks that each hold a whole SM, for its measured time",
    "block": "one block of one warp for its measured time: it leaves the rest of the device free",
}

#: tensors: the layouts of a tensor-access log (gpuan/trace/tensorlog/formats.py defines each)
TENSOR_LOG_FORMATS = ("seed64", "packed64", "op256", "op1024")
#: tensors: what --log-format and ``log_format=`` take: a layout, or auto (picked by the plausibility of the fields)
TENSOR_LOG_CHOICES = (*TENSOR_LOG_FORMATS, "auto")
#: tensors: points of one scatter or 3-D view (WebGL fails beyond this)
TENSORS_MAX_POINTS = 500_000

#: replay: the reports one run can give
REPLAY_REPORTS = ("waits", "stragglers", "breakdown", "comm-matrix")
#: replay: how the ranks' files are dealt to MPI processes
REPLAY_DEALS = ("round-robin", "size")
