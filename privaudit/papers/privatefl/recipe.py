"""Recipes for PrivateFL's privacy claims (001, USENIX Security 2023; reference code BHui97/PrivateFL).

``central_dp`` — CDP at (8, 1e-3) (audit points P1, P2). The reference server clips every aggregated tensor k of an
update to C_k and adds N(0, (σC_k)²) to each tensor's sum. Rescaling block k by 1/C_k shows the release is a
Gaussian mechanism with sensitivity √L and unit noise, i.e. multiplier σ/√L (``per_tensor_effective_multiplier``);
σ itself was calibrated (opacus ``get_noise_multiplier``) as if the whole update had one clip bound. With all
clients in every round (q = 1) the composition is Gaussian and its ε is exact.

It is also a certified *lower* bound for the reference code, despite its data-dependent clip norms (P2): take
K ≥ 2 identical clients whose every tensor update has norm ζ_k ≤ 10, and add a client whose tensor updates
are larger. The per-tensor median (capped at 10) is ζ_k with and without the added client, so the noise is
the same in both worlds and the added client moves every clipped block by exactly ζ_k — the worst case of the
Gaussian mechanism above. Readings: one per setting of the paper (the numbers of tensors L are architecture
facts) and the paper's Algorithm 1 (normalise each update by its own norm, noise σ·median norm), whose
accounting has no valid upper bound because the median is unprivatised.

``ldp_participation`` — LDP at (8, 1e-3) per client (audit point P4): σ calibrated for E·R·sr epochs (the clients'
expected participation); the run stops after the first round in which some client's opacus ε exceeds 8.
Readings: the reference code's run (with its stop rule), the paper's reported 150 rounds, and the older
code's conservative calibration for E·R epochs (validity).

``client-canary-attack`` (implementation) — client-level canary clients (Andrew et al. 2024) in scaled-down
PrivateFL-CDP runs of the reference code (issue 6's training code): cosines of the canary directions with the final
model's delta, bounded by the one-run estimators (trials in :mod:`privaudit.papers.privatefl.trials`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Composition, Gaussian, SubsampledGaussian
from privaudit.audit.claims import Claim
from privaudit.audit.plan import (
    Analysis,
    AttackInfo,
    EstimatorChoice,
    Reading,
    Role,
    TrialPlan,
)
from privaudit.audit.recipes.accounting import epsilon_of, gaussian_composition_epsilon, gaussian_mu
from privaudit.audit.recipes.trial_results import summary
from privaudit.audit.verdict import AccountingEvidence
from privaudit.models import build_model
from privaudit.papers.privatefl.closed_forms import per_tensor_effective_multiplier
from privaudit.papers.privatefl.experiment import PrivateFLConfig, train_privatefl
from privaudit.papers.privatefl.trials import canary_client_trial, participation_trial

#: Keys the reference code keeps on the client (never aggregated): the transformation and norm layers.
PERSONAL_KEYS = ("norm", "bn", "downsample.1")


@lru_cache(maxsize=32)
def opacus_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """The reference code's calibration: opacus ``get_noise_multiplier`` with its RDP accountant."""
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate,
                                      steps=int(steps), accountant="rdp"))


def aggregated_tensors(model_name: str) -> tuple[str, ...]:
    """Names of the tensors the reference server aggregates (and clips one by one) for an MNIST-shaped model."""
    model = build_model(model_name, (1, 28, 28), 10)
    return tuple(name for name, p in model.named_parameters() if p.requires_grad and not any(k in name for k in PERSONAL_KEYS))


