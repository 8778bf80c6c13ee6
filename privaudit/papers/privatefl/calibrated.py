"""PrivateFL as ``privaudit train --algorithm privatefl --privacy none|ldp|cdp|ddp`` runs it: its own privacy modes.

PrivateFL's privacy modes are not generic privatizers with a given noise multiplier: the paper states a claimed
(ε, δ) and its code calibrates the noise for it from the run — the rounds, the client sampling rate, every
client's data size (LDP's per-client σ_i) and the model's dimension (DDP's Skellam encoding)
(:func:`privaudit.papers.privatefl.experiment.privacy_wrapper`). :class:`CalibratedPrivateFL` is the algorithm
that does this through the federation's hooks:

* ``start_federation`` — builds the run's :class:`~privaudit.papers.privatefl.experiment.PrivateFLConfig` from its
  settings and the federation's configuration, calibrates, and wraps a fresh
  :class:`~privaudit.papers.privatefl.algorithm.PrivateFL` in the mechanism (``LocalDP``, ``CentralDP``,
  ``DistributedDP`` or ``NoPrivacy``), which then runs every round;
* ``end_federation`` — puts the claimed budgets into the run's ledger (per client for LDP, the server's for
  CDP/DDP), records server events no client result carried, and refreshes the run's algorithm description
  with the mechanism's end-of-run state (excluded clients, clip norms, DDP diagnostics);
* ``model_for`` — the personalised transformation in front of the named body (a registered name when one
  describes it, so checkpoints can rebuild the model);
* ``manifest_sections`` / ``summary_rows`` — the calibration under ``"privatefl"`` in the checkpoint manifest,
  and the personalised accuracy and realised ε in ``privaudit train``'s summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from privaudit.accounting.ledger import SERVER
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine.capabilities import ModelChoice, RunCompletion, RunPlanning, RunReport
from privaudit.fl.privacy.local_dp import LocalDP
from privaudit.fl.privacy.server_release import ServerReleaseWrapper
from privaudit.papers.privatefl.algorithm import PrivateFL
from privaudit.papers.privatefl.experiment import (
    DATA_FIELDS,
    OPTION_FIELDS,
    PrivateFLConfig,
    model_builder,
    named_model,
    privacy_wrapper,
    summary_rows,
)


class CalibratedPrivateFL(AlgorithmWrapper, RunPlanning, RunCompletion, ModelChoice, RunReport):
    """PrivateFL under one of its privacy modes, the noise calibrated for the claimed (ε, δ) when the run starts.

    ``settings`` holds the privacy mode and PrivateFL's options (its run fields — rounds, local training, client
    sampling — are replaced by the federation's in :meth:`start_federation`). Until then the wrapped algorithm is
    a bare :class:`PrivateFL`; from then on the privacy mechanism around a fresh one.
    """

    def __init__(self, settings: PrivateFLConfig) -> None:
        if not isinstance(settings, PrivateFLConfig):
            raise InvalidParameterError("CalibratedPrivateFL needs a PrivateFLConfig")
        super().__init__(PrivateFL())
        self.settings = settings
        self.run_config: PrivateFLConfig | None = None
        self.calibration: dict[str, Any] = {}

    @classmethod
    def from_options(cls, privacy: str, options: Mapping[str, Any]) -> CalibratedPrivateFL:
        """From ``privaudit train``'s privacy mode and PrivateFL options (flag names); validated here, before any data."""
        unknown = sorted(set(options) - set(OPTION_FIELDS))
        if unknown:
            raise InvalidParameterError(f"option --{unknown[0].replace('_', '-')} does not apply to algorithm privatefl")
        return cls(PrivateFLConfig(privacy=privacy, **{OPTION_FIELDS[k]: v for k, v in options.items()}))

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def setup(self, context) -> None:
        self.inner = PrivateFL()
        self.run_config, self.calibration = None, {}
        super().setup(context)

    def _run_config(self, config) -> PrivateFLConfig:
        local = config.local
        run = replace(self.settings, rounds=config.rounds, local_epochs=local.epochs, batch_size=local.batch_size, lr=local.lr,
                      momentum=local.momentum, clients_per_round=config.clients_per_round, client_sampling=config.sampling.value,
                      seed=config.seed, eval_every=config.eval_every, num_clients=self.context.num_clients)
        if run.sampling != run.client_sampling:
            raise InvalidParameterError("PrivateFL-CDP dp-fedavg samples clients by Poisson sampling (its accounting assumes it): "
                                        "run it with --sampling poisson")
        return run

    def start_federation(self, config, ledger) -> None:
        """Calibrate the privacy mode for the run and wrap a fresh PrivateFL in its mechanism."""
        run = self._run_config(config)
        scale = 1.0 if run.transform_lr is None else float(run.transform_lr) / run.learning_rate
        inner = PrivateFL(transform_lr_scale=scale, personal_layers=run.personal_layers or "transform")
        mechanism, self.calibration = privacy_wrapper(run, inner, self.context.client_sizes,
                                                      self.context.model)
        self.inner, self.run_config = mechanism, run
        mechanism.setup(self.context)
        RunPlanning.of(mechanism).start_federation(config, ledger)

    def end_federation(self, result) -> None:
        run, mechanism = self.run_config, self.inner
        if isinstance(mechanism, LocalDP):
            for cid, (eps, delta) in mechanism.budgets.items():
                result.ledger.set_budget(cid, eps, delta)
        elif run is not None and run.privacy in ("cdp", "ddp") and run.epsilon is not None:
            result.ledger.set_budget(SERVER, float(run.epsilon), float(run.delta))
        if isinstance(mechanism, ServerReleaseWrapper):
            result.ledger.record_all(mechanism.pending_events())
        RunCompletion.of(mechanism).end_federation(result)
        result.info.algorithm.update(self.describe())

    def model_for(self, name: str):
        model = replace(self.settings, model=name)
        named = named_model(model)
        return named if named is not None else model_builder(model)

    def manifest_sections(self) -> dict[str, Any]:
        run = self.run_config if self.run_config is not None else self.settings
        config = {k: v for k, v in run.to_dict().items() if k not in DATA_FIELDS}
        return {"privatefl": {"config": config, "calibration": self.calibration}}

    def summary_rows(self, result) -> dict[str, Any]:
        return summary_rows(result)

    def hyperparameters(self) -> dict[str, Any]:
        return self.inner.hyperparameters()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()
