"""The seed papers' printed privacy bounds, each with the assumptions it rests on.

Every function returns a :class:`ClosedForm`: the value, the formula used, the assumptions (those that
hold and those that fail — failed assumptions are data, never exceptions), and where a numerical
accountant can check the same mechanism, the :class:`~privaudit.accounting.mechanisms.Composition`
to check it with. Sources: Upcycled-FL 000 Thm 5.2/5.3 and 003 Thm 6.2/6.3 (with osu-srml/Upcycled-FL@4dd7400:client/avg.py),
PrivateFL 001 §5 (BHui97/PrivateFL@39711e6:FedServer.py), PFA 004 Theorems 1–2 (Emory-AIMS/PFA@72b3f89:
common_utils/dpsgd_utils.py); the audit points (U…, P…, F…) are listed in the README.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from privaudit.accounting.mechanisms import Composition, Gaussian, Neighbouring, PureDP
from privaudit.errors import InvalidParameterError

UPCYCLED_NOISE_STD = ("sigma", "sigma-squared")
UPCYCLED_SENSITIVITY = ("paper", "replace-one", "clipped-model")
#: "tmlr" — 003 (TMLR 2024) Thm 6.2 as printed; "draft" — 000 (ICLR draft) Thm 5.2 as printed.
#: "corrected" = "tmlr" (the same formula: the true minimum over λ) and "printed" = "draft" are the older names, kept.
UPCYCLED_FORMS = ("tmlr", "draft", "printed", "corrected")
_UPCYCLED_FORM_ALIASES = {"printed": "draft", "corrected": "tmlr"}


@dataclass(frozen=True)
class ClosedForm:
    """A closed-form ε with its provenance."""

    name: str
    value: float
    formula: str
    source: str
    assumptions: tuple[str, ...] = ()
    failed_assumptions: tuple[str, ...] = ()
    composition: Composition | None = field(default=None, compare=False)
    details: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.failed_assumptions


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not value > 0 or math.isnan(value) or math.isinf(value):
        raise InvalidParameterError(f"{name} must be a positive number, got {value}")
    return value


def _delta(delta: float) -> float:
    delta = float(delta)
    if not 0 < delta < 1:
        raise InvalidParameterError(f"delta must lie in (0, 1), got {delta}")
    return delta


# --------------------------------------------------------------------------------------------------
# Upcycled-FL
# --------------------------------------------------------------------------------------------------
def upcycled_output_perturbation(
    rounds: int,
    noise: float,
    clip: float,
    dataset_size: float,
    delta: float,
    *,
    form: str = "tmlr",
    noise_std: str = "sigma",
    sensitivity: str = "paper",
) -> ClosedForm:
    """Upcycled-FL output perturbation over M perturbed rounds: Theorem 6.2 of 003, Theorem 5.2 of 000.

    With r = M·Δ²/(2s²) (moments accountant of the Gaussian mechanism, add-one neighbours, both versions'
    proof in App. E) the two versions print different closed forms:

    * ``form="tmlr"`` (alias ``"corrected"``): ε = r + 2·sqrt(r·ln(1/δ)) — 003 (TMLR 2024) Thm 6.2 as printed,
      which is also the true minimum over λ of r(λ+1) + ln(1/δ)/λ;
    * ``form="draft"`` (alias ``"printed"``, its older name): ε = 2·sqrt(r·ln(1/δ) + r) — 000 (the ICLR draft)
      Thm 5.2 as printed, not the minimum (audit point U4). 003's Fig. 3 numbers 1.40 / 1.59 are this form at
      δ = 1e-3 (a δ only the draft states); 003's own form gives 1.373 / 1.562 there.

    Switches (audit points U1–U3): ``noise_std`` — s = σ (paper) or s = σ² (reference code,
    ``torch.normal(0, sigma**2)`` whose second argument is the std); ``sensitivity`` — Δ = τ/|D| (paper),
    2τ/|D| (replace-one neighbours, the paper's own definition of neighbours), or 2τ (a clipped SGD-trained
    model with no per-example decomposition: the output can move anywhere in the τ-ball).

    At M = 80, σ = 1, τ = 10, δ = 1e-3, |D| = 224.2: draft 1.587, TMLR 1.562; M = 40, σ = 0.8: draft 1.402,
    TMLR 1.373 (σ² convention: draft 1.753, TMLR 1.736). No single δ makes the TMLR form give both 1.40
    and 1.59 (δ ≈ 7.5e-4 and 7.7e-4).
    """
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 1:
        raise InvalidParameterError(f"rounds must be a positive integer, got {rounds}")
    noise, clip, size, delta = _positive("noise", noise), _positive("clip", clip), _positive("dataset_size", dataset_size), _delta(delta)
    if form not in UPCYCLED_FORMS:
        raise InvalidParameterError(f"form must be one of {', '.join(UPCYCLED_FORMS)}, got {form!r}")
    form = _UPCYCLED_FORM_ALIASES.get(form, form)
    if noise_std not in UPCYCLED_NOISE_STD:
        raise InvalidParameterError(f"noise_std must be one of {', '.join(UPCYCLED_NOISE_STD)}, got {noise_std!r}")
    if sensitivity not in UPCYCLED_SENSITIVITY:
        raise InvalidParameterError(f"sensitivity must be one of {', '.join(UPCYCLED_SENSITIVITY)}, got {sensitivity!r}")

    std = noise if noise_std == "sigma" else noise * noise
    sens = {"paper": clip / size, "replace-one": 2 * clip / size, "clipped-model": 2 * clip}[sensitivity]
    r = rounds * sens * sens / (2 * std * std)
    log_inv_delta = math.log(1 / delta)
    if form == "draft":
        value = 2 * math.sqrt(r * log_inv_delta + r)
        formula = ("ε = 2·sqrt(r·ln(1/δ) + r), r = M·Δ²/(2s²)  [000 (ICLR draft) Thm 5.2 as printed; not the minimum "
                   "over λ]")
        source = "Upcycled-FL (000, ICLR draft) Theorem 5.2"
    else:
        value = r + 2 * math.sqrt(r * log_inv_delta)
        formula = "ε = r + 2·sqrt(r·ln(1/δ)), r = M·Δ²/(2s²)  [003 (TMLR 2024) Thm 6.2 as printed]"
        source = "Upcycled-FL (003, TMLR 2024) Theorem 6.2"

    assumptions = [
        f"M = {int(rounds)} perturbed (odd) rounds; even rounds are server-side post-processing (Lemma 6.1)",
        ("noise std s = σ (paper)" if noise_std == "sigma"
         else "noise std s = σ² (reference code: torch.normal(0, sigma**2) takes the std)"),
        {
            "paper": "sensitivity Δ = τ/|D|: the clipped model is an average of per-example terms each bounded by τ "
                     "(the paper's proof, add-one neighbours)",
            "replace-one": "sensitivity Δ = 2τ/|D|: replace-one neighbours (the paper's definition) with the proof's averaging",
            "clipped-model": "sensitivity Δ = 2τ: the clipped SGD-trained model has no per-example decomposition (audit point U2)",
        }[sensitivity],
        f"|D| = {size:g} is the size of ONE client's dataset: per-client DP is the max over clients, not ε at the mean size",
        "noise drawn from a proper random generator (the reference code's clock-seeded generator makes ε = ∞, audit point U5)",
    ]
    failed = []
    if delta * size > 0.01:
        failed.append(f"δ·|D| = {delta * size:.3g} is not small: δ should be well below 1/|D|")
    composition = Composition.of(Gaussian(noise_multiplier=std, sensitivity=sens), int(rounds),
                                 Neighbouring.ADD_REMOVE)
    return ClosedForm(
        name="upcycled-output",
        value=value,
        formula=formula,
        source=source,
        assumptions=tuple(assumptions),
        failed_assumptions=tuple(failed),
        composition=composition,
        details={"r": r, "noise_std_used": std, "sensitivity_used": sens, "form": form},
    )


def upcycled_objective_perturbation(
    rounds: int,
    alpha: float,
    mu: float,
    u1: float,
    u2: float,
    dataset_size: float,
    *,
    terms: str = "rounds",
) -> ClosedForm:
    """Upcycled-FL Theorem 6.3 (003; = Thm 5.3 of 000): objective perturbation, pure ε-DP.

    ε = Σ_m (2 α_m u₁ μ + 2.8 u₂) / (|D| μ), for a GLM loss with ‖∇F̂‖ < u₁, |F̂''| ≤ u₂, ‖x‖ ≤ 1,
    u₂ ≤ 0.5|D|μ, noise density ∝ exp(−α‖n‖) in d = #parameters dimensions and the exact minimiser of the
    perturbed strongly convex objective. ``terms="rounds"`` sums one term per perturbed round (M terms);
    ``terms="printed"`` sums m = 0..M as printed (M + 1 terms, audit point U4).

    Failed checkable assumptions (μ ≤ 0, u₂ > 0.5|D|μ) are returned, not raised; with μ = 0 the bound is
    infinite (FedAvg has no proximal term, audit point U6e).
    """
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 1:
        raise InvalidParameterError(f"rounds must be a positive integer, got {rounds}")
    alpha, u1, size = _positive("alpha", alpha), _positive("u1", u1), _positive("dataset_size", dataset_size)
    u2, mu = float(u2), float(mu)
    if u2 < 0 or math.isnan(u2):
        raise InvalidParameterError(f"u2 must be non-negative, got {u2}")
    if mu < 0 or math.isnan(mu):
        raise InvalidParameterError(f"mu must be non-negative, got {mu}")
    if terms not in ("rounds", "printed"):
        raise InvalidParameterError(f"terms must be 'rounds' or 'printed', got {terms!r}")
    n_terms = int(rounds) + (1 if terms == "printed" else 0)
    failed = []
    if mu <= 0:
        failed.append("μ > 0: Theorem 6.3 needs a strongly convex local objective (FedAvg has μ = 0): ε = ∞")
        per_round = math.inf
    else:
        per_round = (2 * alpha * u1 * mu + 2.8 * u2) / (size * mu)
        if u2 > 0.5 * size * mu:
            failed.append(f"u₂ ≤ 0.5·|D|·μ fails: u₂ = {u2:g} > {0.5 * size * mu:g}")
    value = n_terms * per_round
    assumptions = (
        "GLM loss F̂(ωᵀx, y) with ‖∇F̂‖ < u₁ and |F̂''| ≤ u₂ (not checkable here; the reference models are not GLMs, audit point U6d)",
        "‖x‖ ≤ 1 for every record (the reference data has ‖x‖ up to 10.3)",
        "the exact minimiser of the perturbed objective is released (the reference code runs a fixed number of SGD epochs)",
        "noise density ∝ exp(−α‖n‖) in d = #parameters dimensions (the reference code draws Gamma(feature_len) norms in a cube)",
        f"{n_terms} terms ({'one per perturbed round' if terms == 'rounds' else 'm = 0..M as printed'})",
    )
    composition = None if math.isinf(per_round) else Composition.of(PureDP(per_round), n_terms)
    return ClosedForm(
        name="upcycled-objective",
        value=value,
        formula="ε = Σ_m (2 α u₁ μ + 2.8 u₂)/(|D| μ)  [Thm 6.3]",
        source="Upcycled-FL (003) Theorem 6.3 / (000) Theorem 5.3",
        assumptions=assumptions,
        failed_assumptions=tuple(failed),
        composition=composition,
        details={"per_round": per_round, "terms": n_terms},
    )


# --------------------------------------------------------------------------------------------------
# PFA
# --------------------------------------------------------------------------------------------------
def pfa_reference_noise(sample_rate: float, steps: float, delta: float, epsilon: float) -> float:
    """The PFA reference code's calibration σ = 10·q·sqrt(T·log₁₀(1/δ))/ε (``compute_noise_multiplier``, audit point F1).

    Not an accountant: the constants (10, log base 10) are not those of any theorem; an audit compares the
    ε this σ really gives (through a numerical accountant) with the claimed ε.
    """
    q, t, e = _positive("sample_rate", sample_rate), _positive("steps", steps), _positive("epsilon", epsilon)
    return 10.0 * q * math.sqrt(t * math.log10(1.0 / _delta(delta))) / e


def pfa_reference_epsilon(sample_rate: float, steps: float, delta: float, noise_multiplier: float) -> float:
    """Inverse of :func:`pfa_reference_noise` — PFA's "budget accountant" (the same formula inverted, F1)."""
    q, t, s = _positive("sample_rate", sample_rate), _positive("steps", steps), _positive("noise_multiplier", noise_multiplier)
    return 10.0 * q * math.sqrt(t * math.log10(1.0 / _delta(delta))) / s


