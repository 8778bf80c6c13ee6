"""benchmarks/bench_gpu.py: its CPU side runs at smoke size (so it cannot rot on machines without a GPU), and without a
GPU it says so and writes nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    """Import ``benchmarks/<name>.py`` as module ``name`` (spawned workers unpickle its classes by that name)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_without_cuda_it_says_so_and_writes_no_table(capsys, tmp_path):
    bench = _load("bench_gpu")
    assert bench.main(["--out", str(tmp_path / "gpu.md")]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "gpu.md").exists()


def test_smoke_runs_the_federation_rows_on_the_cpu(capsys, tmp_path):
    bench = _load("bench_gpu")
    out = tmp_path / "gpu.md"
    assert bench.main(["--smoke", "--rows", "upcycled,resnet", "--workers", "1", "--out", str(out)]) == 0
    table = out.read_text()
    assert "Smoke sizes" in table and "ResNet-18 federation round" in table and "Upcycled README workload" in table
    cpu_cells = [line.split("|")[3].strip() for line in table.splitlines() if line.startswith("| Upcycled") or line.startswith("| ResNet")]
    assert len(cpu_cells) == 2 and all(float(c) > 0 for c in cpu_cells)


def test_resnet18_has_the_published_parameter_count():
    bench = _load("bench_gpu")
    assert sum(p.numel() for p in bench.resnet18(10).parameters()) == 11_173_962  # CIFAR ResNet-18, 10 classes


@pytest.mark.slow
def test_smoke_runs_the_cli_rows_on_the_cpu(tmp_path):
    bench = _load("bench_gpu")
    out = tmp_path / "gpu.md"
    assert bench.main(["--smoke", "--rows", "lira,ig", "--out", str(out)]) == 0
    assert "LiRA" in out.read_text() and "Inverting Gradients" in out.read_text()
