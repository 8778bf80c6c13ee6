"""Trials of FedReg's membership audits: one client's local training with and without a canary record.

The audited client holds ``client_size`` records drawn (seeded, fixed for the audit) from the pooled training data;
the canary is a held-out record from the pooled test set with a wrong label (a mislabelled record: the model can
only fit it by memorising it; spec ``auditing.md`` §3). Add-one neighbours: the in-world client holds the canary as
well. Every trial trains the client once per world from the same public initial model, with *independent* seeds,
so in- and out-scores are independent draws of the mechanism (what the multi-run estimators need).

Threat model: the server sees the client's released model (FedReg's server receives every client's update) and knows
the initial model, the algorithm and the client's other records (the DP adversary). Score: how much closer the release
is to the auditor's own in-world run than to its out-world run (:func:`reference_distance_score`); the LOSS score
(the canary's negative cross-entropy, Yeom et al. 2018) is kept beside it.

:func:`membership_trial` trains either local DP-SGD (``privacy`` block: :class:`privaudit.fl.dpsgd.DPSGD` through
:class:`privaudit.fl.local_dp.LocalDP`, full batches q = 1, clip C, noise multiplier σ) on top of FedAvg's client, or
a registry algorithm as it is (``fedreg-mg``: FedReg with modified gradients, no noise); T full-batch local steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class MembershipProblem:
    x: np.ndarray
    y: np.ndarray
    canary_x: np.ndarray
    canary_y: int
    input_shape: tuple[int, ...]
    num_classes: int

    def client(self, world: str):
        from privaudit.data.base import ClientData

        x, y = self.x, self.y
        if world == "in":
            x = np.concatenate([x, self.canary_x[None]])
            y = np.concatenate([y, [self.canary_y]])
        return ClientData(x.astype(np.float32), y.astype(np.int64), self.x[:8].astype(np.float32), self.y[:8].astype(np.int64))


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def problem_from_spec(spec: dict[str, Any]) -> MembershipProblem:
    return _problem(_key(spec["data"]))


@lru_cache(maxsize=8)
def _problem(data_key: str) -> MembershipProblem:
    from privaudit.data import load_dataset

    data = json.loads(data_key)
    dataset = load_dataset(data["dataset"], seed=int(data["data_seed"]))
    pooled_x = np.concatenate([c.x_train for c in dataset.clients]).astype(np.float32)
    pooled_y = np.concatenate([c.y_train for c in dataset.clients]).astype(np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(data["data_seed"]), int(data["client_size"]), 0xFED5]))
    rows = rng.choice(len(pooled_y), size=int(data["client_size"]), replace=False)
    test_x, test_y = dataset.test if dataset.test is not None else (pooled_x, pooled_y)
    pick = int(rng.integers(len(test_y)))
    wrong = (int(test_y[pick]) + 1 + int(rng.integers(dataset.num_classes - 1))) % dataset.num_classes
    return MembershipProblem(pooled_x[rows], pooled_y[rows], np.asarray(test_x[pick], np.float32), wrong,
                             tuple(dataset.input_shape), int(dataset.num_classes))


def _initial_model(spec: dict[str, Any], problem: MembershipProblem):
    """The public initial model the server sends: the named architecture under the audit's fixed init seed."""
    import torch

    from privaudit.models import build_model

    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(int(spec["training"]["init_seed"]))
        return build_model(spec["training"]["model"], problem.input_shape, problem.num_classes)
    finally:
        torch.random.set_rng_state(generator_state)