def pfa_reference(sample_rate: float, steps: int, delta: float, epsilon: float) -> ClosedForm:
    """PFA's claimed ε_m with the reference calibration, and the DP-SGD composition that σ really gives."""
    from privaudit.accounting.mechanisms import SubsampledGaussian

    sigma = pfa_reference_noise(sample_rate, steps, delta, epsilon)
    return ClosedForm(
        name="pfa-reference",
        value=float(epsilon),
        formula="σ = 10·q·sqrt(T·log₁₀(1/δ))/ε  [PFA reference code, compute_noise_multiplier]",
        source="PFA (004) Theorem 1 as implemented by Emory-AIMS/PFA",
        assumptions=(
            f"noise multiplier σ = {sigma:.6g} from the reference formula for the claimed ε",
            "T = the client's planned local steps (T* = K·T/M is an expectation, audit point F2)",
            "Poisson sampling at rate q (the code draws fixed-size batches without replacement, audit point F3)",
        ),
        failed_assumptions=("the formula is not derived from an accountant: its constants (10, log₁₀) match no theorem",),
        composition=Composition.of(SubsampledGaussian(sigma, sample_rate), int(steps)),
        details={"noise_multiplier": sigma},
    )


def pfa_theorem1_noise(sample_rate: float, steps: float, delta: float, epsilon: float, c2: float) -> ClosedForm:
    """PFA Theorem 1 form σ ≥ c₂·q·sqrt(T*·ln(1/δ))/ε, valid for ε < c₁q²T* (constants unspecified, "follows DPSGD")."""
    q, t, e, c = _positive("sample_rate", sample_rate), _positive("steps", steps), _positive("epsilon", epsilon), _positive("c2", c2)
    sigma = c * q * math.sqrt(t * math.log(1.0 / _delta(delta))) / e
    return ClosedForm(
        name="pfa-theorem1",
        value=sigma,
        formula="σ ≥ c₂·q·sqrt(T*·ln(1/δ))/ε  [PFA Thm 1; c₁, c₂ unspecified]",
        source="PFA (004) Theorem 1",
        assumptions=(f"c₂ = {c:g} supplied by the caller (the paper gives no value)", f"validity needs ε < c₁·q²·T* = c₁·{q * q * t:.4g}"),
    )


