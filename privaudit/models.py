"""The model zoo: architectures built by name for any dataset they fit, the papers' included through the registry.

Every model takes ``input_shape`` (without the batch dimension) and ``num_classes`` from the dataset, so
the same name builds the paper's exact network on the paper's data (e.g. ``upcycled-mlp`` is 784-196-10 on
MNIST) and a same-shaped network on the offline substitutes (64-196-10 on scikit-learn digits).

Every model returns **logits**; the loss (cross-entropy) is the caller's. The core's models are defined here (a small
ConvNet and its BatchNorm variant for gradient inversion, the DLG LeNet) with the building blocks the papers' models
share (:class:`LogisticRegression`, :class:`BinaryLogisticGLM`, :class:`FeaturesThenHead`); each audited paper
registers its own architectures as its ``models`` part (:class:`ModelSpec`, :attr:`privaudit.plugins.Paper.models`)
and the model a run uses when it names none (``default_models``), so :func:`build_model` and
:func:`default_model_for` look them up by name and this module names no paper.

Sources: Zhu et al. 2019 "Deep Leakage from Gradients" (the DLG LeNet); Zhu & Blaschko 2021 "R-GAP" (the
"cnn6"-style ConvNet used for gradient inversion); the papers' models cite their reference code where they are defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from privaudit import plugins
from privaudit.errors import InvalidParameterError

if TYPE_CHECKING:
    from privaudit.data.base import FederatedDataset

__all__ = [
    "BinaryLogisticGLM",
    "FeaturesThenHead",
    "LogisticRegression",
    "ModelSpec",
    "build_model",
    "count_parameters",
    "default_model_for",
    "describe_models",
    "model_fits",
    "model_names",
]


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def flat_size(input_shape: tuple[int, ...]) -> int:
    """Number of inputs of a flat model on ``input_shape`` (the product of its sizes)."""
    return math.prod(input_shape)


def image_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """``input_shape`` as (channels, height, width), or one clear error naming model ``name``."""
    if len(input_shape) != 3:
        raise InvalidParameterError(
            f"model {name!r} needs image inputs shaped (channels, height, width), got input shape {input_shape}"
        )
    return input_shape  # type: ignore[return-value]


def feature_count(name: str, features: nn.Module, shape: tuple[int, int, int]) -> int:
    """Size of ``features``' flattened output on one image; a clear error when the image is too small."""
    try:
        with torch.no_grad():
            out = features(torch.zeros(1, *shape))
    except RuntimeError as exc:
        raise InvalidParameterError(
            f"model {name!r} does not fit input shape {shape}: the image is too small for its convolutions"
        ) from exc
    if out.numel() == 0:
        raise InvalidParameterError(f"model {name!r} does not fit input shape {shape}: no features are left")
    return int(out.numel())


def tf_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow 'same' padding along one axis: (before, after), the extra pixel going after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


# --------------------------------------------------------------------------- building blocks


class LogisticRegression(nn.Module):
    """Multinomial logistic regression on the flattened input: one ``nn.Linear(d, C)``, logits out.

    ``init="normal"``: weights ~ N(0, 0.01²), bias 0, as Upcycled-FL's ``LogisticRegression``
    (osu-srml/Upcycled-FL@4dd7400:models.py, ``nn.Linear(20, 2)`` on its synthetic data: 42 parameters). ``init="zeros"``: W = 0, b = 0, as PFA's
    logistic regression (Emory-AIMS/PFA@72b3f89; 7,850 parameters on MNIST, PFA Table 5). ``init="torch"``: PyTorch's default.
    Both reference codes put a softmax in the model and cross-entropy on top ("double softmax"); this
    model returns logits.
    """

    def __init__(self, in_features: int, num_classes: int, init: str = "normal") -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(in_features, num_classes)
        if init == "normal":
            nn.init.normal_(self.linear.weight, mean=0.0, std=0.01)
            nn.init.zeros_(self.linear.bias)
        elif init == "zeros":
            nn.init.zeros_(self.linear.weight)
            nn.init.zeros_(self.linear.bias)
        elif init != "torch":
            raise InvalidParameterError(f"unknown init {init!r} for logistic regression: use normal, zeros or torch")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.flatten(x))


class BinaryLogisticGLM(nn.Module):
    """Binary logistic regression with one weight vector and no bias: logits ``[0, wᵀx]``.

    Cross-entropy on these logits is the log loss log(1 + e^{−z}) of z = ±wᵀx, the generalised linear model of
    Upcycled-FL's objective-perturbation theorem (u₁ = ‖x‖ ≤ 1, u₂ = 1/4; the fitting and the feature norms are
    :mod:`privaudit.fl.engine.glm`).
    """

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x.flatten(1) @ self.weight
        return torch.stack([torch.zeros_like(z), z], dim=1)


