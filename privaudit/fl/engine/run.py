"""A training run described by names and options (what ``privaudit train`` and the evidence scripts run).

:class:`TrainSpec` is the JSON-ready description (dataset spec string, model name, algorithm name and
options, privacy mechanism and options, the federation settings); :func:`run_training` loads the data,
builds model and algorithm, runs the federation and, given ``out``, writes the checkpoint with the spec in
its manifest (``"train_spec"``), so a run can be repeated from its checkpoint alone.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import ClientSampling, Execution, FederationConfig, LocalTrainingConfig


@dataclass(frozen=True)
class TrainSpec:
    algorithm: str
    dataset: str
    rounds: int
    model: str | None = None
    algorithm_options: dict[str, Any] = field(default_factory=dict)
    privacy: str = "none"
    privacy_options: dict[str, Any] = field(default_factory=dict)
    local: LocalTrainingConfig = field(default_factory=LocalTrainingConfig)
    clients_per_round: float = 1.0
    sampling: str = ClientSampling.FIXED_SIZE.value
    stragglers: float = 0.0
    seed: int = 0
    data_seed: int = 0
    num_clients: int | None = None
    partition: str | None = None
    dataset_options: dict[str, Any] = field(default_factory=dict)
    execution: str = Execution.AUTO.value
    eval_every: int = 1
    eval_train_loss: bool = False

    def federation_config(self) -> FederationConfig:
        return FederationConfig(
            rounds=self.rounds,
            local=self.local,
            clients_per_round=self.clients_per_round,
            sampling=self.sampling,
            stragglers=self.stragglers,
            seed=self.seed,
            execution=self.execution,
            eval_every=self.eval_every,
            eval_train_loss=self.eval_train_loss,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_algorithm(spec: TrainSpec):
    from privaudit.fl.algorithms.registry import make_algorithm
    from privaudit.fl.privacy.registry import privatize

    privacy_name = spec.privacy or "none"
    return make_algorithm(
        spec.algorithm,
        spec.algorithm_options,
        privatizer=lambda algorithm: privatize(algorithm, privacy_name, spec.privacy_options),
    )


def run_training(spec: TrainSpec, out: str | os.PathLike | None = None, *, save_client_updates: bool = False,
                 overwrite: bool = False, progress: bool = True):
    """Run ``spec``; returns the :class:`~privaudit.fl.engine.round_loop.FederationResult`."""
    from privaudit.data import load_dataset
    from privaudit.fl.engine.checkpoint import CheckpointWriter
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.models import default_model_for

    config = spec.federation_config()  # validate the cheap things before loading data
    algorithm = build_algorithm(spec)
    dataset = load_dataset(
        spec.dataset, num_clients=spec.num_clients, partition=spec.partition, seed=spec.data_seed, **spec.dataset_options
    )
    model = spec.model or default_model_for(dataset)
    if not isinstance(model, str):
        raise InvalidParameterError("the model must be given by name")
    observers = []
    if out is not None:
        observers.append(CheckpointWriter(out, save_client_updates=save_client_updates, overwrite=overwrite,
                                          extra={"train_spec": spec.to_dict()}))
    return run_federation(dataset, model, algorithm, config, observers=observers, progress=progress)
