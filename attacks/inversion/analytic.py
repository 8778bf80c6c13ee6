"""Analytic recovery of the input of a fully connected first layer from its gradient.

For a layer z ↦ Wz + b whose input z is the (flattened) data, the per-example gradients are
∂ℓ/∂W = δ zᵀ and ∂ℓ/∂b = δ with δ = ∂ℓ/∂(Wz + b). Hence row i of ∂W divided by ∂b_i is z whenever
∂b_i ≠ 0 (Phong et al. 2018, "Privacy-preserving deep learning via additively homomorphic encryption",
§3; Geiping et al. 2020 §4 "any fully connected input is recoverable"). Any single-step update (a
gradient, or −η × gradient) gives the same ratio, so one-step FedAvg deltas are covered too.

What is recoverable:

* **One example** — exact: every row with ∂b_i ≠ 0 holds z; this module uses the least-squares
  combination of all rows, Σ_i ∂b_i ∂W_i / Σ_i ∂b_i².
* **A batch of B** (mean loss) — row i gives Σ_j δ_ji z_j / Σ_j δ_ji, a weighted mix of the examples
  whose δ_ji ≠ 0. A row is *pure* (exactly one example) when the layer is followed by a ReLU that is
  active for only one example at unit i. Two pure rows of the same example give identical candidates,
  while mixed rows almost never coincide; so identical candidates are grouped and each group of ≥ 2 rows
  is reported as one recovered example (exact). With no such sparsity (e.g. the FC layer is the logit
  layer, or sigmoid/tanh/LeakyReLU follows it) rows are mixtures and only B = 1 is exact; the result
  records how many examples were separated and fills the rest with the strongest remaining rows.
* **More than one local step** — the ratio no longer cancels exactly; the recovery is approximate.

Transformation layer (PrivateFL's personalised "layer zero", x ↦ α⊙x + β before the FC layer; Yang et
al., USENIX Security 2023 §4): the attack probes the map from the input to the FC layer with the
attacker's copy of the model. If it is elementwise affine, z is mapped back with x = (z − β)/α using
the α, β the attacker holds. When the client keeps α, β private (they are absent from the global
weights), the attacker's copy has the architecture's initial values (identity for PrivateFL), so the
output is the transformed input α⊙x + β itself, off by the client's unknown per-channel scale and
per-pixel offset; the result lists those parameters as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

from .base import InversionAttack
from .functional_model import FunctionalModel
from .labels import labels_or_reason, probe_pair
from .limits import finite
from .model_probe import LayerCall, capture_layer_input, trace_parameterised_layers
from .threat_model import InversionPayload, InversionResult


@dataclass(frozen=True)
class AnalyticConfig:
    """``row_threshold``: rows with |∂b_i| below this fraction of the largest are ignored (no signal);
    ``match_tolerance``: relative distance under which two row candidates count as the same example;
    ``label_strategy``: how labels are obtained (see :func:`attacks.inversion.labels.infer_labels`)."""

    row_threshold: float = 1e-6
    match_tolerance: float = 1e-3
    label_strategy: str = "auto"

    def __post_init__(self) -> None:
        if not 0 <= self.row_threshold < 1:
            raise InvalidParameterError(f"row_threshold must lie in [0, 1), got {self.row_threshold}")
        finite("match_tolerance", self.match_tolerance, positive=True)


@dataclass(frozen=True)
class ElementwiseAffine:
    """z = α⊙x + β (flattened), as believed by the attacker."""

    alpha: torch.Tensor
    beta: torch.Tensor

    @property
    def is_identity(self) -> bool:
        return bool(torch.allclose(self.alpha, torch.ones_like(self.alpha)) and torch.allclose(self.beta, torch.zeros_like(self.beta)))

    def invert(self, z: torch.Tensor) -> torch.Tensor:
        safe = torch.where(self.alpha.abs() > 1e-12, self.alpha, torch.ones_like(self.alpha))
        return (z - self.beta) / safe


def first_fc_layer(model: FunctionalModel, probe: torch.Tensor) -> LayerCall:
    """The first parameterised layer that is a fully connected layer with bias, else a typed error.

    Parameterised layers before it are allowed only if, together, they act elementwise on the input
    (checked by :func:`probe_input_map`); a convolution or another layer type first is rejected.
    """
    calls = trace_parameterised_layers(model, probe)
    if not calls:
        raise InvalidParameterError("analytic recovery needs a model with trainable layers")
    for call in calls:
        if isinstance(call.module, nn.Linear):
            if call.module.bias is None:
                raise InvalidParameterError(
                    f"analytic recovery needs a bias in the first fully connected layer ({call.name or 'root'} has none)"
                )
            return call
        if isinstance(call.module, nn.modules.conv._ConvNd | nn.RNNBase | nn.Embedding | nn.MultiheadAttention):
            break
    raise InvalidParameterError(
        f"analytic recovery needs a fully connected first layer with bias; the first trainable layer is "
        f"{type(calls[0].module).__name__} ({calls[0].name or 'root'})"
    )


def probe_input_map(
    model: FunctionalModel, layer: nn.Module, probe: torch.Tensor, tolerance: float = 1e-4
) -> ElementwiseAffine:
    """Identify z(x) = α⊙x + β between the input and ``layer`` from three probes, or raise.

    α = z(x + 1) − z(x), β = z(x) − α⊙x, checked on a third, independent input.
    """
    flat = probe.reshape(probe.shape[0], -1)
    z0 = capture_layer_input(model, layer, probe).reshape(probe.shape[0], -1)
    if z0.shape != flat.shape:
        raise InvalidParameterError(
            "analytic recovery needs the data to reach the first fully connected layer elementwise; "
            f"the layer sees {z0.shape[1]} features for {flat.shape[1]} input values"
        )
    z1 = capture_layer_input(model, layer, probe + 1.0).reshape(probe.shape[0], -1)
    alpha = (z1 - z0)[0]
    beta = z0[0] - alpha * flat[0]
    check = -0.5 * probe + 0.25
    zc = capture_layer_input(model, layer, check).reshape(probe.shape[0], -1)[0]
    predicted = alpha * check.reshape(probe.shape[0], -1)[0] + beta
    scale = zc.abs().max().clamp(min=1.0)
    if not torch.all((zc - predicted).abs() <= tolerance * scale):
        raise InvalidParameterError(
            "analytic recovery needs the input to reach the first fully connected layer through an "
            "elementwise affine map (identity or a transformation layer x ↦ α⊙x + β); this model's map is not"
        )
    return ElementwiseAffine(alpha=alpha, beta=beta)


def least_squares_input(weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> torch.Tensor:
    """Σ_i ∂b_i ∂W_i / Σ_i ∂b_i² — the input when all rows are pure for one example."""
    return (bias_grad[:, None] * weight_grad).sum(dim=0) / (bias_grad**2).sum()


def separate_batch(
    weight_grad: torch.Tensor, bias_grad: torch.Tensor, count: int, tolerance: float, threshold: float
) -> tuple[torch.Tensor, list[bool]]:
    """Group rows whose candidates ∂W_i/∂b_i coincide; return ``count`` inputs and which rest on agreeing rows.

    Rows are scanned by decreasing |∂b_i|; a row joins the first group whose representative is within
    ``tolerance`` (relative L2), else starts a group. Groups of ≥ 2 rows (pure rows) come first, largest
    first; if fewer than ``count`` exist, the strongest single rows fill the rest (flagged ``False``). Agreeing rows
    are what a lone example produces, but examples that always activate the same units together produce agreeing
    rows too (their fixed mixture): the flag is evidence of separation, not proof.
    """
    strength = bias_grad.abs()
    active = torch.nonzero(strength > threshold * strength.max()).flatten()
    order = active[torch.argsort(strength[active], descending=True)]
    candidates = weight_grad[order] / bias_grad[order, None]
    groups: list[list[int]] = []
    representatives: list[torch.Tensor] = []
    for position in range(len(order)):
        candidate = candidates[position]
        for group, rep in zip(groups, representatives, strict=True):
            if torch.linalg.vector_norm(candidate - rep) <= tolerance * torch.linalg.vector_norm(rep).clamp(min=1e-12):
                group.append(position)
                break
        else:
            groups.append([position])
            representatives.append(candidate)
    ranked = sorted(range(len(groups)), key=lambda g: (len(groups[g]) < 2, -len(groups[g]), groups[g][0]))
    chosen = ranked[:count]
    inputs, exact = [], []
    for g in chosen:
        rows = order[groups[g]]
        inputs.append(least_squares_input(weight_grad[rows], bias_grad[rows]))
        exact.append(len(groups[g]) >= 2)
    while len(inputs) < count:  # fewer non-zero rows than examples: nothing more to recover
        inputs.append(torch.zeros_like(weight_grad[0]))
        exact.append(False)
    return torch.stack(inputs), exact


class AnalyticAttack(InversionAttack):
    """Closed-form recovery of the inputs of a fully connected first layer (module docstring)."""

    name: ClassVar[str] = "analytic"
    description: ClassVar[str] = "closed-form input recovery from a fully connected first layer with bias"
    config_class: ClassVar[type] = AnalyticConfig

    def __init__(self, config: AnalyticConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or AnalyticConfig(), device)

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        cfg: AnalyticConfig = self.config
        probe = probe_pair(payload, generator, model)  # two inputs: BatchNorm in train mode needs more than one
        layer = first_fc_layer(model, probe)
        weight_name, bias_name = layer.parameter_name("weight"), layer.parameter_name("bias")
        for name in (weight_name, bias_name):
            if name not in payload.update:
                raise InvalidParameterError(f"the released update lacks the first layer's {name!r}")
        input_map = probe_input_map(model, layer.module, probe)
        weight_grad = payload.update[weight_name].detach().to(self.device, torch.float64)
        bias_grad = payload.update[bias_name].detach().to(self.device, torch.float64)
        if not bias_grad.abs().max() > 0:
            raise InvalidParameterError("the first layer's bias update is zero: no example reaches the layer")
        count = payload.knowledge.num_examples
        if count == 1:
            z = least_squares_input(weight_grad, bias_grad)[None]
            exact = [True]
        else:
            z, exact = separate_batch(weight_grad, bias_grad, count, cfg.match_tolerance, cfg.row_threshold)
        x = input_map.invert(z.to(model.dtype)).reshape(count, *payload.data.shape).to(torch.float32)
        notes = {
            "first_layer": layer.name,
            "input_map": "identity" if input_map.is_identity else "elementwise-affine (inverted with the attacker's α, β)",
            # rows that agree are one example's input, or a fixed mixture of examples that always activate the same
            # units together: agreement is evidence of separation, not proof (the PSNR against the truth is the proof)
            "candidates_with_agreeing_rows": int(sum(exact)),
            "rows_agree": exact,
            "labels_paired": count == 1,
        }
        if payload.knowledge.local_steps > 1:
            notes["approximate"] = "multi-step update: the row ratio is not exact"
        labels, notes["label_strategy"] = labels_or_reason(payload, model, generator, cfg.label_strategy)
        return InversionResult(attack=self.name, images=x.detach().cpu(), labels=None if labels is None else labels.cpu(), settings=notes)
