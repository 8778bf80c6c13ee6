"""Imprint attack: a malicious server modifies the model so that one update separates many images.

Fowl, Geiping, Czaja, Goldblum, Goldstein, "Robbing the Fed: Directly Obtaining Private Data in Federated
Learning with Modified Models", ICLR 2022, §3. Threat model: the server is **malicious** — it prepends an
imprint block (:mod:`attacks.inversion.imprint_block`) to the model it sends, and the client computes its
ordinary update on that modified model. The attacker is the same server: it knows the block it designed.

Recovery (the paper's bin-difference formula). With mean loss over a batch of B examples, bin i of the
encoder (hᵢ = ReLU(⟨m, x⟩ − cᵢ)) receives

    ∂L/∂Wᵢ = (1/B) Σ_{j : sⱼ > cᵢ} aⱼ xⱼ,      ∂L/∂bᵢ = (1/B) Σ_{j : sⱼ > cᵢ} aⱼ,

where sⱼ = ⟨m, xⱼ⟩ and aⱼ = ⟨v, ∂ℓⱼ/∂out⟩ is the same for every bin (the decoder's columns are equal). With
the bins sorted by threshold, consecutive differences keep the examples of one interval (cᵢ, cᵢ₊₁]:

    x̂ᵢ = (∂L/∂Wᵢ − ∂L/∂Wᵢ₊₁) / (∂L/∂bᵢ − ∂L/∂bᵢ₊₁)      (the last bin: ∂L/∂W_k / ∂L/∂b_k),

which equals xⱼ exactly when example j is alone in its interval, and the aⱼ-weighted mean of the
examples when several share it (a mixed row). Intervals with no example give a zero bias difference.

What the attacker can tell: the number N of bins with a bias difference above its signal threshold
(``bins_with_images``; the threshold is the larger of a float32 rounding floor — a few ulps of the numbers the
difference is taken of — and ``min_signal`` times the median of the B strongest such bins, so one outlier bin
does not hide the others; ``bins_below_threshold`` counts the non-zero bins discarded). With fixed bins (one
local step, or a FedSGD gradient) N ≤ B examples in N non-empty bins leave at least 2N − B of them alone
(``examples_separated``, a guaranteed count; all B when N = B). With several local steps the bins move while
the client trains — an example crossing a threshold lights two intervals — so N no longer bounds anything and
``examples_separated`` is ``None`` (``examples_separated_reason`` says why). Equal-mass bins separate
B·(1 − 1/k)^{B−1} examples on average (``expected_separated``). A row outside the data range is certainly
mixed (a lone image's row is the image; weights aⱼ of both signs push a mixture out;
``rows_outside_data_range``). When N < B the B − N missing reconstructions are the mean of the in-range rows
(``reconstructions_filled``). The experiment records the ground truth separately
(:meth:`ImprintDesign.occupancy`, and how many images have a row ≥ 40 dB anywhere among the reconstructions):
the scoring's minimum-total-MSE matching can still pair a lone image's exact row with another image.

Several local steps (a parameter delta θ_K − θ₀ instead of a gradient): the difference ratio still gives
xⱼ for a lone example as long as no example changes interval during local training (the per-step aⱼ
cancel); but the encoder's rows and biases move with every step, examples near a threshold change bin and
their rows mix, so recovery degrades with the learning rate and the steps. A float32 delta must also
resolve the block's update against its weights (rounding ~ulp(λcᵢ)); hence the small default
``encoder_scale`` λ = 1e-4. With λ = 1 the bias change of a one-step delta (lfw, 8 images, 128 bins, lr 0.01,
seed 0) is at most about one ulp of the bias: a threshold relative to the largest bin still counted 7 bins,
but 0/8 rows reached 40 dB; such a result is flagged ``approximate`` (no bin's change exceeds
``RESOLVABLE_FLOORS`` rounding floors, or no candidate row lies in the data range). So a one-step parameter delta is exact only when the encoder scale keeps
the bins' float32 change resolvable; a FedSGD gradient has no such limit. Several-step figures:
``reports/bench/imprint.md`` (``benchmarks/bench_imprint.py``).

An update computed on an unmodified model has no block and is refused with one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .base import InversionAttack
from .functional_model import FunctionalModel
from .imprint_block import (
    BLOCK,
    DISTRIBUTIONS,
    STATISTICS,
    ImprintDesign,
    ImprintedFactory,
    design_imprint,
    find_imprint_block,
)
from .labels import labels_or_reason
from .threat_model import DataSpec, InversionPayload, InversionResult, ModelFactory

#: What the result records as the server's behaviour.
MALICIOUS_SERVER = "malicious-server (model modified: imprint block prepended)"
MAX_BINS = 65536


@dataclass(frozen=True)
class ImprintConfig:
    """``bins``: k, the encoder's width; ``statistic``: ``brightness`` or ``random`` (the measurement m);
    ``distribution``: how the server estimates the statistic's quantiles from public data (``gaussian`` —
    mean and std, the paper's assumption — or ``empirical``); ``output_scale``: ‖v‖·k, the size of the
    block's shift of the input; ``encoder_scale``: λ, the size of the encoder's weights and biases (the
    bins are the same for every λ; a small λ makes a float32 parameter delta resolve the bins' update, see
    :func:`~attacks.inversion.imprint_block.design_imprint`); ``min_signal``: bins whose bias difference is below
    this fraction of the median of the B strongest bins (B examples; see :func:`signal_threshold`) count as
    empty; ``label_strategy``: as in :func:`attacks.inversion.labels.infer_labels`."""

    bins: int = 128
    statistic: str = "brightness"
    distribution: str = "gaussian"
    output_scale: float = 1.0
    encoder_scale: float = 1e-4
    min_signal: float = 1e-4
    label_strategy: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.bins, bool) or not isinstance(self.bins, int) or not 2 <= self.bins <= MAX_BINS:
            raise InvalidParameterError(f"imprint bins must be an integer in [2, {MAX_BINS}], got {self.bins!r}")
        if self.statistic not in STATISTICS:
            raise InvalidParameterError(f"unknown imprint statistic {self.statistic!r}; choose one of: {', '.join(STATISTICS)}")
        if self.distribution not in DISTRIBUTIONS:
            raise InvalidParameterError(
                f"unknown imprint distribution {self.distribution!r}; choose one of: {', '.join(DISTRIBUTIONS)}"
            )
        if not (isinstance(self.output_scale, int | float) and math.isfinite(self.output_scale) and self.output_scale > 0):
            raise InvalidParameterError(f"imprint output_scale must be positive and finite, got {self.output_scale!r}")
        if not (isinstance(self.encoder_scale, int | float) and math.isfinite(self.encoder_scale) and self.encoder_scale > 0):
            raise InvalidParameterError(f"imprint encoder_scale must be positive and finite, got {self.encoder_scale!r}")
        if not (isinstance(self.min_signal, int | float) and 0 <= self.min_signal < 1):
            raise InvalidParameterError(f"imprint min_signal must lie in [0, 1), got {self.min_signal!r}")


@dataclass(frozen=True)
class ServerModification:
    """The modified model the server sends: architecture factory, weights, and the block's design."""

    factory: ModelFactory
    weights: dict[str, torch.Tensor]
    design: ImprintDesign
    behaviour: str = MALICIOUS_SERVER

    def describe(self) -> dict[str, Any]:
        return {"behaviour": self.behaviour, **self.design.describe()}