# ================================================================================================
# CDP (P1, P2)
# ================================================================================================
def central_dp(claim: Claim, trials: int) -> Sequence[Reading]:
    """001 §5's CDP claim (ε = 8): per setting, the ε the reference's per-tensor clipping really gives (σ/√L, audit point
    P1) and Alg. 1 as printed (median-norm noise, P2), then the client-level canary attack on a trained federation."""
    p = claim.params
    eps, delta = claim.epsilon, claim.delta
    readings: list[Reading] = []
    for setting_id, text, model_name, rounds, sample_rate, given_tensors in p["settings"]:
        def analyse(_results, model_name=model_name, rounds=rounds, q=sample_rate, given=given_tensors) -> Analysis:
            names = aggregated_tensors(model_name) if model_name else None
            count = len(names) if names else int(given)
            sigma = opacus_noise_multiplier(eps, delta, q, rounds)
            effective = per_tensor_effective_multiplier(sigma, count)
            calibrated = epsilon_of(Composition.of(Gaussian(sigma), rounds), delta)
            actual = epsilon_of(Composition.of(Gaussian(effective.value), rounds), delta)
            rdp = epsilon_of(Composition.of(Gaussian(effective.value), rounds), delta, "rdp")
            evidence = (
                AccountingEvidence(
                    label=f"as calibrated: one Gaussian mechanism of multiplier σ = {sigma:.4g} per round, {rounds} rounds",
                    accountant=calibrated.accountant, upper=calibrated.epsilon, implementation=False, assumptions_hold=False,
                    assumptions=("one clip bound over the whole update (not what the reference code does)",)),
                AccountingEvidence(
                    label=f"reference code: {count} tensors clipped and noised separately, effective multiplier σ/√L = {effective.value:.4g}",
                    accountant=actual.accountant, upper=actual.epsilon, lower=actual.lower if actual.lower is not None else actual.epsilon,
                    implementation=True, assumptions_hold=False,
                    assumptions=(*effective.assumptions,
                                 "exact: all clients in every round (q = 1), so the composition is Gaussian (μ = √T·√L/σ)",
                                 "lower bound despite the unprivatised median clip (P2): K ≥ 2 identical clients plus one whose "
                                 "tensor updates are larger leave every per-tensor median unchanged, and the added client "
                                 "shifts each clipped block by its full clip norm",
                                 "upper bound not valid for the reference code: its clip norms are unprivatised medians (P2)")),
                AccountingEvidence(
                    label="reference code, RDP accountant (audit point P1)", accountant="rdp", upper=rdp.epsilon,
                    implementation=True, assumptions_hold=False,
                    assumptions=("an upper bound; the clip norms are unprivatised medians (P2)",)),
            )
            details = {"noise_multiplier": sigma, "aggregated_tensors": count, "tensor_names": list(names) if names else None,
                       "effective_multiplier": effective.value, "rounds": rounds, "sample_rate": q,
                       "calibration": "opacus get_noise_multiplier(target ε, δ, sample_rate, steps = rounds), RDP"}
            return Analysis(evidence, details=details)

        readings.append(Reading(
            reading_id=f"reference-{setting_id}",
            title=f"reference per-tensor clipping — {text}",
            role=Role.IMPLEMENTATION,
            description=f"{text}; σ from opacus for (ε, δ) = ({eps:g}, {delta:g}); per-tensor clip and noise as FedServer.agg_updates.",
            claimed_epsilon=eps,
            claimed_delta=delta,
            analyse=analyse,
        ))

    first = p["settings"][0]

    def analyse_alg1(_results, rounds=first[3], q=first[4]) -> Analysis:
        sigma = opacus_noise_multiplier(eps, delta, q, rounds)
        table = {f"{z:g}": gaussian_composition_epsilon(sigma * z, rounds, delta) for z in p["median_levels"]}
        evidence = (AccountingEvidence(
            label="Alg. 1: each update divided by its own norm (sensitivity 1), noise σ·ζ with ζ the median update norm",
            accountant="exact Gaussian composition, conditional on ζ", upper=math.inf, implementation=True, assumptions_hold=False,
            assumptions=("ζ is computed from the raw updates and not privatised: no valid upper bound",
                         "for data whose median update norm is ζ the noise is σζ on sensitivity 1: "
                         + ", ".join(f"ζ = {z}: ε = {v:.4g}" for z, v in table.items()),
                         "under-noised whenever ζ < 1; the reference code does something else again (per-tensor clipping)")),)
        return Analysis(evidence, details={"noise_multiplier": sigma, "epsilon_by_median_norm": table, "rounds": rounds})

    readings.append(Reading(
        reading_id="paper-alg1",
        title="the paper's Algorithm 1 (normalise by own norm, noise σ·median)",
        role=Role.PAPER,
        description=f"Alg. 1 as printed, at the first setting ({first[1]}).",
        claimed_epsilon=eps,
        claimed_delta=delta,
        analyse=analyse_alg1,
    ))
    readings.append(client_canary_attack(claim, trials))
    return readings


