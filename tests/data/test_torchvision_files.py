"""Local-file loaders (torchvision layout) against tiny files written here."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from privaudit.data import load_dataset
from privaudit.data.torchvision_files import cifar10, emnist, mnist, read_idx
from privaudit.errors import DataUnavailableError, InvalidParameterError


def write_idx(path: Path, array: np.ndarray, gz: bool = False) -> None:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    payload = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        payload = gzip.compress(payload)
    path.write_bytes(payload)


def fake_images(n: int, side: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, side, side), dtype=np.uint8)


def write_mnist_like(folder: Path, prefix: str = "", tags: tuple[str, str] = ("train", "t10k"), n_train: int = 40, n_test: int = 10, num_classes: int = 10, gz: bool = False, label_offset: int = 0):
    rng = np.random.default_rng(0)
    arrays = {}
    for tag, n in zip(tags, (n_train, n_test), strict=True):
        images = fake_images(n, 6, seed=n)
        labels = (np.arange(n) % num_classes + label_offset).astype(np.uint8)
        rng.shuffle(labels)
        write_idx(folder / f"{prefix}{tag}-images-idx3-ubyte", images, gz=gz)
        write_idx(folder / f"{prefix}{tag}-labels-idx1-ubyte", labels, gz=gz)
        arrays[tag] = (images, labels)
    return arrays


def test_read_idx_roundtrip_plain_and_gzip(tmp_path):
    images = fake_images(3, 5, seed=1)
    write_idx(tmp_path / "a-idx3-ubyte", images)
    write_idx(tmp_path / "b-idx3-ubyte", images, gz=True)
    assert np.array_equal(read_idx(tmp_path / "a-idx3-ubyte"), images)
    assert np.array_equal(read_idx(tmp_path / "b-idx3-ubyte.gz"), images)


def test_read_idx_rejects_bad_magic_and_truncation(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(InvalidParameterError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    write_idx(tmp_path / "t", fake_images(2, 4, seed=2))
    (tmp_path / "t").write_bytes((tmp_path / "t").read_bytes()[:-3])
    with pytest.raises(InvalidParameterError, match="truncated"):
        read_idx(tmp_path / "t")


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_from_torchvision_layout(tmp_path, gz):
    arrays = write_mnist_like(tmp_path / "MNIST" / "raw", gz=gz)
    pooled = mnist(tmp_path)
    assert pooled.x.shape == (40, 1, 6, 6) and pooled.x.dtype == np.float32
    assert np.allclose(pooled.x[:, 0] * 255, arrays["train"][0])
    assert np.array_equal(pooled.y, arrays["train"][1])
    assert pooled.x_test.shape == (10, 1, 6, 6)
    assert pooled.x.min() >= 0 and pooled.x.max() <= 1


def test_mnist_root_may_be_the_raw_folder(tmp_path):
    write_mnist_like(tmp_path)
    assert mnist(tmp_path).x.shape[0] == 40


def test_load_dataset_partitions_train_and_keeps_official_test(tmp_path):
    write_mnist_like(tmp_path / "FashionMNIST" / "raw")
    data = load_dataset(f"fashion-mnist:{tmp_path}", num_clients=5, partition="classes:2:equal", seed=3)
    assert data.num_clients == 5 and data.input_shape == (1, 6, 6)
    assert len(data.test[1]) == 10  # the official test set, not the clients' splits
    assert sum(c.num_train + c.num_test for c in data.clients) == 40  # 5 clients × 2 = 10 class slots: all used
    for client in data.clients:
        assert len(np.unique(np.concatenate([client.y_train, client.y_test]))) == 2


def test_emnist_letters_are_shifted_and_upright(tmp_path):
    arrays = write_mnist_like(tmp_path / "EMNIST" / "raw", prefix="emnist-letters-", tags=("train", "test"), num_classes=26, n_train=52, label_offset=1)
    upright = emnist(tmp_path, split="letters")
    raw = emnist(tmp_path, split="letters", upright=False)
    assert upright.num_classes == 26
    assert np.array_equal(upright.y, arrays["train"][1].astype(np.int64) - 1)
    assert np.allclose(upright.x[:, 0], raw.x[:, 0].transpose(0, 2, 1))
    assert np.allclose(raw.x[:, 0] * 255, arrays["train"][0])


def test_emnist_through_load_dataset_with_split_option(tmp_path):
    write_mnist_like(tmp_path / "EMNIST" / "raw", prefix="emnist-digits-", tags=("train", "test"))
    data = load_dataset(f"emnist:{tmp_path}", num_clients=2, emnist_split="digits")
    assert data.num_classes == 10 and data.metadata["emnist_split"] == "digits"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("mnist", ["train-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "MNIST/raw"]),
        ("fashion-mnist", ["train-images-idx3-ubyte", "FashionMNIST/raw"]),
        ("emnist", ["emnist-digits-train-images-idx3-ubyte", "EMNIST/raw"]),
        ("cifar10", ["data_batch_1", "test_batch", "cifar-10-batches-py"]),
    ],
)
def test_missing_files_name_what_to_put_where(tmp_path, spec, expected):
    with pytest.raises(DataUnavailableError) as info:
        load_dataset(f"{spec}:{tmp_path / 'nowhere'}")
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message


def _cifar_arrays(n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), [int(v) for v in rng.integers(0, 10, size=n)]


def write_cifar_python(folder: Path, n: int = 6) -> dict[str, tuple[np.ndarray, list[int]]]:
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for i, name in enumerate([*(f"data_batch_{k}" for k in range(1, 6)), "test_batch"]):
        data, labels = _cifar_arrays(n, seed=i)
        with open(folder / name, "wb") as handle:
            pickle.dump({"batch_label": name, "labels": labels, "data": data, "filenames": [f"{j}.png" for j in range(n)]}, handle, protocol=2)
        batches[name] = (data, labels)
    return batches


def test_cifar10_python_batches(tmp_path):
    batches = write_cifar_python(tmp_path / "cifar-10-batches-py")
    pooled = cifar10(tmp_path)
    assert pooled.x.shape == (30, 3, 32, 32) and pooled.input_shape == (3, 32, 32)
    first, labels = batches["data_batch_1"]
    assert np.allclose(pooled.x[0] * 255, first[0].reshape(3, 32, 32))
    assert list(pooled.y[:6]) == labels
    assert pooled.x_test.shape == (6, 3, 32, 32)


def test_cifar10_binary_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    expected = []
    for i, name in enumerate([*(f"data_batch_{k}.bin" for k in range(1, 6)), "test_batch.bin"]):
        data, labels = _cifar_arrays(4, seed=10 + i)
        records = np.concatenate([np.array(labels, dtype=np.uint8)[:, None], data], axis=1)
        (folder / name).write_bytes(records.tobytes())
        expected.append((data, labels))
    pooled = cifar10(tmp_path)
    assert pooled.x.shape == (20, 3, 32, 32)
    assert list(pooled.y_test) == expected[-1][1]
    assert np.allclose(pooled.x_test[1] * 255, expected[-1][0][1].reshape(3, 32, 32))


class _Payload:
    def __reduce__(self):
        return (Path.touch, (Path(_Payload.target),))


def test_cifar10_pickle_cannot_run_code(tmp_path):
    write_cifar_python(tmp_path / "cifar-10-batches-py")
    _Payload.target = str(tmp_path / "pwned")
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_3", "wb") as handle:
        pickle.dump({"data": _Payload(), "labels": [0]}, handle)
    with pytest.raises(InvalidParameterError, match="refusing"):
        cifar10(tmp_path)
    assert not (tmp_path / "pwned").exists()
