"""Read MNIST, Fashion-MNIST, EMNIST and CIFAR-10 from files already on disk, in torchvision's layout.

Nothing is downloaded and torchvision is not needed: the IDX files (LeCun et al.'s format: a 4-byte magic
``0x00 0x00 <dtype> <ndim>``, ``ndim`` big-endian uint32 sizes, then the data; optionally gzipped) and the
CIFAR-10 batches (python pickles of ``{"data": uint8 (10000, 3072), "labels": [...]}``, or the binary
version's 1 label byte + 3,072 pixel bytes per record) are parsed with numpy. CIFAR pickles are read by an
unpickler that only accepts plain containers and numpy arrays, so a hostile file cannot run code.

Expected layout under the user-given ``root`` (the folder torchvision's ``root=`` argument names)::

    <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
    <root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
    <root>/EMNIST/raw/emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]
    <root>/cifar-10-batches-py/{data_batch_1..5,test_batch}    (or cifar-10-batches-bin/*.bin)

``root`` may also be the ``raw`` folder (or the dataset folder) itself.
"""

from __future__ import annotations

import gzip
import io
import pickle
from pathlib import Path

import numpy as np

from privaudit.data.federate import PooledData
from privaudit.errors import DataUnavailableError, InvalidParameterError

__all__ = ["EMNIST_SPLITS", "cifar10", "emnist", "fashion_mnist", "mnist", "read_idx"]

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

EMNIST_SPLITS: dict[str, int] = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10}


