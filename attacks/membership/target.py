"""The attacked model: an architecture, one set of weights, and (when known) the data and recipe behind it.

A :class:`TargetModel` comes from a checkpoint (:meth:`TargetModel.from_checkpoint`: the global model of a
round, its training data reloaded from the manifest's ``train_spec`` and checked against the recorded
fingerprint) or from an in-memory :class:`~privaudit.fl.engine.round_loop.FederationResult`
(:meth:`TargetModel.from_result`). Predictions always run the model in evaluation mode (no dropout), the
fix tensorflow/privacy PR #484 made to the LiRA reference code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

import privaudit.data
from privaudit.data.base import FederatedDataset
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.params import State
from privaudit.fl.engine.recorded_data import is_recorded, recorded_dataset
from privaudit.fl.run import TrainSpec

_CHUNK = 8192


def train_spec_from_dict(data: Mapping[str, Any]) -> TrainSpec:
    """Rebuild a :class:`TrainSpec` from its ``to_dict()`` form (as stored in a checkpoint manifest)."""
    fields = dict(data)
    local = fields.pop("local", {}) or {}
    known = set(TrainSpec.__dataclass_fields__)
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InvalidParameterError(f"the training recipe has unknown field(s) {', '.join(unknown)}")
    return TrainSpec(local=LocalTrainingConfig(**local), **fields)


def load_training_data(spec: TrainSpec) -> FederatedDataset:
    """The federated dataset ``spec`` trains on (the same loader call as :func:`privaudit.fl.run.run_training`)."""
    return privaudit.data.load_dataset(spec.dataset, num_clients=spec.num_clients, partition=spec.partition, seed=spec.data_seed,
                        **spec.dataset_options)


@dataclass(frozen=True, eq=False)
class TargetModel:
    """A model to attack. ``dataset``/``train_spec`` are ``None`` when unknown (attacks that need them say so)."""

    module: nn.Module
    state: State
    model_name: str | None = None
    dataset: FederatedDataset | None = None
    train_spec: TrainSpec | None = None
    source: str = "in-memory"

    def logits(self, x: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The model's logits on ``x`` (evaluation mode, no gradients), in chunks."""
        inputs = torch.as_tensor(np.asarray(x, dtype=np.float32))
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.no_grad():
                parts = [functional_call(self.module, dict(self.state), (inputs[i : i + _CHUNK],)) for i in range(0, len(inputs), _CHUNK)]
        finally:
            self.module.train(was_training)
        if not parts:
            raise InvalidParameterError("no examples to score")
        return torch.cat(parts)

    def with_state(self, state: State, source: str) -> TargetModel:
        """The same architecture and data with other weights (e.g. one client's released model)."""
        return replace(self, state=dict(state), source=source)

    def require_dataset(self, what: str) -> FederatedDataset:
        if self.dataset is None:
            raise InvalidParameterError(f"{what} needs the target's training data, and {self.source} does not say what it was")
        return self.dataset

    def require_recipe(self, what: str) -> TrainSpec:
        if self.train_spec is None:
            raise InvalidParameterError(
                f"{what} retrains the target's federation and needs its training recipe; {self.source} has none "
                "(train it with privaudit train, or pass train_spec=TrainSpec(...))"
            )
        if not (self.train_spec.model or self.model_name):
            raise InvalidParameterError(f"{what} rebuilds the model by name; {self.source} used a custom module")
        return self.train_spec

    # -- constructors ---------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, round: int | None = None, *, load_data: bool = True,
                        trust_factory: str | None = None) -> TargetModel:
        """The global model after ``round`` (default: the last) of the trained federation at ``path``.

        A checkpoint written by ``privaudit train`` reloads its data from its recipe (``train_spec``); one recorded
        from another training loop (:mod:`privaudit.interop.recorder`) from its dataset reference and partition
        (:func:`privaudit.fl.engine.recorded_data.recorded_dataset`). ``trust_factory`` names the user factory a
        recorded model may be built by (:mod:`privaudit.fl.engine.architecture`).
        """
        federation = TrainedFederation(path)
        module = federation.build_model(round, trust_factory=trust_factory)
        order = list(federation.manifest["model"]["parameters"])
        stored = federation.global_state(round)
        state = {k: stored[k] for k in order}
        recipe = federation.manifest.get("train_spec")
        spec = train_spec_from_dict(recipe) if recipe else None
        dataset = None
        if spec is not None and load_data:
            dataset = load_training_data(spec)
            recorded = federation.manifest["dataset"].get("fingerprint")
            if recorded and dataset.fingerprint() != recorded:
                raise CheckpointError(
                    f"the data reloaded for {federation.root} differ from the data it was trained on (fingerprint mismatch); "
                    "the dataset files or generator changed"
                )
        elif spec is None and load_data and is_recorded(federation.manifest):
            dataset = recorded_dataset(federation)
        name = federation.manifest["model"].get("name")
        label = f"checkpoint {federation.root}" + ("" if round is None else f" (round {round})")
        return cls(module, state, name, dataset, spec, label)

    @classmethod
    def from_result(cls, result, dataset: FederatedDataset | None = None, train_spec: TrainSpec | None = None) -> TargetModel:
        """The final global model of an in-memory :class:`~privaudit.fl.engine.round_loop.FederationResult`."""
        info = result.info
        state = {k: result.state[k].clone() for k in info.initial_state}
        return cls(info.model, state, info.model_name, dataset, train_spec, f"federation {info.algorithm.get('name', '?')}")
