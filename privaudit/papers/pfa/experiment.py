"""Run the PFA family (004) from Python or from ``privaudit train``, and say what each client really spent.

* :class:`PFAConfig` + :func:`train_pfa` — the Python entry point: ``train_pfa(PFAConfig(algorithm="pfa",
  budgets="mixgauss1", num_clients=20, rounds=50))`` returns a :class:`PFAResult` (a
  :class:`~privaudit.fl.engine.round_loop.FederationResult` with the run's PFA report attached);
* :func:`run_pfa_training` — what ``privaudit train --algorithm pfa|pfa-plus|weiavg|...`` runs: the generic
  :func:`~privaudit.fl.engine.run.run_training` plus the PFA report (participation, when and why training
  stopped, uplink bytes, per-round aggregation) in the checkpoint manifest under ``"pfa"``;
* :func:`run_privacy` — per client: claimed ε_m, σ_m, realised steps (from the run's ledger) and the ε a
  real accountant gives for them. For a plan without training use
  :func:`privaudit.papers.pfa.budget_calibration.plan_client_privacy`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import CheckpointWriter
from privaudit.fl.engine.round_loop import FederationResult
from privaudit.fl.engine.run import TrainSpec
from privaudit.papers.pfa.budget_calibration import (
    ClientCalibration,
    ClientPrivacy,
    client_privacy,
    summarise_privacy,
)


@dataclass
class PFAResult(FederationResult):
    """A trained PFA-family federation and its report (``algorithm`` is the trained algorithm object)."""

    report: dict[str, Any] = field(default_factory=dict)
    algorithm: Any = None

    @property
    def calibrations(self) -> list[ClientCalibration]:
        return list(getattr(self.algorithm, "calibrations", []) or [])

    @property
    def stop_reason(self) -> str | None:
        stopped = (self.report.get("participation") or {}).get("stopped")
        return None if stopped is None else stopped["reason"]


@dataclass(frozen=True)
class PFAConfig:
    """A PFA-family run by names. ``options`` are PFA options by their CLI names (``projection_dims``, ``split``, …).

    Defaults follow the paper's setup where this toolkit can (§5.1: K/M = 0.8, B = 8, τ = 100; MNIST logistic
    regression) on the offline 5,000-image MNIST subset; local SGD without momentum, as the reference
    code's ``DPGradientDescentGaussianOptimizer``.
    """

    algorithm: str = "pfa"
    budgets: str = "mixgauss1"
    dataset: str = "mnist5k"
    num_clients: int = 20
    partition: str = "iid"
    model: str = "pfa-lr"
    rounds: int = 50
    clients_per_round: float = 0.8
    local_steps: int = 100
    batch_size: int = 8
    lr: float = 0.1
    momentum: float = 0.0
    seed: int = 0
    data_seed: int = 0
    eval_every: int = 1
    options: dict[str, Any] = field(default_factory=dict)

    def train_spec(self) -> TrainSpec:
        from privaudit.fl.engine.config import LocalTrainingConfig
        from privaudit.papers.pfa.specs import is_pfa_family

        if not is_pfa_family(self.algorithm):
            raise InvalidParameterError(f"{self.algorithm!r} is not a PFA-family algorithm")
        options = {"budgets": self.budgets, "local_steps": self.local_steps, **self.options}
        return TrainSpec(
            algorithm=self.algorithm,
            dataset=self.dataset,
            rounds=self.rounds,
            model=self.model,
            algorithm_options=options,
            local=LocalTrainingConfig(epochs=1, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum),
            clients_per_round=self.clients_per_round,
            seed=self.seed,
            data_seed=self.data_seed,
            num_clients=self.num_clients,
            partition=self.partition,
            execution="sequential",
            eval_every=self.eval_every,
        )


class _PFACheckpointWriter(CheckpointWriter):
    """Writes the PFA report into the manifest (``"pfa"``) when the run ends."""

    def __init__(self, path, algorithm, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.algorithm = algorithm

    def on_end(self, result: FederationResult) -> None:
        self.extra["pfa"] = self.algorithm.report()
        super().on_end(result)


def _pfa_algorithm(algorithm: Any) -> Any:
    """The HeterogeneousDP object inside ``algorithm`` (itself, or the innermost wrapped one)."""
    from privaudit.papers.pfa.algorithm import HeterogeneousDP

    current = algorithm
    while current is not None and not isinstance(current, HeterogeneousDP):
        current = getattr(current, "inner", None)
    return current


def run_pfa_training(spec: TrainSpec, out: str | os.PathLike | None = None, *, save_client_updates: bool = False,
                     overwrite: bool = False, progress: bool = True) -> PFAResult:
    """Run a PFA-family ``spec`` (as :func:`privaudit.fl.engine.run.run_training` does) and attach its report."""
    from privaudit.data import load_dataset
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.fl.engine.run import build_algorithm

    config = spec.federation_config()
    algorithm = build_algorithm(spec)
    family = _pfa_algorithm(algorithm)
    if family is None:
        raise InvalidParameterError(f"{spec.algorithm!r} is not a PFA-family algorithm")
    dataset = load_dataset(spec.dataset, num_clients=spec.num_clients, partition=spec.partition, seed=spec.data_seed,
                           **spec.dataset_options)
    model = spec.model or "pfa-lr"
    observers = []
    if out is not None:
        observers.append(_PFACheckpointWriter(out, family, save_client_updates=save_client_updates, overwrite=overwrite,
                                              extra={"train_spec": spec.to_dict()}))
    result = run_federation(dataset, model, algorithm, config, observers=observers, progress=progress)
    base = {f.name: getattr(result, f.name) for f in fields(FederationResult)}
    return PFAResult(**base, report=family.report(), algorithm=family)


def train_pfa(config: PFAConfig, out: str | os.PathLike | None = None, *, progress: bool = False,
              overwrite: bool = False) -> PFAResult:
    """Train the PFA-family run ``config`` (optionally writing a checkpoint to ``out``)."""
    return run_pfa_training(config.train_spec(), out, overwrite=overwrite, progress=progress)


def realised_steps(result: FederationResult) -> dict[int, int]:
    """DP-SGD steps per client recorded in the run's ledger."""
    steps: dict[int, int] = {}
    for event in result.ledger.events:
        steps[int(event.client_id)] = steps.get(int(event.client_id), 0) + event.count
    return steps


