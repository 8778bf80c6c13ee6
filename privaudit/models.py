"""The seed papers' model architectures, built by name for any dataset they fit.

Every model takes ``input_shape`` (without the batch dimension) and ``num_classes`` from the dataset, so
the same name builds the paper's exact network on the paper's data (e.g. ``upcycled-mlp`` is 784-196-10 on
MNIST) and a same-shaped network on the offline substitutes (64-196-10 on scikit-learn digits).

Every model returns **logits**; the loss (cross-entropy) is the caller's. The Upcycled-FL and PFA reference
codes applied cross-entropy to a softmax output ("double softmax": osu-srml/Upcycled-FL@4dd7400:models.py and the
models of Emory-AIMS/PFA@72b3f89); the affected builders say so in their docstrings and do not reproduce it.

Sources: the papers' reference code — osu-srml/Upcycled-FL@4dd7400:models.py, BHui97/PrivateFL@0ff71d6:modelUtil.py,
Zoesgithub/FedReg@34b081f:FedUtils/models/mnist/cnn.py, Emory-AIMS/PFA@72b3f89 (and PFA Table 5's parameter counts);
Zhu et al. 2019 "Deep Leakage from Gradients" (the DLG LeNet); Zhu & Blaschko 2021 "R-GAP" (the
"cnn6"-style ConvNet used for gradient inversion).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

if TYPE_CHECKING:
    from privaudit.data.base import FederatedDataset

__all__ = [
    "MODEL_NAMES",
    "build_model",
    "count_parameters",
    "default_model_for",
    "describe_models",
    "model_fits",
]


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _flat_size(input_shape: tuple[int, ...]) -> int:
    return math.prod(input_shape)


def _image_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise InvalidParameterError(
            f"model {name!r} needs image inputs shaped (channels, height, width), got input shape {input_shape}"
        )
    return input_shape  # type: ignore[return-value]


def _feature_count(name: str, features: nn.Module, image_shape: tuple[int, int, int]) -> int:
    """Size of ``features``' flattened output on one image; a clear error when the image is too small."""
    try:
        with torch.no_grad():
            out = features(torch.zeros(1, *image_shape))
    except RuntimeError as exc:
        raise InvalidParameterError(
            f"model {name!r} does not fit input shape {image_shape}: the image is too small for its convolutions"
        ) from exc
    if out.numel() == 0:
        raise InvalidParameterError(f"model {name!r} does not fit input shape {image_shape}: no features are left")
    return int(out.numel())


def _tf_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow 'same' padding along one axis: (before, after), the extra pixel going after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


# --------------------------------------------------------------------------- flat models


class LogisticRegression(nn.Module):
    """Multinomial logistic regression on the flattened input: one ``nn.Linear(d, C)``, logits out.

    ``init="upcycled"``: weights ~ N(0, 0.01²), bias 0, as Upcycled-FL's ``LogisticRegression``
    (osu-srml/Upcycled-FL@4dd7400:models.py, ``nn.Linear(20, 2)`` on its synthetic data: 42 parameters). ``init="zeros"``: W = 0, b = 0, as PFA's
    logistic regression (Emory-AIMS/PFA@72b3f89; 7,850 parameters on MNIST, PFA Table 5). ``init="torch"``: PyTorch's default.
    Both reference codes put a softmax in the model and cross-entropy on top ("double softmax"); this
    model returns logits.
    """

    def __init__(self, in_features: int, num_classes: int, init: str = "upcycled") -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(in_features, num_classes)
        if init == "upcycled":
            nn.init.normal_(self.linear.weight, mean=0.0, std=0.01)
            nn.init.zeros_(self.linear.bias)
        elif init == "zeros":
            nn.init.zeros_(self.linear.weight)
            nn.init.zeros_(self.linear.bias)
        elif init != "torch":
            raise InvalidParameterError(f"unknown init {init!r} for logistic regression: use upcycled, zeros or torch")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.flatten(x))


def _logreg(input_shape: tuple[int, ...], num_classes: int, init: str = "upcycled") -> nn.Module:
    """Logistic regression (Upcycled-FL ``nn.Linear(20, 2)`` on its synthetic data; osu-srml/Upcycled-FL@4dd7400:models.py)."""
    return LogisticRegression(_flat_size(input_shape), num_classes, init=init)


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


