"""A client's clipped local model under two neighbouring datasets, D and D ∪ {z}, with the same randomness.

Upcycled-FL's output perturbation releases ω̂ = ξ(ω) + n, ξ(ω) = ω / max(1, ‖ω‖/τ), where ω is the client's
SGD-trained local model (003 §6; osu-srml/Upcycled-FL@4dd7400:client/avg.py). Thm 6.2's proof assumes ‖ξ(ω) − ξ(ω')‖ ≤ τ/|D|
(the clipped model as an average of per-example terms bounded by τ, add-one neighbours); audit point U2 shows that
for the code's training one record can move ξ(ω) by ≈ τ.

:func:`neighbouring_clipped_models` trains the client twice from the same start with the engine's optimiser
(:func:`privaudit.fl.engine.local_training.run_lanes`: momentum SGD on the mean mini-batch cross-entropy, optional
proximal term), *coupled*: D ∪ {z} uses D's own mini-batch schedule with z added to one uniformly chosen
mini-batch per epoch, so the only difference between the runs is the record (dropout masks come from the
same seed; a batch holding z draws one more row of masks, which shifts later masks — exact coupling holds for
models without dropout). Records:

* :func:`worst_case_record` — audit point U2: one record of large norm (default 5·10³; norms of 3·10³–6·10³ move ξ(ω) by ≈ τ) in a
  uniformly random direction, labelled with the class the starting model finds least likely;
* :func:`in_domain_record` — a record inside the theorem's domain: a random direction with small norm
  (default ‖x‖ = 1, the ‖x‖ ≤ 1 assumption of the paper's analysis).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.data.base import ClientData
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.local_training import Schedule, make_schedule, run_lanes
from privaudit.fl.engine.params import State, global_norm, sub
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.privacy import noise

#: audit point U2's record norms were 3·10³–6·10³
WORST_CASE_NORM = 5e3


Record = tuple[np.ndarray, int | None]


def _random_record(input_shape: Sequence[int], norm: float, label: int | None, seed: int, stream: int) -> Record:
    if not norm > 0:
        raise InvalidParameterError(f"the record norm must be positive, got {norm}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), stream]))
    x = rng.standard_normal(tuple(input_shape))
    return (x / np.linalg.norm(x) * norm).astype(np.float32), None if label is None else int(label)


def worst_case_record(input_shape: Sequence[int], *, norm: float = WORST_CASE_NORM, label: int | None = None, seed: int = 0) -> Record:
    """Audit point U2's record: a uniformly random direction scaled to a large norm.

    With ``label=None`` the label is chosen when the record is inserted: the class the starting model finds
    least likely. At norm 5·10³ the starting logits are already saturated, so a record whose label the model
    already predicts has zero gradient and moves nothing; the least likely label makes its gradient maximal.
    """
    return _random_record(input_shape, norm, label, seed, 0xB2)


def in_domain_record(input_shape: Sequence[int], *, norm: float = 1.0, label: int | None = None, seed: int = 0) -> Record:
    """A record inside the paper's domain: a uniformly random direction with small norm (default 1).

    ``label=None``: the starting model's least likely class, as for :func:`worst_case_record`.
    """
    return _random_record(input_shape, norm, label, seed, 0xD0)


def least_likely_label(model: nn.Module, state: State, x: np.ndarray) -> int:
    """The class with the smallest logit for ``x`` under ``state`` (evaluation mode)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = functional_call(model, dict(state), (torch.as_tensor(x, dtype=torch.float32),))
    finally:
        model.train(was_training)
    return int(torch.argmin(logits[0]))


@dataclass(frozen=True, eq=False)
class NeighbouringClippedModels:
    """ξ(ω) trained on D and ξ(ω') trained on D ∪ {z}, with what the paper claims their distance is."""

    without: State
    with_record: State
    norms_before_clip: tuple[float, float]
    clip: float
    num_examples: int
    record_norm: float
    record_label: int

    @property
    def displacement(self) -> float:
        """‖ξ(ω') − ξ(ω)‖₂ (at most 2τ: both lie in the τ-ball)."""
        return global_norm(sub(self.with_record, self.without))

    @property
    def claimed_sensitivity(self) -> float:
        """τ/|D|, the sensitivity Thm 6.2's proof uses (003 App. E; audit point U2)."""
        return self.clip / self.num_examples

    def mu(self, std: float) -> float:
        """The Gaussian mechanism's μ for this pair: ‖ξ(ω') − ξ(ω)‖ / s."""
        return self.displacement / float(std)

    def to_dict(self) -> dict[str, Any]:
        return {
            "displacement": self.displacement, "claimed_sensitivity": self.claimed_sensitivity,
            "ratio_to_claim": self.displacement / self.claimed_sensitivity, "clip": self.clip,
            "num_examples": self.num_examples, "record_norm": self.record_norm, "record_label": self.record_label,
            "norm_before_clip_without": self.norms_before_clip[0], "norm_before_clip_with": self.norms_before_clip[1],
        }


