"""Typed, frozen configuration of a federation, validated once when it is built.

Defaults follow Upcycled-FL's experimental setup (003 §7.2 and osu-srml/Upcycled-FL@4dd7400:train.py): SGD with momentum 0.5, E = 10
local epochs, batch 32; the reference code's ``--frac 1`` and ``--straggler 0`` (every client, no stragglers).
Inner code trusts these objects; bad values raise :class:`~privaudit.errors.InvalidParameterError` here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from privaudit.accounting.mechanisms import Sampling
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError


class Execution(str, Enum):
    """How sampled clients are trained: all at once on stacked parameters, or one after another."""

    AUTO = "auto"  # batched when the model allows it, sequential otherwise
    BATCHED = "batched"
    SEQUENTIAL = "sequential"

    @classmethod
    def parse(cls, value: str | Execution) -> Execution:
        return parse_enum(cls, value, "execution mode")


def _int_at_least(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if int(value) < low:
        raise InvalidParameterError(f"{name} must be at least {low}, got {int(value)}")
    return int(value)


def _float_in(name: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from None
    too_low = number <= low if low_open else number < low
    too_high = number >= high if high_open else number > high
    if math.isnan(number) or too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        raise InvalidParameterError(f"{name} must lie in {left}{low:g}, {high:g}{right}, got {value}")
    return number


@dataclass(frozen=True)
class LocalTrainingConfig:
    """Local SGD of every client: ``epochs`` passes over its data in shuffled mini-batches of ``batch_size``.

    The optimiser is SGD with heavy-ball momentum in PyTorch's convention (buf ← m·buf + g; ω ← ω − lr·buf,
    the first buffer being g). The gradient g includes every term of the local objective (proximal term,
    linear correction, objective-perturbation noise), which is exactly what Upcycled-FL's
    ``FedProxOptimizer`` computes, since there the proximal term and the noise are added to the momentum
    buffer in place (osu-srml/Upcycled-FL@4dd7400:FedProxOptimizer.py, ``step``).

    ``double_softmax``: the mini-batch loss is the cross-entropy of softmax(logits) instead of the logits, i.e.
    −log softmax(softmax(z))_y. Upcycled-FL's models all end in ``nn.Softmax`` and are trained with
    ``nn.CrossEntropyLoss`` on top (osu-srml/Upcycled-FL@4dd7400:models.py, client/avg.py), as is PFA's logistic
    regression (Emory-AIMS/PFA@72b3f89); privaudit's models return logits, so this switch reproduces what those
    codes train. It applies to the local SGD of the federation (both trainers); solvers that compute their own
    loss refuse it.
    """

    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.5
    double_softmax: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epochs", _int_at_least("local epochs", self.epochs, 1))
        object.__setattr__(self, "batch_size", _int_at_least("batch size", self.batch_size, 1))
        object.__setattr__(self, "lr", _float_in("learning rate", self.lr, 0.0, math.inf, low_open=True, high_open=True))
        object.__setattr__(self, "momentum", _float_in("momentum", self.momentum, 0.0, 1.0, high_open=True))
        if not isinstance(self.double_softmax, bool):
            raise InvalidParameterError(f"double_softmax must be true or false, got {self.double_softmax!r}")


@dataclass(frozen=True)
class FederationConfig:
    """The round loop.

    ``rounds`` counts iterations (Upcycled-FL's ``--epochs``): for Upcycled-X, half of them (the odd ones)
    train clients. ``clients_per_round`` is the fraction q of clients sampled per training round, by ``sampling``
    (:class:`~privaudit.accounting.mechanisms.Sampling`, the vocabulary the privacy events use): a fixed-size set of
    m = max(⌊q·N⌋, 1) clients uniformly without replacement (Upcycled-FL, FedProx; the default), or Poisson (each client
    independently with probability q, so a round may be empty);
    ``stragglers`` the probability that a sampled client is a straggler and runs a uniformly random number of
    local epochs in {1, …, E−1} (Upcycled-FL ``client/avg.py``). ``eval_every`` evaluates the global model
    every k iterations (and always after the last); ``eval_train_loss`` also evaluates it on every client's
    training data, as the reference code's published curves do (audit point U9: outside any DP analysis).
    """

    rounds: int
    local: LocalTrainingConfig = field(default_factory=LocalTrainingConfig)
    clients_per_round: float = 1.0
    sampling: Sampling = Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT
    stragglers: float = 0.0
    seed: int = 0
    execution: Execution = Execution.AUTO
    eval_every: int = 1
    eval_train_loss: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "rounds", _int_at_least("rounds", self.rounds, 1))
        if not isinstance(self.local, LocalTrainingConfig):
            raise InvalidParameterError("local must be a LocalTrainingConfig")
        object.__setattr__(
            self, "clients_per_round", _float_in("clients per round", self.clients_per_round, 0.0, 1.0, low_open=True)
        )
        object.__setattr__(self, "sampling", Sampling.parse(self.sampling))
        object.__setattr__(self, "stragglers", _float_in("straggler fraction", self.stragglers, 0.0, 1.0))
        object.__setattr__(self, "seed", _int_at_least("seed", self.seed, 0))
        object.__setattr__(self, "execution", Execution.parse(self.execution))
        object.__setattr__(self, "eval_every", _int_at_least("eval every", self.eval_every, 1))
        object.__setattr__(self, "eval_train_loss", bool(self.eval_train_loss))
        if self.stragglers > 0 and self.local.epochs < 2:
            raise InvalidParameterError("stragglers run fewer than E local epochs, so they need at least 2 local epochs")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["sampling"] = self.sampling.value
        out["execution"] = self.execution.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FederationConfig:
        fields = dict(data)
        local = LocalTrainingConfig(**fields.pop("local", {}))
        return cls(local=local, **fields)
