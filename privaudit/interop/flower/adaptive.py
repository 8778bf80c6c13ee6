"""Flower's adaptive-clipping DP wrappers (flwr 1.42): their settings and the client-level privacy events of one round.

The algorithm is Andrew, Thakkar, McMahan & Ramaswamy 2021 ("Differentially private learning with adaptive clipping",
NeurIPS), Alg. 1 with the geometric clip update. What flwr 1.42 runs (``flwr/serverapp/strategy/dp_adaptive_clipping.py``,
``adaptiveclipping_mod`` in ``flwr/clientapp/mod/centraldp_mods.py``, ``flwr/supercore/differential_privacy.py``) per
round t with clip norm C_t, m = ``num_sampled_clients`` and the n updates that arrived, releases two things:

* **the noisy count** of the clipped updates: b_i = 1 when client i's update was longer than C_t (the server clips it,
  or ``adaptiveclipping_mod`` does and reports the bit), c̃ = Σ b_i + N(0, σ_b²), and the clip moves to
  C_{t+1} = C_t·exp(−η·(c̃/n − γ)). One client changes Σ b_i by at most 1;
* **the noisy mean** of the updates clipped to C_t, plus N(0, (z_Δ·C_{t+1}/m)²) per coordinate. Flower draws this noise
  *after* moving the clip norm, so its scale is C_{t+1}, not the C_t that bounded the updates (the paper, and
  tensorflow/privacy@0094fbb25aaa4a5f312cd7c6c95725d3ba9ff804:tensorflow_privacy/privacy/dp_query/quantile_adaptive_clip_sum_query.py,
  noise the sum at the clip it was clipped to and move the clip afterwards). On the sum of the n clipped updates, of
  sensitivity C_t, the noise multiplier is z₁ = z_Δ·(C_{t+1}/C_t)·n/m.

The wrapper is configured with a noise multiplier z and derives z_Δ = (z⁻² − (2σ_b)⁻²)^{-1/2} (Thm 1, with σ_b =
``clipped_count_stddev``, m/20 by default); it keeps z_Δ (``noise_multiplier``) and σ_b, from which z is read back.

**Events** (client-level, charged to ``server``; privaudit's :mod:`~privaudit.accounting.mechanisms`):

* *every node trains* (q = 1), add/remove neighbours: the mean is ``Gaussian(z₁)``, the count ``Gaussian(σ_b)``
  (sensitivity 1) — two events, whose composition is one Gaussian of multiplier (z₁⁻² + σ_b⁻²)^{-1/2}. Thm 1's
  combination (z₁⁻² + (2σ_b)⁻²)^{-1/2} = z holds under add/remove for *centred* bits b_i − ½
  (tensorflow/privacy@2f51adac89b6c6224d0b4b4d5455734fbb94c6d3:tensorflow_privacy/privacy/dp_query/quantile_estimator_query.py:
  sensitivity ½); for Flower's uncentred bits it holds only when the number of participants cannot change
  (replace-one neighbours, or the fixed-size sample below). With every node training an added client adds its bit,
  so a round is less private than the z the wrapper was configured with;
* *m of N nodes sampled* (Flower's ``random.sample``: fixed size, without replacement): both releases use the same
  sample, so they are **one** event — two events subsampled separately would assume independent samples. The sample
  always holds m clients and an added client displaces one, which moves the sum by at most 2C_t and the count by at
  most 1: in units of each release's noise the pair moves by at most ((2/z₁)² + σ_b⁻²)^{1/2} = 2/z_joint, with
  z_joint = (z₁⁻² + (2σ_b)⁻²)^{-1/2} — Thm 1's combination, exact here because the sample size is public.
  ``SubsampledGaussian(z_joint, q = m/N, fixed-size)``, whose dominating pair privaudit derives from that displacement
  (:mod:`privaudit.accounting.pairs`, fixed-size batches under add/remove);
* *only the count released* (the wrapped strategy aggregated nothing): ``Gaussian(σ_b)``, or
  ``SubsampledGaussian(2σ_b, q, fixed-size)``.

Each round's multiplier uses the realised ratio C_{t+1}/C_t, which this round's noisy count chose: the ledger
composes what ran, given those outputs (the noise scale is a post-processing of a release already accounted). It is
a reading of this run's schedule, not a bound fixed before the run (a privacy odometer in the sense of Rogers, Roth,
Ullman & Vadhan 2016, "Privacy odometers and filters: pay-as-you-go composition"): no bound on C_{t+1}/C_t exists in
advance, as the count's noise is unbounded.

As for fixed clipping, the mean's event is invalid with unequal client weights, when the wrapped strategy does not
aggregate by ``FedAvg.aggregate_train``, or (client-side clipping) when an update longer than C_t arrives.

Two more things flwr 1.42 does: with σ_b = m/20 by default its wrappers refuse z ≥ m/10; and they move the clip with
the fraction *clipped* in the paper's rule for the fraction *unclipped* (tensorflow/privacy's ``QuantileEstimatorQuery``
counts ``record <= estimate``), so C shrinks when most updates are clipped, the reverse of the paper's update — a
utility matter, except that a shrinking clip makes C_{t+1}/C_t < 1, so every such round is noised below its
configured scale.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian, Mechanism, Sampling, SubsampledGaussian

#: The two adaptive wrappers, by class name: the server clips, or the clients' ``adaptiveclipping_mod`` does.
SERVER_SIDE = "DifferentialPrivacyServerSideAdaptiveClipping"
CLIENT_SIDE = "DifferentialPrivacyClientSideAdaptiveClipping"


def configured_noise_multiplier(noise_multiplier: float, count_stddev: float) -> float:
    """The z a wrapper was configured with, from its z_Δ and σ_b: z = (z_Δ⁻² + (2σ_b)⁻²)^{-1/2} (Andrew et al. 2021,
    Thm 1, inverted); 0 when z_Δ = 0 (no noise)."""
    if noise_multiplier <= 0:
        return 0.0
    if count_stddev <= 0:
        return float(noise_multiplier)
    return (noise_multiplier ** -2 + (2.0 * count_stddev) ** -2) ** -0.5


@dataclass(frozen=True)
class FlowerAdaptiveDP:
    """The settings of a Flower adaptive-clipping wrapper, as it holds them (see the module docstring).

    ``noise_multiplier`` is z_Δ (Flower derives it from the configured z), ``count_stddev`` σ_b, ``initial_clipping_norm``
    the clip when the tap was built; the clip of each round is read from the wrapper as the run goes.
    """

    wrapper: str
    noise_multiplier: float
    count_stddev: float
    num_sampled_clients: int
    initial_clipping_norm: float
    target_clipped_quantile: float
    clip_norm_lr: float
    aggregator: str = "FedAvg"
    mean_aggregation: bool = True

    @property
    def configured_noise_multiplier(self) -> float:
        """z, the noise multiplier the wrapper was given."""
        return configured_noise_multiplier(self.noise_multiplier, self.count_stddev)

    @property
    def client_side(self) -> bool:
        """Whether the clients clip (``adaptiveclipping_mod``) and the server only checks what arrives."""
        return self.wrapper == CLIENT_SIDE

    @property
    def clipping_norm(self) -> None:
        """No single clip norm: C_t moves every round (each round's event states it). ``None``, so that a caller needing
        one C (the canary audit's default magnitude) asks for it."""
        return None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "configured_noise_multiplier": self.configured_noise_multiplier}


def _multiplier_or_reason(dp: FlowerAdaptiveDP, clip: float, next_clip: float, replied: int) -> tuple[float | None, str]:
    if dp.noise_multiplier <= 0:
        return None, f"{dp.wrapper} with noise multiplier 0: clipped but not noised"
    if not (math.isfinite(clip) and math.isfinite(next_clip) and clip > 0):
        return None, f"{dp.wrapper}'s clip norm left the positive numbers (C_t = {clip!r}, C_t+1 = {next_clip!r})"
    z = dp.noise_multiplier * (next_clip / clip) * replied / dp.num_sampled_clients
    if not z > 0:
        return None, f"{dp.wrapper} drew the mean's noise at C_t+1 = {next_clip:g}: no noise"
    return z, ""


@dataclass(frozen=True)
class AdaptiveRound:
    """What the tap saw of one round of a Flower adaptive-clipping wrapper.

    ``sampled`` of ``population`` nodes were asked, ``replied`` answered with aggregation ``weights``; ``clip`` is C_t
    (the norm the updates were clipped to, sent to the clients with client-side clipping), ``next_clip`` C_{t+1} (the
    wrapper's norm after its ``aggregate_train``: the mean's noise scale), ``count_released`` whether the wrapper drew
    its noisy count (it does whenever no reply is an error), ``mean_released`` whether a noised model came out,
    ``largest_norm`` the longest update that arrived (client-side clipping only).
    """

    round: int
    sampled: int
    population: int
    replied: int
    weights: list[float] | None
    clip: float
    next_clip: float
    count_released: bool
    mean_released: bool
    largest_norm: float | None = None


def adaptive_round_events(dp: FlowerAdaptiveDP, observed: AdaptiveRound) -> list[PrivacyEvent]:
    """The client-level events of one round of a Flower adaptive-clipping wrapper (see the module docstring)."""
    round_, sampled, population, replied = observed.round, observed.sampled, observed.population, observed.replied
    weights, clip, next_clip = observed.weights, observed.clip, observed.next_clip
    count_released, mean_released, largest_norm = observed.count_released, observed.mean_released, observed.largest_norm
    if replied == 0 or not (count_released or mean_released):
        return []
    z_mean = None
    if mean_released:
        z_mean, reason = _multiplier_or_reason(dp, clip, next_clip, replied)
        if z_mean is None:
            return [PrivacyEvent.no_guarantee(SERVER, round_, reason)]
    if count_released and dp.count_stddev <= 0:
        return [PrivacyEvent.no_guarantee(SERVER, round_, f"{dp.wrapper} counted the clipped updates without noise "
                                                          "(clipped_count_stddev = 0)")]
    q = sampled / population if population else 1.0
    sigma_b = dp.count_stddev
    site = "sent to the clients, whose adaptiveclipping_mod clips" if dp.client_side else "the server clips"
    mean_line = (f"Flower {dp.wrapper} mean release: updates clipped to C_t = {clip:.6g} ({site}), N(0, (z_Δ·C_t+1/m)²) "
                 f"added to their mean with z_Δ = {dp.noise_multiplier:.6g}, C_t+1 = {next_clip:.6g} (Flower moves the "
                 f"clip before it noises), m = {dp.num_sampled_clients}; {replied} update(s) arrived: multiplier "
                 f"z_Δ·(C_t+1/C_t)·{replied}/{dp.num_sampled_clients} = {z_mean:.6g} on their sum, of sensitivity C_t"
                 if z_mean is not None else "")
    count_line = (f"Flower {dp.wrapper} count release (adaptive clipping, Andrew et al. 2021): the number of updates "
                  f"longer than the round's C_t, uncentred, plus N(0, σ_b²) with σ_b = {sigma_b:g}; sensitivity 1 (an "
                  "added client adds its bit, 0 or 1)" if count_released else "")
    common = [
        f"the wrapper was configured with z = {dp.configured_noise_multiplier:.6g}, split into z_Δ on the mean and σ_b on "
        "the count by Andrew et al. 2021, Thm 1",
        "C_t+1/C_t was chosen by this round's noisy count: the ledger composes the realised schedule (post-processing "
        "of a release it accounts), a reading of this run rather than a bound fixed before it",
        "client-level add/remove neighbours (one client's whole data)",
    ]
    events: list[tuple[Mechanism, str, list[str]]] = []  # (mechanism, which release, its assumptions)
    if q >= 1:
        every = (f"every node trained ({sampled} of {population}): one Gaussian event per release; composed, a Gaussian "
                 "of multiplier (z₁⁻² + σ_b⁻²)^(-1/2), below Thm 1's z, which holds for centred bits")
        if z_mean is not None:
            events.append((Gaussian(z_mean), "mean", [mean_line, *common, every]))
        if count_released:
            events.append((Gaussian(sigma_b), "count", [count_line, *common, every]))
    else:
        inverse_square = (z_mean ** -2 if z_mean is not None else 0.0) + ((2.0 * sigma_b) ** -2 if count_released else 0.0)
        joint = inverse_square ** -0.5
        sampled_line = (
            f"{sampled} of {population} nodes sampled uniformly without replacement (Flower's sample_nodes), the same "
            "sample for the releases of the round: one event; an added client displaces a sampled one, moving the sum "
            f"by ≤ 2C_t and the count by ≤ 1, so the round is one fixed-size subsampled Gaussian of multiplier {joint:.6g}"
            " = (z₁⁻² + (2σ_b)⁻²)^(-1/2) (Thm 1's combination; the sample size is public)")
        fixed_m = (f"the sample size m = {dp.num_sampled_clients} is fixed and public (Flower derives it from the number "
                   "of connected nodes, which adding or removing one client could change; the fixed-size analysis "
                   "assumes it does not)")
        lines = [line for line in (mean_line, count_line) if line]
        events.append((SubsampledGaussian(joint, q, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT),
                       "mean" if z_mean is not None else "count", [*lines, *common, sampled_line, fixed_m]))
    failures = []
    if z_mean is not None:
        if not dp.mean_aggregation:
            failures.append(f"the wrapped strategy aggregates with {dp.aggregator}.aggregate_train, not FedAvg's mean: the "
                            "noise z_Δ·C/m is calibrated to the sensitivity of the mean of clipped updates only")
        if largest_norm is not None and largest_norm > clip * (1 + 1e-6):
            failures.append(f"an update of norm {largest_norm:.6g} > C_t = {clip:.6g} arrived: the clients did not clip "
                            "(add adaptiveclipping_mod to the ClientApp's mods)")
        if weights is None:
            failures.append("the clients' aggregation weights are unknown, so the mean's sensitivity C_t/n is not established")
        elif len(set(weights)) > 1:
            failures.append(f"the clients' aggregation weights differ ({min(weights):g}..{max(weights):g}): a client's "
                            "share of the weighted mean exceeds 1/n, so the noise is not calibrated to its sensitivity")
    note = "; ".join(failures)  # the mean's failures: the count's sensitivity holds whatever the weights
    return [PrivacyEvent(SERVER, round_, mechanism, 1, tuple(assumptions), valid=part != "mean" or not failures,
                         note=note if part == "mean" else "")
            for mechanism, part, assumptions in events]
