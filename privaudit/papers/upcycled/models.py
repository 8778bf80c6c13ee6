"""Upcycled-FL's models (osu-srml/Upcycled-FL@4dd7400:models.py), registered as the paper's ``models`` part.

``logreg`` is its ``LogisticRegression`` (N(0, 0.01²) weights), ``upcycled-mlp`` its FEMNIST ``Twolayer`` MLP and
``glm-logistic`` the binary logistic GLM of Thm 6.3's setting (003; 000 Thm 5.3). They are also the models a run uses
when it names none: ``logreg`` for feature vectors (the synthetic data), ``upcycled-mlp`` for single-channel images
(the offline substitutes of FEMNIST) — the ``default_models`` of :data:`privaudit.papers.upcycled.PAPER`.
"""

from __future__ import annotations

from torch import nn

from privaudit.errors import InvalidParameterError
from privaudit.models import BinaryLogisticGLM, LogisticRegression, ModelSpec, flat_size


def logreg(input_shape: tuple[int, ...], num_classes: int, init: str = "normal") -> nn.Module:
    """Logistic regression (Upcycled-FL ``nn.Linear(20, 2)`` on its synthetic data; osu-srml/Upcycled-FL@4dd7400:models.py)."""
    return LogisticRegression(flat_size(input_shape), num_classes, init=init)


def glm_logistic(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Binary logistic GLM, logits ``[0, wᵀx]`` without bias: Upcycled-FL Thm 6.3's own setting (u₁ = ‖x‖, u₂ = 1/4)."""
    if int(num_classes) != 2:
        raise InvalidParameterError(f"glm-logistic is a binary model (Thm 6.3's GLM); the dataset has {num_classes} classes")
    return BinaryLogisticGLM(flat_size(input_shape))


def upcycled_mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 196, dropout: float = 0.5) -> nn.Module:
    """Upcycled-FL's FEMNIST ``Twolayer`` MLP: Linear(d,196) → ReLU → Dropout(0.5) → Linear(196,C)
    (osu-srml/Upcycled-FL@4dd7400:models.py).

    784-196-10 on MNIST-shaped data = 155,830 parameters. The reference model ended in ``Softmax`` under
    ``nn.CrossEntropyLoss`` (double softmax); this one returns logits.
    """
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(flat_size(input_shape), hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, num_classes),
    )


LOGREG = ModelSpec(logreg, "logistic regression on the flattened input (Upcycled-FL Linear(20,2))")
GLM_LOGISTIC = ModelSpec(glm_logistic, "binary logistic GLM, logits [0, wᵀx], no bias (Upcycled-FL Thm 6.3's setting; "
                                       "with --dataset-option normalise_rows=true)")
UPCYCLED_MLP = ModelSpec(upcycled_mlp, "Linear(d,196)-ReLU-Dropout(0.5)-Linear(196,C) (Upcycled-FL FEMNIST)")
