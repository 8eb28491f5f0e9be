"""Shared test fixtures: where the real data lives, and skipping cleanly where it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
