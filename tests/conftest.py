"""Shared test fixtures: where the real data lives, and skipping cleanly where it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# the commands the tests start run in their own processes, never in a gpuan server someone left running
# for this checkout (tests/test_server.py starts its own, apart)
os.environ["GPUAN_SERVER"] = "off"

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# The tests' own reading of what each Kineto category is (written out here, not taken from gpuan).
KINETO_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "driver",
    "cpu_op": "cpu_op",
    # PyTorch 1.x spellings
    "operator": "cpu_op",
    "runtime": "runtime",
    "memcpy": "memcpy",
    "memset": "memset",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
}


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real traces of ../shared/data; tests that need them skip where it is absent."""
    if not DATA.is_dir():
        pytest.skip(f"real test data not found at {DATA} (../shared/data beside the project)")
    return DATA


def kineto_files() -> list[str]:
    """Names of the single-file Kineto traces in ../shared/data/kineto (empty where absent)."""
    d = DATA / "kineto"
    return sorted(p.name for p in d.glob("*.json.gz")) if d.is_dir() else []
