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
from typing import Any, ClassVar, Protocol, runtime_checkable

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


@runtime_checkable
class PrecisionChoice(Protocol):
    """An attack configuration that chooses its float precision (``float32`` or ``float64``); others run in float32."""

    precision: str


class InversionAttack(ABC):
    """Base class: holds the configuration and device, times ``_run`` and records the settings.

    Every attack, built in or a paper's plug-in (:func:`attacks.inversion.registry.registered_attacks`), declares its
    registry ``name``, a one-line ``description`` and its frozen configuration dataclass ``config_class`` (the options
    :func:`~attacks.inversion.registry.build_attack` accepts are its fields), and implements :meth:`_run`.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    config_class: ClassVar[type]

    @classmethod
    def options_for_defence(cls, defence: Any) -> dict[str, Any]:
        """Configuration options this attacker takes from the defence it attacks in an experiment
        (:func:`attacks.inversion.experiment.run_inversion`): the protocol is public, so an attacker that simulates
        the client may assume its settings. Options given explicitly override them. Default: none."""
        return {}

    #: The trained runs whose local step this attacker simulates beyond plain SGD (named in a checkpoint attack's
    #: notes, :mod:`attacks.inversion.checkpoint_payload`); ``None``: it unrolls plain SGD.
    simulates_runs: ClassVar[str | None] = None

    @classmethod
    def options_for_run(cls, algorithm: str, algorithm_options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Configuration options this attacker takes from a trained run it attacks (a checkpoint's algorithm and its
        options), with notes on what it assumes instead: a white-box attacker of a trained federation knows its
        protocol. Options given explicitly override them. Default: none."""
        return {}, []

    def __init__(self, config: Any, device: torch.device | str = "cpu") -> None:
        self.config = config
        self.device = torch.device(device)
        precision = config.precision if isinstance(config, PrecisionChoice) else "float32"
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