#: The reference clips each tensor at the unprivatised median of the clients' norms, so the noise scale depends on the
#: data and the release is not Gaussian-shaped: only routes valid for any mechanism (the (ε, δ)-DP curve).
CANARY_ESTIMATORS = (EstimatorChoice("one-run"), EstimatorChoice("one-run-fdp-box"))
CANARY_THREAT = ("the server (or anyone who sees the released global models): knows the initial model and the canary "
                 "directions; the final model only is scored (the claim covers every round's release, a stronger view)")
ONE_RUN_NOTE = ("one-run bounds (Steinke, Nasr & Jagielski 2023; Mahloujifar et al. 2024): every canary is an independent "
                "fair coin in exactly one run, so the canaries of all runs pooled are one one-run experiment; at δ = 1e-3 "
                "the one-run box bound's 2mδ term caps what any attack can certify — see the ceilings")


def client_canary_attack(claim: Claim, trials: int) -> Reading:
    """Client-level canary clients (Andrew et al. 2024) in scaled-down PrivateFL-CDP runs of the reference code.

    ``trials`` runs, each with ``canaries_per_run`` canary clients (each inserted w.p. ½) beside the real clients;
    σ calibrated by the reference's opacus call for the claimed (ε, δ) over the run's rounds at its client rate.
    Trials in :mod:`privaudit.papers.privatefl.trials`.
    """
    p = claim.params
    run = dict(p["canary_run"])
    eps, delta = claim.epsilon, claim.delta
    m = int(p["canaries_per_run"])
    spec = {"run": run, "variant": "reference", "epsilon": eps, "delta": delta, "canaries": m}
    text = (f"{run['num_clients']} real clients ({run['dataset']}, privatefl-dnn with the personalised transformation), "
            f"{run['rounds']} rounds, all clients every round; {m} canary clients per run, each inserted w.p. ½")

    def analyse(results: Sequence[dict[str, Any]]) -> Analysis:
        in_s = np.array([s for r in results for s in r["in"]], dtype=np.float64)
        out_s = np.array([s for r in results for s in r["out"]], dtype=np.float64)
        d = int(results[0]["dimension"])
        sigma = float(results[0]["noise_multiplier"])
        tensors = len(results[0]["clip_history"][0]) if results[0]["clip_history"] else 0
        clips = [c for r in results for rnd in r["clip_history"] for c in rnd.values()]
        effective = per_tensor_effective_multiplier(sigma, tensors).value if tensors else sigma
        scale = math.sqrt(d)  # the null cosine has variance exactly 1/d
        iter_in = np.array([s for r in results for s in r["all_iterates_in"]]) * scale
        iter_out = np.array([s for r in results for s in r["all_iterates_out"]]) * scale
        details = {
            "runs": len(results), "inserted": int(in_s.size), "unseen": int(out_s.size), "dimension": d,
            "noise_multiplier": sigma, "aggregated_tensors": tensors, "effective_multiplier": effective,
            "rounds": run["rounds"], "real_clients": int(results[0]["real_clients"]),
            "scores_times_sqrt_d": {"final_model_in": summary(in_s * scale), "final_model_out": summary(out_s * scale),
                                    "all_iterates_in": summary(iter_in), "all_iterates_out": summary(iter_out)},
            "per_tensor_clip_norms": summary(clips) if clips else None,
            "exact_epsilon_of_this_run": gaussian_composition_epsilon(effective, int(run["rounds"]), delta),
            "mu_of_this_run": gaussian_mu(effective, int(run["rounds"])),
            "note": "cosines × √d: the unseen canaries' null is ≈ N(0, 1); the exact ε of the scaled-down run (per-tensor "
                    "multiplier σ/√L, all clients every round) is what a perfect attack could reach with unlimited canaries",
        }
        return Analysis((), in_s, out_s, details, notes=(ONE_RUN_NOTE,))

    return Reading(
        reading_id="client-canary-attack",
        title="client-level canary clients in trained PrivateFL-CDP runs (reference per-tensor clipping)",
        role=Role.IMPLEMENTATION,
        description=(f"{text}. The reference server (FedServer.agg_updates, audit point P1–P2): per-tensor clip at the "
                     "unprivatised median norm, N(0, (σζ_t)²) per tensor; σ from opacus for the claimed (ε, δ) over the "
                     "run's rounds. Score: cosine of each canary direction with the final model's delta."),
        claimed_epsilon=eps,
        claimed_delta=delta,
        analyse=analyse,
        trials=TrialPlan(canary_client_trial, spec, trials, "PrivateFL-CDP runs with canary clients"),
        estimators=CANARY_ESTIMATORS,
        mechanism="any",
        design="bernoulli",
        attack=AttackInfo("canary clients (Andrew et al. 2024)", CANARY_THREAT,
                          "a client whose update is a fixed random unit direction on the aggregated parameters, scaled "
                          "×10⁴ of the clip cap so the server's clipping always binds",
                          "cosine of the direction with the final model's delta (larger = inserted)"),
    )


