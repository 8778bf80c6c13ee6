"""Recipes for FedReg's privacy statements (002, ICLR 2022; reference code Zoesgithub/FedReg).

``dpsgd_baselines`` — Table 4 compares FedReg+MG with DP-SGD "at similar PSNR" (spec R2). The paper states no ε;
the comparison points use clip C = 1 and σ = 0.01 (EMNIST, 20 full-batch local steps), 0.05 (CIFAR-10, 30 steps)
and 0.001 (COVID-CT, 1 step). With full batches every step is a Gaussian mechanism of multiplier σ, so T steps
are exactly √T/σ-GDP (Dong, Roth & Su 2022): the ε below is exact, and attained — DP-SGD's guarantee does not
depend on the loss, and a record whose clipped gradient is the same vector at every step realises the
composition even when only the final model is released. Audited against ε ≤ 10 at δ = 1e-5.

``mg_membership`` — FedReg with modified gradients adds no noise (spec R1): a membership audit of MG needs
FedReg's training code (issue 5).
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.audit.claims import FEDREG_TRAINING, Claim
from privaudit.audit.plan import Analysis, PendingPart, Reading, Requirement, Role
from privaudit.audit.recipes.accounting import epsilon_of, gaussian_composition_epsilon, gaussian_mu
from privaudit.audit.recipes.privatefl import awaiting
from privaudit.audit.verdict import AccountingEvidence

DPSGD_TRAINING = Requirement("privaudit.fl.dpsgd", "local DP-SGD (issue 5)")


def dpsgd_baselines(claim: Claim, trials: int) -> Sequence[Reading | PendingPart]:
    p = claim.params
    delta = claim.delta
    readings: list[Reading | PendingPart] = []
    for setting_id, text, sigma, steps in p["settings"]:
        def analyse(_results, sigma=sigma, steps=steps, text=text) -> Analysis:
            from privaudit.accounting.mechanisms import Composition, Gaussian

            exact = gaussian_composition_epsilon(sigma, steps, delta)
            rdp = epsilon_of(Composition.of(Gaussian(sigma), steps), delta, "rdp")
            evidence = (
                AccountingEvidence(
                    label=f"{text}: exact Gaussian composition (full batches, q = 1)", accountant="exact GDP profile",
                    upper=exact, lower=exact, implementation=True, assumptions_hold=True,
                    assumptions=(f"μ = √T/σ = {gaussian_mu(sigma, steps):.6g}",
                                 "attained by a record whose clipped gradient is one fixed vector at every step (loss-agnostic guarantee)")),
                AccountingEvidence(label=f"{text}: RDP", accountant="rdp", upper=rdp.epsilon, implementation=True,
                                   assumptions_hold=True, assumptions=("an upper bound",)),
            )
            return Analysis(evidence, details={"noise_multiplier": sigma, "steps": steps, "clip": p["clip"],
                                               "mu": gaussian_mu(sigma, steps)})

        readings.append(Reading(
            reading_id=f"dpsgd-{setting_id}",
            title=f"DP-SGD comparison point — {text}",
            role=Role.PAPER,
            description=f"{text}, clip C = {p['clip']:g}: the DP-SGD baseline of Table 4 (App. B.4).",
            claimed_epsilon=claim.epsilon,
            claimed_delta=delta,
            analyse=analyse,
        ))
    readings.append(awaiting(DPSGD_TRAINING, "dpsgd-membership",
                             "membership audit of a local DP-SGD client at σ = 0.01 (the accounting above already decides the claim)"))
    return readings


def mg_membership(claim: Claim, trials: int) -> Sequence[Reading | PendingPart]:
    return [awaiting(FEDREG_TRAINING, "mg-canary-audit", "multi-run canary audit of FedReg with modified gradients")]
