"""The choices of a cycles analysis, apart from the code that uses them (the command line lists them)."""

#: which patterns a cycles Result names as its files: every distinct one, or the LLM prefill/decode phases
MODES = ("all", "llm")
#: values of the ``ops`` choice for CPU operators
OP_LEVELS = ("top", "leaf", "all")
#: how a device's GPU streams make sequences: one per stream, one per stream group (compute apart from
#: communication), or one for all of them
SPLITS = ("stream", "group", "merged")
