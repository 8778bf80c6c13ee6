"""The attacker's functional copy of the client model.

Attacks need the model as a pure function of (parameters, inputs) so that simulated client updates can
be differentiated with respect to candidate inputs (``torch.func.functional_call``). This module builds
that copy from an :class:`~attacks.inversion.threat_model.InversionPayload` and provides the soft-label
cross-entropy every simulated client step uses.

BatchNorm layers run in train mode for every attack (``dlg``, ``ig``, ``label``, ``analytic``, ...): they normalise
with each batch's own statistics, as a client training in train mode does, so the simulated update is the client's
train-mode update. Checkpoint attacks on recorded BatchNorm architectures used the stored running statistics (eval
mode) before the BatchNorm prior (:mod:`attacks.inversion.bn_prior`) was added. A batch with one value per channel
(one example whose feature map shrinks to 1×1) cannot be normalised with its own statistics; calling the model on it
raises :class:`~privaudit.errors.InvalidParameterError`, and so would the client's own training step.
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
        try:
            return functional_call(self.module, (dict(params), self.buffers), (inputs,))
        except ValueError as exc:  # F.batch_norm in train mode: "Expected more than 1 value per channel when training"
            if "more than 1 value per channel" not in str(exc):
                raise
            raise InvalidParameterError(f"BatchNorm cannot normalise this batch with its own statistics ({exc}): one example whose "
                                        "feature map shrinks to 1×1 has no batch variance, so the client's train-mode step "
                                        "is undefined; use larger images or more examples per update") from None

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
        # eval() fixes dropout to its deterministic form. BatchNorm layers then normalise with the batch's own
        # statistics, as a client training in train mode does (FedSGD/FedAvg), without updating the running
        # buffers in place (track_running_stats off: the buffers stay the global ones, and vmap can batch the layer);
        # the release records the client's buffer change separately (attacks.inversion.bn_prior).
        module.eval()
        for layer in module.modules():
            if isinstance(layer, nn.modules.batchnorm._BatchNorm):
                layer.train()
                layer.track_running_stats = False
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
        for name, value in payload.buffer_update.items():
            if name not in model.buffers or tuple(value.shape) != tuple(model.buffers[name].shape):
                raise InvalidParameterError(f"released buffer change {name!r} does not match a buffer of the architecture")
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
