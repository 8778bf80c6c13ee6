"""Upcycled-FL's printed privacy bounds: Thm 6.2 (output perturbation) and Thm 6.3 (objective perturbation).

Theorem 6.2 of 003 (Thm 5.2 of 000) and Theorem 6.3 of 003 (Thm 5.3 of 000), with the reference code's behaviour
(osu-srml/Upcycled-FL@4dd7400:client/avg.py) as named switches; the audit points (U…) are listed in the README. Each
function returns a :class:`~privaudit.accounting.closed_form.ClosedForm`; :data:`OUTPUT` and :data:`OBJECTIVE` are
the paper's ``closed_forms`` part (``compute-epsilon --mechanism upcycled-output|upcycled-objective``). Torch-free:
imports only ``privaudit.accounting``.
"""

from __future__ import annotations

import math
from enum import Enum

from privaudit.accounting.closed_form import (
    ClosedForm,
    ClosedFormSpec,
    Parameter,
    count,
    positive,
    probability,
)
from privaudit.accounting.mechanisms import Composition, Gaussian, Neighbouring, PureDP
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError

NOISE_STD = ("sigma", "sigma-squared")
#: "tmlr" — 003 (TMLR 2024) Thm 6.2 as printed; "draft" — 000 (ICLR draft) Thm 5.2 as printed.
#: "corrected" = "tmlr" (the same formula: the true minimum over λ) and "printed" = "draft" are the older names, kept.
FORMS = ("tmlr", "draft", "printed", "corrected")
_FORM_ALIASES = {"printed": "draft", "corrected": "tmlr"}


class Sensitivity(str, Enum):
    """Δ of the released model (audit points U2, U3): the paper's proof, its own neighbours, or the clip diameter.

    ``paper`` — τ/|D|: the clipped model as an average of per-example terms bounded by τ, add-one neighbours (the
    proof in App. E); ``replace-one`` — 2τ/|D|: replace-one neighbours, the paper's own definition, with the proof's
    averaging (:attr:`~privaudit.accounting.mechanisms.Neighbouring.REPLACE_ONE`; read in either spelling, as every
    enum); ``clipped-model`` — 2τ: an SGD-trained model
    has no per-example decomposition, so the clipped output can move anywhere in the τ-ball.
    """

    PAPER = "paper"
    REPLACE_ONE = "replace-one"
    CLIPPED_MODEL = "clipped-model"

    @classmethod
    def parse(cls, value: str | Sensitivity) -> Sensitivity:
        return parse_enum(cls, value, "sensitivity model")

    def of(self, clip: float, size: float) -> float:
        """Δ for clip norm τ = ``clip`` and a client of ``size`` records."""
        return {Sensitivity.PAPER: clip / size, Sensitivity.REPLACE_ONE: 2 * clip / size, Sensitivity.CLIPPED_MODEL: 2 * clip}[self]

    @property
    def assumption(self) -> str:
        return {
            Sensitivity.PAPER: "sensitivity Δ = τ/|D|: the clipped model is an average of per-example terms each bounded by τ "
                               "(the paper's proof, add-one neighbours)",
            Sensitivity.REPLACE_ONE: "sensitivity Δ = 2τ/|D|: replace-one neighbours (the paper's definition) with the proof's "
                                     "averaging",
            Sensitivity.CLIPPED_MODEL: "sensitivity Δ = 2τ: the clipped SGD-trained model has no per-example decomposition "
                                       "(audit point U2)",
        }[self]


def _form(form: str) -> str:
    if form not in FORMS:
        raise InvalidParameterError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    return _FORM_ALIASES.get(form, form)


def _noise_std(noise_std: str) -> str:
    if noise_std not in NOISE_STD:
        raise InvalidParameterError(f"noise_std must be one of {', '.join(NOISE_STD)}, got {noise_std!r}")
    return noise_std


