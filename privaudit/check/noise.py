"""The noise check: the residual of each aggregate against the clipped mean of the recorded releases has the declared
law — std, per-tensor scale, Gaussian shape, added once — and none of three specific deviations shows.

Null hypothesis H0: every checked round is θ_r = θ_(r−1) + (Σ_k clip_C(Δ_k) + ξ_r)/A_r with ξ_r ~ N(0, s_r² I)
independent of the round's releases (:mod:`privaudit.check.residuals`). Then the standardised residuals u_r are
independent N(0, I_d) vectors, and the sub-tests below are exact (each at level ``level``/m for the m that run,
Bonferroni):

* **std, pooled** — Σ_r ‖u_r‖² ~ χ²(Σ d), two-sided. Its ratio ρ̂ = (Σ‖u_r‖²/Σd)^½ is the measured std over the
  declared; ρ̂² ≈ 2 reads "added twice", ρ̂ ≈ σ reads "σ² for σ" (the diagnostic in the detail);
* **std, per round** — ‖u_r‖² ~ χ²(d) for each round, two-sided, Bonferroni over rounds (a round with another scale);
* **std, per tensor** — Σ_r ‖u_(r,t)‖² ~ χ²(R·d_t) for each tensor t, two-sided, Bonferroni over tensors (a tensor left
  un-noised, or noised at its own scale);
* **Gaussian shape** — D'Agostino–Pearson K² on all coordinates of the u_r (D'Agostino 1971; D'Agostino & Pearson
  1973: skewness and kurtosis; ``scipy.stats.normaltest``), at least 20 coordinates;
* **deviations** — for each predicted deviation δ_r (per-tensor clipping, no clipping, realised divisor), the
  projections Z_r = ⟨u_r, δ_r⟩/‖δ_r‖ are independent N(0, 1) under H0 (δ_r is fixed before ξ_r is drawn), combined
  by Stouffer's Σ Z_r/√R', one-sided (the deviation's direction): a matched filter, far more powerful than the
  variance against that deviation.

When the measured std is below the declared (the pooled or a tensor's upper confidence limit ρ_U < 1, at half the
sub-test's level, the side that test rejects on), the declared releases with their noise scaled by ρ_U give a
certified ε lower bound (:mod:`privaudit.check.bound`), compared with the ε the ledger states.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from privaudit.accounting.ledger import SERVER
from privaudit.check.base import CertifiedBound, CheckResult, Findings, SubTest, decide, not_run
from privaudit.check.bound import claimed_epsilon, lower_epsilon
from privaudit.check.declared import describe_declarations
from privaudit.check.record import NEEDS_RELEASES, RunRecord
from privaudit.check.residuals import DEVIATIONS, Residuals, residuals
from privaudit.errors import PrivauditError

NAME = "noise"
NULL = ("each checked aggregate is θ_(r−1) + (Σ_k clip_C(Δ_k) + N(0, s²I))/A as declared, the noise independent of "
        "the round's releases")
#: The shape test needs at least this many coordinates (scipy's skewness test needs 8, kurtosis 20 for accuracy).
SHAPE_MINIMUM = 20


def two_sided_chi2(value: float, df: float) -> float:
    """Two-sided p-value of a χ²(df) statistic: 2·min(P(X ≤ value), P(X ≥ value)), capped at 1."""
    return float(min(1.0, 2.0 * min(stats.chi2.cdf(value, df), stats.chi2.sf(value, df))))


def log10_two_sided_chi2(value: float, df: float, factor: float = 1.0) -> float:
    """log₁₀ of ``factor`` × :func:`two_sided_chi2` (finite where the p-value underflows)."""
    log_p = math.log(2.0 * factor) + min(float(stats.chi2.logcdf(value, df)), float(stats.chi2.logsf(value, df)))
    return min(0.0, log_p / math.log(10.0))


def ratio_upper(value: float, df: float, alpha: float) -> float:
    """Upper confidence limit (level 1 − α) of ρ when value/ρ² ~ χ²(df): (value / χ²_α(df))^½."""
    return math.sqrt(value / stats.chi2.ppf(alpha, df)) if value > 0 else 0.0


def _reading(ratio: float, sigma: float | None) -> str:
    """What a measured/declared std ratio looks like (a hint, never a verdict)."""
    hints = []
    for k in (2, 3, 4):
        if abs(ratio - math.sqrt(k)) < 0.03 * math.sqrt(k):
            hints.append(f"≈ √{k}: noise added {k} times?")
    if sigma is not None and sigma != 1 and abs(ratio - sigma) < 0.03 * sigma:
        hints.append(f"≈ σ = {sigma:g}: std σ²C used for σC?")
    if ratio < 0.05:
        hints.append("≈ 0: no noise?")
    return f" ({'; '.join(hints)})" if hints else ""


def _realised_hint(found: Residuals) -> str:
    """A hint when every round's measured/declared std is the expected over the arrived count (noise divided by the
    number of updates that arrived, not by the declared count)."""
    close, differs = True, False
    for r in found.rounds:
        if r.arrived <= 0:
            return ""
        declared = r.release.declared_sampled or r.divisor
        expected = declared / r.arrived
        measured = math.sqrt(float(np.dot(r.standardised, r.standardised)) / r.standardised.size)
        differs |= abs(expected - 1) > 0.05
        close &= abs(measured - expected) <= 0.05 * expected
    return " (per round ≈ declared/arrived count: noise divided by the realised number of updates?)" if close and differs else ""


class NoiseCheck:
    """The noise check (module docstring)."""

    name = NAME

    def statistical(self, record: RunRecord) -> bool:
        """Whether it takes a share of α on ``record``: its tests are statistical wherever it runs."""
        return True

    def __init__(self, delta: float = 1e-5, accountant: str = "auto", claimed: float | None = None) -> None:
        self.delta = delta
        self.accountant = accountant
        self.claimed = claimed

    def missing(self, record: RunRecord) -> tuple[str, ...]:
        if not record.declared.central:
            problems = sorted(record.declared.problems.items())
            if problems:  # client-level events it could not read: say why, round by round
                return tuple(f"a client-level Gaussian release whose noise law the check reads (round {r}: {why})"
                             for r, why in problems[:3])
            return ("a client-level Gaussian release of the model (central DP) in the ledger",)
        if not record.releases_recorded:
            return (NEEDS_RELEASES,)
        found = residuals(record)
        return () if found.rounds else (found.reason,)

    def run(self, record: RunRecord, level: float) -> CheckResult:
        found = residuals(record)
        if not found.rounds:
            return not_run(self.name, found.reason, self.missing(record))
        sigma = found.rounds[0].release.multiplier
        shape_n = found.dimension * len(found.rounds)
        planned = ["std, pooled"]
        if len(found.rounds) > 1:
            planned.append("std, per round")
        if len(found.slices) > 1:
            planned.append("std, per tensor")
        if shape_n >= SHAPE_MINIMUM:
            planned.append("Gaussian shape")
        deviations = [d for d in DEVIATIONS if any(d in r.deviations and np.any(r.deviations[d]) for r in found.rounds)]
        planned += [f"deviation: {d}" for d in deviations]
        share = level / len(planned)
        tests = [self._pooled(found, share, sigma)]
        if "std, per round" in planned:
            tests.append(self._per_round(found, share))
        if "std, per tensor" in planned:
            tests.append(self._per_tensor(found, share))
        if "Gaussian shape" in planned:
            tests.append(self._shape(found, share))
        tests += [self._deviation(found, d, share) for d in deviations]
        bound = self._bound(record, found, share, "std, per tensor" in planned)
        rounds = tuple(r.round for r in found.rounds)
        assumptions = (
            *describe_declarations(record.declared),
            "the releases recorded are the updates that entered each aggregate; the clip is global over the checked "
            f"(trainable) tensors: {', '.join(record.names[:6])}{' …' if len(record.names) > 6 else ''}",
            f"sub-tests at α/{len(planned)} = {share:.3g} each (Bonferroni)",
        )
        skipped = [f"round {r}: {why}" for r, why in sorted(found.skipped.items())]
        details = {"rounds": list(rounds), "dimension": found.dimension, "skipped": skipped[:20],
                   "tau": [r.tau for r in found.rounds], "divisor": [r.divisor for r in found.rounds],
                   "arrived": [r.arrived for r in found.rounds],
                   "largest_update_norm": max((max(r.norms, default=0.0) for r in found.rounds), default=0.0),
                   "clip": found.rounds[0].release.clip}
        needs = (f"releases for {len(skipped)} round(s) left out",) if skipped else ()
        return decide(self.name, NULL, tests, level, Findings(
            assumptions, needs, rounds, bound, details,
            passed_reason=f"the residuals of {len(rounds)} round(s) fit the declared noise (measured/declared std "
                          f"{tests[0].statistic:.4g})"))

    # -- sub-tests ---------------------------------------------------------------------------------------
    @staticmethod
    def _pooled(found: Residuals, level: float, sigma: float) -> SubTest:
        value = float(sum(np.dot(r.standardised, r.standardised) for r in found.rounds))
        df = float(found.dimension * len(found.rounds))
        p = two_sided_chi2(value, df)
        ratio = math.sqrt(value / df)
        upper = ratio_upper(value, df, level / 2)
        return SubTest("std, pooled", "Σ_r ‖u_r‖² ~ χ²(R·d): the noise std is the declared one", ratio, p, level, p <= level,
                       f"measured/declared std {ratio:.4g} (upper limit {upper:.4g}) over {len(found.rounds)} round(s) × "
                       f"{found.dimension} coordinates{_realised_hint(found) or _reading(ratio, sigma)}",
                       log10_two_sided_chi2(value, df))

    @staticmethod
    def _per_round(found: Residuals, level: float) -> SubTest:
        d = float(found.dimension)
        values = [(r.round, float(np.dot(r.standardised, r.standardised))) for r in found.rounds]
        ps = [(log10_two_sided_chi2(v, d, len(values)), two_sided_chi2(v, d), r, math.sqrt(v / d)) for r, v in values]
        log_p, p, worst, ratio = min(ps)
        adjusted = min(1.0, p * len(ps))
        return SubTest("std, per round", "each ‖u_r‖² ~ χ²(d) (Bonferroni over rounds)", ratio, adjusted, level,
                       adjusted <= level, f"round {worst}: measured/declared std {ratio:.4g}{_realised_hint(found)}", log_p)

    @staticmethod
    def _per_tensor(found: Residuals, level: float) -> SubTest:
        rows = []
        for name, part in found.slices.items():
            value = float(sum(np.dot(r.standardised[part], r.standardised[part]) for r in found.rounds))
            df = float((part.stop - part.start) * len(found.rounds))
            rows.append((log10_two_sided_chi2(value, df, len(found.slices)), two_sided_chi2(value, df), name,
                         math.sqrt(value / df)))
        log_p, p, name, ratio = min(rows)
        adjusted = min(1.0, p * len(rows))
        return SubTest("std, per tensor", "each tensor's Σ_r ‖u_(r,t)‖² ~ χ²(R·d_t) (Bonferroni over tensors)", ratio,
                       adjusted, level, adjusted <= level, f"tensor {name}: measured/declared std {ratio:.4g}"
                       + ("" if ratio > 0.05 else " (no noise?)"), log_p)

    @staticmethod
    def _shape(found: Residuals, level: float) -> SubTest:
        values = np.concatenate([r.standardised for r in found.rounds])
        if np.all(values == values[0]):
            return SubTest("Gaussian shape", "the coordinates of the u_r are Gaussian (D'Agostino–Pearson K²)", None, 0.0,
                           level, True, "every residual coordinate is equal: no noise")
        statistic, p = stats.normaltest(values)
        skew, kurt = float(stats.skew(values)), float(stats.kurtosis(values))
        return SubTest("Gaussian shape", "the coordinates of the u_r are Gaussian (D'Agostino–Pearson K²)", float(statistic),
                       float(p), level, float(p) <= level, f"skewness {skew:.3g}, excess kurtosis {kurt:.3g} over "
                       f"{values.size} coordinates")

    @staticmethod
    def _deviation(found: Residuals, deviation: str, level: float) -> SubTest:
        zs = []
        for r in found.rounds:
            d = r.deviations.get(deviation)
            if d is None:
                continue
            norm = float(np.sqrt(np.dot(d, d)))
            if norm > 0:
                zs.append(float(np.dot(r.standardised, d)) / norm)
        z = float(np.sum(zs) / math.sqrt(len(zs)))
        p = float(stats.norm.sf(z))
        strength = [float(np.sqrt(np.dot(r.deviations[deviation], r.deviations[deviation])))
                    for r in found.rounds if deviation in r.deviations]
        return SubTest(f"deviation: {deviation}", f"no component along the {deviation} prediction (Stouffer Z over "
                       f"{len(zs)} round(s), one-sided)", z, p, level, p <= level,
                       f"Z = {z:.3g}; the prediction is {np.mean(strength):.3g} noise std long per round (Z ≈ that length "
                       "if it happened)", float(stats.norm.logsf(z)) / math.log(10.0))

    # -- the certified bound ----------------------------------------------------------------------------
    def _bound(self, record: RunRecord, found: Residuals, level: float, per_tensor: bool) -> CertifiedBound | None:
        value = float(sum(np.dot(r.standardised, r.standardised) for r in found.rounds))
        df = float(found.dimension * len(found.rounds))
        candidates = [(ratio_upper(value, df, level / 2), "all checked tensors", level / 2)]
        if per_tensor:
            share = level / len(found.slices) / 2
            for name, part in found.slices.items():
                v = float(sum(np.dot(r.standardised[part], r.standardised[part]) for r in found.rounds))
                candidates.append((ratio_upper(v, float((part.stop - part.start) * len(found.rounds)), share),
                                   f"tensor {name} (a client update of norm C within it alone)", share))
        ratio, scope, alpha = min(candidates, key=lambda c: c[0])
        if ratio >= 1.0 or not all(r.release.alone for r in found.rounds):
            return None  # no noise below the declared, or an event that composes this release with another
        events = [r.release.event for r in found.rounds]
        try:
            epsilon, how = lower_epsilon(record.ledger, events, ratio, self.delta)
        except PrivauditError:
            return None  # no accountant could compute it: no bound is stated (the test's failure stands)
        claimed = (self.claimed if self.claimed is not None
                   else claimed_epsilon(record.ledger, SERVER, self.delta, self.accountant))
        confidence = 1.0 - (level / 2 + (level / 2 if per_tensor else 0.0))
        assumptions = (
            f"the noise of the {len(events)} checked round(s) is Gaussian (as declared) with std at most {ratio:.4g} × the "
            f"declared (upper limit at confidence {1 - alpha:.4g}); one ratio for all rounds",
            "the declared sensitivity: some client's update reaches the clip C",
            f"ε composed over the checked rounds only ({how})",
        )
        return CertifiedBound(epsilon, self.delta, confidence, ratio, SERVER, tuple(r.round for r in found.rounds), how,
                              assumptions, claimed, scope)
