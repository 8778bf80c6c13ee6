"""The attacker's functional copy of the client model.

Attacks need the model as a pure function of (parameters, inputs) so that simulated client updates can
be differentiated with respect to candidate inputs (``torch.func.functional_call``). This module builds
that copy from an :class:`~attacks.inversion.threat_model.InversionPayload` and provides the soft-label
cross-entropy every simulated client step uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.errors import InvalidParameterError

from .threat_model import InversionPayload, ModelFactory

ParamDict = dict[str, torch.Tensor]


@dataclass
class FunctionalModel:
    """A module plus explicit parameter and buffer dictionaries; call it with any parameter dict.

    ``params`` are detached leaves that require grad (so simulated steps can differentiate the loss
    with respect to them); ``unknown`` lists parameters the attacker did not receive and left at the
    factory's initial values.
    """

    module: nn.Module
    params: ParamDict
    buffers: ParamDict
    unknown: tuple[str, ...] = ()

    def __call__(self, params: Mapping[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, (dict(params), self.buffers), (inputs,))

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    @property
    def dtype(self) -> torch.dtype:
        return next(iter(self.params.values())).dtype

    @classmethod
    def build(
        cls,
        factory: ModelFactory,
        weights: Mapping[str, torch.Tensor],
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> FunctionalModel:
        """Instantiate ``factory()``, load ``weights`` (missing entries stay at their initial values),
        move it to ``device`` and floating-point ``dtype``."""
        with torch.random.fork_rng(devices=[]):  # building must not consume the caller's global RNG
            module = factory()
        if not isinstance(module, nn.Module):
            raise InvalidParameterError(f"model_factory returned {type(module).__name__}, not a torch.nn.Module")
        own = module.state_dict()
        unexpected = sorted(set(weights) - set(own))
        if unexpected:
            raise InvalidParameterError(
                f"global weights name entries the architecture does not have: {', '.join(unexpected[:5])}"
            )
        for name, value in weights.items():
            if tuple(value.shape) != tuple(own[name].shape):
                raise InvalidParameterError(
                    f"global weight {name!r} has shape {tuple(value.shape)}, the architecture expects {tuple(own[name].shape)}"
                )
        module.load_state_dict(dict(weights), strict=False)
        module.to(device=device, dtype=dtype)
        # Models here have no dropout/batch-norm; eval() fixes any such layer to its deterministic form.
        module.eval()
        params = {n: p.detach().clone().requires_grad_(True) for n, p in module.named_parameters()}
        buffers = {n: b.detach().clone() for n, b in module.named_buffers()}
        unknown = tuple(n for n in params if n not in weights)
        return cls(module=module, params=params, buffers=buffers, unknown=unknown)

    @classmethod
    def from_payload(
        cls, payload: InversionPayload, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> FunctionalModel:
        model = cls.build(payload.model_factory, payload.global_weights, device, dtype)
        missing = sorted(set(payload.update) - set(model.params))
        if missing:
            raise InvalidParameterError(
                f"the released update names parameters the architecture does not have: {', '.join(missing[:5])}"
            )
        for name, value in payload.update.items():
            if tuple(value.shape) != tuple(model.params[name].shape):
                raise InvalidParameterError(
                    f"update entry {name!r} has shape {tuple(value.shape)}, parameter has {tuple(model.params[name].shape)}"
                )
        return model


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of −Σ_c t_c log softmax(z)_c; equals ``F.cross_entropy`` for one-hot targets.

    Soft targets are needed for DLG's joint label optimisation (Zhu et al. 2019) and FedReg's pseudo data
    (soft labels from the global model, uniform labels for MG; Xu et al. 2022 §3.2–3.3).
    """
    return -(targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Float one-hot rows for integer ``labels``."""
    return F.one_hot(labels.long(), num_classes).to(torch.float32)


def flat_dot(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """⟨a, b⟩ over all entries of two parameter dictionaries with the same keys."""
    return sum((a[k] * b[k]).sum() for k in a)  # type: ignore[return-value]
