"""The per-round one-run bound: max over rounds of one-run ε lower bounds, valid when a round's canaries are coupled.

Each round t gives a one-run audit of its K canaries (Steinke, Nasr & Jagielski 2023, Thm 3.1: m fair-coin canaries in
one training run; the bound needs no independence between canaries, only a fair coin each). Every round's bound is
computed at α/T (Bonferroni over the T rounds), so all hold together with probability ≥ 1 − α and so does their
maximum; any one round's release is a post-processing of the whole run's transcript, so its ε lower-bounds the run's.
Unlike ``gdp-best-round`` (:mod:`privaudit.stats.gdp_composition`) it stays valid when the release is not linear in
the canaries (clipping rescales the model by a factor that depends on how many canaries are in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.assumptions import MechanismFamily
from privaudit.stats.claim_power import NO_CLAIM, ClaimPower
from privaudit.stats.estimates import LowerBound
from privaudit.stats.estimators import estimate
from privaudit.stats.power import power_unavailable
from privaudit.stats.routes import ROUTES
from privaudit.stats.scores import check_positive_delta, check_significance

ONE_RUN_ROUND_VALIDITY = (
    "valid when a round's canaries are coupled (e.g. by clipping): each round is a one-run audit of its K canaries "
    "(Steinke, Nasr & Jagielski 2023, whose bound needs no independence between canaries, only a fair coin each), "
    "at α/T per round (Bonferroni), and any one round's release is a post-processing of the whole transcript"
)


def one_run_best_round_lower_bound(rounds: Sequence[tuple[object, object]], *, significance: float = 0.05,
                                   delta: float = 1e-5, claim: ClaimPower = NO_CLAIM) -> LowerBound:
    """max_t of per-round one-run ε lower bounds (Steinke, Nasr & Jagielski 2023, Thm 3.1), each at α/T.

    Its rounds are audited as mechanism family ``any`` (coupled or non-Gaussian rounds), which has no attack-based
    power (:func:`privaudit.stats.power.power_unavailable`): with a claimed ε, ``power`` is None and
    ``no_power_reason`` says why; the claim is taken for a uniform signature with the GDP bounds.
    """
    if not rounds:
        raise InvalidParameterError("one_run_best_round_lower_bound needs at least one round of scores")
    significance, delta = check_significance(significance), check_positive_delta(delta, "one-run")
    share = significance / len(rounds)
    per_round = [estimate("one-run", i, o, mechanism="any", design="bernoulli", significance=share, delta=delta)
                 for i, o in rounds]
    best = int(np.argmax([b.epsilon_lb for b in per_round]))
    no_power = None
    if claim.claimed_epsilon is not None:
        claim.request(delta)  # checked as every power request
        no_power = power_unavailable(MechanismFamily.ANY, ROUTES["one-run"], per_round[best].strategy, delta, claim.factor)
    chosen = per_round[best]
    return replace(chosen, estimator="one-run-best-round", significance=significance, power=None,
                   attack_optimal=bool(claim.attack_optimal), no_power_reason=no_power,
                   ceiling=max(b.ceiling for b in per_round), n_in=sum(b.n_in for b in per_round),
                   n_out=sum(b.n_out for b in per_round),
                   details={"rounds": len(rounds), "per_round_significance": share, "best_round_index": best,
                            "per_round_epsilon_lb": [b.epsilon_lb for b in per_round], "validity": ONE_RUN_ROUND_VALIDITY,
                            "reference": "Steinke, Nasr & Jagielski 2023 (one run, m canaries); Bonferroni over rounds"})
