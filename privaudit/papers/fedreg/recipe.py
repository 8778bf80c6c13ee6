"""Recipe for FedReg's privacy claim (002, ICLR 2022; reference code Zoesgithub/FedReg), audited as the paper states it.

FedReg states no ε anywhere. Its privacy evidence is the PSNR of images a gradient-inversion attack recovers (002 §4.5,
App. B.4): "we tune the noise level in DPSGD to generate images with similar quality as measured by PSNR", and FedReg
with modified gradients (MG) keeps "a similar privacy protection level" at a much smaller accuracy cost (Table 4). So
the claim is a comparison, decided by :mod:`privaudit.audit.comparison` — never an invented (ε, δ) to refute:

``psnr-ig`` / ``psnr-analytic`` (comparison readings)
    FedAvg, DP-SGD at each of the paper's noise multipliers (σ = 0.01 EMNIST, 0.05 CIFAR-10, 0.001 CT; C = 1), plain
    FedReg and FedReg+MG release the update of one local step on one image (App. B.4), from the same seeded weights;
    the same attack reconstructs each (trials in :mod:`privaudit.papers.fedreg.trials`). ``psnr-ig``: Inverting
    Gradients on a small CNN, naive (assumes FedAvg, as the paper's attacker) and — from ``adaptive_from_images``
    images on — adaptive (simulates FedReg's step, R4); ``psnr-analytic``: the closed-form attack on an FC-first
    model, cheap enough for ``ANALYTIC_TRIAL_FACTOR`` × as many images.

    Rule: "FedReg+MG's inversion PSNR is at or below DP-SGD's" up to a margin Δ, per σ, on paired per-image
    differences of the *effective* PSNR max(strongest attack run, data-only baseline) — an attacker can always output
    the mean of the dataset's other images without looking at the update, so a reconstruction worse than that reveals
    nothing more and two such defences are equally protective. The attack must beat that baseline on the undefended
    FedAvg update by more than Δ, else the reading measures nothing (inconclusive). Plain FedReg is a row too: what MG
    adds over FedReg's regulariser is reported from the measured numbers.

``dpsgd-epsilon`` (fact)
    The ε that the paper's DP-SGD noise levels really give at δ (privaudit.accounting, ``auto`` = exact for Gaussian
    compositions): for one participation in the paper's setting and for the one attacked step.

``mg-no-dp-guarantee`` (fact)
    FedReg+MG adds no noise: its release is a deterministic function of the data (checked: the same data under two
    seeds gives the identical update, a neighbouring dataset a different one), so it satisfies no (ε, δ) with δ < 1 —
    ε = ∞ by construction, as the accountant says of ``PureDP(∞)``. Reported as a fact, not as a refuted ε.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from attacks.inversion.convergence import FLAGGED
from privaudit.accounting import Composition, Gaussian, PureDP
from privaudit.audit.claims import Claim
from privaudit.audit.comparison import ComparisonRule, PairedComparison, decide_comparison, fact, paired_bound
from privaudit.audit.plan import Analysis, AttackInfo, Reading, Role, TrialPlan
from privaudit.audit.recipes.accounting import epsilon_of, gaussian_composition_epsilon, gaussian_mu
from privaudit.audit.verdict import AccountingEvidence
from privaudit.papers.fedreg.trials import attackers, defence_ids, psnr_trial, release_is_deterministic

#: The closed-form attack takes milliseconds per image: its reading attacks this many images per requested trial.
ANALYTIC_TRIAL_FACTOR = 16

MG = "fedreg-mg"
NAMES = {"fedavg": "FedAvg", "fedreg": "FedReg", MG: "FedReg+MG"}
THREAT = ("the server: receives the client's update after one local step on one example (App. B.4) and knows the initial "
          "weights and the protocol (lr, one step, FedReg's γ, η_s and FGSM steps); not the example, its label or the DP noise")
SCORE = ("PSNR (dB) of the reconstruction against the true image (scikit-image, [0, 1]); per image the comparison uses "
         "max(strongest attack run, data-only baseline = the mean of the dataset's other images)")


def defence_name(defence: str) -> str:
    if defence.startswith("dpsgd:"):
        return f"DP-SGD σ = {defence.split(':', 1)[1]}"
    return NAMES.get(defence, defence)


def _sigmas(p: dict[str, Any]) -> list[float]:
    return [float(s[2]) for s in p["settings"]]


def _trial_spec(p: dict[str, Any], attack: str, images: int) -> dict[str, Any]:
    section = dict(p[attack])
    return {"dataset": p["dataset"], "data_seed": p["data_seed"], "model": section["model"], "attack": attack,
            "attack_options": {"iterations": int(section["iterations"])} if attack == "ig" else {},
            "adaptive": attack == "ig" and images >= int(p["adaptive_from_images"]),
            "labels_known": bool(p["labels_known"]), "local": dict(p["local"]), "fedreg": dict(p["fedreg"]),
            "clip": float(p["clip"]), "sigmas": _sigmas(p), "psnr_cap": float(p["psnr_cap"])}


def _one_step_epsilon(sigma: float, delta: float) -> float:
    return gaussian_composition_epsilon(sigma, 1, delta)


def psnr_table(results: Sequence[dict[str, Any]], spec: dict[str, Any]) -> dict[str, Any]:
    """Per defence × attacker: per-image PSNR, means, SSIM, label accuracy; per defence the effective PSNR (flagged
    attack runs left out) and the number of flagged runs."""
    baseline = np.array([float(r["baseline_psnr"]) for r in results])
    rows, effective, flagged = [], {}, {}
    for defence in defence_ids(spec):
        best = baseline.copy()
        for attacker in attackers(spec, defence):
            cells = [next(x for x in r["rows"] if x["defence"] == defence and x["attacker"] == attacker) for r in results]
            psnr = np.array([float(c["psnr"]) for c in cells])
            # a flagged run (diverged, no progress) measures the attack's failure, not the defence: left out of the
            # effective PSNR (result files from before the status was recorded count as "ok")
            usable = np.array([c.get("status", "ok") not in FLAGGED for c in cells])
            best = np.where(usable, np.maximum(best, psnr), best)
            flagged[defence] = flagged.get(defence, 0) + int((~usable).sum())
            labels = [c["label_accuracy"] for c in cells if c["label_accuracy"] is not None]
            rows.append({"defence": defence_name(defence), "defence_id": defence, "attacker": attacker,
                         "psnr_mean": float(psnr.mean()), "psnr": [float(v) for v in psnr],
                         "flagged_runs": int((~usable).sum()),
                         "exact_recoveries": int(sum(bool(c["exact"]) for c in cells)),
                         "ssim_mean": float(np.mean([c["ssim"] for c in cells])),
                         "label_accuracy": float(np.mean(labels)) if labels else None,
                         "seconds_mean": float(np.mean([c["seconds"] for c in cells]))})
        effective[defence] = best
    return {"rows": rows, "effective": effective, "baseline": baseline, "flagged": flagged}


def _per_image(values: Sequence[float]) -> str:
    if len(values) <= 8:
        return " / ".join(f"{v:.1f}" for v in values)
    return f"min {min(values):.1f} · median {float(np.median(values)):.1f} · max {max(values):.1f}"


def _psnr_table_block(table: dict[str, Any], effective: dict[str, np.ndarray], baseline: np.ndarray, delta: float,
                      title: str) -> dict[str, Any]:
    """The reading's PSNR table for the report (``details["table"]``, rendered by privaudit.report.sections)."""
    rows = []
    for row in table["rows"]:
        eps = row["epsilon_of_release"]
        rows.append([row["defence"], row["attacker"], "∞ (no DP guarantee)" if math.isinf(eps) else f"{eps:.3g}",
                     row["psnr_mean"], _per_image(row["psnr"]), float(effective[row["defence_id"]].mean()),
                     row["ssim_mean"], "—" if row["label_accuracy"] is None else row["label_accuracy"]])
    rows.append(["data-only baseline", "mean of the other images", "—", float(baseline.mean()), _per_image(list(baseline)),
                 float(baseline.mean()), "—", "—"])
    return {"title": f"{title}: PSNR per defence and attacker", "header": [
        "defence", "attacker", f"ε of the attacked release (δ = {delta:g})", "PSNR mean (dB)", "PSNR per image (dB)",
        "effective PSNR mean (dB)", "SSIM mean", "label accuracy"], "rows": rows}


