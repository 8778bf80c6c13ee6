"""A run as the checks read it: a verified checkpoint's ledger, declarations, models and client releases as arrays.

Any privaudit checkpoint (``privaudit train``, the recorder, opacus, Flower's audit tap) is read through
:class:`~privaudit.fl.engine.checkpoint.TrainedFederation` (schema, hashes and shapes verified before anything is
parsed). The tensors checked are the model's *trainable* ones (``model.trainable``; the aggregated parameters — buffers
such as batch-norm statistics are not part of a DP release), as float64 arrays in the model's order. What a round
recorded: the global model after it (always), the clients sampled in it (``metrics[r].clients``) and, when the run
kept them (``save_client_updates``, the recorder's ``client_releases``, the tap's ``record_client_updates``), the
model each client released.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.check.declared import Declarations, Overrides, declarations
from privaudit.fl.engine.checkpoint import TrainedFederation

T = TypeVar("T")

#: What the noise and randomness checks say a run lacks when it kept no client releases.
NEEDS_RELEASES = ("client releases (privaudit train --save-client-updates; FederationRecorder.record_round("
                  "client_releases=...); AuditTap(record_client_updates=True))")


class RunRecord:
    """One checkpoint, read once; arrays are loaded on first use and kept (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, overrides: Overrides | None = None) -> None:
        self.federation = TrainedFederation(path)
        self.path = Path(self.federation.root)
        self.manifest: Mapping[str, Any] = self.federation.manifest
        self.ledger: PrivacyLedger = self.federation.ledger
        self.overrides = overrides or Overrides()
        self.rounds = self.federation.rounds
        model = self.manifest["model"]
        shapes = {name: tuple(shape) for name, shape in model.get("parameters", {}).items()}
        trainable = [n for n in model.get("trainable", []) if n in shapes]
        self.names: tuple[str, ...] = tuple(trainable or shapes)
        self.shapes: dict[str, tuple[int, ...]] = {n: shapes[n] for n in self.names}
        self.parameter_order: tuple[str, ...] = tuple(shapes)
        self.sizes = {n: int(np.prod(s, dtype=np.int64)) for n, s in self.shapes.items()}
        self.dimension = sum(self.sizes.values())
        self._metrics = {int(m.get("round", i + 1)): m for i, m in enumerate(self.manifest.get("metrics", []))
                         if isinstance(m, dict)}
        self._memo: dict[str, Any] = {}
        self._globals: dict[int, dict[str, np.ndarray]] = {}
        self._releases: dict[int, dict[int, dict[str, np.ndarray]]] = {}

    # -- declarations ------------------------------------------------------------------------------------
    @cached_property
    def declared(self) -> Declarations:
        return declarations(self.ledger, self.manifest, self.overrides)

    @property
    def num_clients(self) -> int:
        dataset = self.manifest.get("dataset") if isinstance(self.manifest.get("dataset"), dict) else {}
        value = dataset.get("num_clients")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    @property
    def releases_recorded(self) -> bool:
        return bool(self.manifest.get("save_client_updates"))

    @property
    def framework(self) -> str:
        recorded = self.manifest.get("recorded")
        if isinstance(recorded, dict):
            return str(recorded.get("framework") or "recorded loop")
        return "privaudit"

    # -- what each round recorded -----------------------------------------------------------------------
    def sampled(self, round_: int) -> list[int] | None:
        """The clients that trained in ``round_`` (``None`` when the run did not say)."""
        metrics = self._metrics.get(int(round_))
        clients = None if metrics is None else metrics.get("clients")
        if not isinstance(clients, list):
            return None
        return sorted(int(c) for c in clients if isinstance(c, int) and not isinstance(c, bool))

    def global_model(self, round_: int) -> dict[str, np.ndarray]:
        """The checked tensors of the global model after ``round_`` (0: the initial model), float64."""
        if round_ not in self._globals:
            state = self.federation.global_state(round_)
            self._globals[round_] = {n: state[n].double().numpy().reshape(-1) for n in self.names}
        return self._globals[round_]

    def dtype(self, name: str) -> str:
        """The stored dtype of tensor ``name`` (``float32``, …), as the run's generators drew its noise."""
        if "dtypes" not in self._memo:
            self._memo["dtypes"] = {n: str(t.dtype).removeprefix("torch.") for n, t in self.federation.global_state(0).items()}
        return self._memo["dtypes"].get(name, "float32")

    def releases(self, round_: int) -> dict[int, dict[str, np.ndarray]] | None:
        """client → its released model's checked tensors in ``round_`` (float64); ``None`` when none were recorded."""
        if not self.releases_recorded:
            return None
        if round_ not in self._releases:
            raw = self.federation.client_releases(round_)
            out: dict[int, dict[str, np.ndarray]] = {}
            for client, entry in raw.items():
                state = entry["state"]
                if not all(n in state for n in self.names):
                    continue  # a partial release (some algorithms send a subset): not a model release
                out[int(client)] = {n: state[n].double().numpy().reshape(-1) for n in self.names}
            self._releases[round_] = out
        return self._releases[round_]

    def cached(self, key: str, compute: Callable[[RunRecord], T]) -> T:
        """``compute(self)`` once per record (shared by checks that read the same derived arrays)."""
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]


def flat(state: Mapping[str, np.ndarray], names: tuple[str, ...]) -> np.ndarray:
    """The tensors ``names`` of ``state`` concatenated (model order)."""
    return np.concatenate([state[n] for n in names]) if names else np.zeros(0)
