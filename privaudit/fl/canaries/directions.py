"""Canary directions in parameter space: uniform random unit vectors and Dirac (one-coordinate) vectors.

A random unit vector is a standard normal vector divided by its norm, i.e. uniform on S^{d−1} (Muller 1959);
Andrew et al. 2024 (§3) and Steinke, Nasr & Jagielski 2023 (white-box audit) use such directions because in
high dimension they are nearly orthogonal to the data's updates. A Dirac canary (Nasr et al. 2023,
"Tight auditing", §4) is one coordinate set to 1.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from privaudit.errors import InvalidParameterError


class DirectionKind(str, Enum):
    RANDOM = "random"
    DIRAC = "dirac"

    @classmethod
    def parse(cls, value: str | DirectionKind) -> DirectionKind:
        if isinstance(value, cls):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown canary direction {value!r}; use 'random' or 'dirac'")


def random_unit_directions(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` independent uniform unit vectors in R^dimension, as a float64 array (count, dimension)."""
    if count < 1 or dimension < 2:
        raise InvalidParameterError(f"need at least one direction in at least 2 dimensions, got {count} in {dimension}")
    vectors = rng.standard_normal((count, dimension))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def dirac_directions(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` one-hot vectors at distinct, uniformly chosen coordinates (float64, (count, dimension))."""
    if count < 1 or count > dimension:
        raise InvalidParameterError(f"{count} Dirac canaries need {count} distinct coordinates, the model has {dimension}")
    coordinates = rng.choice(dimension, size=count, replace=False)
    out = np.zeros((count, dimension))
    out[np.arange(count), coordinates] = 1.0
    return out


def make_directions(kind: str | DirectionKind, count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    if DirectionKind.parse(kind) is DirectionKind.DIRAC:
        return dirac_directions(count, dimension, rng)
    return random_unit_directions(count, dimension, rng)


def membership_bits(shape: int | tuple[int, ...], rng: np.random.Generator, inclusion: float = 0.5) -> np.ndarray:
    """Independent Bernoulli(``inclusion``) membership bits (½ by default: the audit's fair coin)."""
    if not 0.0 < inclusion < 1.0:
        raise InvalidParameterError(f"the inclusion probability must lie in (0, 1), got {inclusion}")
    return rng.random(shape) < inclusion


#: Above this many flops (≈ 2·d·m²) the Haar frame's QR is replaced by disjoint supports (seconds, not minutes).
QR_BUDGET = 2e10


def random_orthonormal_directions(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` mutually orthonormal rows in R^dimension; isotropic Gaussian noise projects onto them as independent
    N(0, s²) coordinates.

    Up to :data:`QR_BUDGET` flops: Haar-distributed, the Q factor of a Gaussian matrix with the signs of R's diagonal
    fixed (Mezzadri 2007, "How to generate random matrices from the classical compact groups", §5). Beyond it (e.g.
    10⁴ canaries in 1.4·10⁴ dimensions): the coordinates are split at random into ``count`` disjoint supports of
    ⌊d/m⌋ coordinates and each row is a uniform unit vector on its own support — orthonormal by disjointness.
    """
    if count < 1 or count > dimension:
        raise InvalidParameterError(f"{count} orthonormal directions need at least as many dimensions, the model has "
                                    f"{dimension}; use at most {dimension} canaries or random (non-orthogonal) directions")
    if 2.0 * dimension * count * count <= QR_BUDGET:
        q, r = np.linalg.qr(rng.standard_normal((dimension, count)))
        return (q * np.sign(np.diag(r))).T.copy()
    width = dimension // count
    support = rng.permutation(dimension)[: count * width].reshape(count, width)
    values = rng.standard_normal((count, width))
    out = np.zeros((count, dimension))
    out[np.arange(count)[:, None], support] = values / np.linalg.norm(values, axis=1, keepdims=True)
    return out
