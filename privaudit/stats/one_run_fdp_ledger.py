"""One-run f-DP audit against the run's own trade-off curve (route ``one-run-fdp-ledger``).

The guessing game is that of :mod:`privaudit.stats.one_run` (Steinke, Nasr & Jagielski 2023: m canaries, each
included by an independent fair coin, r guesses of which v are right); the test is the f-DP recursion of Mahloujifar,
Melis & Chaudhuri 2024 (:func:`privaudit.stats.one_run_fdp.curve_falsified`), and the hypothesis is a member of a
:class:`~privaudit.stats.curve_family.CurveFamily` — by default the ledger's own mechanism with its noise scaled
(:class:`~privaudit.stats.ledger_family.LedgerFamily`, e.g. the T-fold Poisson-subsampled Gaussian of rate q). The
bound is the ε at δ of the least private member the guesses reject.

Threat model and why it is valid: the mechanism *as declared* (its ledger: T, q, sampling, neighbouring, σ) is
f_σ-DP for its own curve f_σ, which the accountant evaluates; so rejecting f_σ refutes the declaration, and the
bound refutes every claim "the run is this mechanism with noise at least σ'" for σ' down to the reported member.
The auditor's canaries must be subject to the mechanism as declared (sampled by the run's own sampling, clipped like
any other contribution) — a canary the mechanism always includes audits a different, un-amplified mechanism — and
their membership must be fair coins (design ``bernoulli``). Unlike ``one-run-fdp`` (Gaussian curve through (ε, δ),
valid only for un-subsampled Gaussian mechanisms) this curve is the subsampled mechanism's own, so it is valid for
subsampled runs; unlike ``one-run-fdp-box`` it does not give away the curve's shape for the (ε, δ) box. It says
nothing about a mechanism whose implementation differs from its declaration in anything but the noise scale.
"""

from __future__ import annotations

from typing import Any

from privaudit.stats.curve_family import CurveFamily
from privaudit.stats.guess_selection import GuessTest, guess_bound
from privaudit.stats.one_run_fdp import curve_falsified
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import GuessStrategy


def ledger_guess_test(family: CurveFamily, delta: float) -> GuessTest:
    """The ε lower bound of one guess count (m, r, v) at level α against ``family`` (0 when v = 0).

    The counts of one audit are tested one after the other and only the largest bound is kept
    (:func:`privaudit.stats.guess_selection.guess_bound`), so each count's search starts above the best bound so far
    (per m, level and precision) and a count that cannot beat it is credited 0 — a valid bound, never the kept one.
    """
    best: dict[tuple[int, float, bool], float] = {}

    def test(m: int, r: int, v: int, share: float, precise: bool) -> float:
        if v == 0 or r == 0:
            return 0.0
        key = (m, share, precise)
        epsilon = family.certified_epsilon(lambda g: curve_falsified(m, r, v, share, g), delta, precise,
                                           best.get(key, 0.0))
        best[key] = max(best.get(key, 0.0), epsilon)
        return epsilon

    return test


def one_run_fdp_ledger_bound(scores: AuditScores, significance: float, delta: float, strategy: GuessStrategy,
                             family: CurveFamily) -> tuple[float, dict[str, Any]]:
    """ε lower bound of the one-run f-DP audit against ``family``'s curves under ``strategy`` (validated inputs)."""
    epsilon, details, split_values = guess_bound(scores, strategy, significance, ledger_guess_test(family, delta))
    details["curve"] = family.describe()
    if split_values:
        details["split_epsilons"] = list(split_values)
    return epsilon, details
