"""Recipes for FedReg's privacy statements (002, ICLR 2022; reference code Zoesgithub/FedReg).

``dpsgd_baselines`` — Table 4 compares FedReg+MG with DP-SGD "at similar PSNR" (spec R2). The paper states no ε;
the comparison points use clip C = 1 and σ = 0.01 (EMNIST, 20 full-batch local steps), 0.05 (CIFAR-10, 30 steps)
and 0.001 (COVID-CT, 1 step). With full batches every step is a Gaussian mechanism of multiplier σ, so T steps
are exactly √T/σ-GDP (Dong, Roth & Su 2022): the ε below is exact, and attained — DP-SGD's guarantee does not
depend on the loss, and a record whose clipped gradient is the same vector at every step realises the
composition even when only the final model is released. Audited against ε ≤ 10 at δ = 1e-5.

``dpsgd_baselines`` also runs ``dpsgd-membership``: a multi-run membership audit of one local DP-SGD client
(:mod:`privaudit.fl.dpsgd`) at the EMNIST point (σ = 0.01, C = 1, 20 full-batch steps), scaled down to a small
client and model, with a mislabelled canary record.

``mg_membership`` — FedReg with modified gradients adds no noise (spec R1): a multi-run membership audit of one
FedReg+MG client (issue 5's training code) with a mislabelled canary record in or out of its data; the score is the
release's distance to the auditor's own runs of both worlds (trials in :mod:`privaudit.audit.recipes.fedreg_trials`).
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.audit.claims import FEDREG_TRAINING, Claim
from privaudit.audit.plan import (
    Analysis,
    AttackInfo,
    EstimatorChoice,
    PendingPart,
    Reading,
    Requirement,
    Role,
    TrialPlan,
)
from privaudit.audit.recipes.accounting import epsilon_of, gaussian_composition_epsilon, gaussian_mu
from privaudit.audit.strategies import Explicit
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
    readings.append(dpsgd_membership(claim, trials))
    return readings


#: Membership trials are cheap (one tiny client, two short local runs): this many per requested trial.
MEMBERSHIP_TRIAL_FACTOR = 40
REFERENCE_ATTACK = "distance to the auditor's own in- and out-world runs (white-box, release level)"
#: 0 is the reference-distance score's own threshold (equidistant from both reference runs), declared before any score.
REFERENCE_ESTIMATORS = (EstimatorChoice("cp", Explicit(0.0)), EstimatorChoice("gdp", Explicit(0.0)))
REFERENCE_SCORE = "‖θ − r_out‖ − ‖θ − r_in‖ for the auditor's runs r_out, r_in (larger = member)"
MEMBERSHIP_THREAT = ("the server: receives the client's released local model, knows the initial model it sent, the algorithm "
                     "and the client's other records (the DP adversary); the seeds of the audited runs are secret")
MISLABELLED = "a held-out test record with a wrong label (mislabelled: fitted only by memorising it), added to the client's data"
#: MG adds no noise, so its privacy profile is not Gaussian-shaped and the GDP route would not refute an (ε, δ) claim
#: (spec auditing.md §2.4, validity caveat): only the Clopper–Pearson bound on the (ε, δ) box is used.
MG_ESTIMATORS = (EstimatorChoice("cp", Explicit(0.0)),)
MG_NOTE = ("only cp is used: MG adds no noise, so its privacy profile is not Gaussian-shaped and a GDP bound would not "
           "refute an (ε, δ) claim (spec auditing.md §2.4); no multi-run method certifies much more than ln N from N "
           "trials per side, whatever the attack — compare separation_gap and repeat_distance with in_out_distance")
GDP_NOTE = ("gdp refutes the claim for a mechanism whose privacy profile is Gaussian-shaped (μ-GDP, spec auditing.md §2.4) — "
            "exactly what full-batch DP-SGD is; cp bounds the (ε, δ) box directly, with no such assumption, and no "
            "multi-run method certifies much more than ln N from N trials per side")


def _membership_spec(run: dict, algorithm: str, sigma: float | None, clip: float | None, steps: int,
                     repeat: bool = False) -> dict:
    spec = {"data": {"dataset": run["dataset"], "client_size": run["client_size"], "data_seed": run["data_seed"]},
            "training": {"algorithm": algorithm, "model": run["model"], "init_seed": run["init_seed"], "steps": int(steps),
                         "lr": run["lr"]},
            "auditor_seed": run["auditor_seed"]}
    if sigma is not None:
        spec["privacy"] = {"sigma": float(sigma), "clip": float(clip)}
    if repeat:
        spec["repeat"] = True
    return spec


def _membership_details(results: Sequence[dict]) -> dict:
    from privaudit.audit.recipes.trial_results import paired_scores, summary

    in_s, out_s = paired_scores(results)
    gap = float(in_s.min() - out_s.max())
    loss_in = [float(r["in_loss_score"]) for r in results]
    loss_out = [float(r["out_loss_score"]) for r in results]
    return {"trials": len(results), "in_scores": summary(in_s), "out_scores": summary(out_s), "separation_gap": gap,
            "separated": gap > 0, "in_out_distance": summary(float(r["in_out_distance"]) for r in results),
            "loss_scores": {"in": summary(loss_in), "out": summary(loss_out),
                            "note": "LOSS attack (−ℓ(θ; canary)), reported only; the bound uses the reference-distance score"}}


def dpsgd_membership(claim: Claim, trials: int) -> Reading | PendingPart:
    """A membership audit of a local DP-SGD client at the EMNIST comparison point (σ = 0.01, 20 full-batch steps).

    Scaled down (``membership_run``: a small client, a small model); the mechanism — clip C, noise σ, T full-batch
    steps — is the comparison point's. Trials in :mod:`privaudit.audit.recipes.fedreg_trials`.
    """
    if not DPSGD_TRAINING.available():
        return PendingPart("dpsgd-membership", "membership audit of a local DP-SGD client at σ = 0.01", DPSGD_TRAINING.reason())
    from privaudit.audit.recipes.fedreg_trials import membership_trial
    from privaudit.audit.recipes.trial_results import paired_scores

    p = claim.params
    run = dict(p["membership_run"])
    setting_id, text, sigma, steps = p["settings"][0]
    delta = claim.delta
    count = MEMBERSHIP_TRIAL_FACTOR * int(trials)

    def analyse(results: Sequence[dict]) -> Analysis:
        in_s, out_s = paired_scores(results)
        details = {**_membership_details(results), "noise_multiplier": sigma, "steps": steps, "clip": p["clip"],
                   "mu": gaussian_mu(sigma, steps), "exact_epsilon": gaussian_composition_epsilon(sigma, steps, delta),
                   "note": "exact_epsilon: the mechanism's exact ε (full batches: √T/σ-GDP), the most any attack could show"}
        return Analysis((), in_s, out_s, details, notes=(GDP_NOTE,))

    return Reading(
        reading_id="dpsgd-membership",
        title=f"membership audit of a DP-SGD client — {text}",
        role=Role.IMPLEMENTATION,
        description=(f"Local DP-SGD (privaudit.fl.dpsgd, opacus clipping) at the {setting_id} comparison point: σ = {sigma:g}, "
                     f"C = {p['clip']:g}, {steps} full-batch steps (q = 1); one client of {run['client_size']} "
                     f"{run['dataset']} records, model {run['model']}, lr {run['lr']:g}; add-one neighbours with a "
                     f"mislabelled canary; {count} independent runs per world."),
        claimed_epsilon=claim.epsilon,
        claimed_delta=delta,
        analyse=analyse,
        trials=TrialPlan(membership_trial, _membership_spec(run, "fedavg", sigma, p["clip"], steps), count,
                         f"DP-SGD client, σ = {sigma:g}"),
        estimators=REFERENCE_ESTIMATORS,
        attack=AttackInfo(REFERENCE_ATTACK, MEMBERSHIP_THREAT, MISLABELLED, REFERENCE_SCORE),
    )


def mg_membership(claim: Claim, trials: int) -> Sequence[Reading | PendingPart]:
    """Membership audit of FedReg+MG (no noise, spec R1): a mislabelled canary in or out of one client's data.

    Scaled down (``membership_run``); ``trials`` independent runs per world, each also re-running the out-world
    under another seed to show how random the release is at all. Trials in :mod:`privaudit.audit.recipes.fedreg_trials`.
    """
    if not FEDREG_TRAINING.available():
        return [PendingPart("mg-canary-audit", "multi-run canary audit of FedReg with modified gradients", FEDREG_TRAINING.reason())]
    from privaudit.audit.recipes.fedreg_trials import membership_trial
    from privaudit.audit.recipes.trial_results import paired_scores, summary

    p = claim.params
    run = dict(p["membership_run"])
    delta = claim.delta
    steps = int(run["steps"])

    def analyse(results: Sequence[dict]) -> Analysis:
        in_s, out_s = paired_scores(results)
        repeats = [float(r["repeat_distance"]) for r in results]
        mechanisms = sorted({m for r in results for w in ("in", "out") for m in r[f"{w}_mechanisms"]})
        details = {**_membership_details(results), "steps": steps, "algorithm": "fedreg-mg",
                   "repeat_distance": summary(repeats), "ledger_mechanisms": mechanisms,
                   "note": "repeat_distance: ‖θ_out − θ'_out‖ between two out-world runs under different seeds (what the "
                           "training's own randomness moves the release) vs in_out_distance (what the canary moves it)"}
        return Analysis((), in_s, out_s, details, notes=(MG_NOTE,))

    return [Reading(
        reading_id="mg-canary-audit",
        title="membership audit of FedReg with modified gradients (no noise)",
        role=Role.PAPER,
        description=(f"FedReg+MG (eq. 12; privaudit.fl.algorithms.fedreg, default γ, η_s, E) on one client of "
                     f"{run['client_size']} {run['dataset']} records, model {run['model']}, {steps} full-batch local steps, "
                     f"lr {run['lr']:g}; add-one neighbours with a mislabelled canary; {trials} independent runs per world."),
        claimed_epsilon=claim.epsilon,
        claimed_delta=delta,
        analyse=analyse,
        trials=TrialPlan(membership_trial, _membership_spec(run, "fedreg-mg", None, None, steps, repeat=True), trials,
                         "FedReg+MG client"),
        estimators=MG_ESTIMATORS,
        attack=AttackInfo(REFERENCE_ATTACK, MEMBERSHIP_THREAT, MISLABELLED, REFERENCE_SCORE),
    )]
