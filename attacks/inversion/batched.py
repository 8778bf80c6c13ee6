"""Many Inverting Gradients attacks as one optimisation: every (update, restart) pair is one lane.

Inverting Gradients (Geiping et al. 2020, eq. 4) attacks one released update U*_a with its own candidate
inputs x_a. A lane l = (attack a, restart r) holds x_l; one optimisation minimises

    Σ_l  L_l(x_l),   L_l(x) = 1 − cos∠(U_a(x), U*_a) + w_TV·TV(x),

and since L_l depends on x_l only, ∇_{x_l} of the sum is ∇L_l(x_l): every lane follows its own attack's trajectory,
in exact arithmetic (signed Adam and the box projection act element by element, the step schedule is shared; in
float32, see below).
The simulated updates U_a(x_l) are computed for all lanes at once with ``torch.func.vmap`` over a
``torch.func.grad`` simulation of the client (:func:`functional_simulation`: FedSGD's gradient, or FedAvg/
FedProx's unrolled local steps, the same arithmetic as :mod:`attacks.inversion.client_simulation`), so a GPU
runs 64 attacks in the time of a few, and a CPU saves the per-step overhead of 64 small graphs.

Each attack keeps its own randomness: attack a's generator is seeded with its seed, infers its labels first
(:func:`attacks.inversion.labels.infer_labels`) and then draws its restarts' starting points in order, as
:meth:`InvertingGradientsAttack._run` does. Same seeds, same starting points, same objective — but not the same
images. The sequential attack differentiates through ``autograd.grad`` and the lanes through ``torch.func.vmap``,
whose batched kernels sum in another order, so the two gradients differ in float32 rounding. Signed Adam moves a pixel
by the full step whatever the size of its gradient component, so a component that is zero up to rounding can take the
other sign; and the objective is not convex, so once two trajectories part they settle in different nearby optima.
Short runs on small images still agree (``tests/attacks/test_batched_inversion.py``: 25 iterations on 8×8 images,
within 1e-5), longer ones do not. Measured (``python benchmarks/bench_inversion_batched.py --images 16 --iterations
100,300 --out reports/bench/inversion_batched_agreement.md``; lfw, ``convnet``, one restart, CPU): after 100
iterations 9 (FedSGD) and 13 (FedAvg) of 16 images differ, by at most 0.056 and 0.028 of the [0, 1] pixel range; after
300 iterations all 16 do (at most 0.058 and 0.038), each image's PSNR by at most 0.22 and 0.42 dB, and the mean PSNR
of the 16 by at most 0.03 dB (33.88 vs 33.85, 34.09 vs 34.09). The two modes are equally good attacks, not the same
computation: a result records which ran (``settings["batched"]``).

Attacks are grouped by what a lane shares (the client simulation, the data format, the global weights' shapes):
each group is one optimisation. A simulator without a functional form (a plug-in attack's own client model)
makes :func:`functional_simulation` return ``None`` and the caller runs those attacks one by one.

With the BatchNorm-statistics prior on (:mod:`attacks.inversion.bn_prior`), each lane adds α_BN·R_BN(x_l) against its
own attack's target statistics (stacked per lane); R_BN also depends on x_l only, so lanes stay independent. Lanes of
one optimisation share the prior's structure (layers, candidate batches and weights), which the group key includes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import grad, grad_and_value, vmap

from .bn_prior import BatchNormTarget, bn_prior
from .client_simulation import ClientSimulator, FedSGDGradient, UnrolledLocalSGD, batch_slices
from .descent import descent_step
from .functional_model import FunctionalModel, ParamDict, one_hot, soft_cross_entropy
from .labels import infer_labels
from .objectives import Distance, total_variation
from .threat_model import InversionPayload

#: ``simulate(params, inputs, targets) -> update``: a client simulation written with torch.func (vmap-able).
FunctionalSimulation = Callable[[ParamDict, torch.Tensor, torch.Tensor], ParamDict]
#: ``prior(params, inputs, statistics) -> scalar``: a per-lane image prior with per-lane target statistics (vmap-able).
LanePrior = Callable[[ParamDict, torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]


def functional_simulation(simulator: ClientSimulator, model: FunctionalModel) -> FunctionalSimulation | None:
    """The ``torch.func`` form of ``simulator`` on ``model`` (``None`` for simulators without one)."""

    def loss(params: ParamDict, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return soft_cross_entropy(model(params, inputs), targets)  # FunctionalModel: one-line BatchNorm errors

    if type(simulator) is FedSGDGradient:
        return grad(loss)
    if type(simulator) is UnrolledLocalSGD:
        sim = simulator

        def unrolled(params: ParamDict, inputs: torch.Tensor, targets: torch.Tensor) -> ParamDict:
            batches = batch_slices(inputs.shape[0], sim.batch_size)
            theta = dict(params)
            for step in range(sim.local_steps):
                batch = batches[step % len(batches)]

                def step_loss(th: ParamDict, _b=batch, _prox=sim.proximal_mu > 0 and step > 0) -> torch.Tensor:
                    value = loss(th, inputs[_b], targets[_b])
                    if _prox:
                        value = value + 0.5 * sim.proximal_mu * sum(((th[k] - params[k]) ** 2).sum() for k in th)
                    return value

                g = grad(step_loss)(theta)
                theta = {k: theta[k] - sim.lr * g[k] for k in theta}
            return {k: theta[k] - params[k] for k in theta}

        return unrolled
    return None


@dataclass
class LaneOutcome:
    """One lane after the optimisation: its final candidates, final matching loss and loss trace."""

    images: torch.Tensor
    matching_loss: float
    trace: list[float]


@dataclass(frozen=True)
class LaneSettings:
    """The optimiser settings shared by every lane (those of :class:`InvertingGradientsConfig`)."""

    iterations: int
    lr: float
    tv_weight: float
    signed: bool
    lr_schedule: bool
    trace_every: int
    milestones: tuple[int, ...]
    bn_weight: float = 0.0  # α_BN of the BatchNorm prior (used when ``optimise_lanes`` gets a prior)


@dataclass(frozen=True)
class LaneProblem:
    """What every lane matches: the simulated client update, the distance, the global weights — the same for every
    lane (``shared_params``) or stacked ``[L, ...]`` — the box of valid inputs and an optional prior term
    ``prior(params, x, statistics)`` (the BatchNorm prior, weighted by ``LaneSettings.bn_weight``)."""

    simulate: FunctionalSimulation
    distance: Distance
    params: ParamDict
    shared_params: bool
    box: tuple[torch.Tensor, torch.Tensor] | None = None
    prior: LanePrior | None = None


@dataclass(frozen=True)
class LaneTargets:
    """Each lane's start and what it must match: ``starts`` ``[L, n, ...]``, one-hot ``targets`` ``[L, n, C]``,
    ``updates`` ``{name: [L, ...]}`` and, with a prior, its per-lane statistics ``prior_targets`` ``{name: [L, ...]}``."""

    starts: torch.Tensor
    targets: torch.Tensor
    updates: dict[str, torch.Tensor]
    prior_targets: dict[str, torch.Tensor] | None = None


def optimise_lanes(problem: LaneProblem, lanes_in: LaneTargets, settings: LaneSettings,
                   on_iteration: Callable[[int], None] | None = None) -> list[LaneOutcome]:
    """Signed-Adam gradient matching for all lanes at once (Geiping et al. 2020's optimiser, per lane)."""
    simulate, distance, params, box, prior = problem.simulate, problem.distance, problem.params, problem.box, problem.prior
    starts, targets, target_updates, prior_targets = lanes_in.starts, lanes_in.targets, lanes_in.updates, lanes_in.prior_targets
    shared_params = problem.shared_params
    param_dim = None if shared_params else 0
    statistics = prior_targets if prior is not None and prior_targets is not None else {}

    def lane_terms(x: torch.Tensor, p: ParamDict, t: torch.Tensor, u: dict[str, torch.Tensor],
                   s: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        matching = distance(simulate(p, x, t), u)
        objective = matching + settings.tv_weight * total_variation(x) if settings.tv_weight > 0 else matching
        if prior is not None:
            objective = objective + settings.bn_weight * prior(p, x, s)
        return objective, matching

    lanes = vmap(lane_terms, in_dims=(0, param_dim, 0, 0, 0))

    def total(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        objective, matching = lanes(x, params, targets, target_updates, statistics)
        return objective.sum(), matching.detach()

    step = grad_and_value(total, has_aux=True)
    x = starts.clone()
    if box is not None:
        x = torch.maximum(torch.minimum(x, box[1]), box[0])
    x.requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=settings.lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, list(settings.milestones), gamma=0.1) if settings.lr_schedule else None
    traces: list[list[float]] = [[] for _ in range(x.shape[0])]
    for iteration in range(settings.iterations):
        gradient, (_, matching) = step(x.detach())
        descent_step(x, gradient, optimizer, scheduler, box, signed=settings.signed)
        if iteration % settings.trace_every == 0:
            for trace, value in zip(traces, matching.tolist(), strict=True):
                trace.append(float(value))
        if on_iteration is not None:
            on_iteration(iteration + 1)
    with torch.no_grad():
        _, final = lanes(x.detach(), params, targets, target_updates, statistics)
    finals = [float(v) for v in final.tolist()]
    for trace, value in zip(traces, finals, strict=True):
        trace.append(value)
    images = x.detach()
    return [LaneOutcome(images[i].clone(), finals[i], traces[i]) for i in range(images.shape[0])]


@dataclass
class PreparedAttack:
    """One attack's share of a lane group: its model, labels, target update and restarts' starting points."""

    index: int
    payload: InversionPayload
    model: FunctionalModel
    labels: torch.Tensor
    rule: str
    starts: list[torch.Tensor]
    seed: int
    seconds: float  # its own preparation (label inference, draws)
    bn_target: BatchNormTarget | None = None  # the BatchNorm prior's target statistics, when the prior is on


def group_key(payload: InversionPayload, model: FunctionalModel, simulator: ClientSimulator) -> tuple[Any, ...]:
    """What lanes of one optimisation must share: simulator, data format, the architecture (its factory) and the
    model's parameter shapes and buffers (lanes may differ in their global weights)."""
    shapes = tuple((k, tuple(v.shape)) for k, v in model.params.items())
    buffers = tuple((k, tuple(v.shape), v.detach().cpu().numpy().tobytes()) for k, v in model.buffers.items())
    return (simulator, payload.data, payload.model_factory, shapes, buffers, tuple(sorted(payload.update)),
            payload.knowledge.num_examples)


def prepare_attack(index: int, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator, restarts: int,
                   label_strategy: str, seed: int, *, bn_target: BatchNormTarget | None = None) -> PreparedAttack:
    """Labels first, then the restarts' starting points, from the attack's own generator (the sequential order)."""
    started = time.perf_counter()
    labels, rule = infer_labels(payload, model, generator, label_strategy)
    shape = (payload.knowledge.num_examples, *payload.data.shape)
    starts = [torch.randn(shape, generator=generator, device=model.device, dtype=model.dtype) for _ in range(restarts)]
    return PreparedAttack(index, payload, model, labels, rule, starts, seed, time.perf_counter() - started, bn_target)


def run_group(
    group: Sequence[PreparedAttack],
    simulate: FunctionalSimulation,
    distance: Distance,
    settings: LaneSettings,
    boxed: bool,
    on_iteration: Callable[[int], None] | None = None,
) -> list[tuple[PreparedAttack, list[LaneOutcome]]]:
    """Optimise every restart of every attack of ``group`` together; per attack, its restarts' outcomes in order."""
    first = group[0]
    restarts = len(first.starts)
    names = list(first.payload.update)
    device, dtype = first.model.device, first.model.dtype
    reference = first.model.params
    shared = all(all(torch.equal(a.model.params[k], reference[k]) for k in reference) for a in group[1:])
    if shared:
        params = {k: v.detach() for k, v in reference.items()}
    else:
        params = {k: torch.stack([a.model.params[k].detach() for a in group for _ in range(restarts)]) for k in reference}
    num_classes = first.payload.data.num_classes
    starts = torch.stack([s for a in group for s in a.starts])
    targets = torch.stack([one_hot(a.labels, num_classes).to(device, dtype) for a in group for _ in range(restarts)])
    updates = {k: torch.stack([a.payload.update[k].detach().to(device, dtype) for a in group for _ in range(restarts)]) for k in names}
    box = first.payload.data.box(device) if boxed else None
    prior = prior_targets = None
    if first.bn_target is not None:
        structure = first.bn_target

        def prior(p: ParamDict, x: torch.Tensor, statistics: dict[str, torch.Tensor]) -> torch.Tensor:
            return bn_prior(first.model, p, x, structure, statistics)

        prior_targets = {k: torch.stack([a.bn_target.tensors()[k] for a in group for _ in range(restarts)])  # type: ignore[union-attr]
                         for k in structure.tensors()}
    outcomes = optimise_lanes(LaneProblem(simulate, distance, params, shared, box, prior),
                              LaneTargets(starts, targets, updates, prior_targets), settings, on_iteration)
    return [(a, outcomes[i * restarts:(i + 1) * restarts]) for i, a in enumerate(group)]
