"""Mini-batch schedules, the shared lane optimiser, and batched == sequential local training."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import Execution, LocalTrainingConfig
from privaudit.fl.engine.local_solver import LocalTask
from privaudit.fl.engine.local_training import LocalObjective, MoreauEnvelope, active_counts, make_schedule
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.engine.trainer import ClientTrainer
from tests.fl.conftest import make_dataset, tiny_model


def test_schedule_covers_every_example_once_per_epoch():
    schedule = make_schedule(23, 3, 5, np.random.default_rng(0))
    assert schedule.steps == 3 * 5
    assert list(schedule.sizes[:5]) == [5, 5, 5, 5, 3]
    for epoch in range(3):
        rows = schedule.indices[epoch * 5 : (epoch + 1) * 5]
        seen = rows[rows >= 0]
        assert sorted(seen.tolist()) == list(range(23))


def test_schedule_batch_larger_than_data_is_full_batch():
    schedule = make_schedule(4, 2, 32, np.random.default_rng(1))
    assert schedule.indices.shape == (2, 4) and list(schedule.sizes) == [4, 4]


def test_active_counts_for_sorted_lanes():
    assert list(active_counts([3, 2, 2, 1])) == [4, 3, 1]
    with pytest.raises(ValueError):
        active_counts([1, 3])


def _manual_sgd(model, state, x, y, schedule, cfg, prox=0.0, anchor=None, linear=None):
    """Plain PyTorch: SGD(momentum) on CE + prox + linear, batch by batch (an independent reference)."""
    params = {k: v.clone().requires_grad_() for k, v in state.items()}
    optimiser = torch.optim.SGD(params.values(), lr=cfg.lr, momentum=cfg.momentum)
    for step in range(schedule.steps):
        rows = torch.from_numpy(schedule.indices[step, : schedule.sizes[step]])
        optimiser.zero_grad()
        loss = F.cross_entropy(functional_call(model, params, (x[rows],)), y[rows])
        if prox:
            loss = loss + prox / 2 * sum(((params[k] - anchor[k]) ** 2).sum() for k in params)
        if linear is not None:
            loss = loss + sum((params[k] * linear[k]).sum() for k in params)
        loss.backward()
        optimiser.step()
    return {k: v.detach() for k, v in params.items()}


@pytest.mark.parametrize("execution", [Execution.SEQUENTIAL, Execution.BATCHED])
def test_local_training_matches_torch_sgd(execution):
    data = make_dataset()
    model = tiny_model()
    state = model_state(model)
    cfg = LocalTrainingConfig(epochs=2, batch_size=7, lr=0.1, momentum=0.5)
    linear = {k: torch.full_like(v, 0.05) for k, v in state.items()}
    objective = LocalObjective(anchor=state, prox=0.3, linear=linear)
    trainer = ClientTrainer(model, (5,), 3, cfg, execution, SeedTree(3))
    tasks = [LocalTask(i, c, 2, objective) for i, c in enumerate(data.clients)]
    outcomes = trainer.train(state, tasks, training_round=1)
    for task, outcome in zip(tasks, outcomes, strict=True):
        x, y = torch.from_numpy(task.data.x_train), torch.from_numpy(task.data.y_train)
        want = _manual_sgd(model, state, x, y, trainer.schedule(task, 1), cfg, prox=0.3, anchor=state, linear=linear)
        for k in want:
            torch.testing.assert_close(outcome.state[k], want[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", [None, MoreauEnvelope(lam=5.0, inner_steps=3, personal_lr=0.05)])
def test_batched_equals_sequential(solver):
    data = make_dataset(sizes=(30, 12, 45, 7, 19))
    model = tiny_model(hidden=4)
    state = model_state(model)
    cfg = LocalTrainingConfig(epochs=3, batch_size=8, lr=0.05, momentum=0.5)
    objective = LocalObjective(anchor=state, prox=0.1) if solver is None else LocalObjective(solver=solver)
    results = {}
    for execution in (Execution.BATCHED, Execution.SEQUENTIAL):
        trainer = ClientTrainer(model, (5,), 3, cfg, execution, SeedTree(0))
        tasks = [LocalTask(i, c, (3, 1, 2, 3, 1)[i], objective) for i, c in enumerate(data.clients)]
        results[execution] = trainer.train(state, tasks, training_round=4)
    for a, b in zip(results[Execution.BATCHED], results[Execution.SEQUENTIAL], strict=True):
        assert a.client_id == b.client_id and a.steps == b.steps
        for k in state:
            torch.testing.assert_close(a.state[k], b.state[k], rtol=1e-5, atol=1e-6)
        assert a.mean_loss == pytest.approx(b.mean_loss, rel=1e-5)
        if solver is not None:
            for k in a.personal:
                torch.testing.assert_close(a.personal[k], b.personal[k], rtol=1e-5, atol=1e-6)


def test_fewer_epochs_mean_fewer_steps_and_a_smaller_move():
    data = make_dataset(sizes=(40,))
    model = tiny_model()
    state = model_state(model)
    trainer = ClientTrainer(model, (5,), 3, LocalTrainingConfig(epochs=4, batch_size=10, lr=0.1, momentum=0.0), Execution.SEQUENTIAL, SeedTree(0))
    full, short = (trainer.train(state, [LocalTask(0, data.clients[0], e, LocalObjective())], 1)[0] for e in (4, 1))
    assert (full.steps, short.steps) == (16, 4)
    # the 1-epoch run is the first quarter of the 4-epoch run (same shuffle stream): not the same model
    assert not torch.equal(full.state["1.weight"], short.state["1.weight"])


def test_batched_is_refused_for_models_without_a_stacked_form():
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.5, inplace=True), torch.nn.Linear(8, 3))
    with pytest.raises(InvalidParameterError, match="cannot be trained batched"):
        ClientTrainer(model, (5,), 3, LocalTrainingConfig(), Execution.BATCHED, SeedTree(0))
    assert ClientTrainer(model, (5,), 3, LocalTrainingConfig(), Execution.AUTO, SeedTree(0)).mode == "sequential"
    plain_dropout = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 3))
    assert ClientTrainer(plain_dropout, (5,), 3, LocalTrainingConfig(), Execution.AUTO, SeedTree(0)).mode == "batched (layers)"


def test_dropout_training_is_seeded_and_leaves_global_rng_alone():
    data = make_dataset(sizes=(20, 20))
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 3))
    state = model_state(model)
    trainer = ClientTrainer(model, (5,), 3, LocalTrainingConfig(epochs=1, batch_size=5), Execution.AUTO, SeedTree(0))
    tasks = [LocalTask(i, c, 1, LocalObjective()) for i, c in enumerate(data.clients)]
    before = torch.random.get_rng_state()
    first = trainer.train(state, tasks, 1)
    assert torch.equal(torch.random.get_rng_state(), before)
    second = trainer.train(state, tasks, 1)
    for a, b in zip(first, second, strict=True):
        assert all(torch.equal(a.state[k], b.state[k]) for k in state)
