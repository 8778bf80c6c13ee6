"""Per-example membership signals from a model's logits, each oriented so that larger means "member".

* ``loss`` — s = −ℓ(x, y), the cross-entropy (Yeom et al. 2018, the LOSS attack).
* ``confidence`` — s = p_y, the probability of the true class (Salem et al. 2019).
* ``entropy`` — s = −H(p) = Σ_i p_i log p_i: confident predictions look like members (Salem et al. 2019).
* ``modified-entropy`` — s = −Mentr(p, y), Mentr = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i)
  (Song & Mittal 2021, eq. 4): uses the label, monotone decreasing in p_y and increasing in each wrong p_i.
* ``logit-confidence`` — φ = log(p_y / (1 − p_y)) (Carlini et al. 2022, LiRA §IV-B, eq. 5), computed as
  z_y − logsumexp_{i≠y} z_i so that it stays finite when p_y rounds to 1.

Everything is computed in float64 from log-probabilities; log(1 − p_i) as logsumexp_{j≠i} z_j − logsumexp_j z_j.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from privaudit.errors import InvalidParameterError


def _as_float64(logits: torch.Tensor | np.ndarray) -> torch.Tensor:
    tensor = torch.as_tensor(logits).detach().to(torch.float64)
    if tensor.ndim != 2 or tensor.shape[1] < 2:
        raise InvalidParameterError(f"logits must have shape (examples, classes ≥ 2), got {tuple(tensor.shape)}")
    return tensor


def _labels(y: np.ndarray | torch.Tensor, count: int) -> torch.Tensor:
    labels = torch.as_tensor(np.asarray(y), dtype=torch.int64).reshape(-1)
    if labels.numel() != count:
        raise InvalidParameterError(f"{labels.numel()} labels for {count} examples")
    return labels


def log_complement(z: torch.Tensor) -> torch.Tensor:
    """log(1 − p_i) = logsumexp_{j≠i} z_j − logsumexp_j z_j for every class i (exact even when p_i rounds to 1)."""
    total = torch.logsumexp(z, dim=1, keepdim=True)
    columns = []
    for i in range(z.shape[1]):
        others = torch.cat([z[:, :i], z[:, i + 1 :]], dim=1)
        columns.append(torch.logsumexp(others, dim=1, keepdim=True))
    return torch.cat(columns, dim=1) - total


def cross_entropy(logits, y) -> np.ndarray:
    z = _as_float64(logits)
    labels = _labels(y, z.shape[0])
    return (-torch.log_softmax(z, dim=1).gather(1, labels[:, None]).squeeze(1)).numpy()


def true_class_probability(logits, y) -> np.ndarray:
    z = _as_float64(logits)
    labels = _labels(y, z.shape[0])
    return torch.softmax(z, dim=1).gather(1, labels[:, None]).squeeze(1).numpy()


def prediction_entropy(logits) -> np.ndarray:
    """H(p) = −Σ_i p_i log p_i."""
    log_p = torch.log_softmax(_as_float64(logits), dim=1)
    return (-(log_p.exp() * log_p).sum(dim=1)).numpy()


def modified_entropy(logits, y) -> np.ndarray:
    """Mentr(p, y) = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i) (Song & Mittal 2021, eq. 4)."""
    z = _as_float64(logits)
    labels = _labels(y, z.shape[0])
    log_p = torch.log_softmax(z, dim=1)
    p = log_p.exp()
    log_q = log_complement(z)  # log(1 − p_i)
    true = torch.zeros_like(p, dtype=torch.bool).scatter_(1, labels[:, None], True)
    own = -(1.0 - p) * log_p  # −(1 − p_y) log p_y at the true class
    other = -p * log_q  # −p_i log(1 − p_i) elsewhere
    return torch.where(true, own, other).sum(dim=1).numpy()


def logit_scaled_confidence(logits, y) -> np.ndarray:
    """φ = log(p_y / (1 − p_y)) = z_y − logsumexp_{i≠y} z_i (LiRA's per-example statistic)."""
    z = _as_float64(logits)
    labels = _labels(y, z.shape[0])
    true = torch.zeros_like(z, dtype=torch.bool).scatter_(1, labels[:, None], True)
    others = torch.logsumexp(z.masked_fill(true, float("-inf")), dim=1)
    return (z.gather(1, labels[:, None]).squeeze(1) - others).numpy()


#: signal name → (function of (logits, labels) → score with larger = member, one-line description)
SIGNALS: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "loss": (lambda z, y: -cross_entropy(z, y), "negative cross-entropy −ℓ(x, y) (Yeom et al. 2018)"),
    "confidence": (true_class_probability, "probability of the true class p_y (Salem et al. 2019)"),
    "entropy": (lambda z, y: -prediction_entropy(z), "negative prediction entropy −H(p) (Salem et al. 2019)"),
    "modified-entropy": (lambda z, y: -modified_entropy(z, y), "negative modified entropy −Mentr (Song & Mittal 2021)"),
    "logit-confidence": (logit_scaled_confidence, "logit-scaled confidence φ = log(p_y/(1−p_y)) (Carlini et al. 2022)"),
}


def membership_signal(name: str, logits, y) -> np.ndarray:
    """The per-example score of signal ``name`` (larger = member), float64."""
    entry = SIGNALS.get(name)
    if entry is None:
        raise InvalidParameterError(f"unknown membership signal {name!r}; choose one of: {', '.join(SIGNALS)}")
    return np.asarray(entry[0](logits, y), dtype=np.float64)
