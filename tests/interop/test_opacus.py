"""An opacus DP-SGD run imported as privacy events: privaudit re-accounts it and shows opacus's own ε beside its own."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.accounting.mechanisms import SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import read_ledger, verify_checkpoint
from privaudit.interop import DatasetReference
from privaudit.interop.opacus import OpacusTap, history_releases, record_opacus_run
from tests.cli.test_fuzz import run_cli

opacus = pytest.importorskip("opacus")
pytestmark = [pytest.mark.filterwarnings("ignore:Secure RNG turned off"),
              pytest.mark.filterwarnings("ignore:Full backward hook is firing")]
torch.set_num_threads(1)
DELTA = 1e-5


def _opacus_run(epochs: int = 2, accountant: str = "rdp"):
    torch.manual_seed(0)
    order = np.random.default_rng(0).permutation(1797)
    data = DatasetReference.packaged("digits", partition={0: order[:600]}, non_members=order[600:900])
    x, y = (torch.from_numpy(a) for a in data.client_data(0))
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=60)
    engine = opacus.PrivacyEngine(accountant=accountant)
    model, optimiser, loader = engine.make_private(module=model, optimizer=optimiser, data_loader=loader,
                                                   noise_multiplier=1.1, max_grad_norm=1.0,
                                                   noise_generator=torch.Generator().manual_seed(0))
    tap = OpacusTap(engine, client=0, optimizer=optimiser)
    per_epoch = []
    for _ in range(epochs):
        for xb, yb in loader:
            if len(yb) == 0:
                continue
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimiser.step()
        per_epoch.append(tap.new_releases())
    return data, model, engine, optimiser, per_epoch


@pytest.fixture(scope="module")
def run():
    return _opacus_run()


def test_tap_reads_the_steps_of_each_epoch(run):
    _, _, engine, _, per_epoch = run
    ((sigma, q, steps),) = engine.accountant.history
    assert (sigma, q) == (1.1, pytest.approx(0.1))
    assert [sum(r.steps for r in releases) for releases in per_epoch] == [steps // 2, steps // 2]
    assert all(r.mechanism() == SubsampledGaussian(1.1, q) for releases in per_epoch for r in releases)


def test_checkpoint_reaccounts_the_run_and_keeps_opacus_epsilon(run, tmp_path):
    data, model, engine, optimiser, _ = run
    path = record_opacus_run(tmp_path / "op", model=model, dataset=data, engine=engine, optimizer=optimiser, delta=DELTA, seed=0)
    manifest = verify_checkpoint(path)
    ((sigma, q, steps),) = engine.accountant.history
    ledger = read_ledger(path)
    assert [(e.mechanism, e.count) for e in ledger.events] == [(SubsampledGaussian(sigma, q), steps)]
    (reported,) = manifest["reported_epsilon"]
    assert reported["source"].startswith("opacus ") and "rdp" in reported["source"]
    assert reported["epsilon"] == pytest.approx(engine.get_epsilon(DELTA))

    code, out, err = run_cli("compute-epsilon", "--checkpoint", path, "--delta", DELTA, "--json")
    assert code == 0, err
    data_json = json.loads(out)
    ours = data_json["max_epsilon"]
    # a tight accountant never exceeds RDP's conversion for the same mechanism, and stays within a sane factor of it
    assert 0.5 * reported["epsilon"] < ours <= reported["epsilon"] * (1 + 1e-6)
    (classified,) = data_json["reported_epsilon"]
    assert {k: v for k, v in classified.items() if k != "assessment"} == reported
    # opacus's RDP accountant composed exactly the Poisson-subsampled steps the run recorded: a certified upper bound
    assert classified["assessment"]["status"] == "certified" and classified["assessment"]["privaudit_epsilon"] == ours
    code, text, err = run_cli("compute-epsilon", "--checkpoint", path, "--delta", DELTA)
    assert code == 0 and "reported by opacus" in text and "a certified upper bound" in " ".join(text.split()), err

    code, out, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss", "--json")
    assert code == 0, err
    assert (json.loads(out)["n_in"], json.loads(out)["n_out"]) == (600, 300)


def test_history_shape_and_clip_are_checked():
    with pytest.raises(InvalidParameterError, match="clip"):
        OpacusTap(type("E", (), {"accountant": type("A", (), {"history": []})()})())
    with pytest.raises(InvalidParameterError, match="noise_multiplier, sample_rate, num_steps"):
        history_releases([(1.0, 0.1)], clip=1.0)
    with pytest.raises(InvalidParameterError, match="not a DP-SGD step"):
        history_releases([(1.0, 0.0, 3)], clip=1.0)
    assert math.isclose(history_releases([(2.0, 0.5, 4)], clip=3.0)[0].multiplier, 2.0)


def test_a_rewritten_history_and_a_bad_clip_are_one_clear_error():
    """Regression: a shrunk history (a new accountant) was read as no new steps; a non-numeric clip was a traceback."""
    accountant = type("A", (), {"history": [(1.0, 0.1, 5)]})()
    engine = type("E", (), {"accountant": accountant})()
    with pytest.raises(InvalidParameterError, match="clip C must be a number"):
        OpacusTap(engine, clip="one")
    tap = OpacusTap(engine, clip=1.0)
    assert [r.steps for r in tap.new_releases()] == [5]
    accountant.history = [(1.0, 0.1, 2)]
    with pytest.raises(InvalidParameterError, match="rewritten"):
        tap.new_releases()