def read_idx(path: str | Path) -> np.ndarray:
    """Parse one IDX file (``.gz`` allowed) into a numpy array of its stated shape."""
    path = Path(path)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise InvalidParameterError(f"{path} is not an IDX file (bad magic number)")
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw[4:header], dtype=">u4"))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise InvalidParameterError(f"{path} is truncated or corrupt: {len(raw) - header} data bytes, expected {expected}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find(folders: list[Path], name: str) -> Path | None:
    for folder in folders:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _idx_pair(root: Path, folder: str, images_name: str, labels_name: str, dataset: str, all_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    folders = [root / folder / "raw", root / folder, root]
    images_path, labels_path = _find(folders, images_name), _find(folders, labels_name)
    if images_path is None or labels_path is None:
        raise DataUnavailableError(
            f"{dataset} files not found under {root}: put {', '.join(all_names)} (optionally .gz) in "
            f"{root / folder / 'raw'} (torchvision's layout); privaudit never downloads data"
        )
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise InvalidParameterError(
            f"{images_path.name} / {labels_path.name} do not form an image set: shapes {images.shape} and {labels.shape}"
        )
    return images, labels.astype(np.int64)


def _mnist_like(root: str | Path, folder: str, dataset: str, name: str, prefix: str = "", train_tag: str = "train", test_tag: str = "t10k") -> tuple[np.ndarray, ...]:
    root = Path(root).expanduser()
    names = [f"{prefix}{tag}-{kind}" for tag in (train_tag, test_tag) for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")]
    x_train, y_train = _idx_pair(root, folder, names[0], names[1], dataset, names)
    x_test, y_test = _idx_pair(root, folder, names[2], names[3], dataset, names)
    return x_train, y_train, x_test, y_test


def _unit_images(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W) or (N, C, H, W) → float32 (N, C, H, W) in [0, 1]."""
    images = images.astype(np.float32) / np.float32(255.0)
    return images[:, None, :, :] if images.ndim == 3 else images


def _pooled(name: str, arrays: tuple[np.ndarray, ...], num_classes: int, metadata: dict[str, object]) -> PooledData:
    x_train, y_train, x_test, y_test = arrays
    for labels in (y_train, y_test):
        if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
            raise InvalidParameterError(f"{name}: labels outside 0..{num_classes - 1} in the files")
    x_train, x_test = _unit_images(x_train), _unit_images(x_test)
    return PooledData(
        name=name,
        x=x_train,
        y=y_train,
        num_classes=num_classes,
        input_shape=x_train.shape[1:],
        x_test=x_test,
        y_test=y_test,
        metadata={**metadata, "input_kind": "image"},
    )


def mnist(root: str | Path) -> PooledData:
    """MNIST from ``<root>/MNIST/raw`` (60,000 train / 10,000 test, 28×28, /255)."""
    arrays = _mnist_like(root, "MNIST", "MNIST", "mnist")
    return _pooled("mnist", arrays, 10, {"source": f"MNIST idx files under {root}"})


def fashion_mnist(root: str | Path) -> PooledData:
    """Fashion-MNIST from ``<root>/FashionMNIST/raw`` (same format and sizes as MNIST)."""
    arrays = _mnist_like(root, "FashionMNIST", "Fashion-MNIST", "fashion-mnist")
    return _pooled("fashion-mnist", arrays, 10, {"source": f"Fashion-MNIST idx files under {root}"})


def emnist(root: str | Path, split: str = "digits", upright: bool = True) -> PooledData:
    """EMNIST split ``split`` from ``<root>/EMNIST/raw`` (PrivateFL uses ``digits``: 240,000 / 40,000).

    The EMNIST files store every image transposed; ``upright=True`` transposes them back (torchvision
    returns them as stored). ``letters`` labels 1..26 are shifted to 0..25.
    """
    if split not in EMNIST_SPLITS:
        raise InvalidParameterError(f"unknown EMNIST split {split!r}; known splits: {', '.join(EMNIST_SPLITS)}")
    x_train, y_train, x_test, y_test = _mnist_like(root, "EMNIST", f"EMNIST ({split})", "emnist", f"emnist-{split}-", "train", "test")
    if upright:
        x_train, x_test = x_train.transpose(0, 2, 1), x_test.transpose(0, 2, 1)
    if split == "letters":
        y_train, y_test = y_train - 1, y_test - 1
    metadata = {"source": f"EMNIST {split} idx files under {root}", "emnist_split": split, "upright": bool(upright)}
    return _pooled(f"emnist-{split}", (x_train, y_train, x_test, y_test), EMNIST_SPLITS[split], metadata)


_PICKLE_GLOBALS_ALLOWED = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }
)


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings, numbers and numpy arrays; refuses every other global."""

    def find_class(self, module: str, name: str):  # type: ignore[no-untyped-def]
        if (module, name) not in _PICKLE_GLOBALS_ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR batch")
        return super().find_class(module, name)


def _cifar_pickle_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _ArraysOnlyUnpickler(io.BytesIO(path.read_bytes()), encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise InvalidParameterError(f"{path} is not a CIFAR-10 python batch: {exc}") from exc
    if not isinstance(batch, dict) or "data" not in batch or "labels" not in batch:
        raise InvalidParameterError(f"{path} is not a CIFAR-10 python batch (no 'data'/'labels' entries)")
    data = np.asarray(batch["data"], dtype=np.uint8)
    labels = np.asarray(batch["labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise InvalidParameterError(f"{path}: expected data of shape (n, 3072) and n labels, got {data.shape}, {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


def _cifar_binary_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    if raw.size % 3073:
        raise InvalidParameterError(f"{path} is not a CIFAR-10 binary batch: {raw.size} bytes is not a multiple of 3073")
    records = raw.reshape(-1, 3073)
    return records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].astype(np.int64)


def cifar10(root: str | Path) -> PooledData:
    """CIFAR-10 (50,000 / 10,000, 3×32×32, /255) from ``cifar-10-batches-py`` or ``cifar-10-batches-bin``."""
    root = Path(root).expanduser()
    train_names = [f"data_batch_{i}" for i in range(1, 6)]
    layouts = (("cifar-10-batches-py", "", _cifar_pickle_batch), ("cifar-10-batches-bin", ".bin", _cifar_binary_batch))
    for folder, suffix, reader in layouts:
        for base in (root / folder, root):
            paths = [base / f"{n}{suffix}" for n in [*train_names, "test_batch"]]
            if all(p.is_file() for p in paths):
                batches = [reader(p) for p in paths]
                x_train = np.concatenate([b[0] for b in batches[:-1]])
                y_train = np.concatenate([b[1] for b in batches[:-1]])
                arrays = (x_train, y_train, batches[-1][0], batches[-1][1])
                return _pooled("cifar10", arrays, 10, {"source": f"CIFAR-10 batches under {base}"})
    raise DataUnavailableError(
        f"CIFAR-10 files not found under {root}: put data_batch_1 … data_batch_5 and test_batch in "
        f"{root / 'cifar-10-batches-py'} (torchvision's layout; or the .bin files in {root / 'cifar-10-batches-bin'}); "
        "privaudit never downloads data"
    )