def _printed_epsilon(form: str, r: float, log_inv_delta: float) -> tuple[float, str, str]:
    """(ε, formula, source) of Thm 6.2 as 003 prints it (``tmlr``) or Thm 5.2 as 000 prints it (``draft``)."""
    if form == "draft":
        return (2 * math.sqrt(r * log_inv_delta + r),
                "ε = 2·sqrt(r·ln(1/δ) + r), r = M·Δ²/(2s²)  [000 (ICLR draft) Thm 5.2 as printed; not the minimum over λ]",
                "Upcycled-FL (000, ICLR draft) Theorem 5.2")
    return (r + 2 * math.sqrt(r * log_inv_delta),
            "ε = r + 2·sqrt(r·ln(1/δ)), r = M·Δ²/(2s²)  [003 (TMLR 2024) Thm 6.2 as printed]",
            "Upcycled-FL (003, TMLR 2024) Theorem 6.2")


def upcycled_output_perturbation(
    rounds: int,
    noise: float,
    clip: float,
    dataset_size: float,
    delta: float,
    *,
    form: str = "tmlr",
    noise_std: str = "sigma",
    sensitivity: str | Sensitivity = Sensitivity.PAPER,
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
    ``torch.normal(0, sigma**2)`` whose second argument is the std); ``sensitivity`` — :class:`Sensitivity`.

    At M = 80, σ = 1, τ = 10, δ = 1e-3, |D| = 224.2: draft 1.587, TMLR 1.562; M = 40, σ = 0.8: draft 1.402,
    TMLR 1.373 (σ² convention: draft 1.753, TMLR 1.736). No single δ makes the TMLR form give both 1.40
    and 1.59 (δ ≈ 7.5e-4 and 7.7e-4).
    """
    rounds = count("rounds", rounds)
    noise, clip, size = positive("noise", noise), positive("clip", clip), positive("dataset_size", dataset_size)
    delta, form, noise_std = probability("delta", delta), _form(form), _noise_std(noise_std)
    model = Sensitivity.parse(sensitivity)
    std = noise if noise_std == "sigma" else noise * noise
    sens = model.of(clip, size)
    r = rounds * sens * sens / (2 * std * std)
    value, formula, source = _printed_epsilon(form, r, math.log(1 / delta))
    assumptions = (
        f"M = {rounds} perturbed (odd) rounds; even rounds are server-side post-processing (Lemma 6.1)",
        ("noise std s = σ (paper)" if noise_std == "sigma"
         else "noise std s = σ² (reference code: torch.normal(0, sigma**2) takes the std)"),
        model.assumption,
        f"|D| = {size:g} is the size of ONE client's dataset: per-client DP is the max over clients, not ε at the mean size",
        "noise drawn from a proper random generator (the reference code's clock-seeded generator makes ε = ∞, audit point U5)",
    )
    failed = (f"δ·|D| = {delta * size:.3g} is not small: δ should be well below 1/|D|",) if delta * size > 0.01 else ()
    return ClosedForm(
        name="upcycled-output",
        value=value,
        formula=formula,
        source=source,
        assumptions=assumptions,
        failed_assumptions=failed,
        composition=Composition.of(Gaussian(noise_multiplier=std, sensitivity=sens), rounds, Neighbouring.ADD_REMOVE),
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
    rounds = count("rounds", rounds)
    alpha, u1, size = positive("alpha", alpha), positive("u1", u1), positive("dataset_size", dataset_size)
    u2, mu = float(u2), float(mu)
    if u2 < 0 or math.isnan(u2):
        raise InvalidParameterError(f"u2 must be non-negative, got {u2}")
    if mu < 0 or math.isnan(mu):
        raise InvalidParameterError(f"mu must be non-negative, got {mu}")
    if terms not in ("rounds", "printed"):
        raise InvalidParameterError(f"terms must be 'rounds' or 'printed', got {terms!r}")
    n_terms = rounds + (1 if terms == "printed" else 0)
    failed = []
    if mu <= 0:
        failed.append("μ > 0: Theorem 6.3 needs a strongly convex local objective (FedAvg has μ = 0): ε = ∞")
        per_round = math.inf
    else:
        per_round = (2 * alpha * u1 * mu + 2.8 * u2) / (size * mu)
        if u2 > 0.5 * size * mu:
            failed.append(f"u₂ ≤ 0.5·|D|·μ fails: u₂ = {u2:g} > {0.5 * size * mu:g}")
    assumptions = (
        "GLM loss F̂(ωᵀx, y) with ‖∇F̂‖ < u₁ and |F̂''| ≤ u₂ (not checkable here; the reference models are not GLMs, audit point U6d)",
        "‖x‖ ≤ 1 for every record (the reference data has ‖x‖ up to 10.3)",
        "the exact minimiser of the perturbed objective is released (the reference code runs a fixed number of SGD epochs)",
        "noise density ∝ exp(−α‖n‖) in d = #parameters dimensions (the reference code draws Gamma(feature_len) norms in a cube)",
        f"{n_terms} terms ({'one per perturbed round' if terms == 'rounds' else 'm = 0..M as printed'})",
    )
    return ClosedForm(
        name="upcycled-objective",
        value=n_terms * per_round,
        formula="ε = Σ_m (2 α u₁ μ + 2.8 u₂)/(|D| μ)  [Thm 6.3]",
        source="Upcycled-FL (003) Theorem 6.3 / (000) Theorem 5.3",
        assumptions=assumptions,
        failed_assumptions=tuple(failed),
        composition=None if math.isinf(per_round) else Composition.of(PureDP(per_round), n_terms),
        details={"per_round": per_round, "terms": n_terms},
    )


#: ``compute-epsilon --help`` lines of the parameters both forms take.
ROUNDS_HELP = "perturbed (odd) rounds M."
DATASET_SIZE_HELP = "the client's dataset size |D|."

OUTPUT = ClosedFormSpec(
    "upcycled-output",
    "ε of output perturbation over M perturbed rounds (clip the local model to τ, Gaussian noise σ)",
    "Upcycled-FL 003 Thm 6.2 / 000 Thm 5.2 as printed",
    (Parameter("rounds", "count", help=ROUNDS_HELP), Parameter("noise", "positive", help="noise σ."),
     Parameter("clip", "positive", help="clip norm τ."),
     Parameter("dataset_size", "positive", help=DATASET_SIZE_HELP), Parameter("delta", "delta"),
     # compute-epsilon's default is the draft's form: it reproduces 003's Fig. 3 numbers 1.40 / 1.59
     Parameter("form", "choice", "printed", FORMS,
               help="draft (default; alias printed: the ICLR draft's Thm 5.2 form, which reproduces 1.40 / 1.59) or tmlr "
                    "(alias corrected: the TMLR paper's Thm 6.2 form, r + 2√(r·ln 1/δ))."),
     Parameter("noise_std", "choice", "sigma", NOISE_STD, help="sigma (paper, default) or sigma-squared (reference code)."),
     Parameter("sensitivity", "choice", "paper", tuple(s.value for s in Sensitivity))),
    lambda rounds, noise, clip, dataset_size, delta, form, noise_std, sensitivity: upcycled_output_perturbation(
        rounds, noise, clip, dataset_size, delta, form=form, noise_std=noise_std, sensitivity=sensitivity),
)

OBJECTIVE = ClosedFormSpec(
    "upcycled-objective",
    "pure ε of objective perturbation over M perturbed rounds (noise density ∝ exp(−α‖n‖), proximal μ)",
    "Upcycled-FL 003 Thm 6.3 / 000 Thm 5.3",
    (Parameter("rounds", "count", help=ROUNDS_HELP), Parameter("alpha", "positive", help="α of the noise density ∝ exp(−α‖n‖)."),
     Parameter("mu", "number", help="proximal μ."), Parameter("u1", "positive", help="Bound on ‖∇F̂‖."),
     Parameter("u2", "number", help="Bound on |F̂''|."), Parameter("dataset_size", "positive", help=DATASET_SIZE_HELP),
     Parameter("terms", "choice", "rounds", ("rounds", "printed"), help="rounds (M terms, default) or printed (M+1 terms).")),
    lambda rounds, alpha, mu, u1, u2, dataset_size, terms: upcycled_objective_perturbation(
        rounds, alpha, mu, u1, u2, dataset_size, terms=terms),
)