def _psnr_reading(claim: Claim, attack: str, images: int) -> Reading:
    """The paper's comparison (FedReg+MG vs DP-SGD, 002 §5 / App. B.4) under one attack: paired inversion PSNR per image."""
    p = claim.params
    spec = _trial_spec(p, attack, images)
    delta = float(p["delta"])
    margin = float(p["margin_db"])
    rule = ComparisonRule("FedReg+MG's inversion PSNR is at or below DP-SGD's at each of the paper's noise levels, up to Δ "
                          "(per image: max(strongest attack run, data-only baseline))", margin)
    section = dict(p[attack])
    fedreg = dict(p["fedreg"])
    title = ("inversion PSNR: Inverting Gradients (naive and adaptive) on a CNN" if attack == "ig"
             else "inversion PSNR: closed-form attack on an FC-first model")
    if attack == "ig":
        attack_info = AttackInfo(f"Inverting Gradients ({section['iterations']} iterations; naive: assumes FedAvg) and "
                                 "adaptive-MG (simulates FedReg's step)", THREAT, "—", SCORE)
    else:
        attack_info = AttackInfo("analytic (first-layer recovery; exact for FedAvg)", THREAT, "—", SCORE)
    return Reading(
        reading_id=f"psnr-{attack}",
        title=title,
        role=Role.PAPER,
        description=(f"{images} image(s) of {p['dataset']}, model {spec['model']}: FedAvg, DP-SGD at σ = "
                     f"{', '.join(f'{s:g}' for s in spec['sigmas'])} (C = {spec['clip']:g}), FedReg and FedReg+MG (γ "
                     f"{fedreg['gamma']:g}, η_s {fedreg['pseudo_step']:g}, {fedreg['fgsm_steps']} FGSM "
                     f"steps) each release one local step (lr {dict(p['local'])['lr']:g}) on one image from the same weights; "
                     "paired per image."),
        claimed_epsilon=None,  # no ε is claimed (privaudit.audit.comparison)
        claimed_delta=None,
        analyse=_psnr_analysis(spec, attack, section, title, delta),
        trials=TrialPlan(psnr_trial, spec, images, f"{attack} inversion, one image per trial"),
        attack=attack_info,
        claim_note=rule.statement,
        decision=_psnr_decision(spec, attack, p, rule, margin),
    )


