"""Privatizers for the probe tests (named as ``tests.check.probe_functions:NAME`` on the command line): DP-FedAvg's
server step done right, without clipping, and with σ² for σ (clip C = 1, σ = 0.7, divided by the number of updates)."""

from __future__ import annotations

import numpy as np

_RNG = np.random.default_rng(20_260_226)
CLIP, SIGMA = 1.0, 0.7


def _clipped(updates: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(updates, axis=1, keepdims=True)
    return updates * np.minimum(1.0, CLIP / np.maximum(norms, 1e-12))


def dp_fedavg(updates: np.ndarray) -> np.ndarray:
    return (_clipped(updates).sum(axis=0) + _RNG.normal(0.0, SIGMA * CLIP, updates.shape[1])) / len(updates)


def unclipped(updates: np.ndarray) -> np.ndarray:
    return (updates.sum(axis=0) + _RNG.normal(0.0, SIGMA * CLIP, updates.shape[1])) / len(updates)


def sigma_squared(updates: np.ndarray) -> np.ndarray:
    return (_clipped(updates).sum(axis=0) + _RNG.normal(0.0, SIGMA**2 * CLIP, updates.shape[1])) / len(updates)


def broken(updates: np.ndarray) -> np.ndarray:
    raise RuntimeError("out of cheese")


def flower_dp_strategy():
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    inner = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_available_nodes=11, min_train_nodes=11)
    return DifferentialPrivacyServerSideFixedClipping(inner, SIGMA, CLIP, 11)
