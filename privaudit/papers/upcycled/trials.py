"""Trials of the Upcycled-FL audits: the canary client trained without and with one canary, released, scored.

Every trial is a module-level function ``fn(spec, seed) -> dict`` (the executor pickles it by reference) that
returns one *in* score (releases made from D ∪ {canary}, or from D with one record replaced by it) and one
*out* score (from D), plus the numbers the analysis reports. Both worlds of a trial share the trial's
training randomness; in-scores are i.i.d. across trials and so are out-scores, which is all the estimators
need (they bound the two error rates separately).

Threat model (white-box, the mechanism level of Thm 6.2 / 6.3): the auditor plays the server. It fixes the
global model the canary client starts from (ω̄ = 0 — Theorems 6.2 and 6.3 hold for every ω̄), knows the local
training's randomness (public per-round seeds, as the reference code seeds every round from a public list),
and observes every release of the client. The privacy noise is secret (a stream the scoring never touches),
or, for ``rng="clock-ms"``, seeded by the clock's milliseconds exactly as the reference code seeds it.

Pieces: the neighbouring clipped models, the likelihood-ratio test, the canary records and the clock-seed
recovery come from :mod:`attacks.membership` (``neighbouring_clipped_models``, ``output_perturbation_lr_test``,
``worst_case_record`` / ``in_domain_record``, ``recover_clock_seeds``); releases use the engine's own privatizer
functions (:mod:`privaudit.fl.privacy.noise`); objective perturbation runs through
:func:`~privaudit.fl.engine.round_loop.run_federation` with the engine's
:class:`~privaudit.papers.upcycled.objective_perturbation.ObjectivePerturbation` (one client, one round).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from attacks.membership import (
    NeighbouringClippedModels,
    clock_noise,
    in_domain_record,
    neighbouring_clipped_models,
    output_perturbation_lr_test,
    recover_clock_seeds,
    worst_case_record,
)
from attacks.membership.neighbouring_models import least_likely_label
from privaudit.accounting.mechanisms import Neighbouring
from privaudit.data import load_dataset
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.glm import BinaryLogisticGLM
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy.noise import clock_ms_seed, gaussian_noise
from privaudit.fl.privacy.perturbation import OutputPerturbationConfig
from privaudit.fl.privacy.registry import privatize
from privaudit.models import build_model

CLOCK_SEEDS = 1000  # int(frac(time.time())·1000) ∈ {0, …, 999} (audit point U5)


# ------------------------------------------------------------------------------------------------
# the audited client and its canary
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AuditProblem:
    """The canary client's records without (``x_out``) and with (``x_in``) the canary, and the canary itself."""

    x_out: np.ndarray
    y_out: np.ndarray
    x_in: np.ndarray
    y_in: np.ndarray
    canary_x: np.ndarray
    canary_y: int
    x_test: np.ndarray
    y_test: np.ndarray
    input_shape: tuple[int, ...]
    num_classes: int
    row_scale: float

    def client(self, world: str):
        x, y = (self.x_in, self.y_in) if world == "in" else (self.x_out, self.y_out)
        return ClientData(x, y, self.x_test, self.y_test)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def problem_from_spec(spec: dict[str, Any]) -> AuditProblem:
    return _problem(_key(spec["data"]), _key(spec["canary"]), _key(spec["training"]["model"]),
                    Neighbouring.parse(spec.get("neighbours", Neighbouring.ADD_REMOVE)).value)