def _coupled_schedule(base: Schedule, batches_per_epoch: int, extra: int, rng: np.random.Generator) -> Schedule:
    """``base`` with index ``extra`` appended to one uniformly chosen mini-batch of every epoch."""
    steps, width = base.indices.shape
    indices = np.full((steps, width + 1), -1, dtype=np.int64)
    indices[:, :width] = base.indices
    sizes = base.sizes.copy()
    for epoch in range(base.epochs):
        step = epoch * batches_per_epoch + int(rng.integers(batches_per_epoch))
        indices[step, sizes[step]] = extra
        sizes[step] += 1
    return Schedule(indices, sizes, base.epochs)


class _BatchOracle:
    """Mean cross-entropy gradients of one lane on the schedule's mini-batches (the engine's local loss).

    ``double_softmax`` mirrors :class:`~privaudit.fl.engine.config.LocalTrainingConfig`: the cross-entropy of
    softmax(logits), as the Upcycled-FL reference trains, so a run trained that way is simulated that way.
    """

    def __init__(self, model: nn.Module, names: Sequence[str], fixed: State, x: torch.Tensor, y: torch.Tensor, schedule: Schedule,
                 double_softmax: bool = False):
        self.model, self.names, self.fixed, self.x, self.y = model, list(names), fixed, x, y
        self.double_softmax = bool(double_softmax)
        self.indices, self.sizes = torch.from_numpy(schedule.indices), schedule.sizes

    def __call__(self, params, step, active):
        rows = self.indices[step, : int(self.sizes[step])]
        leaves = [p[0].detach().requires_grad_() for p in params]
        out = functional_call(self.model, {**self.fixed, **dict(zip(self.names, leaves, strict=True))}, (self.x[rows],))
        loss = F.cross_entropy(torch.softmax(out, dim=-1) if self.double_softmax else out, self.y[rows])
        grads = torch.autograd.grad(loss, leaves)
        return [g.unsqueeze(0) for g in grads], loss.detach().reshape(1)


def _train(model: nn.Module, start: State, x: np.ndarray, y: np.ndarray, schedule: Schedule, local: LocalTrainingConfig,
           prox: float, dropout_seed: int) -> State:
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    fixed = {k: v.clone() for k, v in start.items() if k not in names}
    oracle = _BatchOracle(model, names, fixed, torch.from_numpy(x), torch.from_numpy(y), schedule, local.double_softmax)
    lane = [start[n].unsqueeze(0) for n in names]

    def run():
        model.train()
        return run_lanes(lane, [schedule.steps], oracle, local, prox=prox, anchor=lane if prox else None)

    result = seeded_torch_global(dropout_seed, run)
    trained = {**fixed, **{n: p[0] for n, p in zip(names, result.params, strict=True)}}
    return {k: trained[k] for k in start}


def neighbouring_clipped_models(
    model: nn.Module,
    start: State,
    client: ClientData,
    record: Record,
    *,
    local: LocalTrainingConfig,
    clip: float,
    prox: float = 0.0,
    seed: int = 0,
) -> NeighbouringClippedModels:
    """ξ(ω) and ξ(ω') for one client started at ``start`` (the round's global model), coupled as described above.

    ``prox`` > 0 adds FedProx's (μ/2)‖ω − start‖² (Upcycled-FL's private runs use FedProx, μ = 0.1).
    """
    x_record, y_record = record
    x_record = np.asarray(x_record, dtype=np.float32).reshape(1, *client.x_train.shape[1:])
    if y_record is None:
        y_record = least_likely_label(model, start, x_record)
    n = client.num_train
    seeds = SeedTree(seed)
    base = make_schedule(n, local.epochs, local.batch_size, seeds.numpy("shuffle"))
    coupled = _coupled_schedule(base, -(-n // local.batch_size), n, seeds.numpy("insert"))
    dropout = seeds.integer("dropout")
    without = _train(model, start, client.x_train, client.y_train, base, local, prox, dropout)
    x_with = np.concatenate([client.x_train, x_record])
    y_with = np.concatenate([client.y_train, np.array([y_record], dtype=np.int64)])
    with_record = _train(model, start, x_with, y_with, coupled, local, prox, dropout)
    clipped_without, norm_without = noise.clip_to_norm(without, clip)
    clipped_with, norm_with = noise.clip_to_norm(with_record, clip)
    return NeighbouringClippedModels(clipped_without, clipped_with, (norm_without, norm_with), float(clip), n,
                                     float(np.linalg.norm(x_record)), int(y_record))
