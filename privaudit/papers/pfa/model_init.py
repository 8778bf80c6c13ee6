"""The reference code's initialisation of PFA's MNIST CNN: Keras' glorot-uniform kernels and zero biases.

The reference builds the TF-privacy MNIST CNN from ``tf.keras.layers.Conv2D`` / ``Dense`` with their default
initialisers (Emory-AIMS/PFA@72b3f89:modules/cnn.py, ``__cnn_mnist``): kernels Glorot-uniform, U(±√(6/(fan_in +
fan_out))) with the receptive field counted in both fans (Glorot & Bengio 2010, eq. 16), biases zero. privaudit's
``pfa-cnn`` otherwise starts from PyTorch's defaults (Kaiming-uniform with a = √5 and uniform biases).
``model_init="keras"`` (option ``--model-init keras``) re-initialises every convolution and dense layer the Keras
way, drawing from the run's seeded model initialisation; ``"torch"`` (default) leaves the model as built.
"""

from __future__ import annotations

from enum import Enum

from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.models import build_model

#: The models whose reference counterpart is a Keras network (``pfa-lr`` is zero-initialised in both codes).
KERAS_MODELS = ("pfa-cnn",)


class ModelInit(str, Enum):
    TORCH = "torch"  # PyTorch's layer defaults (privaudit's models as built)
    KERAS = "keras"  # the reference CNN's Keras defaults: glorot-uniform kernels, zero biases

    @classmethod
    def parse(cls, value: str | ModelInit) -> ModelInit:
        return parse_enum(cls, value, "model initialisation")


def keras_initialise(module):
    """Glorot-uniform weights and zero biases for every ``Conv2d`` and ``Linear`` of ``module`` (in place; returned)."""
    from torch import nn

    for layer in module.modules():
        if isinstance(layer, nn.Conv2d | nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return module


def model_builder(name: str, init: ModelInit | str):
    """What the PFA family trains for model ``name``: ``name`` itself, or a builder of it with the Keras initialisation."""
    init = ModelInit.parse(init)
    if init is ModelInit.TORCH:
        return name
    if name not in KERAS_MODELS:
        raise InvalidParameterError(f"--model-init keras reproduces the reference's Keras CNN; it applies to "
                                    f"{', '.join(KERAS_MODELS)}, not {name!r}")

    def build(input_shape: tuple[int, ...], num_classes: int):
        return keras_initialise(build_model(name, input_shape, num_classes))

    return build