def _psnr_analysis(spec: dict[str, Any], attack: str, section: dict[str, Any], title: str, delta: float):
    """The analysis of a PSNR reading: each defence's effective PSNR per image, paired differences, ε of each release."""
    def analyse(results: Sequence[dict[str, Any]]) -> Analysis:
        table = psnr_table(results, spec)
        eff, base = table["effective"], table["baseline"]
        images_seen = [int(r["image"]) for r in results]
        epsilon = {f"dpsgd:{s:g}": _one_step_epsilon(s, delta) for s in spec["sigmas"]}
        for row in table["rows"]:
            row["epsilon_of_release"] = epsilon.get(row["defence_id"], math.inf)
        details = {
            "dataset": spec["dataset"], "model": spec["model"], "attack": attack, "images": len(results),
            "distinct_images": len(set(images_seen)), "image_indices": images_seen,
            "adaptive_attacker": spec["adaptive"], "iterations": section.get("iterations"),
            "baseline_psnr_mean": float(base.mean()), "psnr": table["rows"],
            "flagged_runs": {defence_name(k): v for k, v in table["flagged"].items() if v},
            "effective_psnr_mean": {defence_name(k): float(v.mean()) for k, v in eff.items()},
            "paired_differences": {f"FedReg+MG − DP-SGD σ = {s:g}": [float(v) for v in eff[MG] - eff[f"dpsgd:{s:g}"]]
                                   for s in spec["sigmas"]},
            "fedreg_mg_minus_fedreg": [float(v) for v in eff[MG] - eff["fedreg"]],
            "fedavg_minus_baseline": [float(v) for v in
                                      next(np.array(r["psnr"]) for r in table["rows"] if r["defence_id"] == "fedavg") - base],
            "note": ("effective PSNR = max(strongest attack run, data-only baseline); epsilon_of_release: the exact ε of the "
                     f"attacked release (one DP-SGD step on one example, q = 1) at δ = {delta:g}, ∞ for releases without noise"),
        }
        details["table"] = _psnr_table_block(table, eff, base, delta, f"{title} ({len(results)} image(s) of {spec['dataset']})")
        return Analysis((), None, None, details)

    return analyse