# ================================================================================================
# LDP participation (P4)
# ================================================================================================
def _ldp_setup(p: dict[str, Any]) -> dict[str, Any]:
    """The reference LDP client's schedule (BHui97/PrivateFL@39711e6:FedUser.py with opacus): steps per epoch =
    ⌈|D|/B⌉, q = 1/that, and the epochs σ is calibrated for — expected E·R·sr (the code) or every round E·R (P4)."""
    steps_per_epoch = math.ceil(p["client_size"] / p["batch_size"])  # opacus: len(data_loader)
    return {"steps_per_epoch": steps_per_epoch, "sample_rate": 1.0 / steps_per_epoch,
            "expected_epochs": p["epochs"] * p["rounds"] * p["sample_rate"], "every_round_epochs": p["epochs"] * p["rounds"]}


def _client_epsilon(sigma: float, q: float, steps: int, delta: float, accountant: str):
    return epsilon_of(Composition.of(SubsampledGaussian(sigma, q), int(steps)), delta, accountant)


def _first_count_over(sigma: float, q: float, steps_per_epoch: int, delta: float, target: float, limit: int) -> int | None:
    """Smallest participation count whose opacus-style RDP ε exceeds ``target`` (ε grows with the count)."""
    low, high = 0, limit
    if _client_epsilon(sigma, q, limit * steps_per_epoch, delta, "rdp").epsilon <= target:
        return None
    while high - low > 1:  # ε(low) ≤ target < ε(high)
        middle = (low + high) // 2
        if middle > 0 and _client_epsilon(sigma, q, middle * steps_per_epoch, delta, "rdp").epsilon > target:
            high = middle
        else:
            low = middle
    return high


def _participation_evidence(label: str, sigma: float, q: float, spe: int, delta: float, counts: Sequence[int],
                            runs: int) -> tuple[AccountingEvidence, ...]:
    """ε of the most-sampled client's DP-SGD steps (RDP upper, PRV interval) against the calibration's participation
    (audit point P4): the fewest and most participations over the simulated runs bracket it."""
    c_min, c_max = int(min(counts)), int(max(counts))
    rdp = _client_epsilon(sigma, q, c_max * spe, delta, "rdp")
    prv_high = _client_epsilon(sigma, q, c_max * spe, delta, "prv")
    prv_low = _client_epsilon(sigma, q, c_min * spe, delta, "prv")
    lower = prv_low.lower if prv_low.lower is not None else None
    common = (f"σ = {sigma:.4g}, Poisson sampling at q = {q:g} (opacus), {spe} steps per participation",
              f"over {runs} simulated runs the most-sampled client took part between {c_min} and {c_max} times")
    return (
        AccountingEvidence(label=f"{label}: opacus RDP (the reference's own accountant), {c_max} participations",
                           accountant="rdp", upper=rdp.epsilon, implementation=True, assumptions_hold=True, assumptions=common),
        AccountingEvidence(
            label=f"{label}: PRV, most-sampled client", accountant="prv", upper=prv_high.epsilon, lower=lower,
            implementation=True, assumptions_hold=True,
            assumptions=(*common,
                         f"upper at {c_max} participations (the largest of any run), lower at {c_min} (the smallest): they hold in every simulated run",
                         "all-iterates DP-SGD accounting, which the paper's opacus accounting is; for general (non-convex) losses "
                         "releasing only the per-round model is not more private (Annamalai 2024)")),
    )


