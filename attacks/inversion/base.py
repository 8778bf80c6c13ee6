"""The one interface every inversion attack implements.

An attack is built from a frozen configuration dataclass and a device; ``reconstruct(payload, seed=…)``
returns an :class:`~attacks.inversion.threat_model.InversionResult` with the status of its optimisation
(:mod:`attacks.inversion.convergence`). The payload is the whole threat
model (breaching's ``reconstruct(server_payload, shared_data)`` boundary, reduced): the attack sees
nothing else. All randomness comes from a ``torch.Generator`` seeded with ``seed``.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .convergence import optimisation_status
from .functional_model import FunctionalModel
from .threat_model import InversionPayload, InversionResult

PRECISIONS: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """A torch.Generator on ``device`` seeded with ``seed`` (explicit, never the global RNG)."""
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(int(seed))
    return generator


def config_record(config: Any) -> dict[str, Any]:
    """A JSON-friendly record of a configuration dataclass (tensors become lists)."""
    record = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, torch.Tensor):
            value = value.tolist()
        elif isinstance(value, tuple):
            value = list(value)
        record[f.name] = value
    return record


class InversionAttack(ABC):
    """Base class: holds the configuration and device, times ``_run`` and records the settings."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self, config: Any, device: torch.device | str = "cpu") -> None:
        self.config = config
        self.device = torch.device(device)
        precision = getattr(config, "precision", "float32")
        if precision not in PRECISIONS:
            raise InvalidParameterError(f"unknown precision {precision!r}; choose float32 or float64")
        self.dtype = PRECISIONS[precision]

    def reconstruct(self, payload: InversionPayload, *, seed: int = 0) -> InversionResult:
        """Run the attack on ``payload``; reproducible for a given ``seed`` and device."""
        start = time.perf_counter()
        model = FunctionalModel.from_payload(payload, self.device, self.dtype)
        generator = make_generator(seed, self.device)
        result = self._run(payload, model, generator)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        result.seconds = time.perf_counter() - start
        result.status, result.status_reason = optimisation_status(result.loss_trace, result.matching_loss, result.images)
        result.settings = {
            "attack": self.name,
            "config": config_record(self.config),
            "threat_model": payload.knowledge.to_dict(),
            "data": payload.data.to_dict(),
            "parameters_unknown_to_attacker": list(model.unknown),
            "matched_parameters": len(payload.update),
            "device": str(self.device),
            "seed": int(seed),
            **result.settings,
        }
        return result

    @abstractmethod
    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        """Attack-specific work; ``settings`` of the returned result hold attack notes only."""
