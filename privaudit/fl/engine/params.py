"""Model states as plain ``{name: tensor}`` dictionaries and the arithmetic the algorithms need.

A *state* holds a model's parameters and floating-point buffers in the model's own order. Algorithms treat
states as vectors: weighted averages, differences, scaled sums and the global L2 norm over every tensor
(the norm Upcycled-FL's output perturbation clips: 003 §6, ``client/avg.py`` of osu-srml/Upcycled-FL@4dd7400). All functions return new tensors and never
modify their arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import nn

State = dict[str, torch.Tensor]


def model_state(model: nn.Module) -> State:
    """Detached copies of the model's parameters and floating-point buffers, in module order."""
    state: State = {name: p.detach().clone() for name, p in model.named_parameters()}
    for name, b in model.named_buffers():
        if b.is_floating_point():
            state[name] = b.detach().clone()
    return state


def clone(state: Mapping[str, torch.Tensor]) -> State:
    return {k: v.detach().clone() for k, v in state.items()}


def zeros_like(state: Mapping[str, torch.Tensor]) -> State:
    return {k: torch.zeros_like(v) for k, v in state.items()}


def add(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], scale: float = 1.0) -> State:
    """a + scale·b."""
    return {k: a[k] + scale * b[k] for k in a}


def sub(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> State:
    """a − b."""
    return {k: a[k] - b[k] for k in a}


def scale(a: Mapping[str, torch.Tensor], factor: float) -> State:
    return {k: v * factor for k, v in a.items()}


def weighted_average(states: Sequence[Mapping[str, torch.Tensor]], weights: Iterable[float]) -> State:
    """Σ_i w_i·state_i / Σ_i w_i (weights need not be normalised; they must not all be zero)."""
    weights = [float(w) for w in weights]
    total = sum(weights)
    if not states or total <= 0:
        raise ValueError("weighted_average needs at least one state and a positive total weight")
    keys = list(states[0])
    return {k: sum(w / total * s[k] for w, s in zip(weights, states, strict=True)) for k in keys}


def global_norm(state: Mapping[str, torch.Tensor]) -> float:
    """L2 norm of all tensors concatenated into one vector."""
    return float(torch.sqrt(sum((v.double() ** 2).sum() for v in state.values())))


def num_scalars(state: Mapping[str, torch.Tensor]) -> int:
    return sum(v.numel() for v in state.values())


def flatten(state: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """All tensors concatenated (module order) into one vector."""
    return torch.cat([v.reshape(-1) for v in state.values()])


def unflatten(vector: torch.Tensor, like: Mapping[str, torch.Tensor]) -> State:
    """Inverse of :func:`flatten` for states shaped like ``like``."""
    out: State = {}
    offset = 0
    for k, v in like.items():
        out[k] = vector[offset : offset + v.numel()].reshape(v.shape).to(v.dtype).clone()
        offset += v.numel()
    if offset != vector.numel():
        raise ValueError(f"vector has {vector.numel()} entries, the state needs {offset}")
    return out


def allclose(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], *, rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=rtol, atol=atol) for k in a)


def equal(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    """Bit-for-bit equality of two states."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
