"""benchmarks/bench_cpu.py at a tiny size: every mode runs and sequential workers match one process bit for bit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_cpu_runs_every_mode_at_a_tiny_size(tmp_path):
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)  # imported by name: spawned processes unpickle its functions
    module = importlib.import_module("bench_cpu")
    out = tmp_path / "cpu.md"
    assert module.main(["--dataset", "digits", "--model", "privatefl-dnn", "--clients", "3", "--rounds", "2", "--step-repeats", "1", "--step-models", "pfa-cnn", "--out", str(out)]) == 0
    rows = [line for line in out.read_text().splitlines() if line.startswith("| sequential, 2 workers")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith("yes")