def expected_client_steps(clients_per_round: int, rounds: int, num_clients: int, local_steps: int) -> float:
    """PFA's T* = K·T/M local steps per client (an expectation under uniform client sampling, audit point F2)."""
    return clients_per_round * rounds * local_steps / num_clients


# --------------------------------------------------------------------------------------------------
# PrivateFL
# --------------------------------------------------------------------------------------------------
def per_tensor_effective_multiplier(noise_multiplier: float, num_tensors: int) -> ClosedForm:
    """PrivateFL-CDP's per-tensor clipping (audit point P1): L tensors, each clipped to C_k and noised N(0, (σC_k)²).

    Rescaling block k by 1/C_k gives a per-client L2 sensitivity of √L with unit-σ noise on every block, so
    the release is a Gaussian mechanism with effective multiplier σ/√L — independent of the C_k. Correct
    per-layer clipping (McMahan et al. 2018) would add noise σ·sqrt(Σ_j C_j²) to every tensor instead.
    """
    sigma = _positive("noise_multiplier", noise_multiplier)
    if isinstance(num_tensors, bool) or int(num_tensors) != num_tensors or num_tensors < 1:
        raise InvalidParameterError(f"num_tensors must be a positive integer, got {num_tensors}")
    return ClosedForm(
        name="per-tensor-clipping",
        value=sigma / math.sqrt(num_tensors),
        formula="z_eff = σ/√L",
        source="PrivateFL reference code (FedServer.agg_updates), audit point P1",
        assumptions=(f"L = {int(num_tensors)} separately clipped tensors, each with its own noise σ·C_k",
                     "the clip norms C_k do not depend on the data (the reference code uses unprivatised medians, audit point P2)"),
        details={"num_tensors": int(num_tensors)},
    )
