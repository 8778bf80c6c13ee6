"""Non-private local SGD with a learning rate per parameter group (the reference PrivateFL client's param groups).

The reference ``CDPUser`` trains the transformation with ``--flr`` and every other parameter with ``--lr``
(BHui97/PrivateFL@39711e6:FedUser.py). :class:`GroupedSGD` runs the engine's shuffled mini-batch passes (the trainer's seeded
``"shuffle"`` schedule, the same batches the engine's own SGD uses) with PyTorch's SGD step per parameter,
buf ← m·buf + g; θ ← θ − lr·scale·buf, where ``scale`` is the factor of the first name prefix in
``lr_scales`` that matches (1 otherwise). Clients with this solver train sequentially.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.local_solver import ClientSolver, LocalOutcome
from privaudit.fl.engine.params import State


@dataclass(frozen=True)
class GroupedSGD(ClientSolver):
    """Mini-batch SGD with per-prefix learning-rate factors ``lr_scales`` (e.g. (("transform.", 20.0),))."""

    lr_scales: tuple[tuple[str, float], ...] = ()
    kind: str = "grouped-sgd"

    def __post_init__(self) -> None:
        for prefix, factor in self.lr_scales:
            if not isinstance(prefix, str) or not float(factor) > 0:
                raise InvalidParameterError(f"learning-rate scales are (name prefix, factor > 0) pairs, got {(prefix, factor)!r}")

    def scale(self, name: str) -> float:
        for prefix, factor in self.lr_scales:
            if name.startswith(prefix):
                return float(factor)
        return 1.0

    def train_client(self, trainer, global_state: State, task, training_round: int):
        """One client's local SGD with a learning rate per parameter group: the personalised transformation at its own rate
        (the reference code's ``--flr``, BHui97/PrivateFL@0ff71d6:FedAverage.py), the body at ``lr``."""
        schedule = trainer.schedule(task, training_round)
        x = torch.from_numpy(task.data.x_train)
        y = torch.from_numpy(task.data.y_train)
        names = list(trainer.names)
        fixed = {k: v for k, v in global_state.items() if k not in names}
        params = [global_state[n].detach().clone() for n in names]
        lrs = [trainer.local.lr * self.scale(n) for n in names]
        momentum = trainer.local.momentum
        buffers = [torch.zeros_like(p) for p in params] if momentum > 0 else None
        loss_sum = 0.0
        for step in range(schedule.steps):
            rows = torch.from_numpy(schedule.indices[step, : int(schedule.sizes[step])])
            leaves = [p.requires_grad_() for p in params]
            out = functional_call(trainer.model, {**fixed, **dict(zip(names, leaves, strict=True))}, (x[rows],))
            loss = F.cross_entropy(out, y[rows])
            grads = torch.autograd.grad(loss, leaves)
            loss_sum += float(loss.detach())
            with torch.no_grad():
                params = [p.detach() for p in leaves]
                if buffers is not None:
                    for buf, g in zip(buffers, grads, strict=True):
                        buf.mul_(momentum).add_(g)
                    grads = buffers
                for p, g, lr in zip(params, grads, lrs, strict=True):
                    p.add_(g, alpha=-lr)
        state = {k: v.clone() for k, v in global_state.items()}
        state.update({n: p.detach().clone() for n, p in zip(names, params, strict=True)})
        return LocalOutcome(task.client_id, state, steps=schedule.steps, epochs=task.epochs, mean_loss=loss_sum / max(schedule.steps, 1))
