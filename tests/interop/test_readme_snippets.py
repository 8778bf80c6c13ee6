"""The README's recorder and opacus snippets run as printed (issue 24): the opacus one on its own, the recorder one with
the names it leaves to the user (x, y, client_rows, held_out, net, rounds, my_round, evaluate) filled by small data."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.accounting.mechanisms import Sampling, SubsampledGaussian
from privaudit.fl.engine.checkpoint import read_ledger
from tests.cli.test_fuzz import run_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def snippet(heading: str) -> str:
    """The first ```python block after ``heading``."""
    text = README.read_text()
    start = text.index(heading)
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match is not None, f"no python block after {heading!r}"
    return match.group(1)


def test_the_recorder_snippet_runs_and_records_what_it_declares(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=100)
    client_rows = [list(range(k * 10, (k + 1) * 10)) for k in range(8)]
    net = nn.Sequential(nn.Linear(6, 3))
    draw = random.Random(0)

    def my_round(model):  # the user's round: 6 of 8 clients, their (here untrained) releases
        sampled = sorted(draw.sample(range(8), 6))
        return sampled, {k: {n: t.detach().clone() for n, t in model.state_dict().items()} for k in sampled}

    namespace = {"x": x, "y": y, "client_rows": client_rows, "held_out": list(range(80, 100)), "net": net, "rounds": 3,
                 "my_round": my_round, "evaluate": lambda model: 0.5}
    exec(compile(snippet("### Your own PyTorch loop"), "README.md", "exec"), namespace)  # the README, as printed
    ledger = read_ledger(tmp_path / "runs" / "mine")
    assert [(e.mechanism, e.valid) for e in ledger.events] == [
        (SubsampledGaussian(0.3, 0.75, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT), True)] * 3


@pytest.mark.filterwarnings("ignore:Secure RNG turned off", "ignore:Full backward hook is firing")
def test_the_opacus_snippet_runs_as_printed(tmp_path, monkeypatch, capsys):
    pytest.importorskip("opacus")
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    exec(compile(snippet("### opacus"), "README.md", "exec"), {"__name__": "readme"})  # as printed
    printed = capsys.readouterr().out
    assert re.search(r"opacus \(prv\): ε = \d+\.\d{3}", printed)
    code, out, err = run_cli("compute-epsilon", "--checkpoint", tmp_path / "runs" / "opacus", "--delta", "1e-5", "--json")
    assert code == 0, err
    data = json.loads(out)
    (reported,) = data["reported_epsilon"]
    assert "prv accountant" in reported["source"] and reported["assessment"]["status"] == "certified"
    assert data["per_client"]["0"]["steps"] == 30 and data["max_epsilon"] <= reported["epsilon"]