@lru_cache(maxsize=16)
def _problem(data_key: str, canary_key: str, model_key: str, neighbours: str) -> AuditProblem:
    """The client: ``client_size`` records drawn from the pooled training data (seeded); the canary: audit point U2's
    worst-case record or an in-domain record (``attacks.membership``), labelled with the class the starting
    model ω̄ = 0 finds least likely."""
    data, canary, model_name = json.loads(data_key), json.loads(canary_key), json.loads(model_key)
    dataset = load_dataset(data["dataset"], seed=int(data["data_seed"]), dim=int(data["dim"]),
                           num_classes=int(data["num_classes"]))
    pooled_x = np.concatenate([c.x_train for c in dataset.clients]).astype(np.float32)
    pooled_y = np.concatenate([c.y_train for c in dataset.clients]).astype(np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(data["data_seed"]), int(data["client_size"]), 0xA0D1]))
    rows = rng.choice(len(pooled_y), size=int(data["client_size"]), replace=False)
    x, y = pooled_x[rows], pooled_y[rows]
    scale = 1.0
    if data.get("normalise"):
        # Thm 6.3's domain ‖x‖ ≤ 1: divide by the largest norm (shrunk by 1e-6 to survive float32 rounding)
        scale = (1.0 - 1e-6) / float(np.linalg.norm(x.reshape(len(x), -1), axis=1).max())
        x = (x * scale).astype(np.float32)
    make = worst_case_record if canary["kind"] == "worst-case" else in_domain_record
    cx, _ = make(tuple(dataset.input_shape), norm=float(canary["norm"]), seed=int(canary["seed"]))
    model = _fresh_model({"model": model_name}, tuple(dataset.input_shape), int(dataset.num_classes))
    if data.get("normalise") and float(np.linalg.norm(cx)) > 1.0 - 1e-6:
        cx = (cx * ((1.0 - 1e-6) / float(np.linalg.norm(cx)))).astype(np.float32)  # strictly inside ‖x‖ ≤ 1
    cy = least_likely_label(model, model_state(model), cx[None])
    if Neighbouring.parse(neighbours) is Neighbouring.REPLACE_ONE:
        x_in, y_in = x.copy(), y.copy()
        x_in[0], y_in[0] = cx, cy
    else:  # add/remove: D ∪ {canary} against D
        x_in, y_in = np.concatenate([x, cx[None]]), np.concatenate([y, [cy]])
    test_x, test_y = dataset.test if dataset.test is not None else (x[:8], y[:8])
    return AuditProblem(x, y, x_in, y_in.astype(np.int64), cx.astype(np.float32), int(cy),
                        (test_x[:32] * scale).astype(np.float32), test_y[:32].astype(np.int64),
                        tuple(dataset.input_shape), int(dataset.num_classes), scale)


# ------------------------------------------------------------------------------------------------
# local training of the canary client
# ------------------------------------------------------------------------------------------------
def _fresh_model(training: dict[str, Any], input_shape: tuple[int, ...], num_classes: int):
    """The audited architecture with zero weights: the global model ω̄ = 0 the auditor sends."""
    if training["model"] == "glm":
        return BinaryLogisticGLM(int(np.prod(input_shape)))
    return build_model(training["model"], input_shape, num_classes, init="zeros")


def _local_config(training: dict[str, Any]):
    return LocalTrainingConfig(epochs=int(training["epochs"]), batch_size=int(training["batch_size"]),
                               lr=float(training["lr"]), momentum=float(training["momentum"]))


def local_training(problem: AuditProblem, world: str, training: dict[str, Any], seed: int,
                   privacy: dict[str, Any] | None = None):
    """The canary client's released model after one engine round from ω̄ = 0, and its privacy events."""
    dataset = FederatedDataset(name=f"audit-client-{world}", clients=[problem.client(world)],
                               num_classes=problem.num_classes, input_shape=problem.input_shape)
    privatizer = None
    if privacy is not None:
        options = dict(privacy)
        name = options.pop("mechanism")
        privatizer = lambda algorithm: privatize(algorithm, name, options)  # noqa: E731
    algorithm = make_algorithm(training["algorithm"], dict(training.get("options", {})), privatizer=privatizer)
    config = FederationConfig(rounds=1, local=_local_config(training), seed=int(seed) & ((1 << 62) - 1), execution="sequential")
    model = _fresh_model(training, problem.input_shape, problem.num_classes)
    result = run_federation(dataset, model, algorithm, config, progress=False)
    return result.state, list(result.ledger.events)


def _clipped_pair(problem: AuditProblem, spec: dict[str, Any], seed: int):
    """ξ(ω(D)) and ξ(ω(D ∪ {canary})) with coupled training randomness (``attacks.membership``)."""
    training = spec["training"]
    model = _fresh_model(training, problem.input_shape, problem.num_classes)
    return neighbouring_clipped_models(
        model, model_state(model), problem.client("out"), (problem.canary_x, problem.canary_y),
        local=_local_config(training), clip=float(spec["release"]["clip"]),
        prox=float(training.get("options", {}).get("mu", 0.0)), seed=int(seed) & ((1 << 62) - 1),
    )


