"""The randomized Hadamard rotation of distributed DP: x ↦ (1/√j)·H·D·x and its inverse.

H is the j×j Sylvester–Hadamard matrix (j a power of two, the input zero-padded to it), D a diagonal of
random signs. (1/√j)·H is orthogonal and symmetric, so the inverse is x ↦ D·(1/√j)·H·x. The rotation
spreads a vector's energy evenly over the coordinates, so that every coordinate of a clipped update is
small (≈ ‖x‖/√j) before it is rounded and summed modulo 2^b (Kairouz, Liu & Steinke 2021, "The distributed
discrete Gaussian mechanism"; Agarwal, Kairouz & Liu 2021, §4). The transform is the fast Walsh–Hadamard
transform: log₂ j butterfly passes, O(j log j).
"""

from __future__ import annotations

import torch


def padded_length(dimension: int) -> int:
    """The smallest power of two ≥ ``dimension``."""
    return 1 << max(0, int(dimension) - 1).bit_length()


def walsh_hadamard(x: torch.Tensor) -> torch.Tensor:
    """H·x for the Sylvester ordering (no normalisation); the last axis must have power-of-two length."""
    length = x.shape[-1]
    if length & (length - 1):
        raise ValueError(f"the Walsh–Hadamard transform needs a power-of-two length, got {length}")
    y = x.reshape(-1, length).clone()
    half = 1
    while half < length:  # butterflies in place: (a, b) ← (a + b, a − b) on blocks of width ``half``
        blocks = y.view(-1, length // (2 * half), 2, half)
        first, second = blocks[:, :, 0], blocks[:, :, 1]
        total = first + second
        second.sub_(first).neg_()
        first.copy_(total)
        half *= 2
    return y.reshape(x.shape)


def random_signs(length: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The diagonal of D: independent uniform ±1."""
    return (torch.randint(0, 2, (length,), generator=generator) * 2 - 1).to(dtype)


def rotate(x: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """(1/√j)·H·D·x, with x zero-padded to j = len(signs)."""
    length = signs.shape[0]
    padded = torch.zeros(length, dtype=signs.dtype)
    padded[: x.shape[0]] = x.to(signs.dtype)
    return walsh_hadamard(padded * signs) / length**0.5


def unrotate(y: torch.Tensor, signs: torch.Tensor, dimension: int) -> torch.Tensor:
    """D·(1/√j)·H·y truncated to the first ``dimension`` coordinates (the inverse of :func:`rotate`)."""
    length = signs.shape[0]
    return (signs * walsh_hadamard(y.to(signs.dtype)) / length**0.5)[:dimension]