def _ledger_details(selection: list[list[int]], rounds_run: int, sigma: float, q: float, spe: int, delta: float,
                    target: float) -> dict[str, Any]:
    """Replay one simulated run into a privacy ledger and summarise its per-client ε (RDP, as opacus)."""
    ledger = PrivacyLedger()
    mechanism = SubsampledGaussian(sigma, q)
    for r, clients in enumerate(selection[:rounds_run], start=1):
        for c in clients:
            ledger.record(PrivacyEvent(str(c), r, mechanism, spe, assumptions=("opacus DP-SGD, one epoch",)))
    for c in {c for clients in selection for c in clients}:
        ledger.set_budget(str(c), target, delta)
    s = ledger.summary(delta, "rdp")
    eps = [c.epsilon for c in s.per_client.values()]
    return {"accountant": s.accountant, "clients": len(eps), "max_epsilon": s.max_epsilon, "mean_epsilon": s.mean_epsilon,
            "over_budget": sum(c.over_budget for c in s.per_client.values()), "rounds_replayed": rounds_run,
            "epsilon_quartiles": [float(v) for v in np.quantile(eps, [0.25, 0.5, 0.75])]}


def ldp_participation(claim: Claim, trials: int) -> Sequence[Reading]:
    """001 §3.3's LDP claim: σ_i calibrated for the expected participation E·R·sr (the reference) while clients are
    sampled uniformly each round (audit point P4), the every-round calibration, and a trained federation's ledger."""
    p = claim.params
    eps, delta = claim.epsilon, claim.delta
    setup = _ldp_setup(p)
    spe, q = setup["steps_per_epoch"], setup["sample_rate"]
    plan = TrialPlan(participation_trial,
                     {"num_clients": p["num_clients"], "sample_rate": p["sample_rate"], "rounds": p["rounds"]},
                     trials, "simulated participation")
    description = (f"{p['num_clients']} clients, {int(p['sample_rate'] * p['num_clients'])} drawn per round without replacement "
                   f"(np.random.choice), {p['rounds']} rounds, {p['epochs']} epoch of DP-SGD per participation on "
                   f"{p['client_size']} records with batch {p['batch_size']} (q = {q:g})")

    def analyse_reference(results: Sequence[dict[str, Any]]) -> Analysis:
        sigma = opacus_noise_multiplier(eps, delta, q, round(setup["expected_epochs"] * spe))
        stop_count = _first_count_over(sigma, q, spe, delta, eps, p["rounds"])
        stops, at_stop = [], []
        for r in results:
            by_round = r["max_count_by_round"]
            stop = next((i + 1 for i, c in enumerate(by_round) if stop_count is not None and c >= stop_count), len(by_round))
            stops.append(stop)
            at_stop.append(by_round[stop - 1])
        evidence = _participation_evidence("reference run (stops after the first round with max ε > target)", sigma, q, spe, delta,
                                           at_stop, len(results))
        selection = results[0].get("selection")
        details = {"noise_multiplier": sigma, "calibrated_epochs": setup["expected_epochs"],
                   "participations_over_target": stop_count, "stop_round": summary(stops), "nominal_rounds": p["rounds"],
                   "max_participations_at_stop": summary(at_stop),
                   "note": "the round in which the target is exceeded is evaluated and can be the reported best model"}
        if selection:
            details["ledger_first_run"] = _ledger_details(selection, stops[0], sigma, q, spe, delta, eps)
        return Analysis(evidence, details=details)

    def analyse_nominal(results: Sequence[dict[str, Any]]) -> Analysis:
        sigma = opacus_noise_multiplier(eps, delta, q, round(setup["expected_epochs"] * spe))
        final = [max(r["final_counts"]) for r in results]
        evidence = _participation_evidence(f"all {p['rounds']} reported rounds", sigma, q, spe, delta, final, len(results))
        return Analysis(evidence, details={"noise_multiplier": sigma, "max_participations": summary(final),
                                           "expected_participations": setup["expected_epochs"] / p["epochs"]})

    def analyse_every_round(results: Sequence[dict[str, Any]]) -> Analysis:
        sigma = opacus_noise_multiplier(eps, delta, q, int(setup["every_round_epochs"] * spe))
        final = [max(r["final_counts"]) for r in results]
        evidence = _participation_evidence("calibrated for every round", sigma, q, spe, delta, final, len(results))
        return Analysis(evidence[:1], details={"noise_multiplier": sigma, "max_participations": summary(final)})

    with_selection = TrialPlan(plan.fn, {**plan.spec, "keep_selection": True}, trials, plan.label)
    return [
        Reading("reference-expected-participation", "reference code: σ for E·R·sr epochs, stop once max ε > 8",
                Role.IMPLEMENTATION, f"{description}; σ calibrated for E·R·sr epochs (FedUser.py, newest) and the run stops "
                                     "after the first round in which max ε exceeds the target.",
                eps, delta, analyse_reference, trials=with_selection),
        Reading("paper-reported-rounds", f"the paper's reported {p['rounds']} rounds with the same σ",
                Role.PAPER, f"{description}; the σ above, all {p['rounds']} rounds the paper reports.",
                eps, delta, analyse_nominal, trials=plan),
        Reading("every-round-calibration", "older code: σ calibrated for E·R epochs (every round)",
                Role.VALIDITY, f"{description}; σ calibrated as if every client took part in every round (conservative).",
                eps, delta, analyse_every_round, trials=plan),
        trained_ldp_run(claim, trials),
    ]