@lru_cache(maxsize=8)
def _per_example_pair(spec_key: str):
    """The proof's mechanism: (1/|D|)·Σ_d η(d), η(d) = clip_τ(ω̄ − lr·∇ℓ(ω̄; d)), ω̄ = 0, as a neighbouring pair.

    The normaliser is the public size |D| of the canary-free dataset in both worlds, so adding the canary
    moves the release by η(canary)/|D| — at most τ/|D|, the sensitivity Thm 6.2's proof assumes.
    """
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, grad, vmap


    spec = json.loads(spec_key)
    problem = problem_from_spec(spec)
    training, clip = spec["training"], float(spec["release"]["clip"])
    model = _fresh_model(training, problem.input_shape, problem.num_classes)
    params = {k: v.detach().double() for k, v in model.named_parameters()}

    def loss(p, x, y):
        return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    x = torch.from_numpy(np.concatenate([problem.x_out, problem.canary_x[None]])).double()
    y = torch.from_numpy(np.concatenate([problem.y_out, [problem.canary_y]])).long()
    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    per_example = {k: params[k].unsqueeze(0) - float(training["lr"]) * g for k, g in grads.items()}
    norms = torch.sqrt(sum(v.reshape(len(x), -1).pow(2).sum(1) for v in per_example.values()))
    factor = torch.clamp(clip / norms, max=1.0)
    eta = {k: v * factor.reshape(-1, *([1] * (v.dim() - 1))) for k, v in per_example.items()}
    n = len(problem.y_out)
    without = {k: (v[:n].sum(0) / n).float() for k, v in eta.items()}
    with_record = {k: without[k] + (v[n] / n).float() for k, v in eta.items()}
    return NeighbouringClippedModels(without, with_record, (float(norms[:n].max()), float(norms[n])), clip, n,
                                     float(np.linalg.norm(problem.canary_x)), problem.canary_y)


# ------------------------------------------------------------------------------------------------
# output perturbation (Thm 6.2)
# ------------------------------------------------------------------------------------------------
def _flat64(state) -> np.ndarray:
    return np.concatenate([v.detach().double().reshape(-1).numpy() for v in state.values()])


@lru_cache(maxsize=8)
def _clock_noise_bank(shapes: tuple[tuple[str, tuple[int, ...]], ...], std: float) -> np.ndarray:
    """The ≤ 1000 noise vectors the clock-seeded generator can draw, flat, one row per seed."""
    import torch


    like = {name: torch.zeros(shape) for name, shape in shapes}
    return np.stack([_flat64(clock_noise(like, std, s)) for s in range(CLOCK_SEEDS)])


def _support_gap(xi_in: np.ndarray, xi_out: np.ndarray, bank: np.ndarray) -> float:
    """min over seeds s, s' of ‖(ξ_in + n_s) − (ξ_out + n_s')‖: > 0 means the two supports are disjoint."""
    import torch

    return float(torch.cdist(torch.from_numpy(xi_in[None] + bank), torch.from_numpy(xi_out[None] + bank)).min())


def _clock_trial(pair, spec: dict[str, Any], tree) -> dict[str, Any]:
    """Releases seeded by the clock's milliseconds; the seed-recovery attack scores them."""
    import torch


    release, std = spec["release"], float(spec["release"]["std"])
    states = {"out": pair.without, "in": pair.with_record}
    xi = {w: _flat64(states[w]) for w in states}
    zero = {k: torch.zeros_like(v) for k, v in pair.without.items()}
    result: dict[str, Any] = {"delta_norm": pair.displacement, "recovery_error": {}, "recovered_seed": {}, "distinct_seeds": {}}
    worlds, firsts, first_seeds = ("out", "in"), [], []
    for index, world in enumerate(worlds):
        times = tree.numpy("clock", index).uniform(1.7e9, 1.8e9, size=int(release["rounds"]))
        seeds = [clock_ms_seed(float(t)) for t in times]
        drawn = gaussian_noise(states[world], std, torch.Generator().manual_seed(seeds[0]))
        firsts.append({k: states[world][k] + drawn[k] for k in drawn})  # as OutputPerturbation.finish
        first_seeds.append(seeds[0])
        result["distinct_seeds"][world] = len(set(seeds))
    report = recover_clock_seeds(firsts, clip=float(release["clip"]), std=std, references=[zero, zero],
                                 truths=[states[w] for w in worlds])
    for world, found, seed in zip(worlds, report.recoveries, first_seeds, strict=True):
        if found.recovered is None:
            result[world] = 0.0
        else:
            recovered = _flat64(found.recovered)
            result[world] = float(np.linalg.norm(recovered - xi["out"]) - np.linalg.norm(recovered - xi["in"]))
        result["recovery_error"][world] = found.error
        result["recovered_seed"][world] = found.seed == seed
    bank = _clock_noise_bank(tuple((k, tuple(v.shape)) for k, v in pair.without.items()), std)
    result["support_gap"] = _support_gap(xi["in"], xi["out"], bank)
    return result