def _psnr_decision(spec: dict[str, Any], attack: str, p: dict[str, Any], rule: ComparisonRule, margin: float):
    """The decision rule of a PSNR reading (privaudit.audit.comparison): supported / not supported / inconclusive."""
    def decision(analysis: Analysis, significance: float):
        d = analysis.details
        comparisons = [PairedComparison(f"σ = {s:g}", "FedReg+MG", f"DP-SGD σ = {s:g}",
                                        tuple(d["paired_differences"][f"FedReg+MG − DP-SGD σ = {s:g}"]))
                       for s in spec["sigmas"]]
        gap = float(np.mean(d["fedavg_minus_baseline"]))
        invalid = [] if gap > margin else [
            f"the attack does not beat the data-only baseline on the undefended FedAvg update (by {gap:+.3g} dB on average, "
            f"≤ Δ = {margin:g} dB): it cannot tell defences apart here"]
        needs = [] if attack == "analytic" or spec["adaptive"] else [
            f"the adaptive attacker was not run ({d['images']} image(s); it runs from {p['adaptive_from_images']} images, "
            "e.g. in the claims suite): 'supported' would rest on the naive attacker alone"]
        flagged = d.get("flagged_runs", {})
        mg_flagged = flagged.get(defence_name(MG), 0)
        if mg_flagged:  # FedReg+MG's PSNR can only be under-measured: "not supported" stands, "supported" cannot
            needs.append(f"{mg_flagged} attack run(s) on FedReg+MG diverged or made no progress (left out of its effective "
                         "PSNR), so its leakage may be under-measured")
        reference_flagged = sum(v for k, v in flagged.items() if k.startswith("DP-SGD"))
        if reference_flagged:  # an under-measured reference could make FedReg+MG look worse than it is
            invalid.append(f"{reference_flagged} attack run(s) on DP-SGD diverged or made no progress, so the reference "
                           "PSNR may be under-measured")
        mg_gain = paired_bound(PairedComparison("MG − FedReg", "FedReg+MG", "FedReg", tuple(d["fedreg_mg_minus_fedreg"])),
                               0.025, 0.0)
        means = d["effective_psnr_mean"]
        context = [
            "effective PSNR means (dB): " + ", ".join(f"{k} {v:.3g}" for k, v in means.items())
            + f"; data-only baseline {d['baseline_psnr_mean']:.3g}",
            f"what MG adds over plain FedReg: {mg_gain.mean:+.3g} dB [{mg_gain.lower:+.3g}, {mg_gain.upper:+.3g}] (95 %)"
            if mg_gain.n > 1 else f"what MG adds over plain FedReg: {mg_gain.mean:+.3g} dB on 1 image",
            f"{d['images']} image(s) of {spec['dataset']}, {spec['model']}, {attack}"
            + (f" ({d['iterations']} iterations{', naive and adaptive' if spec['adaptive'] else ', naive only'})"
               if attack == "ig" else ""),
        ]
        return decide_comparison(comparisons, rule, significance, invalid=invalid, support_needs=needs, context=context)

    return decision