def _glm_logistic(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Binary logistic GLM, logits ``[0, wᵀx]`` without bias: Upcycled-FL Thm 6.3's own setting (u₁ = ‖x‖, u₂ = 1/4)."""
    if int(num_classes) != 2:
        raise InvalidParameterError(f"glm-logistic is a binary model (Thm 6.3's GLM); the dataset has {num_classes} classes")
    return BinaryLogisticGLM(_flat_size(input_shape))


def _pfa_lr(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PFA logistic regression, zero-initialised (Emory-AIMS/PFA@72b3f89; 7,850 parameters on MNIST, PFA Table 5).

    The reference code applied ``sparse_softmax_cross_entropy_with_logits`` to ``softmax(xW + b)`` (double
    softmax); this model returns the logits ``xW + b``.
    """
    return LogisticRegression(_flat_size(input_shape), num_classes, init="zeros")


def _upcycled_mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 196, dropout: float = 0.5) -> nn.Module:
    """Upcycled-FL's FEMNIST ``Twolayer`` MLP: Linear(d,196) → ReLU → Dropout(0.5) → Linear(196,C)
    (osu-srml/Upcycled-FL@4dd7400:models.py).

    784-196-10 on MNIST-shaped data = 155,830 parameters. The reference model ended in ``Softmax`` under
    ``nn.CrossEntropyLoss`` (double softmax); this one returns logits.
    """
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_flat_size(input_shape), hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, num_classes),
    )


def _fedreg_mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 100) -> nn.Module:
    """Linear(d,100) → ReLU → Linear(100,C): a CPU-scale stand-in for FedReg's MNIST CNN (002 §4.1) in evidence runs.

    784-100-10 on MNIST-shaped data = 79,510 parameters; no dropout or buffers, so it trains batched and under opacus.
    """
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_size(input_shape), hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def _privatefl_dnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PrivateFL's ``mnist_fully_connected``: d-600-100-C, ReLU, no biases (BHui97/PrivateFL@0ff71d6:modelUtil.py).

    531,400 parameters on 784 inputs with C = 10. The paper's personalised ``InputNorm`` layer (the
    ``*_IN`` variant) is not part of this builder; the PrivateFL algorithm adds it in front.
    """
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_flat_size(input_shape), 600, bias=False),
        nn.ReLU(),
        nn.Linear(600, 100, bias=False),
        nn.ReLU(),
        nn.Linear(100, num_classes, bias=False),
    )


def _privatefl_dnn_in(
    input_shape: tuple[int, ...], num_classes: int, transform: str = "linear", alpha: str = "channel", beta: str = "pixel"
) -> nn.Module:
    """PrivateFL's ``mnist_fully_connected_IN``: the personalised transformation T_k, then d-600-100-C
    (BHui97/PrivateFL@0ff71d6:modelUtil.py).

    Default T_k(x) = α ⊙ x + β with α per channel and β per pixel and channel (001 Table 2's best, the
    reference ``InputNorm(1, 28)``), identity at initialisation; other forms of 001 Table 1 via ``transform``
    (:mod:`privaudit.papers.privatefl.transform`). The body is built first, so its initial weights equal
    ``privatefl-dnn``'s under the same seed. The transformation's parameters are named ``transform.*``.
    """
    from privaudit.papers.privatefl.transform import PersonalisedModel, build_transform

    body = _privatefl_dnn(input_shape, num_classes)
    return PersonalisedModel(body, build_transform(input_shape, transform, alpha, beta))


# --------------------------------------------------------------------------- convolutional models


class _FeaturesThenHead(nn.Module):
    """A convolutional feature extractor, a flatten, and a classifier head built for its output size."""

    def __init__(self, features: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.features = features
        self.flatten = nn.Flatten()
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.features(x)))


def _fedreg_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """FedReg's MNIST/EMNIST CNN (Zoesgithub/FedReg@34b081f:FedUtils/models/mnist/cnn.py).

    Conv(c,32,5)-ReLU-Conv(32,32,5)-MaxPool2-ReLU-Conv(32,64,5)-MaxPool2-ReLU-Flatten-Linear(·,256)-ReLU-
    Linear(256,C); the flattened size is 576 on 28×28 inputs. Needs images of at least 20×20.
    """
    channels, _, _ = shape = _image_shape("fedreg-cnn", input_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 32, 5),
        nn.ReLU(),
        nn.Conv2d(32, 32, 5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Conv2d(32, 64, 5),
        nn.MaxPool2d(2),
        nn.ReLU(),
    )
    flat = _feature_count("fedreg-cnn", features, shape)
    head = nn.Sequential(nn.Linear(flat, 256), nn.ReLU(), nn.Linear(256, num_classes))
    return _FeaturesThenHead(features, head)