def output_perturbation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One trial of Thm 6.2's mechanism (see the module docstring); spec keys: data, canary, mechanism, training, release.

    The in-score is the log-likelihood ratio of M releases made from ξ(D ∪ {canary}) — the sum of the per-release
    ratios of ``attacks.membership.output_perturbation_lr_test`` — and the out-score that of M releases from ξ(D).
    """
    tree = SeedTree(int(seed))
    release = spec["release"]
    if spec["mechanism"] == "per-example-average":
        pair = _per_example_pair(_key({k: spec[k] for k in ("data", "canary", "training", "release", "neighbours")}))
    else:
        pair = _clipped_pair(problem_from_spec(spec), spec, tree.integer("training"))  # public training randomness
    info = {"norm_before_clip": {"out": pair.norms_before_clip[0], "in": pair.norms_before_clip[1]}}
    if release.get("rng") == "clock-ms":
        return {**_clock_trial(pair, spec, tree), **info}
    config = OutputPerturbationConfig(clip=float(release["clip"]), sigma=float(release["sigma"]), noise_std=release["noise_std"])
    scores = output_perturbation_lr_test(pair, config, trials=int(release["rounds"]), seed=tree.integer("release-noise"))
    return {"in": float(np.sum(scores.in_scores)), "out": float(np.sum(scores.out_scores)), "delta_norm": pair.displacement, **info}


# ------------------------------------------------------------------------------------------------
# objective perturbation (Thm 6.3)
# ------------------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _canary_pull(problem_key: str) -> tuple[np.ndarray, float]:
    """The direction the canary pulls the model from ω̄ = 0: −∇_θ ℓ(ω̄; canary), flattened, and its norm."""
    import torch
    import torch.nn.functional as F

    spec = json.loads(problem_key)
    problem = problem_from_spec(spec)
    model = _fresh_model(spec["training"], problem.input_shape, problem.num_classes)
    x = torch.from_numpy(problem.canary_x[None]).float()
    loss = F.cross_entropy(model(x), torch.tensor([problem.canary_y]))
    grads = torch.autograd.grad(loss, [p for p in model.parameters()])
    pull = -np.concatenate([g.double().reshape(-1).numpy() for g in grads])
    norm = float(np.linalg.norm(pull))
    return pull / norm if norm > 0 else pull, norm


def objective_perturbation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One trial of Thm 6.3's mechanism: both worlds share the trial's seed (hence the same noise n)."""
    problem = problem_from_spec(spec)
    direction, _ = _canary_pull(_key({k: spec[k] for k in ("data", "canary", "training", "neighbours")}))
    result: dict[str, Any] = {}
    failures: set[str] = set()
    valid = True
    epsilon = None
    for world in ("out", "in"):
        state, events = local_training(problem, world, spec["training"], int(seed), privacy=spec["privacy"])
        result[world] = float(_flat64(state) @ direction)
        for event in events:
            valid = valid and event.valid
            failures.update(a.removeprefix("fails: ") for a in event.assumptions if a.startswith("fails: "))
            epsilon = event.mechanism.epsilon
    result["events_valid"] = valid
    result["failed_assumptions"] = sorted(failures)
    result["round_epsilon"] = epsilon if epsilon is None or math.isfinite(epsilon) else "inf"
    return result
