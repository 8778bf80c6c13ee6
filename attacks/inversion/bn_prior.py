"""BatchNorm-statistics prior for gradient inversion, and the running statistics a client's release reveals.

The prior has the form of the R_BN term of GradInversion's image-fidelity regulariser (Yin et al., "See through
Gradients: Image Batch Recovery via GradInversion", CVPR 2021, §3, R_fidelity = α_TV·R_TV + α_ℓ2·R_ℓ2 + α_BN·R_BN),
itself DeepInversion's feature-distribution regulariser R_feature (Yin et al., "Dreaming to Distill", CVPR 2020, §3):

    R_BN(x̂) = Σ_l ‖μ_l(x̂) − μ_l‖₂ + ‖σ²_l(x̂) − σ²_l‖₂

where μ_l(x̂), σ²_l(x̂) are the per-channel mean and variance of BatchNorm layer l's input on the candidates x̂
(the statistics the layer normalises with in training mode) and μ_l, σ²_l the target statistics, from one of two
sources (:data:`BN_STATS_SOURCES`). Both papers take the network's stored running statistics as the target; that is
``running`` here. ``update`` is a stronger target this module adds, read from the client's released buffers (a
stronger threat model: the server sees the buffers, as breaching's ``provide_buffers`` allows):

* ``update`` — the client's own batch statistics, which an honest-but-curious server can read from the release when
  the release carries the BatchNorm buffers. A client that trains in train mode updates every BatchNorm layer's
  running buffers once per forward pass, r ← (1 − m)·r + m·s with s the batch's
  mean and *unbiased* variance (PyTorch's convention) and m the layer's momentum; FedAvg's state-dict exchange
  returns the buffers with the weights. After K forward passes from the global r₀,
  r_K = P·r₀ + Σ_k w̃_k·s_k with P = Π_k (1 − m_k) and w̃_k = m_k·Π_{j>k}(1 − m_j), so
  (r_K − P·r₀)/(1 − P) = Σ_k w_k·s_k, w_k = w̃_k/(1 − P), Σ_k w_k = 1. For one local step (FedSGD, or FedAvg
  with K = 1) that is exactly the batch's statistics s₁. For K > 1 it is the w-weighted average of the K steps'
  statistics, each taken on that step's mini-batch at that step's weights θ_k; the attacker forms the same
  weighted average of its candidates' statistics at the global weights θ₀, so the target is exact up to the
  drift of θ over the local steps (small for small learning rates, not zero).
* ``running`` — the global model's running statistics: the target of GradInversion's R_BN and DeepInversion's
  R_feature (the training data's population statistics, not the client's batch). It is a weaker prior, since a
  batch's statistics differ from the population's, and it needs no buffers in the release.

Limits of ``update`` (what :meth:`BatchNormTarget.describe` records). K comes from the attacker's model of the client,
and the released ``num_batches_tracked`` change must agree with it. A release without that count (privaudit's engine
keeps only floating-point buffers) has K assumed, not checked, and the record's ``notes`` say so. For K > 1 the weights
w_k must be the same in every layer: layers with different momentum are refused. The candidate batches follow one
fixed order of the records (:func:`~attacks.inversion.client_simulation.batch_slices`). A client that reshuffles every
epoch (privaudit's engine does) forms other batches in later epochs, so the target is then not exact; the checkpoint
CLI adds that note.

Variances are compared in the unbiased form the running buffers hold (n/(n − 1) times the variance the layer
normalises with, n = batch × height × width values per channel). BatchNorm in training mode needs n > 1 per
channel: one example works wherever the feature map has more than one pixel (the client's own forward pass would
fail otherwise, and :func:`recorded_forward_statistics` says so in one line).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

from .client_simulation import batch_slices
from .functional_model import FunctionalModel, ParamDict
from .threat_model import InversionPayload

#: Where the prior's target statistics come from (see the module docstring).
BN_STATS_SOURCES: tuple[str, ...] = ("update", "running")


def batch_norm_layers(module: nn.Module) -> list[tuple[str, nn.modules.batchnorm._BatchNorm]]:
    """The module's BatchNorm layers (any dimension) with their qualified names, in registration order."""
    return [(name, m) for name, m in module.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def has_batch_norm(module: nn.Module) -> bool:
    return bool(batch_norm_layers(module))


def channel_statistics(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and unbiased variance of a BatchNorm input ``[N, C, ...]`` over every axis but the channel."""
    dims = [0, *range(2, features.dim())]
    return features.mean(dim=dims), features.var(dim=dims, correction=1)


@contextmanager
def capture_batch_norm_inputs(module: nn.Module) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Within the block, every forward pass appends each BatchNorm layer's input to ``captured[layer name]``.

    Forward pre-hooks, removed on exit; they work under ``torch.func.vmap`` (the captured tensors are then the lane's).
    """
    captured: dict[str, list[torch.Tensor]] = {}
    handles = []
    for name, layer in batch_norm_layers(module):
        captured[name] = []

        def hook(_layer: nn.Module, args: tuple, _name: str = name) -> None:
            captured[_name].append(args[0])

        handles.append(layer.register_forward_pre_hook(hook))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def _momentum_factors(layer: nn.Module, batches_tracked: int, passes: int) -> list[float]:
    """m_k for the k-th of ``passes`` forward passes: the layer's momentum, or 1/t for a cumulative average."""
    if layer.momentum is None:
        return [1.0 / (batches_tracked + k) for k in range(1, passes + 1)]
    return [float(layer.momentum)] * passes


def fold_running_statistics(
    model: FunctionalModel, statistics: Mapping[str, list[tuple[torch.Tensor, torch.Tensor]]]
) -> dict[str, torch.Tensor]:
    """The BatchNorm buffers after the recorded forward passes, from the global ones: r ← (1 − m)·r + m·s per pass.

    ``statistics[layer]`` lists (mean, unbiased variance) of each training forward pass in order. Returns the change
    of every running_mean, running_var and num_batches_tracked buffer (PyTorch's train-mode update, done explicitly).
    """
    change: dict[str, torch.Tensor] = {}
    for name, layer in batch_norm_layers(model.module):
        passes = statistics.get(name, [])
        prefix = f"{name}." if name else ""
        mean_key, var_key, count_key = prefix + "running_mean", prefix + "running_var", prefix + "num_batches_tracked"
        if mean_key not in model.buffers or var_key not in model.buffers:
            continue  # a layer without running statistics releases nothing
        tracked = int(model.buffers[count_key]) if count_key in model.buffers else 0
        mean, var = model.buffers[mean_key].clone(), model.buffers[var_key].clone()
        for m, (batch_mean, batch_var) in zip(_momentum_factors(layer, tracked, len(passes)), passes, strict=True):
            mean = (1 - m) * mean + m * batch_mean.to(mean.dtype)
            var = (1 - m) * var + m * batch_var.to(var.dtype)
        change[mean_key] = mean - model.buffers[mean_key]
        change[var_key] = var - model.buffers[var_key]
        if count_key in model.buffers:
            change[count_key] = torch.tensor(len(passes), dtype=model.buffers[count_key].dtype)
    return change


@contextmanager
def recorded_forward_statistics(model: FunctionalModel) -> Iterator[dict[str, list[tuple[torch.Tensor, torch.Tensor]]]]:
    """Record (mean, unbiased variance) of every BatchNorm input during the block: the client's training forwards."""
    stats: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    try:
        with capture_batch_norm_inputs(model.module) as captured:
            yield stats
            for name, inputs in captured.items():
                stats[name] = [tuple(s.detach() for s in channel_statistics(x)) for x in inputs]  # type: ignore[misc]
    except InvalidParameterError:  # FunctionalModel already says it in one line
        raise
    except ValueError as exc:  # F.batch_norm on a plain module: "Expected more than 1 value per channel when training"
        if "more than 1 value per channel" not in str(exc):
            raise
        raise InvalidParameterError(f"the client's BatchNorm forward pass fails: {exc} (one example whose feature map "
                                    "shrinks to 1×1 has no batch variance; use larger images or more examples per update)") from None


@dataclass(frozen=True)
class BatchNormTarget:
    """Target statistics of each BatchNorm layer and how to form the candidates' matching statistics.

    ``candidate_batches`` pairs a slice of the candidates with its weight: the candidates' statistic is
    Σ weight·statistic(x̂[slice]) at the global weights (one whole-set slice of weight 1 for one step or ``running``).
    """

    source: str
    layers: tuple[str, ...]
    means: tuple[torch.Tensor, ...]
    variances: tuple[torch.Tensor, ...]
    candidate_batches: tuple[tuple[slice, float], ...]
    forward_passes: int
    notes: tuple[str, ...] = ()  # why the target is not exact, beyond the weight drift of several local steps

    def tensors(self) -> dict[str, torch.Tensor]:
        """The target statistics as one flat dictionary (what lanes of a batched attack stack)."""
        out = {f"mean:{n}": m for n, m in zip(self.layers, self.means, strict=True)}
        out.update({f"var:{n}": v for n, v in zip(self.layers, self.variances, strict=True)})
        return out

    def structure(self) -> tuple[Any, ...]:
        """What lanes of one batched optimisation must share: the layers and the candidate batches with their weights."""
        return self.source, self.layers, tuple((s.start, s.stop, w) for s, w in self.candidate_batches)

    def with_note(self, note: str) -> BatchNormTarget:
        """The same target with one more caveat in :attr:`notes` (e.g. one only the caller knows about the client)."""
        return replace(self, notes=(*self.notes, note))

    def describe(self) -> dict[str, Any]:
        record: dict[str, Any] = {"bn_stats": self.source, "layers": len(self.layers), "forward_passes": self.forward_passes,
                                  "exact": self.source == "update" and self.forward_passes == 1,
                                  "candidate_batches": [[s.start, s.stop, w] for s, w in self.candidate_batches]}
        if self.notes:
            record["notes"] = list(self.notes)
        return record


def _require_batch_norm(model: FunctionalModel) -> list[tuple[str, nn.modules.batchnorm._BatchNorm]]:
    layers = [(n, m) for n, m in batch_norm_layers(model.module) if f"{n}.running_mean" in model.buffers]
    if not layers:
        raise InvalidParameterError("the BatchNorm-statistics prior (bn_stats) needs a model with BatchNorm layers that track "
                                    "running statistics; this model has none (e.g. use --model convnet-bn)")
    return layers


def target_from_running(model: FunctionalModel) -> BatchNormTarget:
    """``bn_stats=running``: the global model's running statistics (the target of GradInversion's R_BN and DeepInversion's R_feature)."""
    layers = _require_batch_norm(model)
    names = tuple(n for n, _ in layers)
    return BatchNormTarget("running", names, tuple(model.buffers[f"{n}.running_mean"] for n in names),
                           tuple(model.buffers[f"{n}.running_var"] for n in names), ((slice(None), 1.0),), 0)


def target_from_update(payload: InversionPayload, model: FunctionalModel) -> BatchNormTarget:
    """``bn_stats=update``: the client's batch statistics, recovered from its released buffer change (module docstring).

    This target is stronger than GradInversion's, which uses the running statistics: it needs the release to carry the buffers.

    The number of forward passes K is what the attacker's model of the client runs: 1 for a FedSGD gradient,
    ``local_steps`` for a delta; the released num_batches_tracked change must agree.
    """
    layers = _require_batch_norm(model)
    if not payload.buffer_update:
        raise InvalidParameterError("bn_stats=update needs the client's released BatchNorm buffers, and this release carries none "
                                    "(use bn_stats=running for the global model's statistics)")
    knowledge = payload.knowledge
    passes = 1 if knowledge.update_kind == "gradient" else knowledge.local_steps
    slices = batch_slices(knowledge.num_examples, None if knowledge.update_kind == "gradient" else knowledge.batch_size)
    names, means, variances = [], [], []
    weights: list[float] | None = None
    first_layer = ""
    notes: list[str] = []
    for name, layer in layers:
        count = payload.buffer_update.get(f"{name}.num_batches_tracked")
        if count is not None and int(count) != passes:
            raise InvalidParameterError(f"the released buffers of {name!r} saw {int(count)} forward passes, but the attacker's "
                                        f"model of the client runs {passes}")
        if count is None and not notes:
            notes.append(f"the release carries no num_batches_tracked: the client's {passes} forward pass(es) are assumed, not checked")
        if layer.momentum is None and f"{name}.num_batches_tracked" not in payload.global_weights:
            raise InvalidParameterError(f"BatchNorm layer {name!r} keeps a cumulative average (momentum None), and the global "
                                        "model carries no num_batches_tracked to weight the client's statistics with")
        tracked = int(model.buffers.get(f"{name}.num_batches_tracked", torch.tensor(0)))
        factors = _momentum_factors(layer, tracked, passes)
        keep = 1.0
        for m in factors:
            keep *= 1 - m
        if keep >= 1.0:
            raise InvalidParameterError(f"BatchNorm layer {name!r} has momentum 0: its buffers reveal nothing")
        layer_weights = [m / (1 - keep) for m in factors]
        for k in range(passes):
            for m in factors[k + 1:]:
                layer_weights[k] *= 1 - m
        if weights is None:
            weights, first_layer = layer_weights, name
        elif any(abs(a - b) > 1e-12 for a, b in zip(weights, layer_weights, strict=True)):
            raise InvalidParameterError(f"BatchNorm layers {first_layer!r} and {name!r} weight the client's forward passes "
                                        "differently (different momentum): bn_stats=update needs one momentum for every layer")
        out = []
        for kind in ("running_mean", "running_var"):
            key = f"{name}.{kind}"
            if key not in payload.buffer_update:
                raise InvalidParameterError(f"the release carries no change of {key!r}")
            start = model.buffers[key]
            after = start + payload.buffer_update[key].to(start.device, start.dtype)
            out.append((after - keep * start) / (1 - keep))
        names.append(name)
        means.append(out[0])
        variances.append(out[1])
    assert weights is not None
    per_slice: dict[tuple[int | None, int | None], float] = {}
    for k, w in enumerate(weights):
        batch = slices[k % len(slices)]
        per_slice[(batch.start, batch.stop)] = per_slice.get((batch.start, batch.stop), 0.0) + w
    candidate_batches = tuple((slice(a, b), w) for (a, b), w in per_slice.items())
    return BatchNormTarget("update", tuple(names), tuple(means), tuple(variances), candidate_batches, passes, tuple(notes))


def bn_target(source: str, payload: InversionPayload, model: FunctionalModel) -> BatchNormTarget:
    """The target statistics from ``source`` (``update`` or ``running``), on the model's device and dtype."""
    if source == "update":
        target = target_from_update(payload, model)
    elif source == "running":
        target = target_from_running(model)
    else:
        raise InvalidParameterError(f"unknown bn_stats {source!r}; choose one of: {', '.join(BN_STATS_SOURCES)}")
    cast = tuple(t.to(model.device, model.dtype) for t in target.means), tuple(t.to(model.device, model.dtype) for t in target.variances)
    return replace(target, means=cast[0], variances=cast[1])


def bn_prior(model: FunctionalModel, params: ParamDict, candidates: torch.Tensor, target: BatchNormTarget,
             statistics: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """R_BN(x̂) = Σ_l ‖μ_l(x̂) − μ_l‖₂ + ‖σ²_l(x̂) − σ²_l‖₂ (the form of GradInversion's R_BN and DeepInversion's R_feature).

    The candidates' statistics are taken at ``params`` (the global weights) as ``target.candidate_batches`` says.
    ``statistics`` overrides the target's tensors (``target.tensors()``'s keys; lanes of a batched attack pass theirs).
    """
    wanted = target.tensors() if statistics is None else statistics
    total = candidates.new_zeros(())
    mixed: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for batch, weight in target.candidate_batches:
        with capture_batch_norm_inputs(model.module) as captured:
            model(params, candidates[batch])
        for name in target.layers:
            mean, var = channel_statistics(captured[name][0])
            if name in mixed:
                mixed[name] = (mixed[name][0] + weight * mean, mixed[name][1] + weight * var)
            else:
                mixed[name] = (weight * mean, weight * var)
    for name in target.layers:
        mean, var = mixed[name]
        total = total + torch.linalg.vector_norm(mean - wanted[f"mean:{name}"]) + torch.linalg.vector_norm(var - wanted[f"var:{name}"])
    return total