def trained_ldp_run(claim: Claim, trials: int) -> Reading:
    """A real PrivateFL-LDP federation (issue 6's training code): its ledger's realised per-client ε.

    A scaled-down run (``trained_run`` parameters; rounds = min(max_rounds, 4·trials)) with the reference
    calibration for expected participation and the reference's DP-SGD rate q = 1/len(DataLoader) (``ldp_rate="loader"``),
    every round run (the paper's reported rounds) and overruns recorded, so the ledger shows what each client spent.
    """
    run = dict(claim.params["trained_run"])
    rounds = max(4, min(int(run.pop("max_rounds")), 4 * int(trials)))
    eps, delta = claim.epsilon, claim.delta

    def analyse(_results) -> Analysis:
        config = PrivateFLConfig(**run, rounds=rounds, privacy="ldp", epsilon=eps, delta=delta, participation="expected",
                                 budget_policy="record", eval_every=rounds, ldp_rate="loader")
        ledger = train_privatefl(config).ledger
        summary = ledger.summary(delta, "rdp")
        worst = max(summary.per_client.values(), key=lambda c: c.epsilon)
        prv = epsilon_of(ledger.composition_for(worst.client_id), delta, "prv")
        evidence = (
            AccountingEvidence(label=f"trained run: ledger, largest per-client ε (client {worst.client_id}, {worst.steps} steps)",
                               accountant="rdp", upper=summary.max_epsilon, implementation=True, assumptions_hold=summary.all_valid,
                               assumptions=worst.assumptions[:6]),
            AccountingEvidence(label=f"trained run: PRV for client {worst.client_id}", accountant="prv", upper=prv.epsilon,
                               lower=prv.lower, implementation=True, assumptions_hold=summary.all_valid,
                               assumptions=("all-iterates DP-SGD accounting of the client's recorded steps",)),
        )
        details = {"config": config.to_dict(), "max_epsilon": summary.max_epsilon, "mean_epsilon": summary.mean_epsilon,
                   "over_budget": sum(c.over_budget for c in summary.per_client.values()),
                   "per_client": {cid: {"epsilon": c.epsilon, "steps": c.steps, "rounds": c.rounds}
                                  for cid, c in summary.per_client.items()}}
        return Analysis(evidence, details=details)

    return Reading("trained-run", f"a trained PrivateFL-LDP federation over all its rounds ({run['num_clients']} clients, {rounds} rounds, "
                   f"{run['dataset']})",
                   Role.PAPER,
                   "PrivateFL (issue 6's training code) with LDP calibrated for expected participation and trained at opacus' "
                   "q = 1/⌈|D_i|/64⌉ (both the reference code's) and every round run, as the paper reports its rounds; overruns are "
                   "recorded in the ledger, whose per-client ε is the realised privacy.",
                   eps, delta, analyse)
