"""What a gradient-inversion attacker receives, and what it returns.

The boundary follows breaching's split between the server's payload and the user's shared data
(Geiping et al., breaching ``server_payload`` / ``shared_data``), reduced to what privaudit needs and
stated as explicit arguments, so every result records exactly which knowledge the attack used:

* :class:`DataSpec` — the public data format: input shape, number of classes, value range and the
  per-channel normalisation the model was trained with (reconstructions live in normalised space).
* :class:`ClientKnowledge` — what the attacker knows about the attacked client's local training
  (update kind, learning rate, local steps, batch size, number of examples, labels if leaked).
* :class:`InversionPayload` — the architecture (a module factory), the global weights the client
  started from, the released update, plus the two records above.
* :class:`InversionResult` — reconstructions (normalised space) and inferred labels, the matching loss,
  and a record of every setting the attack ran with.

Nothing here trains or attacks; the types only carry and validate data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

UpdateKind = Literal["gradient", "delta"]
UPDATE_KINDS: tuple[str, ...] = ("gradient", "delta")


@dataclass(frozen=True)
class DataSpec:
    """Public facts about the client's data format.

    ``shape`` excludes the batch dimension, e.g. ``(3, 32, 32)``. Raw values lie in ``data_range``; the
    model sees ``(raw - mean) / std`` per channel when ``mean``/``std`` are given (channel = first axis
    of ``shape``), raw values otherwise.
    """

    shape: tuple[int, ...]
    num_classes: int
    data_range: tuple[float, float] = (0.0, 1.0)
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if not self.shape or any(d <= 0 for d in self.shape):
            raise InvalidParameterError(f"data shape must be non-empty and positive, got {self.shape}")
        if self.num_classes < 2:
            raise InvalidParameterError(f"num_classes must be at least 2, got {self.num_classes}")
        lo, hi = self.data_range
        if not hi > lo:
            raise InvalidParameterError(f"data_range must satisfy low < high, got {self.data_range}")
        if (self.mean is None) != (self.std is None):
            raise InvalidParameterError("give both mean and std for the normalisation, or neither")
        if self.mean is not None and self.std is not None:
            object.__setattr__(self, "mean", tuple(float(m) for m in self.mean))
            object.__setattr__(self, "std", tuple(float(s) for s in self.std))
            if len(self.mean) != len(self.std) or len(self.mean) not in (1, self.shape[0]):
                raise InvalidParameterError(
                    f"normalisation needs 1 or {self.shape[0]} channel values, got mean {self.mean}, std {self.std}"
                )
            if any(s <= 0 for s in self.std):
                raise InvalidParameterError(f"normalisation std must be positive, got {self.std}")

    def _channel_view(self, values: tuple[float, ...], device: torch.device | str) -> torch.Tensor:
        tensor = torch.tensor(values, dtype=torch.float32, device=device)
        return tensor.reshape((1, -1) + (1,) * (len(self.shape) - 1))

    def box(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """Lower and upper bounds of valid inputs in the model's (normalised) space, broadcastable to a batch."""
        lo, hi = self.data_range
        low = torch.full((1,) + (1,) * len(self.shape), float(lo), device=device)
        high = torch.full((1,) + (1,) * len(self.shape), float(hi), device=device)
        if self.mean is None or self.std is None:
            return low, high
        mean = self._channel_view(self.mean, device)
        std = self._channel_view(self.std, device)
        return (low - mean) / std, (high - mean) / std

    def to_unit_range(self, x: torch.Tensor) -> torch.Tensor:
        """Map model-space inputs back to raw values rescaled to [0, 1] and clamped (for PSNR/SSIM)."""
        x = x.detach().to(torch.float32)
        if self.mean is not None and self.std is not None:
            x = x * self._channel_view(self.std, x.device) + self._channel_view(self.mean, x.device)
        lo, hi = self.data_range
        return ((x - lo) / (hi - lo)).clamp(0.0, 1.0)

    def from_unit_range(self, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`to_unit_range` (without clamping): [0, 1] images to model space."""
        lo, hi = self.data_range
        x = x.to(torch.float32) * (hi - lo) + lo
        if self.mean is not None and self.std is not None:
            x = (x - self._channel_view(self.mean, x.device)) / self._channel_view(self.std, x.device)
        return x

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "num_classes": self.num_classes,
            "data_range": list(self.data_range),
            "mean": list(self.mean) if self.mean is not None else None,
            "std": list(self.std) if self.std is not None else None,
        }


@dataclass(frozen=True)
class ClientKnowledge:
    """What the attacker knows about the attacked client's local training.

    ``update_kind`` says what was released: ``"gradient"`` (FedSGD: the mean loss gradient over the
    client's batch) or ``"delta"`` (the parameter change θ_K − θ_0 after ``local_steps`` local steps with
    learning rate ``lr`` on consecutive mini-batches of ``batch_size``; ``None`` = full batch).
    ``proximal_mu`` is FedProx's μ (0 = FedAvg). ``labels`` are the client's labels when they leak to
    the attacker (breaching's ``provide_labels``); ``None`` means the attack must infer them.
    """

    num_examples: int
    update_kind: UpdateKind = "gradient"
    lr: float | None = None
    local_steps: int = 1
    batch_size: int | None = None
    proximal_mu: float = 0.0
    labels: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.num_examples < 1:
            raise InvalidParameterError(f"num_examples must be at least 1, got {self.num_examples}")
        if self.update_kind not in UPDATE_KINDS:
            raise InvalidParameterError(f"update_kind must be one of {UPDATE_KINDS}, got {self.update_kind!r}")
        if self.local_steps < 1:
            raise InvalidParameterError(f"local_steps must be at least 1, got {self.local_steps}")
        if self.update_kind == "delta" and (self.lr is None or not self.lr > 0):
            raise InvalidParameterError("a parameter-delta update needs the client's learning rate lr > 0")
        if self.batch_size is not None and not 1 <= self.batch_size <= self.num_examples:
            raise InvalidParameterError(
                f"batch_size must lie in [1, num_examples={self.num_examples}], got {self.batch_size}"
            )
        if self.proximal_mu < 0:
            raise InvalidParameterError(f"proximal_mu must be non-negative, got {self.proximal_mu}")
        if self.labels is not None:
            object.__setattr__(self, "labels", tuple(int(v) for v in self.labels))
            if len(self.labels) != self.num_examples:
                raise InvalidParameterError(
                    f"{len(self.labels)} labels given for {self.num_examples} examples"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_examples": self.num_examples,
            "update_kind": self.update_kind,
            "lr": self.lr,
            "local_steps": self.local_steps,
            "batch_size": self.batch_size,
            "proximal_mu": self.proximal_mu,
            "labels_known": self.labels is not None,
        }


ModelFactory = Callable[[], nn.Module]


@dataclass(frozen=True)
class InversionPayload:
    """Everything the attacker (an honest-but-curious server) holds for one client update.

    ``global_weights`` is the state dict the client started from. Entries missing from it are parameters
    the client keeps private (for example PrivateFL's personalised transformation layer); the attacker's
    copy of the architecture then keeps the factory's initial values for them, and the result records
    their names. ``update`` maps parameter names to the released update; parameters absent from it are
    not matched. ``buffer_update`` maps buffer names to their change over the client's local training (BatchNorm's
    running mean, variance and batch count, which FedAvg's state-dict exchange carries along with the weights; breaching's
    ``provide_buffers``); it is empty for models without buffers and when the release did not include them.
    """

    model_factory: ModelFactory
    global_weights: Mapping[str, torch.Tensor]
    update: Mapping[str, torch.Tensor]
    data: DataSpec
    knowledge: ClientKnowledge
    buffer_update: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.model_factory):
            raise InvalidParameterError("model_factory must be a callable returning a torch.nn.Module")
        if not self.update:
            raise InvalidParameterError("the released update is empty")
        for name, value in self.update.items():
            if not isinstance(value, torch.Tensor):
                raise InvalidParameterError(f"update entry {name!r} is not a tensor")
            if not torch.isfinite(value).all():
                raise InvalidParameterError(f"update entry {name!r} contains NaN or infinite values")
        for name, value in self.buffer_update.items():
            if not isinstance(value, torch.Tensor) or not torch.isfinite(value).all():
                raise InvalidParameterError(f"released buffer change {name!r} is not a finite tensor")


@dataclass
class InversionResult:
    """Reconstructions in the model's input space plus the record of how they were obtained.

    ``images`` has shape ``(num_examples, *data.shape)`` (``None`` for label-only attacks); ``labels`` are
    the labels the attack used or inferred (``None`` when it has none). ``matching_loss`` is the final
    distance between the simulated and the released update (attack-specific; ``None`` for analytic
    attacks). ``settings`` holds the attack configuration, the threat-model record and any attack notes.
    ``status`` says whether the attack's optimisation did its job (``ok``, ``diverged``, ``no-progress`` or
    ``closed-form``; :mod:`attacks.inversion.convergence`), ``status_reason`` why not.
    """

    attack: str
    images: torch.Tensor | None
    labels: torch.Tensor | None
    settings: dict[str, Any]
    matching_loss: float | None = None
    loss_trace: list[float] = field(default_factory=list)
    seconds: float = 0.0
    status: str = "closed-form"
    status_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary (tensors become shapes and label lists; infinities become strings)."""
        return {
            "attack": self.attack,
            "num_reconstructions": None if self.images is None else int(self.images.shape[0]),
            "labels": None if self.labels is None else [int(v) for v in self.labels.tolist()],
            "matching_loss": _finite_or_str(self.matching_loss),
            "loss_trace": [_finite_or_str(v) for v in self.loss_trace],
            "seconds": self.seconds,
            "status": self.status,
            "status_reason": self.status_reason,
            "settings": _finite_or_str_within(self.settings),  # a diverged restart's NaN loss, e.g.
        }


def _finite_or_str(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _finite_or_str_within(value: Any) -> Any:
    """``value`` with every non-finite float inside it (dicts, lists, tuples) as its string."""
    if isinstance(value, float):
        return _finite_or_str(value)
    if isinstance(value, dict):
        return {k: _finite_or_str_within(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_str_within(v) for v in value]
    return value