def bin_differences(weight_grad: torch.Tensor, bias_grad: torch.Tensor, thresholds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per interval (bins sorted by threshold): ∂Wᵢ − ∂Wᵢ₊₁ and ∂bᵢ − ∂bᵢ₊₁ (the last bin as is)."""
    order = torch.argsort(thresholds)
    w, b = weight_grad[order], bias_grad[order]
    dw = torch.cat([w[:-1] - w[1:], w[-1:]])
    db = torch.cat([b[:-1] - b[1:], b[-1:]])
    return dw, db


def expected_separated(batch: int, bins: int) -> float:
    """B·(1 − 1/k)^{B−1}: examples expected alone in one of k equal-mass bins (uniform bin choice)."""
    return batch * (1.0 - 1.0 / bins) ** (batch - 1)


def in_data_range(rows: torch.Tensor, data: DataSpec, tolerance: float = 1e-3) -> torch.Tensor:
    """Which candidate rows lie in the data range (up to ``tolerance`` of its width): a lone image always does."""
    low, high = (t.expand(1, *data.shape).reshape(1, -1).to(rows) for t in data.box(rows.device))
    slack = tolerance * (high - low)
    return ((rows >= low - slack) & (rows <= high + slack)).all(dim=1)


def fill_rows(candidates: torch.Tensor, inside: torch.Tensor, data: DataSpec, count: int) -> torch.Tensor:
    """``count`` guesses for examples that share a bin: the mean of the in-range candidates (else mid-range).

    A mean image lies close to every image, which makes it less likely than a repeated row that the scoring's
    one-to-one matching (minimum total MSE) hands a lone image's exact row to an example of a mixed bin; it does
    not rule it out: on lfw, 16 images, 32 bins, FedSGD, in each of seeds 2 and 3, 10 images have an exact row among the
    reconstructions and 9 keep it after matching (``server_ground_truth`` in the experiment records both).
    """
    if bool(inside.any()):
        guess = candidates[inside].mean(dim=0)
    else:
        low, high = (t.expand(1, *data.shape).reshape(-1).to(candidates) for t in data.box(candidates.device))
        guess = (low + high) / 2
    return guess.expand(count, -1).clone()


#: Float32 ulps per local step below which a bias difference is indistinguishable from rounding.
ROUNDING_ULPS = 16
#: A one-step delta whose strongest bin changes by less than this many rounding floors is not resolvable.
RESOLVABLE_FLOORS = 1e3


def rounding_floor(bias: torch.Tensor, bias_update: torch.Tensor, thresholds: torch.Tensor, *, delta: bool,
                   local_steps: int) -> torch.Tensor:
    """Per interval (bins sorted as in :func:`bin_differences`): the float32 rounding floor of its bias difference.

    A released float32 number x carries an error of order ulp(x) = eps·|x|; a parameter delta θ_K − θ₀ is
    rounded at the size of the parameters, a gradient at its own size. The floor is ``ROUNDING_ULPS`` · K ·
    eps · the largest magnitude entering the difference of bins i and i + 1.
    """
    order = torch.argsort(thresholds)
    size = torch.maximum(bias.abs(), (bias + bias_update).abs()) if delta else bias_update.abs()
    size = size[order]
    pair = torch.cat([torch.maximum(size[:-1], size[1:]), size[-1:]])
    return ROUNDING_ULPS * local_steps * torch.finfo(torch.float32).eps * pair


def signal_threshold(strength: torch.Tensor, floor: torch.Tensor, count: int, min_signal: float) -> torch.Tensor:
    """Which intervals count as holding examples: strength above the rounding ``floor`` and above ``min_signal``
    times the median of the ``count`` strongest bins that clear the floor (at most B bins carry examples, so one
    outlier bin cannot set the scale for the rest)."""
    above = strength > floor
    if not bool(above.any()):
        return above
    top = torch.sort(strength[above], descending=True).values[:count]
    return above & (strength > min_signal * top.median())


class ImprintAttack(InversionAttack):
    """Malicious-server imprint attack (module docstring): the server designs the block, then reads the bins."""

    name: ClassVar[str] = "imprint"
    description: ClassVar[str] = "malicious server: imprint block prepended to the model, images read off its bins (Fowl et al. 2022)"
    config_class: ClassVar[type] = ImprintConfig

    def __init__(self, config: ImprintConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or ImprintConfig(), device)

    def modify_model(
        self, factory: ModelFactory, weights: dict[str, torch.Tensor], data: DataSpec, public_inputs: torch.Tensor, *, seed: int = 0
    ) -> ServerModification:
        """The server's step before the round: the imprinted architecture and weights (public data → thresholds)."""
        cfg: ImprintConfig = self.config
        design = design_imprint(data, public_inputs, bins=cfg.bins, statistic=cfg.statistic, distribution=cfg.distribution,
                                output_scale=cfg.output_scale, encoder_scale=cfg.encoder_scale, seed=seed)
        return ServerModification(ImprintedFactory(factory, data.shape, cfg.bins), design.weights(weights), design)

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        cfg: ImprintConfig = self.config
        found = find_imprint_block(model.module)
        if found is None:
            raise InvalidParameterError(
                "the imprint attack needs an update computed on the server's modified model (an imprint block); "
                "this model has none, so the server did not modify it"
            )
        prefix, block = found
        weight_name, bias_name = f"{prefix}.encoder.weight", f"{prefix}.encoder.bias"
        for name in (weight_name, bias_name):
            if name not in payload.update:
                raise InvalidParameterError(f"the released update lacks the imprint block's {name!r}")
        weight_grad = payload.update[weight_name].detach().to(self.device, torch.float64)
        bias_grad = payload.update[bias_name].detach().to(self.device, torch.float64)
        thresholds = -model.params[bias_name].detach().to(self.device, torch.float64)
        dw, db = bin_differences(weight_grad, bias_grad, thresholds)
        strength = db.abs()
        if not strength.max() > 0:
            raise InvalidParameterError("the imprint block's bias update is zero: no example reached a bin")
        knowledge = payload.knowledge
        steps, delta = knowledge.local_steps, knowledge.update_kind == "delta"
        floor = rounding_floor(-thresholds, bias_grad, thresholds, delta=delta, local_steps=steps)
        count = knowledge.num_examples
        kept = signal_threshold(strength, floor, count, cfg.min_signal)
        nonempty = torch.nonzero(kept).flatten()
        ranked = nonempty[torch.argsort(strength[nonempty], descending=True)]
        candidates = dw[ranked[:count]] / db[ranked[:count], None]
        inside = in_data_range(candidates, payload.data)
        filled = count - len(candidates)
        if filled:
            candidates = torch.cat([candidates, fill_rows(candidates, inside, payload.data, filled)])
        x = candidates.reshape(count, *payload.data.shape).to(torch.float32)
        with_images = len(ranked)
        notes: dict[str, Any] = {
            "threat_model": {"server": MALICIOUS_SERVER, **knowledge.to_dict()},
            "imprint_block": prefix or BLOCK,
            "bins": int(block.encoder.out_features),
            "bins_with_images": with_images,
            "bins_below_threshold": int(((strength > 0) & ~kept).sum()),
            # fixed bins, N ≤ B non-empty: at least 2N − B hold one example; N > B breaks the premise, nothing is proven
            "examples_separated": max(0, 2 * with_images - count) if with_images <= count else 0,
            "expected_separated": expected_separated(count, int(block.encoder.out_features)),
            "rows_outside_data_range": int((~inside).sum()),
            "reconstructions_filled": filled,
            "labels_paired": count == 1,
        }
        if with_images > count:
            notes["more_bins_than_examples"] = (
                f"{with_images} non-empty bins for {count} examples (bins drifted during local training, or min_signal is "
                "too low): the strongest are used"
            )
        approximate = []
        if steps > 1:
            notes["examples_separated"] = None
            notes["examples_separated_reason"] = "not provable: the bins move during local training"
            approximate.append("multi-step update: bins drift during local training, the bin difference is not exact")
        if delta and not bool((strength > RESOLVABLE_FLOORS * floor).any()):
            approximate.append("the bins' float32 change is not resolvable at this encoder_scale (rows are rounding noise)")
        if not bool(inside[: with_images].any()):
            approximate.append("no candidate row lies in the data range")
        if approximate:
            notes["approximate"] = "; ".join(approximate)
        labels, notes["label_strategy"] = labels_or_reason(payload, model, generator, cfg.label_strategy)
        return InversionResult(attack=self.name, images=x.detach().cpu(), labels=None if labels is None else labels.cpu(),
                               settings=notes)
