"""PrivateFL's models (BHui97/PrivateFL@0ff71d6:modelUtil.py), registered as the paper's ``models`` part."""

from __future__ import annotations

from torch import nn

from privaudit.models import ModelSpec, flat_size
from privaudit.papers.privatefl.transform import PersonalisedModel, build_transform


def privatefl_dnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PrivateFL's ``mnist_fully_connected``: d-600-100-C, ReLU, no biases (BHui97/PrivateFL@0ff71d6:modelUtil.py).

    531,400 parameters on 784 inputs with C = 10. The paper's personalised ``InputNorm`` layer (the
    ``*_IN`` variant) is not part of this builder; the PrivateFL algorithm adds it in front.
    """
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(flat_size(input_shape), 600, bias=False),
        nn.ReLU(),
        nn.Linear(600, 100, bias=False),
        nn.ReLU(),
        nn.Linear(100, num_classes, bias=False),
    )


def privatefl_dnn_in(
    input_shape: tuple[int, ...], num_classes: int, transform: str = "linear", alpha: str = "channel", beta: str = "pixel"
) -> nn.Module:
    """PrivateFL's ``mnist_fully_connected_IN``: the personalised transformation T_k, then d-600-100-C
    (BHui97/PrivateFL@0ff71d6:modelUtil.py).

    Default T_k(x) = α ⊙ x + β with α per channel and β per pixel and channel (001 Table 2's best, the
    reference ``InputNorm(1, 28)``), identity at initialisation; other forms of 001 Table 1 via ``transform``
    (:mod:`privaudit.papers.privatefl.transform`). The body is built first, so its initial weights equal
    ``privatefl-dnn``'s under the same seed. The transformation's parameters are named ``transform.*``.
    """
    body = privatefl_dnn(input_shape, num_classes)
    return PersonalisedModel(body, build_transform(input_shape, transform, alpha, beta))


PRIVATEFL_DNN = ModelSpec(privatefl_dnn, "d-600-100-C ReLU MLP without biases (PrivateFL mnist_fully_connected)")
PRIVATEFL_DNN_IN = ModelSpec(privatefl_dnn_in, "personalised α⊙x+β (α per channel, β per pixel) + d-600-100-C "
                                               "(PrivateFL mnist_fully_connected_IN)")