def _pfa_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PFA's MNIST CNN, the TF-privacy tutorial network (Emory-AIMS/PFA@72b3f89; 26,010 parameters, PFA Table 5).

    Conv(16, 8×8, stride 2, 'same', ReLU)-MaxPool(2, stride 1)-Conv(32, 4×4, stride 2, 'valid', ReLU)-
    MaxPool(2, stride 1)-Flatten-Dense(32, ReLU)-Dense(C). TensorFlow's 'same' padding puts the odd extra
    pixel after the image; it is reproduced with an explicit (possibly asymmetric) zero padding.
    """
    channels, height, width = shape = _image_shape("pfa-cnn", input_shape)
    top, bottom = _tf_same_padding(height, 8, 2)
    left, right = _tf_same_padding(width, 8, 2)
    features = nn.Sequential(
        nn.ZeroPad2d((left, right, top, bottom)),
        nn.Conv2d(channels, 16, 8, stride=2),
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),
        nn.Conv2d(16, 32, 4, stride=2),
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),
    )
    flat = _feature_count("pfa-cnn", features, shape)
    head = nn.Sequential(nn.Linear(flat, 32), nn.ReLU(), nn.Linear(32, num_classes))
    return _FeaturesThenHead(features, head)


def _convnet(input_shape: tuple[int, ...], num_classes: int, negative_slope: float = 0.2) -> nn.Module:
    """A small ConvNet for gradient-inversion experiments, after R-GAP's "cnn6" (Zhu & Blaschko 2021).

    Six 3×3 convolutions (16, 32, 32, 64, 64, 96 channels; strides 1, 2, 1, 2, 1, 2; padding 1) with
    LeakyReLU and no normalisation layer, then one linear layer: 140,522 parameters on 3×32×32 with
    C = 10. Without BatchNorm a single example's gradient is a function of that example alone, which is the
    setting gradient-inversion attacks (and FedReg's one-step attack, 002 App. B.4) assume.
    """
    channels, _, _ = shape = _image_shape("convnet", input_shape)
    features = _convnet_features(channels, negative_slope, batch_norm=False)
    flat = _feature_count("convnet", features, shape)
    return _FeaturesThenHead(features, nn.Linear(flat, num_classes))


def _convnet_features(channels: int, negative_slope: float, *, batch_norm: bool) -> nn.Sequential:
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


def _convnet_bn(input_shape: tuple[int, ...], num_classes: int, negative_slope: float = 0.2) -> nn.Module:
    """``convnet`` with a ``BatchNorm2d`` after each convolution, for inversion experiments with batch-norm priors.

    The same six 3×3 convolutions (16, 32, 32, 64, 64, 96 channels; strides 1, 2, 1, 2, 1, 2; padding 1), each followed
    by BatchNorm2d (PyTorch defaults: ε = 1e-5, momentum 0.1, affine, running statistics tracked) and LeakyReLU, then one
    linear layer. The convolutions have no bias: BatchNorm's shift β takes its place (a bias before a train-mode
    BatchNorm is subtracted again with the batch mean and gets a zero gradient). In training mode a batch's
    normalisation uses its own statistics, so one example's gradient depends on the whole batch, and the running
    statistics the client's forward passes leave in the buffers reveal the batch's feature means and variances
    (the prior of Yin et al., "See through Gradients", CVPR 2021: :mod:`attacks.inversion.bn_prior`).
    """
    channels, _, _ = shape = _image_shape("convnet-bn", input_shape)
    features = _convnet_features(channels, negative_slope, batch_norm=True)
    features.eval()  # measure the output size without touching the running statistics (and with one 1×1 example)
    flat = _feature_count("convnet-bn", features, shape)
    features.train()
    return _FeaturesThenHead(features, nn.Linear(flat, num_classes))


def _lenet_dlg(input_shape: tuple[int, ...], num_classes: int, init_range: float = 0.5) -> nn.Module:
    """The LeNet of "Deep Leakage from Gradients" (Zhu, Liu & Han 2019).

    Three 5×5 convolutions with 12 channels, padding 2 and strides 2, 2, 1, each followed by a sigmoid,
    then one linear layer (768 inputs on 32×32 images). Every weight and bias is drawn from
    U(−0.5, 0.5), as the DLG code does; sigmoid activations keep the network twice differentiable,
    which the DLG attack's gradient matching needs.
    """
    channels, _, _ = shape = _image_shape("lenet-dlg", input_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 12, 5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=1, padding=2),
        nn.Sigmoid(),
    )
    flat = _feature_count("lenet-dlg", features, shape)
    model = _FeaturesThenHead(features, nn.Linear(flat, num_classes))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.uniform_(-init_range, init_range)
    return model


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _ModelEntry:
    builder: Callable[..., nn.Module]
    summary: str


_MODELS: dict[str, _ModelEntry] = {
    "logreg": _ModelEntry(_logreg, "logistic regression on the flattened input (Upcycled-FL Linear(20,2))"),
    "glm-logistic": _ModelEntry(_glm_logistic, "binary logistic GLM, logits [0, wᵀx], no bias (Upcycled-FL Thm 6.3's setting; "
                                                "with --dataset-option normalise_rows=true)"),
    "upcycled-mlp": _ModelEntry(_upcycled_mlp, "Linear(d,196)-ReLU-Dropout(0.5)-Linear(196,C) (Upcycled-FL FEMNIST)"),
    "privatefl-dnn": _ModelEntry(_privatefl_dnn, "d-600-100-C ReLU MLP without biases (PrivateFL mnist_fully_connected)"),
    "privatefl-dnn-in": _ModelEntry(_privatefl_dnn_in, "personalised α⊙x+β (α per channel, β per pixel) + d-600-100-C (PrivateFL mnist_fully_connected_IN)"),
    "fedreg-cnn": _ModelEntry(_fedreg_cnn, "FedReg MNIST CNN: 3 conv 5×5 + 2 linear"),
    "fedreg-mlp": _ModelEntry(_fedreg_mlp, "d-100-C ReLU MLP: CPU-scale stand-in for FedReg's MNIST CNN in evidence runs"),
    "pfa-lr": _ModelEntry(_pfa_lr, "PFA logistic regression, zero init (7,850 params on MNIST)"),
    "pfa-cnn": _ModelEntry(_pfa_cnn, "PFA / TF-privacy MNIST CNN (26,010 params on MNIST)"),
    "convnet": _ModelEntry(_convnet, "6-conv LeakyReLU ConvNet without BatchNorm for gradient inversion (R-GAP cnn6 style)"),
    "convnet-bn": _ModelEntry(_convnet_bn, "convnet with BatchNorm2d after each (bias-free) conv, for BN-statistics inversion priors"),
    "lenet-dlg": _ModelEntry(_lenet_dlg, "DLG LeNet: 3 sigmoid 5×5 convs (12 ch) + linear, U(-0.5,0.5) init (Zhu et al. 2019)"),
}

MODEL_NAMES: tuple[str, ...] = tuple(_MODELS)


def describe_models() -> dict[str, str]:
    """Model name → one-line description (for ``privaudit train --list``)."""
    return {name: entry.summary for name, entry in _MODELS.items()}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kw: Any) -> nn.Module:
    """Build model ``name`` for inputs of ``input_shape`` (no batch dimension) and ``num_classes`` classes.

    Extra keyword arguments go to the architecture (e.g. ``init`` for ``logreg``, ``dropout`` for
    ``upcycled-mlp``). Unknown names, unknown keywords and inputs the architecture cannot take raise
    :class:`InvalidParameterError`. Weights are drawn from torch's global generator: seed it first.
    """
    entry = _MODELS.get(name)
    if entry is None:
        raise InvalidParameterError(f"unknown model {name!r}; known models: {', '.join(MODEL_NAMES)}")
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d < 1 for d in shape):
        raise InvalidParameterError(f"input shape must be non-empty with positive sizes, got {tuple(input_shape)}")
    if int(num_classes) < 2:
        raise InvalidParameterError(f"a classifier needs at least 2 classes, got num_classes={num_classes}")
    try:
        return entry.builder(shape, int(num_classes), **kw)
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


def default_model_for(dataset: FederatedDataset) -> str:
    """The model a run uses when none is named: the paper's model for the data's kind.

    Feature vectors → ``logreg`` (Upcycled-FL's synthetic model); single-channel images → ``upcycled-mlp``
    (Upcycled-FL's FEMNIST model, on the offline substitutes of FEMNIST); colour images → ``convnet``. Token sequences
    (LEAF Sent140) have no model here yet and raise :class:`InvalidParameterError`.
    """
    if dataset.metadata.get("input_kind") == "token_ids":
        raise InvalidParameterError(
            f"dataset {dataset.name!r} holds token sequences and privaudit has no text model yet; "
            "load it with text_encoding='bow' to train logreg on bag-of-words features"
        )
    shape = dataset.input_shape
    if len(shape) == 1:
        return "logreg"
    if len(shape) == 3 and shape[0] == 3:
        return "convnet"
    return "upcycled-mlp"
