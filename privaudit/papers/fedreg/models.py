"""FedReg's models, registered as the paper's ``models`` part: its MNIST CNN (Zoesgithub/FedReg@34b081f:
FedUtils/models/mnist/cnn.py) and a CPU-scale MLP standing in for it in evidence runs."""

from __future__ import annotations

from torch import nn

from privaudit.models import FeaturesThenHead, ModelSpec, feature_count, flat_size, image_shape


def fedreg_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """FedReg's MNIST/EMNIST CNN (Zoesgithub/FedReg@34b081f:FedUtils/models/mnist/cnn.py).

    Conv(c,32,5)-ReLU-Conv(32,32,5)-MaxPool2-ReLU-Conv(32,64,5)-MaxPool2-ReLU-Flatten-Linear(·,256)-ReLU-
    Linear(256,C); the flattened size is 576 on 28×28 inputs. Needs images of at least 20×20.
    """
    channels, _, _ = shape = image_shape("fedreg-cnn", input_shape)
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
    flat = feature_count("fedreg-cnn", features, shape)
    head = nn.Sequential(nn.Linear(flat, 256), nn.ReLU(), nn.Linear(256, num_classes))
    return FeaturesThenHead(features, head)


def fedreg_mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 100) -> nn.Module:
    """Linear(d,100) → ReLU → Linear(100,C): a CPU-scale stand-in for FedReg's MNIST CNN (002 §4.1) in evidence runs.

    784-100-10 on MNIST-shaped data = 79,510 parameters; no dropout or buffers, so it trains batched and under opacus.
    """
    return nn.Sequential(nn.Flatten(), nn.Linear(flat_size(input_shape), hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


FEDREG_CNN = ModelSpec(fedreg_cnn, "FedReg MNIST CNN: 3 conv 5×5 + 2 linear")
FEDREG_MLP = ModelSpec(fedreg_mlp, "d-100-C ReLU MLP: CPU-scale stand-in for FedReg's MNIST CNN in evidence runs")
