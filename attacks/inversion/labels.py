"""Label inference from the last layer's update.

For softmax cross-entropy the gradient of the logit layer's bias over a batch of B examples is
∂L/∂b_c = p̄_c − n_c/B, where p̄_c is the batch-mean softmax probability of class c and n_c the number
of examples labelled c; the weight gradient's row c is Σ_j (p_jc − y_jc) h_jᵀ / B.

* :func:`idlg_label` — one example (Zhao, Mopuri, Bilen, "iDLG", 2020): the only negative entry of the bias
  gradient (or, without a bias, of the row sums of the weight gradient, which needs non-negative
  features h, e.g. after ReLU or sigmoid) is the true class.
* :func:`bias_corrected_counts` — small batches: n_c ≈ B·(p̄_c − ∂L/∂b_c), with p̄ estimated by the
  attacker from the global model's mean softmax on dummy inputs drawn uniformly from the data range (the
  correction of the softmax term follows Geng et al., "Towards General Deep Leakage in Federated
  Learning", 2021). Counts are made non-negative, every class with a negative bias gradient gets at
  least one example (such a class must be present, Wainakh et al. 2022), and the total is rounded to B
  by largest remainders. Without a bias the same estimate uses row sums of the weight gradient divided by
  the mean feature sum on the dummy inputs.

For a parameter delta after K local SGD steps of size η the attacker uses −Δ/(ηK) as the gradient
estimate (exact for K = 1; for K > 1 an average over the trajectory, so counts are approximate).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

from .functional_model import FunctionalModel
from .model_probe import LayerCall, capture_layer_input, trace_parameterised_layers
from .threat_model import InversionPayload


@dataclass(frozen=True)
class LogitLayer:
    """The linear layer producing the logits and the released update's entries for it."""

    call: LayerCall
    weight_grad: torch.Tensor
    bias_grad: torch.Tensor | None


def uniform_in_box(payload: InversionPayload, count: int, generator: torch.Generator, model: FunctionalModel) -> torch.Tensor:
    """``count`` inputs drawn uniformly from the data range (model space), in the model's device and dtype."""
    low, high = payload.data.box(model.device)
    u = torch.rand((count, *payload.data.shape), generator=generator, device=model.device, dtype=model.dtype)
    return low.to(model.dtype) + (high - low).to(model.dtype) * u


def probe_pair(payload: InversionPayload, generator: torch.Generator, model: FunctionalModel) -> torch.Tensor:
    """Two probe inputs for tracing the model: one uniform draw and its reflection in the data box.

    Two, because BatchNorm in train mode (:mod:`attacks.inversion.functional_model`) needs more than one value per
    channel; one draw, so the generator advances as for a single probe.
    """
    probe = uniform_in_box(payload, 1, generator, model)
    low, high = payload.data.box(model.device)
    return torch.cat([probe, low.to(model.dtype) + high.to(model.dtype) - probe])


def gradient_estimate(payload: InversionPayload, name: str) -> torch.Tensor:
    """The released update of one parameter turned into a loss-gradient estimate (sign and scale)."""
    value = payload.update[name].detach().to(torch.float32)
    knowledge = payload.knowledge
    if knowledge.update_kind == "gradient":
        return value
    assert knowledge.lr is not None
    return -value / (knowledge.lr * knowledge.local_steps)


def find_logit_layer(payload: InversionPayload, model: FunctionalModel, probe: torch.Tensor) -> LogitLayer:
    """The last executed parameterised layer; it must be ``nn.Linear`` with ``num_classes`` outputs."""
    calls = trace_parameterised_layers(model, probe)
    if not calls:
        raise InvalidParameterError("the model has no trainable layers to infer labels from")
    last = calls[-1]
    if not isinstance(last.module, nn.Linear) or last.module.out_features != payload.data.num_classes:
        raise InvalidParameterError(
            f"label inference needs a final nn.Linear with {payload.data.num_classes} outputs; "
            f"the last trainable layer is {type(last.module).__name__} ({last.name or 'root'})"
        )
    weight_name = last.parameter_name("weight")
    bias_name = last.parameter_name("bias") if last.module.bias is not None else None
    if weight_name not in payload.update:
        raise InvalidParameterError(f"the released update lacks the logit layer's weight {weight_name!r}")
    bias = gradient_estimate(payload, bias_name) if bias_name is not None and bias_name in payload.update else None
    return LogitLayer(last, gradient_estimate(payload, weight_name), bias)


def idlg_label(layer: LogitLayer) -> int:
    """iDLG: the class whose bias-gradient entry (or weight-row sum) is smallest, i.e. negative."""
    scores = layer.bias_grad if layer.bias_grad is not None else layer.weight_grad.sum(dim=1)
    return int(torch.argmin(scores).item())


