"""The neighbouring-model simulation trains with the loss the audited run used (``--double-softmax`` included)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attacks.membership.neighbouring_models import _BatchOracle
from privaudit.fl.engine.local_training import make_schedule


def _oracle(double_softmax: bool):
    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    names = [n for n, _ in model.named_parameters()]
    x = torch.randn(12, 5)
    y = torch.randint(0, 3, (12,))
    schedule = make_schedule(12, 1, 4, np.random.default_rng(0))
    return model, x, y, schedule, _BatchOracle(model, names, {}, x, y, schedule, double_softmax)


def test_double_softmax_loss_is_the_cross_entropy_of_softmax_outputs():
    for double_softmax in (False, True):
        model, x, y, schedule, oracle = _oracle(double_softmax)
        params = [p.detach().unsqueeze(0) for p in model.parameters()]
        _, loss = oracle(params, 0, None)
        rows = torch.from_numpy(schedule.indices[0, : int(schedule.sizes[0])])
        logits = model(x[rows])
        expected = F.cross_entropy(torch.softmax(logits, -1) if double_softmax else logits, y[rows])
        assert torch.allclose(loss[0], expected.detach(), atol=1e-6)
    # the two losses differ, so a run trained with double softmax is not simulated with the plain loss
    _, _, _, _, plain = _oracle(False)
    _, _, _, _, double = _oracle(True)
    model = _oracle(False)[0]
    params = [p.detach().unsqueeze(0) for p in model.parameters()]
    assert not torch.allclose(plain(params, 0, None)[1], double(params, 0, None)[1])
