"""Fixtures of the check tests: the seeded-bug examples (examples/check_loops.py, examples/check_flower.py), imported
from their files, and recorded runs shared by a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def example(name: str):
    """The module ``examples/<name>.py`` (examples are scripts, not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def loops():
    torch.set_num_threads(1)
    return example("check_loops")


@pytest.fixture(scope="session")
def flower_examples():
    pytest.importorskip("flwr")
    torch.set_num_threads(1)
    module = example("check_flower")
    module.quiet_flower()
    return module


@pytest.fixture(scope="session")
def recorded(tmp_path_factory, loops):
    """The textbook loop and every seeded bug of the loop, seed 0, recorded once for the session."""
    root = tmp_path_factory.mktemp("check-loops")
    runs = {"correct": loops.run_loop(root / "correct", seed=0)}
    for bug in loops.BUGS:
        runs[bug] = loops.run_loop(root / bug, bug=bug, seed=0)
    return runs
