"""Run the PFA family (004) from Python, and say what each client really spent.

* :class:`PFAConfig` + :func:`train_pfa` — the Python API: ``train_pfa(PFAConfig(algorithm="pfa",
  budgets="mixgauss1", num_clients=20, rounds=50))`` returns a :class:`PFAResult` (a
  :class:`~privaudit.fl.engine.round_loop.FederationResult` with the run's PFA report attached);
* :func:`run_pfa_training` — a :class:`~privaudit.fl.run.TrainSpec` of the family through the one training
  entry point :func:`~privaudit.fl.run.run_training` (what ``privaudit train --algorithm pfa|pfa-plus|...``
  runs; the algorithm itself puts its report — participation, when and why training stopped, uplink bytes,
  per-round aggregation — into the checkpoint manifest under ``"pfa"``), returned as a :class:`PFAResult`;
* :func:`run_privacy` — per client: claimed ε_m, σ_m, realised steps (from the run's ledger) and the ε a
  real accountant gives for them. For a plan without training use
  :func:`privaudit.papers.pfa.budget_calibration.plan_client_privacy`.

:class:`PFAConfig` is a thin, typed layer over :class:`~privaudit.fl.run.TrainSpec` with the paper's
defaults (the evidence script and the audit recipe describe their runs with it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import split_wrapper
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.round_loop import FederationResult
from privaudit.fl.run import TrainSpec, run_training
from privaudit.papers.pfa import run_report
from privaudit.papers.pfa.algorithm import family_of
from privaudit.papers.pfa.budget_calibration import ClientCalibration, ClientPrivacy
from privaudit.papers.pfa.specs import NAMES


@dataclass
class PFAResult(FederationResult):
    """A trained PFA-family federation and its report.

    ``algorithm`` is the PFA-family algorithm itself (inside any privatizer wrapper): its ``calibrations``,
    ``uplink`` and per-round ``records``.
    """

    report: dict[str, Any] = field(default_factory=dict)

    @property
    def calibrations(self) -> list[ClientCalibration]:
        return [] if self.algorithm is None else list(self.algorithm.calibrations)

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
        _require_family(self.algorithm)
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


def _require_family(name: str) -> None:
    key = str(name).strip().lower()
    if split_wrapper(key)[1] not in NAMES:  # PFA's own algorithms, alone or inside an algorithm wrapper
        raise InvalidParameterError(f"{name!r} is not a PFA-family algorithm")


def run_pfa_training(spec: TrainSpec, out: str | os.PathLike | None = None, *, save_client_updates: bool = False,
                     overwrite: bool = False, progress: bool = True) -> PFAResult:
    """Run a PFA-family ``spec`` through :func:`~privaudit.fl.run.run_training` and attach its report."""
    _require_family(spec.algorithm)
    result = run_training(spec, out, save_client_updates=save_client_updates, overwrite=overwrite, progress=progress)
    family = family_of(result.algorithm)
    base = {f.name: getattr(result, f.name) for f in fields(FederationResult) if f.name != "algorithm"}
    return PFAResult(**base, report=family.report(), algorithm=family)


def train_pfa(config: PFAConfig, out: str | os.PathLike | None = None, *, progress: bool = False,
              overwrite: bool = False) -> PFAResult:
    """Train the PFA-family run ``config`` (optionally writing a checkpoint to ``out``)."""
    return run_pfa_training(config.train_spec(), out, overwrite=overwrite, progress=progress)


def realised_steps(result: FederationResult) -> dict[int, int]:
    """DP-SGD steps per client recorded in the run's ledger."""
    return run_report.realised_steps(result.ledger)


def run_privacy(result: PFAResult, accountant: str = "rdp", claimed: str = "preference") -> list[ClientPrivacy]:
    """Per client: claimed ε_m, σ_m, realised steps and real ε (``accountant``) of a finished PFA-family run.

    ``claimed="preference"`` compares with each client's own budget (what the ledger keeps); ``"operating"``
    with the budget its noise was calibrated for (they differ for the Minimum/Maximum baselines).
    """
    return run_report.client_privacy_of_run(result.calibrations, result.ledger, result.report, accountant, claimed)


def summary_rows(result: PFAResult, accountant: str = "rdp") -> dict[str, Any]:
    """The lines the family adds to ``privaudit train``'s summary (:func:`privaudit.papers.pfa.run_report.summary_rows`)."""
    return run_report.summary_rows(result.report, result.calibrations, result.ledger, accountant)
