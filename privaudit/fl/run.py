"""A training run described by names and options: the one entry point of ``privaudit train`` and the papers' APIs.

It composes the layers below it — the algorithm registry, the privatizer registry and the round loop — so it sits
above :mod:`privaudit.fl.privacy` (the engine imports neither algorithms nor privatizers).

:class:`TrainSpec` is the JSON-ready description (dataset spec string, model name, algorithm name and
options, privacy mechanism and options, the federation settings); :func:`run_training` completes it with the
algorithm's own defaults (:attr:`~privaudit.fl.algorithms.spec_types.AlgorithmSpec.train_defaults`), loads the
data, builds algorithm and model, runs the federation and, given ``out``, writes the checkpoint with the spec in
its manifest (``"train_spec"``), so a run can be repeated from its checkpoint alone.

Whatever a paper adds comes from its algorithm through its declared capabilities
(:mod:`privaudit.fl.engine.capabilities`), never from a branch here: its privacy modes (``privacy_modes`` of its
spec: PrivateFL calibrates σ for a claimed ε from the run), its model
(:class:`~privaudit.fl.engine.capabilities.ModelChoice`: PrivateFL's transformation), its manifest sections and its
summary rows (:class:`~privaudit.fl.engine.capabilities.RunReport`: PFA's participation and uplink report; the rows
are read by ``privaudit train`` through :meth:`~privaudit.fl.engine.round_loop.FederationResult.summary_rows`).

Building models and training import torch; this module does not at import (``privaudit train`` parses
its flags into a :class:`TrainSpec` first), so :func:`run_training` imports those modules when it is called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from privaudit.accounting.mechanisms import Sampling
from privaudit.data import load_dataset
from privaudit.device import resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import algorithm_spec, make_algorithm
from privaudit.fl.engine.capabilities import ModelChoice, RunReport
from privaudit.fl.engine.checkpoint import CheckpointWriter
from privaudit.fl.engine.config import Execution, FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.privacy.registry import privatize


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
    sampling: str = Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT.value
    stragglers: float = 0.0
    seed: int = 0
    data_seed: int = 0
    num_clients: int | None = None
    partition: str | None = None
    dataset_options: dict[str, Any] = field(default_factory=dict)
    execution: str = Execution.AUTO.value
    eval_every: int = 1
    eval_train_loss: bool = False
    #: where clients train (``cpu``, ``cuda``, ``cuda:N``, ``auto``; :mod:`privaudit.device`) and in how many CPU
    #: processes: hardware, not recipe — left out of :meth:`to_dict` (the checkpoint's ``train_spec``), recorded in
    #: the manifest's ``hardware`` section, so a recipe re-runs anywhere
    device: str = "cpu"
    workers: int = 1

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
        out = asdict(self)
        out.pop("device", None)
        out.pop("workers", None)
        return out


def algorithm_defaults(spec: TrainSpec) -> dict[str, Any]:
    """The run settings ``spec``'s algorithm brings for its privacy mode and options (empty if none)."""
    return algorithm_spec(spec.algorithm).defaults(spec.privacy, spec.algorithm_options)


def with_algorithm_defaults(spec: TrainSpec) -> TrainSpec:
    """``spec`` with the model and data settings it leaves open (``None``) taken from its algorithm's defaults."""
    defaults = algorithm_defaults(spec)
    filled = {k: defaults[k] for k in ("model", "num_clients", "partition") if getattr(spec, k) is None and k in defaults}
    return replace(spec, **filled) if filled else spec


def build_algorithm(spec: TrainSpec):
    """The algorithm of ``spec`` with its privacy: the algorithm's own mode (``privacy_modes``) or a privatizer."""
    privacy_name = spec.privacy or "none"
    if algorithm_spec(spec.algorithm).privacy_modes:
        given = sorted(k for k, v in spec.privacy_options.items() if v is not None)
        if given:
            raise InvalidParameterError(f"option --{given[0].replace('_', '-')} does not apply to algorithm {spec.algorithm} "
                                        f"(its --privacy {privacy_name} is calibrated from its own options)")
        return make_algorithm(spec.algorithm, spec.algorithm_options, privacy=privacy_name)
    return make_algorithm(
        spec.algorithm,
        spec.algorithm_options,
        privatizer=lambda algorithm: privatize(algorithm, privacy_name, spec.privacy_options),
    )


def training_model(algorithm, name: str, dataset, seed: int):
    """The model ``algorithm`` trains for model name ``name``: a registered name, or a module it builds (under the
    run's seeded model initialisation, as the federation builds a named model)."""
    chosen = ModelChoice.of(algorithm).model_for(name)
    if isinstance(chosen, str):
        return chosen
    return seeded_torch_global(SeedTree(seed).integer("model-init"), lambda: chosen(tuple(dataset.input_shape), dataset.num_classes))


class ManifestSections:
    """Round observer placed before the checkpoint writer: puts the trained algorithm's end-of-run manifest sections
    (:meth:`~privaudit.fl.engine.capabilities.RunReport.manifest_sections`) into the manifest it writes."""

    def __init__(self, writer: CheckpointWriter) -> None:
        self.writer = writer

    def on_start(self, info) -> None:
        pass

    def on_round_start(self, round: int, trains_clients: bool) -> None:
        pass

    def on_round_end(self, round, state, results, metrics) -> None:
        pass

    def on_end(self, result) -> None:
        self.writer.extra.update(RunReport.of(result.algorithm).manifest_sections())


def run_training(spec: TrainSpec, out: str | os.PathLike | None = None, *, dataset=None, save_client_updates: bool = False,
                 overwrite: bool = False, progress: bool = True, extra: Mapping[str, Any] | None = None):
    """Run ``spec``; returns the :class:`~privaudit.fl.engine.round_loop.FederationResult`.

    ``dataset`` reuses a loaded federated dataset (it must be the one ``spec`` describes); ``out`` writes the
    checkpoint, whose manifest holds the completed spec (``"train_spec"``), the algorithm's own sections and
    ``extra``.
    """
    # torch (models, the round loop): imported on use, not at the CLI's start-up
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.models import default_model_for

    spec = with_algorithm_defaults(spec)
    config = spec.federation_config()  # validate the cheap things before loading data
    device = resolve_device(spec.device)  # an absent device fails here, before any data is loaded
    if isinstance(spec.workers, bool) or not isinstance(spec.workers, int) or spec.workers < 1:
        raise InvalidParameterError(f"workers must be an integer ≥ 1, got {spec.workers!r}")
    algorithm = build_algorithm(spec)
    if dataset is None:
        dataset = load_dataset(
            spec.dataset, num_clients=spec.num_clients, partition=spec.partition, seed=spec.data_seed, **spec.dataset_options
        )
    if spec.workers > dataset.num_clients:  # one worker trains one client at a time: the others would only wait
        raise InvalidParameterError(f"workers ({spec.workers}) exceed the federation's {dataset.num_clients} clients; "
                                    f"use at most {dataset.num_clients}")
    name = spec.model or default_model_for(dataset)
    if not isinstance(name, str):
        raise InvalidParameterError("the model must be given by name")
    model = training_model(algorithm, name, dataset, spec.seed)
    observers: list[Any] = []
    if out is not None:
        writer = CheckpointWriter(out, save_client_updates=save_client_updates, overwrite=overwrite,
                                  extra={"train_spec": spec.to_dict(), **(extra or {})})
        observers += [ManifestSections(writer), writer]
    return run_federation(dataset, model, algorithm, config, observers=observers, progress=progress, device=device,
                          workers=spec.workers)