def _dpsgd_epsilon_reading(claim: Claim) -> Reading:
    p = claim.params
    delta = float(p["delta"])

    def analyse(_results) -> Analysis:
        evidence, rows = [], []
        for setting_id, text, sigma, steps in p["settings"]:
            paper = epsilon_of(Composition.of(Gaussian(sigma), steps), delta, "auto")
            step = epsilon_of(Composition.of(Gaussian(sigma), 1), delta, "auto")
            evidence.append(AccountingEvidence(
                label=f"{text}", accountant=f"{paper.accountant} (exact Gaussian composition)", upper=paper.epsilon,
                lower=paper.lower if paper.lower is not None else paper.epsilon, implementation=True,
                assumptions=(f"μ = √T/σ = {gaussian_mu(sigma, steps):.6g} (full batches, q = 1; per participation)",)))
            rows.append({"setting": setting_id, "sigma": sigma, "steps": steps, "epsilon": paper.epsilon,
                         "epsilon_one_step": step.epsilon, "accountant": paper.accountant, "notes": list(paper.notes)})
        table = {"title": f"ε of DP-SGD at the paper's noise levels (δ = {delta:g}, clip C = {p['clip']:g})",
                 "header": ["setting", "σ", "full-batch steps per participation", "ε per participation",
                            "ε of the one attacked step", "accountant"],
                 "rows": [[text, r["sigma"], r["steps"], r["epsilon"], r["epsilon_one_step"], r["accountant"]]
                          for (_, text, _, _), r in zip(p["settings"], rows, strict=True)]}
        return Analysis(tuple(evidence), details={"delta": delta, "clip": p["clip"], "settings": rows, "table": table})

    def decision(analysis: Analysis, _significance: float):
        rows = analysis.details["settings"]
        eps = ", ".join(f"{_e(r['epsilon'])} (σ = {r['sigma']:g}, {r['steps']} step{'s' if r['steps'] != 1 else ''})"
                        for r in rows)
        one = ", ".join(f"{_e(r['epsilon_one_step'])} (σ = {r['sigma']:g})" for r in rows)
        return fact(f"DP-SGD at the paper's noise levels: ε = {', '.join(_e(r['epsilon']) for r in rows)} at δ = {delta:g}",
                    f"exact ε per participation in the paper's setting: {eps}; the single attacked step alone: {one} "
                    f"(clip C = {p['clip']:g}, full batches). The paper states no ε; these are what its σ give",
                    delta=delta, settings=rows)

    return Reading(
        reading_id="dpsgd-epsilon", title="ε of DP-SGD at the paper's noise levels (accounting)", role=Role.FACT,
        description=("App. B.4's DP-SGD baselines (C = 1; σ = 0.01 EMNIST, 0.05 CIFAR-10, 0.001 CT) through privaudit's "
                     f"accountant at δ = {delta:g}: one participation of the paper's setting and the one attacked step."),
        claimed_epsilon=None, claimed_delta=None, analyse=analyse, decision=decision)


def _mg_fact_reading(claim: Claim) -> Reading:
    p = claim.params
    delta = float(p["delta"])
    spec = _trial_spec(p, "ig", 0)

    def analyse(_results) -> Analysis:
        check = release_is_deterministic(spec)
        result = epsilon_of(Composition.of(PureDP(math.inf), 1), delta, "auto")
        evidence = AccountingEvidence(label="FedReg+MG release (no noise)", accountant=f"{result.accountant} (by construction)",
                                      upper=result.epsilon, lower=math.inf, implementation=True,
                                      assumptions=("a deterministic, data-dependent release satisfies no (ε, δ) with δ < 1",))
        return Analysis((evidence,), details={**check, "accountant_epsilon": result.epsilon,
                                              "accountant_notes": list(result.notes), "delta": delta})

    def decision(analysis: Analysis, _significance: float):
        d = analysis.details
        return fact("no DP guarantee for FedReg+MG (ε = ∞)",
                    "MG adds no noise (eq. 12 removes one gradient direction; nothing is random), so the release is a "
                    f"deterministic function of the data: the same image under two seeds gives the identical update "
                    f"(‖Δ‖ = {d['repeat_distance']:.3g}), a neighbouring dataset a different one (‖Δ‖ = "
                    f"{d['neighbour_distance']:.3g}); hence P[M(D) = u] = 1 and P[M(D') = u] = 0, no (ε, δ) with δ < 1 "
                    f"holds, and the accountant gives ε = {_e(d['accountant_epsilon'])} at δ = {d['delta']:g} for PureDP(∞). "
                    "A fact by construction, not a refuted ε: the paper claims none", epsilon=math.inf)

    return Reading(
        reading_id="mg-no-dp-guarantee", title="FedReg+MG adds no noise: no DP guarantee (fact)", role=Role.FACT,
        description=(f"FedReg+MG's one-step release ({spec['dataset']}, {spec['model']}) twice on the same image under two "
                     "seeds and once on a neighbouring dataset; the accountant's ε of a release without noise."),
        claimed_epsilon=None, claimed_delta=None, analyse=analyse, decision=decision)


def _e(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.3g}"


def mg_vs_dpsgd_psnr(claim: Claim, trials: int) -> Sequence[Reading]:
    """The readings of ``fedreg-mg-vs-dpsgd-psnr`` (module docstring): ``trials`` images for IG, 16× for the analytic attack."""
    images = max(1, int(trials))
    return [
        _psnr_reading(claim, "ig", images),
        _psnr_reading(claim, "analytic", ANALYTIC_TRIAL_FACTOR * images),
        _dpsgd_epsilon_reading(claim),
        _mg_fact_reading(claim),
    ]