def run_privacy(result: PFAResult, accountant: str = "rdp", claimed: str = "preference") -> list[ClientPrivacy]:
    """Per client: claimed ε_m, σ_m, realised steps and real ε (``accountant``) of a finished PFA-family run.

    ``claimed="preference"`` compares with each client's own budget (what the ledger keeps); ``"operating"``
    with the budget its noise was calibrated for (they differ for the Minimum/Maximum baselines).
    """
    calibrations = result.calibrations
    if not calibrations:
        raise InvalidParameterError("this run trained without DP (np-fedavg): it has no per-client ε")
    steps = realised_steps(result)
    if claimed == "preference":
        prefs = result.report["plan"]["budgets"]["epsilons"]
    elif claimed == "operating":
        prefs = None
    else:
        raise InvalidParameterError(f"claimed must be 'preference' or 'operating', got {claimed!r}")
    return client_privacy(calibrations, steps, accountant, claimed=prefs)


def summary_rows(result: PFAResult, delta: float | None = None, accountant: str = "rdp") -> dict[str, Any]:
    """A few lines for ``privaudit train``'s summary: stop, ε spent (max / mean, over budget), uplink reduction."""
    out: dict[str, Any] = {}
    report = result.report
    stopped = (report.get("participation") or {}).get("stopped")
    out["stopped_at_round"] = None if stopped is None else stopped["round"]
    if stopped is not None:
        out["stop_reason"] = stopped["reason"]
    if result.calibrations:
        privacy = summarise_privacy(run_privacy(result, accountant))
        out["max_epsilon_spent"] = privacy["max_epsilon"]
        out["mean_epsilon_spent"] = privacy["mean_epsilon"]
        out["clients_over_budget"] = len(privacy["over_budget"])
    communication = report.get("communication") or {}
    out["uplink_bytes"] = communication.get("total_bytes")
    out["uplink_reduction_private"] = communication.get("reduction_private")
    return out
