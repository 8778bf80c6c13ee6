"""The README private run as privaudit's engine trains it equals the reference's loop written out straight.

The straight loop below follows the reference code, osu-srml/Upcycled-FL@4dd7400
(server/avg.py ``run``/``train_one_round``/``agg``, client/avg.py ``update_weights``/``private``, models.py
``LogisticRegression``, FedProxOptimizer.py with μ = 0): each round the clients run one after another in the
reference's processing order; a client draws its straggler test and its ``DataLoader(shuffle=True)`` epochs from
torch's global generator, trains with SGD (momentum 0.5, no weight decay) on ``CrossEntropyLoss`` of the softmax
outputs, clips its whole model to norm τ, reseeds the global generator with its clock's milliseconds and adds
``torch.normal(0, σ²)`` per tensor; the server takes the example-weighted mean over the round's clients and
evaluates it on the pooled test set and on every client's training data.

Only what the reference leaves to the clock and to its round seed is taken from privaudit's run: the simulated
clock's processing order and milliseconds, and the first client's batch order (the reference draws it from the
round seed, privaudit from its seed tree). Everything else — training, clipping, noise, the coupling of the next
client's draws to the previous client's noise seed, aggregation, evaluation — is computed independently here, so
a drift in any of them fails the comparison.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.local_training import make_schedule
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy.clock_seed import ReferenceClock
from privaudit.fl.run import run_training
from privaudit.papers.upcycled.readme_run import readme_spec
from tests.fl.conftest import make_dataset

SIZES = (23, 41, 17, 60, 35)
EPOCHS, BATCH, LR, MOMENTUM, CLIP, SIGMA = 3, 8, 0.07, 0.5, 2.0, 0.8


class _SoftmaxRegression(nn.Module):
    """models.py ``LogisticRegression``: a linear layer followed by ``Softmax`` (the double softmax under CE)."""

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        out_features, in_features = state["linear.weight"].shape
        self.linear = nn.Linear(in_features, out_features)
        self.load_state_dict({k: v.clone() for k, v in state.items()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x), dim=1)


def _train(model: nn.Module, batches, x: torch.Tensor, y: torch.Tensor) -> None:
    optimiser = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=0.0)
    criterion = nn.CrossEntropyLoss()
    for rows in batches:
        model.zero_grad()
        criterion(model(x[rows]), y[rows]).backward()
        optimiser.step()


def _private(state: dict[str, torch.Tensor], ms_seed: int) -> dict[str, torch.Tensor]:
    norm = torch.norm(torch.hstack([v.flatten() for v in state.values()]))
    if norm > CLIP:
        state = {k: v * (CLIP / norm) for k, v in state.items()}
    torch.random.manual_seed(ms_seed)  # the global generator: the next client draws from it
    return {k: v + torch.normal(0, SIGMA**2, size=tuple(v.shape)) for k, v in state.items()}


def _straight_reference(dataset, initial: dict[str, torch.Tensor], seed: int, rounds: int):
    """The reference's private FedAvg loop (module docstring); returns the final global state and, per round,
    the pooled test accuracy and the training accuracy."""
    tensors = [(torch.from_numpy(c.x_train), torch.from_numpy(c.y_train)) for c in dataset.clients]
    weights = [c.num_train / sum(c.num_train for c in dataset.clients) for c in dataset.clients]
    x_test = torch.from_numpy(np.concatenate([c.x_test for c in dataset.clients]))
    y_test = torch.from_numpy(np.concatenate([c.y_test for c in dataset.clients]))
    x_all = torch.cat([x for x, _ in tensors])
    y_all = torch.cat([y for _, y in tensors])
    clock, tree = ReferenceClock(SeedTree(seed)), SeedTree(seed)
    state, history = {k: v.clone() for k, v in initial.items()}, []
    with torch.random.fork_rng(devices=[]):
        for r in range(1, rounds + 1):
            planned = clock.round(r, list(range(len(tensors))))
            released = {}
            for position, client in enumerate(planned.order):
                x, y = tensors[client]
                if position == 0:  # drawn from the round seed: privaudit's seeded stream stands in for it
                    schedule = make_schedule(len(y), EPOCHS, BATCH, tree.numpy("shuffle", r, client))
                    batches = [row[: int(size)] for row, size in zip(schedule.indices, schedule.sizes, strict=True)]
                else:  # the global generator as the previous client's release left it
                    assert not torch.rand(1) < 0.0  # update_weights' straggler test (--straggler 0)
                    loader = DataLoader(TensorDataset(torch.arange(len(y))), batch_size=BATCH, shuffle=True)
                    batches = [b[0].numpy() for _ in range(EPOCHS) for b in loader]
                model = _SoftmaxRegression(state)
                _train(model, batches, x, y)
                local = {k: v.detach().clone() for k, v in model.state_dict().items()}
                released[client] = _private(local, planned.seed_of(client))
            chosen = sorted(released)
            total = sum(weights[c] for c in chosen)
            state = {k: sum(released[c][k] * weights[c] for c in chosen) / total for k in state}
            model = _SoftmaxRegression(state)
            with torch.no_grad():
                history.append((float((model(x_test).argmax(1) == y_test).double().mean()),
                                float((model(x_all).argmax(1) == y_all).double().mean())))
    return state, history


def test_engine_readme_run_equals_the_reference_loop_written_out():
    seed, rounds = 3, 3
    dataset = make_dataset(sizes=SIZES, dim=20, num_classes=2, seed=1)
    spec = readme_spec(seed=seed, rounds=rounds)
    spec = replace(spec, local=LocalTrainingConfig(epochs=EPOCHS, batch_size=BATCH, lr=LR, momentum=MOMENTUM, double_softmax=True),
                   privacy_options={**spec.privacy_options, "clip": CLIP, "noise": SIGMA})
    result = run_training(spec, dataset=dataset, progress=False)
    state, history = _straight_reference(dataset, result.info.initial_state, seed, rounds)
    for key, value in state.items():
        assert torch.allclose(result.state[key], value, atol=1e-5), key
    assert not torch.allclose(result.state["linear.weight"], result.info.initial_state["linear.weight"], atol=0.1)
    assert [(m.test_accuracy, m.global_train_accuracy) for m in result.history] == history