class FeaturesThenHead(nn.Module):
    """A convolutional feature extractor, a flatten, and a classifier head built for its output size."""

    def __init__(self, features: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.features = features
        self.flatten = nn.Flatten()
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.features(x)))


# --------------------------------------------------------------------------- the core's models


def convnet(input_shape: tuple[int, ...], num_classes: int, negative_slope: float = 0.2) -> nn.Module:
    """A small ConvNet for gradient-inversion experiments, after R-GAP's "cnn6" (Zhu & Blaschko 2021).

    Six 3×3 convolutions (16, 32, 32, 64, 64, 96 channels; strides 1, 2, 1, 2, 1, 2; padding 1) with
    LeakyReLU and no normalisation layer, then one linear layer: 140,522 parameters on 3×32×32 with
    C = 10. Without BatchNorm a single example's gradient is a function of that example alone, which is the
    setting gradient-inversion attacks (and FedReg's one-step attack, 002 App. B.4) assume.
    """
    channels, _, _ = shape = image_shape("convnet", input_shape)
    features = convnet_features(channels, negative_slope, batch_norm=False)
    flat = feature_count("convnet", features, shape)
    return FeaturesThenHead(features, nn.Linear(flat, num_classes))


def convnet_features(channels: int, negative_slope: float, *, batch_norm: bool) -> nn.Sequential:
    """The six 3×3 convolutions of ``convnet`` (16, 32, 32, 64, 64, 96 channels; strides 1, 2, 1, 2, 1, 2; padding 1),
    each followed by LeakyReLU — with ``batch_norm``, by a BatchNorm2d first, and without the convolution's bias."""
    widths = (16, 32, 32, 64, 64, 96)
    strides = (1, 2, 1, 2, 1, 2)
    layers: list[nn.Module] = []
    previous = channels
    for width, stride in zip(widths, strides, strict=True):
        conv = nn.Conv2d(previous, width, 3, stride=stride, padding=1, bias=not batch_norm)
        layers += [conv, nn.BatchNorm2d(width), nn.LeakyReLU(negative_slope)] if batch_norm else [conv, nn.LeakyReLU(negative_slope)]
        previous = width
    return nn.Sequential(*layers)


def convnet_bn(input_shape: tuple[int, ...], num_classes: int, negative_slope: float = 0.2) -> nn.Module:
    """``convnet`` with a ``BatchNorm2d`` after each convolution, for inversion experiments with batch-norm priors.

    The same six 3×3 convolutions (16, 32, 32, 64, 64, 96 channels; strides 1, 2, 1, 2, 1, 2; padding 1), each followed
    by BatchNorm2d (PyTorch defaults: ε = 1e-5, momentum 0.1, affine, running statistics tracked) and LeakyReLU, then one
    linear layer. The convolutions have no bias: BatchNorm's shift β takes its place (a bias before a train-mode
    BatchNorm is subtracted again with the batch mean and gets a zero gradient). In training mode a batch's
    normalisation uses its own statistics, so one example's gradient depends on the whole batch, and the running
    statistics the client's forward passes leave in the buffers reveal the batch's feature means and variances
    (the prior of Yin et al., "See through Gradients", CVPR 2021: :mod:`attacks.inversion.bn_prior`).
    """
    channels, _, _ = shape = image_shape("convnet-bn", input_shape)
    features = convnet_features(channels, negative_slope, batch_norm=True)
    features.eval()  # measure the output size without touching the running statistics (and with one 1×1 example)
    flat = feature_count("convnet-bn", features, shape)
    features.train()
    return FeaturesThenHead(features, nn.Linear(flat, num_classes))


def lenet_dlg(input_shape: tuple[int, ...], num_classes: int, init_range: float = 0.5) -> nn.Module:
    """The LeNet of "Deep Leakage from Gradients" (Zhu, Liu & Han 2019).

    Three 5×5 convolutions with 12 channels, padding 2 and strides 2, 2, 1, each followed by a sigmoid,
    then one linear layer (768 inputs on 32×32 images). Every weight and bias is drawn from
    U(−0.5, 0.5), as the DLG code does; sigmoid activations keep the network twice differentiable,
    which the DLG attack's gradient matching needs.
    """
    channels, _, _ = shape = image_shape("lenet-dlg", input_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 12, 5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=1, padding=2),
        nn.Sigmoid(),
    )
    flat = feature_count("lenet-dlg", features, shape)
    model = FeaturesThenHead(features, nn.Linear(flat, num_classes))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.uniform_(-init_range, init_range)
    return model


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ModelSpec:
    """A model by name: ``builder(input_shape, num_classes, **options) -> nn.Module`` and a one-line summary."""

    builder: Callable[..., nn.Module]
    summary: str