def canary_loss_score(model, state, problem: MembershipProblem) -> float:
    """−ℓ(θ; canary): the LOSS attack's score of the canary under the released model ``state``."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call

    with torch.no_grad():
        logits = functional_call(model, dict(state), (torch.from_numpy(problem.canary_x[None]),))
        return -float(F.cross_entropy(logits.double(), torch.tensor([problem.canary_y])))


def _run_client(problem: MembershipProblem, world: str, spec: dict[str, Any], algorithm, seed: int):
    from privaudit.data.base import FederatedDataset
    from privaudit.fl.config import FederationConfig, LocalTrainingConfig
    from privaudit.fl.federation import run_federation

    training = spec["training"]
    client = problem.client(world)
    dataset = FederatedDataset(name=f"fedreg-audit-{world}", clients=[client], num_classes=problem.num_classes,
                               input_shape=problem.input_shape)
    local = LocalTrainingConfig(epochs=int(training["steps"]), batch_size=len(client.y_train), lr=float(training["lr"]),
                                momentum=0.0)
    config = FederationConfig(rounds=1, local=local, seed=int(seed) & ((1 << 62) - 1), execution="sequential",
                              eval_every=10**6)
    model = _initial_model(spec, problem)
    return model, run_federation(dataset, model, algorithm, config, progress=False)


def _algorithm(spec: dict[str, Any]):
    """The client's training: the registry algorithm, wrapped in local DP-SGD when the spec names a privacy block."""
    from privaudit.fl.algorithms.registry import make_algorithm

    training = spec["training"]
    algorithm = make_algorithm(training["algorithm"], dict(training.get("options", {})))
    privacy = spec.get("privacy")
    if privacy is None:
        return algorithm
    from privaudit.fl.local_dp import LocalDP, LocalDPConfig

    return LocalDP(algorithm, LocalDPConfig(noise_multiplier=float(privacy["sigma"]), clip_norm=float(privacy["clip"]),
                                            sample_rate=1.0))


def _flat(state) -> np.ndarray:
    return np.concatenate([v.detach().double().reshape(-1).numpy() for v in state.values()])


def _release(problem: MembershipProblem, world: str, spec: dict[str, Any], seed: int):
    model, result = _run_client(problem, world, spec, _algorithm(spec), seed)
    return model, result.state, list(result.ledger.events)


@lru_cache(maxsize=8)
def _references(spec_key: str) -> tuple[np.ndarray, np.ndarray]:
    """The auditor's own runs of the client in both worlds (its fixed seed): the releases it compares against."""
    spec = json.loads(spec_key)
    problem = problem_from_spec(spec)
    seed = int(spec["auditor_seed"])
    return tuple(_flat(_release(problem, world, spec, seed)[1]) for world in ("out", "in"))  # type: ignore[return-value]


def reference_distance_score(release: np.ndarray, references: tuple[np.ndarray, np.ndarray]) -> float:
    """‖θ − r_out‖ − ‖θ − r_in‖: larger = closer to the auditor's in-world run = member."""
    r_out, r_in = references
    return float(np.linalg.norm(release - r_out) - np.linalg.norm(release - r_in))


def membership_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One trial: the client trained once per world with independent seeds; both releases scored.

    Score: :func:`reference_distance_score` against the auditor's own runs of both worlds (white-box: the auditor knows
    the client's data but the canary bit, the algorithm and the initial model — the DP adversary; the seeds of the
    audited runs are secret). The LOSS score (−ℓ(θ; canary)) is returned beside it. With ``spec["repeat"]`` the
    out-world is trained once more under another seed: ``repeat_distance`` = ‖θ_out − θ'_out‖ against
    ``in_out_distance`` = ‖θ_in − θ_out‖ shows how much of the release is random at all.
    """
    from privaudit.fl.seeding import SeedTree

    tree = SeedTree(int(seed))
    problem = problem_from_spec(spec)
    references = _references(_key({k: v for k, v in spec.items() if k != "repeat"}))
    out: dict[str, Any] = {}
    flat = {}
    for world in ("out", "in"):
        model, state, events = _release(problem, world, spec, tree.integer(world))
        flat[world] = _flat(state)
        out[world] = reference_distance_score(flat[world], references)
        out[f"{world}_loss_score"] = canary_loss_score(model, state, problem)
        out[f"{world}_steps"] = int(sum(e.count for e in events))
        out[f"{world}_mechanisms"] = sorted({type(e.mechanism).__name__ for e in events})
    out["in_out_distance"] = float(np.linalg.norm(flat["in"] - flat["out"]))
    if spec.get("repeat"):
        _, state, _ = _release(problem, "out", spec, tree.integer("out-again"))
        out["repeat_distance"] = float(np.linalg.norm(_flat(state) - flat["out"]))
    return out
