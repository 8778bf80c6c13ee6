"""PrivateFL's personalised data transformation T_k ("layer zero"), its forms, and its per-sample gradient rule.

The paper (001 §3.1–3.2, §4) puts a learnt transformation T_k in front of every client's copy of the model,
trains it jointly with the model, initialises it to the identity and never aggregates it. Forms
(001 Table 1, with ``form``):

=========  ====================================  ==================================================
``linear``  α ⊙ x + β                             the paper's choice (Table 1: 0.892)
``sigmoid`` Sigmoid(α ⊙ x + β)                    Table 1 non-linear one-to-one
``tanh``    Tanh(α ⊙ x + β)
``relu``    ReLU(α ⊙ x + β)                       Table 1 many-to-one
``square``  α ⊙ x² + β
``conv2d``  Conv2d(x), 7×7 kernel, same padding   Table 1 many-to-one, identity kernel at start
``none``    no transformation                     the FedAvg baseline (the reference ``*`` models without ``_IN``)
=========  ====================================  ==================================================

Free dimensions of α and β (001 Table 2, with ``alpha`` / ``beta``): ``channel`` (one value per image
channel, α ∈ R^d — the paper's best α), ``pixel`` (one per pixel and channel, β ∈ R^{n×n×d} — the paper's
best β), ``fixed`` (α ≡ 1) / ``zero`` (β ≡ 0). For feature vectors (input shape ``(F,)``) the "channel" is
the whole vector: α is a scalar and a ``pixel`` β has one value per feature, as the reference code's
``FeatureNorm(F)`` (γ ∈ R¹, β ∈ R^{1×F}). Images use the reference ``InputNorm(C, n)`` shapes (γ ∈ R^C,
β ∈ R^{C×n×n}).

:class:`PersonalAffine` has its own per-sample gradient rule (opacus needs one for a new layer type): for
y = α ⊙ x + β with per-example output gradient b_i = ∂ℓ_i/∂y, the per-example gradients are
∂ℓ_i/∂α = Σ_{broadcast axes} b_i ⊙ x_i and ∂ℓ_i/∂β = Σ_{broadcast axes} b_i. It is registered through
:func:`privaudit.fl.privacy.dpsgd.register_per_sample_rule`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from privaudit.errors import InvalidParameterError
from privaudit.fl.privacy.dpsgd import register_per_sample_rule

TRANSFORM_FORMS = ("linear", "sigmoid", "tanh", "relu", "square", "conv2d", "none")
ALPHA_DIMENSIONS = ("channel", "pixel", "fixed")
BETA_DIMENSIONS = ("pixel", "channel", "zero")
#: Parameter-name prefix of the personalised layer inside :class:`PersonalisedModel`.
PERSONAL_PREFIX = "transform."


def _parameter_shape(input_shape: tuple[int, ...], dimension: str) -> tuple[int, ...]:
    """Shape of α or β for inputs shaped ``input_shape`` (no batch axis), broadcastable against them."""
    if dimension == "pixel":
        return tuple(input_shape)
    if len(input_shape) == 1:  # feature vectors: one "channel"
        return (1,)
    return (input_shape[0],) + (1,) * (len(input_shape) - 1)


class PersonalAffine(nn.Module):
    """T(x) = α ⊙ x + β with α, β broadcast over the free dimensions chosen (identity at initialisation)."""

    def __init__(self, input_shape: Sequence[int], alpha: str = "channel", beta: str = "pixel") -> None:
        super().__init__()
        if alpha not in ALPHA_DIMENSIONS:
            raise InvalidParameterError(f"unknown α dimension {alpha!r}; use {', '.join(ALPHA_DIMENSIONS)}")
        if beta not in BETA_DIMENSIONS:
            raise InvalidParameterError(f"unknown β dimension {beta!r}; use {', '.join(BETA_DIMENSIONS)}")
        shape = tuple(int(d) for d in input_shape)
        self.alpha_dimension, self.beta_dimension = alpha, beta
        self.alpha = None if alpha == "fixed" else nn.Parameter(torch.ones(_parameter_shape(shape, alpha)))
        self.beta = None if beta == "zero" else nn.Parameter(torch.zeros(_parameter_shape(shape, beta)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x if self.alpha is None else x * self.alpha
        return y if self.beta is None else y + self.beta

    def extra_repr(self) -> str:
        return f"alpha={self.alpha_dimension}, beta={self.beta_dimension}"


def _reduce_to(per_example: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sum ``per_example`` ([N, *input]) over the axes a parameter of ``shape`` broadcasts along → [N, *shape]."""
    batch = per_example.shape[0]
    aligned = (1,) * (per_example.dim() - 1 - len(shape)) + tuple(shape)
    axes = [i + 1 for i, size in enumerate(aligned) if size == 1 and per_example.shape[i + 1] != 1]
    reduced = per_example.sum(dim=axes, keepdim=True) if axes else per_example
    return reduced.reshape(batch, *shape)


