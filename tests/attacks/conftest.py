"""Attack tests run single-threaded (2 shared cores; OpenMP over-subscription stalls torch)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