def round_counts(estimate: torch.Tensor, total: int, required: torch.Tensor) -> torch.Tensor:
    """Non-negative integer counts summing to ``total``: at least 1 where ``required``, the rest by
    largest remainder of ``estimate`` (ties broken by class index)."""
    if int(required.sum()) > total:
        raise InvalidParameterError(f"{int(required.sum())} classes are required but the total is only {total}")
    est = estimate.clamp(min=0.0).to(torch.float64)
    counts = torch.floor(est).to(torch.int64)
    counts = torch.maximum(counts, required.to(torch.int64))
    while int(counts.sum()) > total:
        # Remove from the class with the most surplus over its estimate (never below the required 1).
        surplus = counts.to(torch.float64) - est
        surplus[counts <= required.to(torch.int64)] = -float("inf")
        counts[int(torch.argmax(surplus))] -= 1
    while int(counts.sum()) < total:
        deficit = est - counts.to(torch.float64)
        counts[int(torch.argmax(deficit))] += 1
    return counts


def bias_corrected_counts(
    payload: InversionPayload,
    model: FunctionalModel,
    layer: LogitLayer,
    generator: torch.Generator,
    dummy_examples: int = 64,
) -> torch.Tensor:
    """Estimated number of examples per class (see the module docstring)."""
    batch = payload.knowledge.num_examples
    device = model.device
    dummy = uniform_in_box(payload, dummy_examples, generator, model)
    with torch.no_grad():
        probs = torch.softmax(model(model.params, dummy), dim=-1).mean(dim=0).to(torch.float32)
    if layer.bias_grad is not None:
        observed = layer.bias_grad.to(device)
        estimate = batch * (probs - observed)
    else:
        features = capture_layer_input(model, layer.call.module, dummy)
        feature_sum = features.reshape(dummy_examples, -1).sum(dim=1).mean()
        if not feature_sum > 0:
            raise InvalidParameterError(
                "label counts without a logit bias need non-negative features before the last layer"
            )
        observed = layer.weight_grad.to(device).sum(dim=1) / feature_sum
        estimate = batch * (probs - observed)
    observed = observed.cpu()
    required = observed < 0
    if int(required.sum()) > batch:
        # Noise or multi-step drift: keep the ``batch`` most negative entries as certainly present.
        required = torch.zeros_like(required)
        required[torch.argsort(observed)[:batch]] = True
    return round_counts(estimate.cpu(), batch, required)


def infer_labels(
    payload: InversionPayload,
    model: FunctionalModel,
    generator: torch.Generator,
    strategy: str = "auto",
) -> tuple[torch.Tensor, str]:
    """Labels for the attacked examples and the name of the rule used.

    ``strategy``: ``"given"`` (the payload's labels; fails if none leaked), ``"idlg"`` (one example),
    ``"bias-corrected"`` (counts), or ``"auto"`` (given labels if known, else iDLG for one example and
    bias-corrected counts for a batch). Returned labels are sorted by class for batches (reconstructions
    are an unordered set; metrics match them to the ground truth afterwards).
    """
    known = payload.knowledge.labels
    if strategy not in ("auto", "given", "idlg", "bias-corrected"):
        raise InvalidParameterError(
            f"unknown label strategy {strategy!r}; choose one of: auto, given, idlg, bias-corrected"
        )
    device = model.device
    if strategy == "given" or (strategy == "auto" and known is not None):
        if known is None:
            raise InvalidParameterError("label strategy 'given' needs labels in the attacker's knowledge")
        return torch.tensor(known, dtype=torch.int64, device=device), "given"
    probe = probe_pair(payload, generator, model)
    layer = find_logit_layer(payload, model, probe)
    batch = payload.knowledge.num_examples
    if strategy == "idlg" or (strategy == "auto" and batch == 1):
        if batch != 1:
            raise InvalidParameterError(f"iDLG infers the label of one example, the update has {batch}")
        return torch.tensor([idlg_label(layer)], dtype=torch.int64, device=device), "idlg"
    counts = bias_corrected_counts(payload, model, layer, generator)
    labels = torch.repeat_interleave(torch.arange(len(counts)), counts)
    return labels.to(device), "bias-corrected"


def labels_or_reason(
    payload: InversionPayload, model: FunctionalModel, generator: torch.Generator, strategy: str
) -> tuple[torch.Tensor | None, str]:
    """:func:`infer_labels`, or ``None`` with the reason as the rule (``"none (…)"``) where the update does not
    reveal them — for attacks whose images stand without labels (analytic, imprint)."""
    try:
        return infer_labels(payload, model, generator, strategy)
    except InvalidParameterError as exc:
        return None, f"none ({exc})"
