"""PFA's models (Emory-AIMS/PFA@72b3f89; parameter counts of PFA Table 5), registered as the paper's ``models`` part."""

from __future__ import annotations

from torch import nn

from privaudit.models import (
    FeaturesThenHead,
    LogisticRegression,
    ModelSpec,
    feature_count,
    flat_size,
    image_shape,
    tf_same_padding,
)


def pfa_lr(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PFA logistic regression, zero-initialised (Emory-AIMS/PFA@72b3f89; 7,850 parameters on MNIST, PFA Table 5).

    The reference code applied ``sparse_softmax_cross_entropy_with_logits`` to ``softmax(xW + b)`` (double
    softmax); this model returns the logits ``xW + b``.
    """
    return LogisticRegression(flat_size(input_shape), num_classes, init="zeros")


def pfa_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """PFA's MNIST CNN, the TF-privacy tutorial network (Emory-AIMS/PFA@72b3f89; 26,010 parameters, PFA Table 5).

    Conv(16, 8×8, stride 2, 'same', ReLU)-MaxPool(2, stride 1)-Conv(32, 4×4, stride 2, 'valid', ReLU)-
    MaxPool(2, stride 1)-Flatten-Dense(32, ReLU)-Dense(C). TensorFlow's 'same' padding puts the odd extra
    pixel after the image; it is reproduced with an explicit (possibly asymmetric) zero padding.
    """
    channels, height, width = shape = image_shape("pfa-cnn", input_shape)
    top, bottom = tf_same_padding(height, 8, 2)
    left, right = tf_same_padding(width, 8, 2)
    features = nn.Sequential(
        nn.ZeroPad2d((left, right, top, bottom)),
        nn.Conv2d(channels, 16, 8, stride=2),
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),
        nn.Conv2d(16, 32, 4, stride=2),
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),
    )
    flat = feature_count("pfa-cnn", features, shape)
    head = nn.Sequential(nn.Linear(flat, 32), nn.ReLU(), nn.Linear(32, num_classes))
    return FeaturesThenHead(features, head)


PFA_LR = ModelSpec(pfa_lr, "PFA logistic regression, zero init (7,850 params on MNIST)")
PFA_CNN = ModelSpec(pfa_cnn, "PFA / TF-privacy MNIST CNN (26,010 params on MNIST)")
