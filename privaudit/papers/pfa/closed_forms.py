"""PFA's calibration formula and Theorem 1, as closed forms (004 Theorems 1–2; Emory-AIMS/PFA@72b3f89:
common_utils/dpsgd_utils.py, ``compute_noise_multiplier``).

:data:`REFERENCE` is the paper's ``closed_forms`` part (``compute-epsilon --mechanism pfa-reference``). Torch-free:
imports only ``privaudit.accounting``.
"""

from __future__ import annotations

import math

from privaudit.accounting.closed_form import ClosedForm, ClosedFormSpec, Parameter, positive, probability
from privaudit.accounting.mechanisms import Composition, SubsampledGaussian


def pfa_reference_noise(sample_rate: float, steps: float, delta: float, epsilon: float) -> float:
    """The PFA reference code's calibration σ = 10·q·sqrt(T·log₁₀(1/δ))/ε (``compute_noise_multiplier``, audit point F1).

    Not an accountant: the constants (10, log base 10) are not those of any theorem; an audit compares the
    ε this σ really gives (through a numerical accountant) with the claimed ε.
    """
    q, t, e = positive("sample_rate", sample_rate), positive("steps", steps), positive("epsilon", epsilon)
    return 10.0 * q * math.sqrt(t * math.log10(1.0 / probability("delta", delta))) / e


def pfa_reference_epsilon(sample_rate: float, steps: float, delta: float, noise_multiplier: float) -> float:
    """Inverse of :func:`pfa_reference_noise` — PFA's "budget accountant" (the same formula inverted, F1)."""
    q, t, s = positive("sample_rate", sample_rate), positive("steps", steps), positive("noise_multiplier", noise_multiplier)
    return 10.0 * q * math.sqrt(t * math.log10(1.0 / probability("delta", delta))) / s


def pfa_reference(sample_rate: float, steps: int, delta: float, epsilon: float) -> ClosedForm:
    """PFA's claimed ε_m with the reference calibration, and the DP-SGD composition that σ really gives."""
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
    q, t, e, c = positive("sample_rate", sample_rate), positive("steps", steps), positive("epsilon", epsilon), positive("c2", c2)
    sigma = c * q * math.sqrt(t * math.log(1.0 / probability("delta", delta))) / e
    return ClosedForm(
        name="pfa-theorem1",
        value=sigma,
        formula="σ ≥ c₂·q·sqrt(T*·ln(1/δ))/ε  [PFA Thm 1; c₁, c₂ unspecified]",
        source="PFA (004) Theorem 1",
        assumptions=(f"c₂ = {c:g} supplied by the caller (the paper gives no value)", f"validity needs ε < c₁·q²·T* = c₁·{q * q * t:.4g}"),
    )


def expected_client_steps(clients_per_round: int, rounds: int, num_clients: int, local_steps: int) -> float:
    """PFA's T* = K·T/M local steps per client (004 §5, an expectation under uniform client sampling, audit point F2)."""
    return clients_per_round * rounds * local_steps / num_clients


REFERENCE = ClosedFormSpec(
    "pfa-reference",
    "the claimed ε_m with the noise multiplier the reference code calibrates for it, and the DP-SGD composition it gives",
    "PFA 004 Thm 1 as implemented by Emory-AIMS/PFA@72b3f89 (compute_noise_multiplier)",
    (Parameter("sample_rate", "rate"), Parameter("steps", "count"), Parameter("delta", "delta"),
     Parameter("epsilon", "positive")),
    pfa_reference,
    reported=("noise_multiplier",),
)
