"""The golden cases: every command on the real traces of ../shared/data, run as a user runs them.

Each case is a list of steps run in order in one fresh directory; a step is the argument list of
``gpuan`` (or of ``python``, for making an input). Paths are written with two placeholders: ``{data}``
(../shared/data) and ``{out}`` (the case's directory). What a case saw (stdout, stderr, exit code of every
step, and every file left in ``{out}``) is stored under ``tests/golden/<case>/`` by ``record.py`` and
compared by ``tests/test_golden.py``, so that a refactor cannot change what a user sees.

The cases were recorded before the refactor of issue 20 (one contract for every analysis); a change of
an option's spelling changes a case's arguments here, never its expected output.
"""

from __future__ import annotations

K = "{data}/kineto"
ALEXNET = f"{K}/a100_alexnet.json.gz"
QWEN = f"{K}/mi300x_qwen05b_inference.json.gz"
PT19 = f"{K}/v100_pt19_resnet50_worker0.json.gz"
V100 = f"{K}/v100_rank0_ns_resolution.json.gz"
TINY_LM = f"{K}/cpu_tiny_lm_prefill_decode.json.gz"
GLOO4 = f"{K}/cpu_ddp_gloo_4rank_slow_rank1_step2"
DLRM = f"{K}/dlrm_8rank_nccl"
NVPROF = "{data}/nvprof"
STORIES = "{data}/gguf/stories260K.gguf"

# a tensor log against the real stories260K model, made by gpuan's generator (seeded, so the same bytes)
_TENSOR_LOG = (
    "from gpuan.synth.tensors import write_log; from gpuan.trace.gguf_map import read_gguf; "
    "import sys; write_log(sys.argv[2], read_gguf(sys.argv[1]), fmt=sys.argv[3], tokens=16)"
)

CASES: dict[str, list[list[str]]] = {
    # info
    "info_alexnet": [["info", ALEXNET]],
    "info_alexnet_json": [["info", ALEXNET, "--format", "json"]],
    "info_qwen_top3": [["info", QWEN, "--top", "3"]],
    "info_nsys": [["info", "{data}/nsys/saxpy_mpi_cuda_rank0.sqlite"]],
    "info_nvprof": [["info", f"{NVPROF}/mem_mem_2stream_23000.csv"]],
    "info_dlrm_dir": [["info", DLRM, "--top", "3"]],
    "info_otf2": [["info", "{data}/otf2/ping_pong_2rank/traces.otf2"]],
    # convert
    "convert_alexnet": [["convert", ALEXNET, "-o", "{out}/alexnet.parquet"], ["info", "{out}/alexnet.parquet"]],
    # cycles
    "cycles_v100": [["cycles", V100, "-o", "{out}/v100"]],
    "cycles_alexnet_json": [["cycles", ALEXNET, "--format", "json"]],
    "cycles_tiny_lm_llm": [["cycles", TINY_LM, "--kind", "cpu_op", "--mode", "llm", "-o", "{out}/lm"]],
    "cycles_tiny_lm_cpu_ops": [["cycles", TINY_LM, "--kind", "cpu_op", "--ops", "leaf", "--sequences", "merged"]],
    # compare
    "compare_xlsx_csv": [
        ["cycles", TINY_LM, "--kind", "cpu_op", "--mode", "llm", "-o", "{out}/lm"],
        ["compare", "{out}/lm_prefill.csv", "{out}/lm_decode.csv", "-o", "{out}/lm.xlsx"],
        ["compare", "{out}/lm_prefill.csv", "{out}/lm_decode.csv", "-o", "{out}/lm.csv", "--mode", "match"],
    ],
    "compare_all": [
        ["cycles", V100, "-o", "{out}/a"],
        ["cycles", f"{K}/v100_ddp_6steps_trace_diff_test.json.gz", "-o", "{out}/b"],
        ["compare", "--all", "{out}/a", "{out}/b", "-o", "{out}/ab.xlsx"],
    ],
    # streams
    "streams_nvprof": [
        [
            "streams", f"{NVPROF}/mem_mem_1stream_10M.csv", "--streams", "2",
            "--measured", f"{NVPROF}/mem_mem_2stream_10M_h2d_h2d_ovlp.csv", "-o", "{out}/predicted.json",
        ]
    ],  # fmt: skip
    "streams_qwen_json": [["streams", QWEN, "--streams", "4", "--format", "json"]],
    "streams_alexnet_h100_depth": [
        ["streams", ALEXNET, "--streams", "2", "--gpu", "H100", "--launch-order", "depth", "--stream", "7"]
    ],
    # sol
    "sol_pt19": [["sol", PT19, "--top", "5", "-o", "{out}/ops.csv", "--html", "{out}/roofline.html"]],
    "sol_qwen_json": [["sol", QWEN, "--format", "json", "--top", "3"]],
    "sol_alexnet_h100_xlsx": [["sol", ALEXNET, "--gpu", "H100", "--tf32", "-o", "{out}/ops.xlsx"]],
    "sol_alexnet_parquet": [["sol", ALEXNET, "-o", "{out}/ops.parquet", "--top", "2"]],
    "sol_mi250": [["sol", f"{K}/mi250_minitoy_train_rocm.json.gz", "--top", "3"]],
    # tensors
    "tensors_stories": [
        ["python", "-c", _TENSOR_LOG, STORIES, "{out}/t.log", "seed64"],
        ["tensors", "{out}/t.log", "--gguf", STORIES, "-o", "{out}/t", "--html", "{out}/t.html", "--top", "5"],
    ],
    "tensors_stories_json": [
        ["python", "-c", _TENSOR_LOG, STORIES, "{out}/t.log", "op256"],
        ["tensors", "{out}/t.log", "--gguf", STORIES, "--log-format", "op256", "--format", "json"],
    ],
    "tensors_stories_parquet": [
        ["python", "-c", _TENSOR_LOG, STORIES, "{out}/t.log", "packed64"],
        ["tensors", "{out}/t.log", "--gguf", STORIES, "-o", "{out}/t", "--table-format", "parquet"],
    ],
    # replay
    "replay_gloo": [["replay", GLOO4, "-o", "{out}/r", "--html", "{out}/r.html"]],
    "replay_gloo_json": [["replay", GLOO4, "--format", "json", "--align-clocks"]],
    "replay_dlrm": [["replay", DLRM, "--analysis", "stragglers,comm-matrix", "--top", "3", "--deal", "size"]],
    "replay_dlrm_parquet": [["replay", DLRM, "-o", "{out}/r", "--table-format", "parquet"]],
    "replay_otf2": [["replay", "{data}/otf2/ping_pong_2rank"]],
    # demo
    "demo": [["demo", "--dir", "{out}/demo"]],
}

# the same commands under MPI: the output must not depend on the number of processes
MPI_CASES: dict[str, tuple[int, list[str]]] = {
    "mpi2_replay_gloo": (2, ["replay", GLOO4]),
    "mpi4_replay_dlrm_json": (4, ["replay", DLRM, "--format", "json"]),
}