#: The core's own models; the papers' come from the registry (:func:`model_specs`).
CORE_MODELS: dict[str, ModelSpec] = {
    "convnet": ModelSpec(convnet, "6-conv LeakyReLU ConvNet without BatchNorm for gradient inversion (R-GAP cnn6 style)"),
    "convnet-bn": ModelSpec(convnet_bn, "convnet with BatchNorm2d after each (bias-free) conv, for BN-statistics inversion priors"),
    "lenet-dlg": ModelSpec(lenet_dlg, "DLG LeNet: 3 sigmoid 5×5 convs (12 ch) + linear, U(-0.5,0.5) init (Zhu et al. 2019)"),
}

#: The model for colour images when no paper names one (inputs (3, H, W)).
CORE_DEFAULT_MODELS = {"colour-images": "convnet"}


@cache
def model_specs() -> dict[str, ModelSpec]:
    """Every model by name: the core's, then each registered paper's (paper-key order); a name given twice is an error."""
    specs = dict(CORE_MODELS)
    for name, (paper, ref) in plugins.collected("models").items():
        spec = ref.load()
        if name in specs or not isinstance(spec, ModelSpec):
            raise InvalidParameterError(f"paper {paper.key!r} registers model {name!r} ({ref.target}): "
                                        "the name is taken or the value is not a privaudit.models.ModelSpec")
        specs[name] = spec
    return specs


def model_names() -> tuple[str, ...]:
    """The names :func:`build_model` accepts."""
    return tuple(model_specs())


def describe_models() -> dict[str, str]:
    """Model name → one-line description (for ``privaudit train --list``)."""
    return {name: spec.summary for name, spec in model_specs().items()}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kw: Any) -> nn.Module:
    """Build model ``name`` for inputs of ``input_shape`` (no batch dimension) and ``num_classes`` classes.

    Extra keyword arguments go to the architecture (e.g. ``init`` for ``logreg``, ``dropout`` for
    ``upcycled-mlp``). Unknown names, unknown keywords and inputs the architecture cannot take raise
    :class:`InvalidParameterError`. Weights are drawn from torch's global generator: seed it first.
    """
    spec = model_specs().get(name)
    if spec is None:
        raise InvalidParameterError(f"unknown model {name!r}; known models: {', '.join(model_names())}")
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d < 1 for d in shape):
        raise InvalidParameterError(f"input shape must be non-empty with positive sizes, got {tuple(input_shape)}")
    if int(num_classes) < 2:
        raise InvalidParameterError(f"a classifier needs at least 2 classes, got num_classes={num_classes}")
    try:
        return spec.builder(shape, int(num_classes), **kw)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise InvalidParameterError(f"model {name!r} does not take option(s) {sorted(kw)}") from exc


def model_fits(name: str, input_shape: tuple[int, ...], num_classes: int = 10) -> bool:
    """Whether ``build_model(name, input_shape, num_classes)`` succeeds (the architecture takes that input)."""
    try:
        build_model(name, input_shape, num_classes)
    except InvalidParameterError:
        return False
    return True


@cache
def default_models() -> dict[str, str]:
    """Input kind (``vectors``, ``images``, ``colour-images``) → the model a run uses when it names none.

    The papers' ``default_models`` (:attr:`privaudit.plugins.Paper.defaults`), then :data:`CORE_DEFAULT_MODELS` for a
    kind no paper names; two papers naming one kind is an error.
    """
    chosen: dict[str, tuple[str, str]] = {}
    for paper in plugins.papers():
        for kind, model in dict(paper.defaults.get("default_models", {})).items():
            if kind in chosen:
                raise InvalidParameterError(f"papers {chosen[kind][0]!r} and {paper.key!r} both name the default model "
                                            f"for {kind}")
            chosen[kind] = (paper.key, str(model))
    return {**CORE_DEFAULT_MODELS, **{kind: model for kind, (_, model) in chosen.items()}}


def input_kind(shape: tuple[int, ...]) -> str:
    """``vectors`` (one axis), ``colour-images`` (3 channels) or ``images`` (any other channel count)."""
    if len(shape) == 1:
        return "vectors"
    return "colour-images" if len(shape) == 3 and shape[0] == 3 else "images"


def default_model_for(dataset: FederatedDataset) -> str:
    """The model a run uses when none is named: the registered paper's model for the data's kind (:func:`default_models`).

    Token sequences (LEAF Sent140) have no model here yet and raise :class:`InvalidParameterError`.
    """
    if dataset.metadata.get("input_kind") == "token_ids":
        raise InvalidParameterError(
            f"dataset {dataset.name!r} holds token sequences and privaudit has no text model yet; "
            "load it with text_encoding='bow' to train logreg on bag-of-words features"
        )
    kind = input_kind(tuple(dataset.input_shape))
    model = default_models().get(kind)
    if model is None:
        raise InvalidParameterError(f"no registered paper names a default model for {kind} (shape {dataset.input_shape}): "
                                    "name one with --model")
    return model