def affine_per_sample_gradients(layer: PersonalAffine, activations: list[torch.Tensor], backprops: torch.Tensor
                                ) -> dict[nn.Parameter, torch.Tensor]:
    """Per-example ∂ℓ_i/∂α = Σ b_i ⊙ x_i and ∂ℓ_i/∂β = Σ b_i over the broadcast axes (opacus grad-sampler signature)."""
    x = activations[0].to(backprops.dtype)
    out: dict[nn.Parameter, torch.Tensor] = {}
    if layer.alpha is not None and layer.alpha.requires_grad:
        out[layer.alpha] = _reduce_to(backprops * x, layer.alpha.shape)
    if layer.beta is not None and layer.beta.requires_grad:
        out[layer.beta] = _reduce_to(backprops, layer.beta.shape)
    return out


register_per_sample_rule(PersonalAffine, affine_per_sample_gradients)


class Square(nn.Module):
    """x ↦ x² (the input of Table 1's α ⊙ x² + β)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x


def identity_conv(channels: int, kernel: int = 7) -> nn.Conv2d:
    """A ``kernel``×``kernel`` same-padding convolution that starts as the identity (delta kernel, zero bias)."""
    conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2)
    with torch.no_grad():
        conv.weight.zero_()
        for c in range(channels):
            conv.weight[c, c, kernel // 2, kernel // 2] = 1.0
        conv.bias.zero_()
    return conv


def build_transform(input_shape: Sequence[int], form: str = "linear", alpha: str = "channel", beta: str = "pixel") -> nn.Module | None:
    """The personalised transformation of ``form`` (module docstring), or ``None`` for ``none``."""
    if form not in TRANSFORM_FORMS:
        raise InvalidParameterError(f"unknown transformation {form!r}; use {', '.join(TRANSFORM_FORMS)}")
    shape = tuple(int(d) for d in input_shape)
    if form == "none":
        return None
    if form == "conv2d":
        if len(shape) != 3:
            raise InvalidParameterError(f"the conv2d transformation needs image inputs (channels, height, width), got {shape}")
        return identity_conv(shape[0])
    affine = PersonalAffine(shape, alpha, beta)
    if form == "linear":
        return affine
    if form == "square":
        return nn.Sequential(Square(), affine)
    activation = {"sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(), "relu": nn.ReLU()}[form]
    return nn.Sequential(affine, activation)


class PersonalisedModel(nn.Module):
    """PrivateFL's extended local model θ_k = θ_{k_T} ∘ θ_{k_L}: ``body(transform(x))`` (001 §3.2, Alg. 2 line 1).

    The transformation's parameters are named ``transform.*`` (:data:`PERSONAL_PREFIX`); PrivateFL keeps
    them on the client. With ``transform=None`` the model is the body alone under the name ``body``.
    """

    def __init__(self, body: nn.Module, transform: nn.Module | None) -> None:
        super().__init__()
        self.transform = transform if transform is not None else nn.Identity()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.transform(x))


def personal_names(model: nn.Module) -> tuple[str, ...]:
    """Names of the personalised (never aggregated) parameters of ``model``."""
    return tuple(name for name, _ in model.named_parameters() if name.startswith(PERSONAL_PREFIX))
