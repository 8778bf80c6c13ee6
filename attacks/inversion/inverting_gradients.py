"""Inverting Gradients (Geiping, Bauermeister, Dröge, Moeller, NeurIPS 2020).

Minimise over candidate inputs x (model space)

    1 − cos∠(U(x), U*) + w_TV · TV(x)  [+ α_BN · R_BN(x)]                   (Geiping et al. eq. 4)

where U* is the released update and U(x) the attacker's simulation of the client on x
(:mod:`attacks.inversion.client_simulation`): one gradient for FedSGD, the unrolled local steps for a
FedAvg/FedProx delta (§5 of the paper). Optimiser as in the paper and its reference settings: Adam on the
*signed* gradient, learning rate ×0.1 at 3/8, 5/8 and 7/8 of the iterations, a box constraint that
projects x back to the data range after every step, and several restarts of which the one with the
smallest final matching loss is returned. Labels are given or inferred first
(:func:`attacks.inversion.labels.infer_labels`).

With ``bn_stats`` set (models with BatchNorm only) the objective adds ``bn_weight`` times a BatchNorm-statistics
prior with the form of GradInversion's R_BN (Yin et al., CVPR 2021, §3; :mod:`attacks.inversion.bn_prior`).
``running`` matches the candidates' feature statistics to the global model's running statistics, the target of
GradInversion and DeepInversion (Yin et al., CVPR 2020). ``update`` matches them to the client's batch statistics,
recovered from its released BatchNorm buffers: a stronger target that needs the buffers. Off by default.

The reference code's defaults are 24,000 iterations (4,800 in its library config) and TV 1e-4 … 1e-1; the
defaults here (1,000 iterations, TV 1e-4) are the CPU budget of privaudit's benchmark and are recorded
with every result.

:meth:`InvertingGradientsAttack.reconstruct_many` attacks many updates in one optimisation, every (update,
restart) pair a lane (:mod:`attacks.inversion.batched`); each lane follows its own attack's trajectory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .base import InversionAttack, config_record, make_generator
from .batched import LaneSettings, functional_simulation, group_key, prepare_attack, run_group
from .bn_prior import BN_STATS_SOURCES, BatchNormTarget, bn_prior, bn_target
from .client_simulation import ClientSimulator, plain_simulator
from .convergence import finite_loss, optimisation_status
from .descent import descent_step, step_milestones
from .functional_model import FunctionalModel, one_hot
from .labels import infer_labels
from .limits import MAX_ITERATIONS, MAX_RESTARTS, count, finite, learning_rate
from .objectives import Distance, get_distance, total_variation
from .threat_model import InversionPayload, InversionResult


@dataclass(frozen=True)
class InvertingGradientsConfig:
    iterations: int = 1000
    lr: float = 0.1
    tv_weight: float = 1e-4
    distance: str = "cosine"
    signed: bool = True
    boxed: bool = True
    lr_schedule: bool = True
    restarts: int = 1
    label_strategy: str = "auto"
    trace_every: int = 100
    precision: str = "float32"
    bn_stats: str | None = None  # BatchNorm-statistics prior: None (off), "update" or "running" (attacks.inversion.bn_prior)
    # α_BN, the prior's weight when it is on. 0.1 is a default, not a tuned value: only a few weights were tried, on
    # one update of 4 images, seed 0, one restart, fedsgd, labels known, bn_stats=update (`privaudit attack inversion
    # --model convnet-bn --defense fedsgd --attack ig --images 4 --per-update 4 --labels-known [--bn-prior update
    # --bn-weight α]`). PSNR mean: digits, 300 iterations: none 7.12 dB, α 0.01 8.69, α 0.1 14.09. lfw, 1000
    # iterations: none 13.49, α 0.01 16.07, α 0.1 26.89. images, 200 iterations: none 10.76, α 0.1 11.18, α 1 9.53.
    bn_weight: float = 0.1

    def __post_init__(self) -> None:  # ranges: attacks.inversion.limits
        count("iterations", self.iterations, 1, MAX_ITERATIONS)
        count("restarts", self.restarts, 1, MAX_RESTARTS)
        if self.bn_stats is not None and self.bn_stats not in BN_STATS_SOURCES:
            raise InvalidParameterError(f"unknown bn_stats {self.bn_stats!r}; choose one of: {', '.join(BN_STATS_SOURCES)}")
        finite("bn_weight", self.bn_weight, positive=True)
        learning_rate("lr", self.lr)
        finite("tv_weight", self.tv_weight, positive=False)
        get_distance(self.distance)
        count("trace_every", self.trace_every, 1, MAX_ITERATIONS)
        for name in ("signed", "boxed", "lr_schedule"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidParameterError(f"{name} must be true or false, got {getattr(self, name)!r}")


def optimizer_record(cfg: InvertingGradientsConfig) -> dict[str, Any]:
    """The optimiser as it runs (torch.optim.Adam on the signed or plain gradient, MultiStepLR, box projection)."""
    return {"name": "Adam", "gradient": "signed" if cfg.signed else "plain", "lr": cfg.lr, "iterations": cfg.iterations,
            "lr_milestones": step_milestones(cfg.iterations) if cfg.lr_schedule else [], "lr_gamma": 0.1 if cfg.lr_schedule else None,
            "box_projection": cfg.boxed, "restarts": cfg.restarts, "precision": cfg.precision}


def prepare_target(payload: InversionPayload, model: FunctionalModel) -> dict[str, torch.Tensor]:
    """The released update on the attack's device, in the model's precision."""
    return {k: v.detach().to(model.device, model.dtype) for k, v in payload.update.items()}


def check_update_kind(payload: InversionPayload, simulator: ClientSimulator) -> None:
    if payload.knowledge.update_kind != simulator.update_kind:
        raise InvalidParameterError(
            f"the released update is a {payload.knowledge.update_kind} but the attacker's client model "
            f"releases a {simulator.update_kind}"
        )


@dataclass(frozen=True)
class MatchingProblem:
    """What every restart of a gradient-matching attack matches against (:meth:`InvertingGradientsAttack.matching_problem`)."""

    labels: torch.Tensor
    label_rule: str
    targets: torch.Tensor
    target_update: Any
    distance: Any
    box: tuple[torch.Tensor, torch.Tensor] | None
    shape: tuple[int, ...]


class InvertingGradientsAttack(InversionAttack):
    """Cosine gradient matching + TV prior with signed Adam, step schedule, box and restarts."""

    name: ClassVar[str] = "ig"
    description: ClassVar[str] = (
        "Inverting Gradients: cosine matching + TV, signed Adam, box constraint, restarts "
        "(unrolls local steps for FedAvg/FedProx deltas)"
    )
    config_class: ClassVar[type] = InvertingGradientsConfig

    def __init__(self, config: InvertingGradientsConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or InvertingGradientsConfig(), device)

    def simulator(self, payload: InversionPayload) -> ClientSimulator:
        """The attacker's model of the client's training (FedSGD or unrolled FedAvg/FedProx here)."""
        return plain_simulator(payload.knowledge)

    def bn_target(self, payload: InversionPayload, model: FunctionalModel) -> BatchNormTarget | None:
        """The BatchNorm prior's target statistics (``None`` when the prior is off); one-line errors for models without
        BatchNorm and releases without buffers."""
        cfg: InvertingGradientsConfig = self.config
        return None if cfg.bn_stats is None else bn_target(cfg.bn_stats, payload, model)

    def _bn_record(self, target: BatchNormTarget | None) -> dict[str, Any]:
        if target is None:
            return {}
        return {"bn_prior": {**target.describe(), "weight": self.config.bn_weight,
                             "source": "client's released BatchNorm buffers (batch statistics)" if target.source == "update"
                             else "global model's running statistics (GradInversion/DeepInversion's target)"}}

    def matching_loss(
        self,
        simulator: ClientSimulator,
        model: FunctionalModel,
        x: torch.Tensor,
        targets: torch.Tensor,
        target_update: dict[str, torch.Tensor],
        distance: Distance,
    ) -> torch.Tensor:
        """Distance between the simulated update for candidates ``x`` and the released one."""
        return distance(simulator.simulate(model, x, targets, create_graph=True), target_update)

    def reconstruct_many(self, payloads: Sequence[InversionPayload], seeds: Sequence[int],
                         on_progress: Callable[[float], None] | None = None) -> list[InversionResult]:
        """``reconstruct(payloads[i], seed=seeds[i])`` for every i, as few optimisations as possible.

        Attacks whose client simulation has a ``torch.func`` form and that share the simulation, the data format
        and the model's shapes run as lanes of one optimisation (:mod:`attacks.inversion.batched`), every restart a
        lane of its own; the others (an overridden matching loss, a simulation without a functional form) run one by
        one.
        ``on_progress(f)``: the fraction f of the work done. Each result's ``seconds`` is its own preparation plus
        an equal share of its optimisation; ``settings["batched"]`` records the optimisation it was part of.
        """
        if len(payloads) != len(seeds):
            raise InvalidParameterError(f"{len(payloads)} payloads but {len(seeds)} seeds")
        cfg: InvertingGradientsConfig = self.config
        plain_loss = type(self).matching_loss is InvertingGradientsAttack.matching_loss
        groups: dict[Any, list] = {}
        simulations: dict[Any, Callable] = {}
        alone: list[int] = []
        for index, (payload, seed) in enumerate(zip(payloads, seeds, strict=True)):
            simulator = self.simulator(payload)
            check_update_kind(payload, simulator)
            model = FunctionalModel.from_payload(payload, self.device, self.dtype)
            simulate = functional_simulation(simulator, model) if plain_loss else None
            if simulate is None:
                alone.append(index)
                continue
            bn = self.bn_target(payload, model)
            key = (*group_key(payload, model, simulator), None if bn is None else bn.structure())
            prepared = prepare_attack(index, payload, model, make_generator(seed, self.device), cfg.restarts, cfg.label_strategy, seed,
                                      bn_target=bn)
            groups.setdefault(key, []).append(prepared)
            simulations.setdefault(key, simulate)
        settings = LaneSettings(cfg.iterations, cfg.lr, cfg.tv_weight, cfg.signed, cfg.lr_schedule, cfg.trace_every,
                                tuple(step_milestones(cfg.iterations)), cfg.bn_weight)
        work = max(1, sum(len(g) for g in groups.values()) * cfg.iterations + len(alone) * cfg.iterations)
        done = 0.0
        results: dict[int, InversionResult] = {}
        for key, group in groups.items():
            started = time.perf_counter()

            def tick(iteration: int, _base=done, _size=len(group)) -> None:
                if on_progress is not None and iteration % 10 == 0:
                    on_progress((_base + _size * iteration) / work)

            outcomes = run_group(group, simulations[key], get_distance(cfg.distance), settings, cfg.boxed, tick)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            seconds = time.perf_counter() - started
            done += len(group) * cfg.iterations
            batch_record = {"attacks": len(group), "restarts": cfg.restarts, "lanes": len(group) * cfg.restarts,
                            "seconds": seconds}
            for prepared, lanes in outcomes:
                results[prepared.index] = self._lane_result(prepared, lanes, key[0], prepared.seconds + seconds / len(group),
                                                            batch_record)
        for index in alone:
            results[index] = self.reconstruct(payloads[index], seed=int(seeds[index]))
            done += cfg.iterations
            if on_progress is not None:
                on_progress(done / work)
        return [results[i] for i in range(len(payloads))]

    def _lane_result(self, prepared, lanes, simulator: ClientSimulator, seconds: float, batch_record: dict[str, Any]) -> InversionResult:
        """The result ``reconstruct`` would return, from one attack's lanes (the best restart, first on ties)."""
        cfg: InvertingGradientsConfig = self.config
        best = min(range(len(lanes)), key=lambda r: (finite_loss(lanes[r].matching_loss), r))
        payload, model = prepared.payload, prepared.model
        result = InversionResult(
            attack=self.name,
            images=lanes[best].images.to(torch.float32).cpu(),
            labels=prepared.labels.cpu(),
            settings={},
            matching_loss=lanes[best].matching_loss,
            loss_trace=lanes[best].trace,
        )
        result.seconds = seconds
        result.status, result.status_reason = optimisation_status(result.loss_trace, result.matching_loss, result.images)
        result.settings = {
            "attack": self.name,
            "config": config_record(cfg),
            "threat_model": payload.knowledge.to_dict(),
            "data": payload.data.to_dict(),
            "parameters_unknown_to_attacker": list(model.unknown),
            "matched_parameters": len(payload.update),
            "device": str(self.device),
            "seed": int(prepared.seed),
            "label_strategy": prepared.rule,
            "labels_paired": True,
            "client_model": simulator.describe(),
            "restart_matching_losses": [lane.matching_loss for lane in lanes],
            "lr_milestones": step_milestones(cfg.iterations) if cfg.lr_schedule else [],
            "optimizer": optimizer_record(cfg),
            **self._bn_record(prepared.bn_target),
            "batched": batch_record,
        }
        return result

    def matching_problem(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> MatchingProblem:
        """Labels (inferred by the configured rule: draws from ``generator``), one-hot targets, the released update in
        the model's dtype, the distance, the data box and the candidates' shape."""
        cfg: InvertingGradientsConfig = self.config
        labels, rule = infer_labels(payload, model, generator, cfg.label_strategy)
        return MatchingProblem(
            labels=labels,
            label_rule=rule,
            targets=one_hot(labels, payload.data.num_classes).to(self.device, model.dtype),
            target_update=prepare_target(payload, model),
            distance=get_distance(cfg.distance),
            box=payload.data.box(self.device) if cfg.boxed else None,
            shape=(payload.knowledge.num_examples, *payload.data.shape),
        )

    def restart_notes(self, label_rule: str, simulator: ClientSimulator, restart_losses: list[float]) -> dict[str, Any]:
        """The result's settings every gradient-matching run records: label rule, client model, each restart's final
        matching loss and the learning-rate milestones."""
        cfg: InvertingGradientsConfig = self.config
        return {
            "label_strategy": label_rule,
            "labels_paired": True,
            "client_model": simulator.describe(),
            "restart_matching_losses": restart_losses,
            "lr_milestones": step_milestones(cfg.iterations) if cfg.lr_schedule else [],
            "optimizer": optimizer_record(cfg),
        }

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        cfg: InvertingGradientsConfig = self.config
        simulator = self.simulator(payload)
        check_update_kind(payload, simulator)
        problem = self.matching_problem(payload, model, generator)
        labels, rule, targets, target_update = problem.labels, problem.label_rule, problem.targets, problem.target_update
        distance, box, shape = problem.distance, problem.box, problem.shape
        bn = self.bn_target(payload, model)
        global_params = {k: v.detach() for k, v in model.params.items()}

        best: tuple[float, torch.Tensor, list[float]] | None = None
        restart_losses = []
        for _ in range(cfg.restarts):
            x = torch.randn(shape, generator=generator, device=self.device, dtype=model.dtype)
            if box is not None:
                x = torch.maximum(torch.minimum(x, box[1]), box[0])
            x.requires_grad_(True)
            optimizer = torch.optim.Adam([x], lr=cfg.lr)
            scheduler = (
                torch.optim.lr_scheduler.MultiStepLR(optimizer, step_milestones(cfg.iterations), gamma=0.1)
                if cfg.lr_schedule
                else None
            )
            trace: list[float] = []
            for iteration in range(cfg.iterations):
                matching = self.matching_loss(simulator, model, x, targets, target_update, distance)
                objective = matching + cfg.tv_weight * total_variation(x) if cfg.tv_weight > 0 else matching
                if bn is not None:
                    objective = objective + cfg.bn_weight * bn_prior(model, global_params, x, bn)
                (grad,) = torch.autograd.grad(objective, x)
                descent_step(x, grad, optimizer, scheduler, box, signed=cfg.signed)
                if iteration % cfg.trace_every == 0:
                    trace.append(float(matching.detach()))
            final = float(self.matching_loss(simulator, model, x, targets, target_update, distance).detach())
            trace.append(final)
            restart_losses.append(final)
            if best is None or finite_loss(final) < finite_loss(best[0]):  # a diverged restart never beats a finite one
                best = (final, x.detach().clone(), trace)
        assert best is not None
        notes = {**self.restart_notes(rule, simulator, restart_losses), **self._bn_record(bn)}
        return InversionResult(
            attack=self.name,
            images=best[1].to(torch.float32).cpu(),
            labels=labels.cpu(),
            settings=notes,
            matching_loss=best[0],
            loss_trace=best[2],
        )
