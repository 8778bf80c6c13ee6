"""Non-private Upcycled-FedAvg with partial participation and stragglers, as privaudit's engine trains it, equals the
reference's loop written out straight (issue 27: the upcycled rounds are where a gap was suspected).

The straight loop follows osu-srml/Upcycled-FL@4dd7400:server/avg.py ``run``: iterations 1, 3, 5, … train (the
round's clients, each from the global model, with ``update_weights``' SGD — momentum 0.5, a fresh optimiser per
client, ``CrossEntropyLoss`` on the softmax outputs — for E or, for a straggler, fewer epochs), the server takes the
example-weighted mean ``agg_weight`` and ``global_difference = agg_weight − prev_weights`` (the model the round
started from); iterations 2, 4, … train nobody and load ``agg_weight + u·global_difference``; the global model is
evaluated on the pooled test set after every iteration, the extrapolated one included. Only the draws are taken
from privaudit's run (which clients, which stragglers and how many epochs, each client's batch order: the reference
draws them from its round seeds); training, aggregation, extrapolation and evaluation are computed here.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.local_training import make_schedule
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from tests.fl.conftest import make_dataset

SIZES = (23, 41, 17, 60, 35, 50, 29, 44, 31, 38)
EPOCHS, BATCH, LR, MOMENTUM, U = 4, 8, 0.05, 0.5, 0.9


class _SoftmaxRegression(nn.Module):
    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        out_features, in_features = state["linear.weight"].shape
        self.linear = nn.Linear(in_features, out_features)
        self.load_state_dict({k: v.clone() for k, v in state.items()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x), dim=1)


def _straight_reference(dataset, initial, history, seed: int):
    """The reference's Upcycled run replayed with privaudit's draws (module docstring): final state, test accuracies."""
    tensors = [(torch.from_numpy(c.x_train), torch.from_numpy(c.y_train)) for c in dataset.clients]
    total = sum(c.num_train for c in dataset.clients)
    weights = [c.num_train / total for c in dataset.clients]
    x_test, y_test = (torch.from_numpy(a) for a in dataset.test)
    tree = SeedTree(seed)
    state = {k: v.clone() for k, v in initial.items()}
    agg_weight = global_difference = None
    accuracies, training_round = [], 0
    for metrics in history:
        if metrics.round % 2 == 1:
            training_round += 1
            prev_weights = {k: v.clone() for k, v in state.items()}
            local = {}
            for client, epochs in zip(metrics.clients, metrics.epochs, strict=True):
                x, y = tensors[client]
                schedule = make_schedule(len(y), epochs, BATCH, tree.numpy("shuffle", training_round, client))
                model = _SoftmaxRegression(state)
                optimiser = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=0.0)
                for row, size in zip(schedule.indices, schedule.sizes, strict=True):
                    rows = row[: int(size)]
                    model.zero_grad()
                    nn.CrossEntropyLoss()(model(x[rows]), y[rows]).backward()
                    optimiser.step()
                local[client] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            chosen = sorted(local)
            norm = sum(weights[c] for c in chosen)
            agg_weight = {k: sum(local[c][k] * weights[c] for c in chosen) / norm for k in state}
            global_difference = {k: agg_weight[k] - prev_weights[k] for k in state}
        else:
            assert not metrics.clients  # an even iteration touches no client
            agg_weight = {k: agg_weight[k] + U * global_difference[k] for k in state}
        state = {k: v.clone() for k, v in agg_weight.items()}
        with torch.no_grad():
            accuracies.append(float((_SoftmaxRegression(state)(x_test).argmax(1) == y_test).double().mean()))
    return state, accuracies


def test_engine_upcycled_fedavg_with_stragglers_equals_the_reference_loop_written_out():
    seed, rounds = 5, 8
    dataset = make_dataset(sizes=SIZES, dim=20, num_classes=2, seed=2)
    config = FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=EPOCHS, batch_size=BATCH, lr=LR, momentum=MOMENTUM,
                                                                    double_softmax=True),
                              clients_per_round=0.3, stragglers=0.5, seed=seed)
    result = run_federation(dataset, "logreg", make_algorithm("upcycled-fedavg", {"upcycle": U}), config, progress=False)
    trained = [m for m in result.history if m.trained]
    assert len(trained) == rounds // 2 and all(len(m.clients) == 3 for m in trained)
    assert any(m.stragglers for m in trained)  # the test covers stragglers in the upcycled rounds
    state, accuracies = _straight_reference(dataset, result.info.initial_state, result.history, seed)
    for key, value in state.items():
        assert torch.allclose(result.state[key], value, atol=1e-5), key
    assert not torch.allclose(result.state["linear.weight"], result.info.initial_state["linear.weight"], atol=0.05)
    assert np.allclose([m.test_accuracy for m in result.history], accuracies)
