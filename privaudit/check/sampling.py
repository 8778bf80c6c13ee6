"""The sampling check: the clients observed training each round fit the client sampling the ledger declares.

The declared scheme is the client-level events' (:mod:`privaudit.check.declared`): every client (q = 1), a fixed-size
sample of m = q·N drawn without replacement, or Poisson sampling at rate q — each client independently with
probability q, the scheme whose amplification the accountants apply (Zhu & Wang 2019, "Poisson subsampled Rényi
differential privacy"; Balle, Barthe & Gaboardi 2018 for the fixed-size pairs). Observed: the clients recorded as
training in each round (``metrics[r].clients``).

* every client / fixed size — exact: each round trains N (or m) clients; where Flower's tap records that fewer replied
  than were sampled, at most m. No α is spent.
* Poisson at rate q — null H0: the counts n_r are independent Binomial(N, q) and each client's participations
  independent Bernoulli(q). Three tests at a third of the level each:
  - **rate**: Σ_r n_r ~ Binomial(R·N, q), exact two-sided binomial test (q fits);
  - **counts per round**: V = Σ_r (n_r − Nq)², two-sided against its law under H0 (Monte Carlo with a fixed seed,
    p = (1 + #{V_b ≤ V})/(1 + B) per tail: valid at any B, Phipson & Smyth 2010). A loop that samples a fixed number
    every round has V at its minimum — the "constant count declared Poisson" bug;
  - **participation per client**: W = Σ_k (c_k − Rq)² over the clients' participation counts c_k ~ Binomial(R, q),
    two-sided the same way (the same clients always, or a round robin).

Record-level sampling (a DP-SGD step's batch inside a client) is not recorded by any run: listed as what the check
needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from privaudit.accounting.mechanisms import Sampling
from privaudit.check.base import CheckResult, Findings, SubTest, decide, not_run
from privaudit.check.record import RunRecord

NAME = "sampling"
#: Monte Carlo draws for the dispersion tests (seeded: the check is deterministic).
DRAWS = 50_000
SEED = 20_260_226


@dataclass(frozen=True)
class _Group:
    rate: float
    scheme: Sampling | None
    population: int
    rounds: tuple[int, ...]
    counts: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]
    sampled_declared: tuple[int | None, ...]

    @property
    def label(self) -> str:
        if self.rate >= 1:
            return "every client"
        scheme = "Poisson" if self.scheme is Sampling.POISSON else "fixed-size"
        return f"{scheme} q = {self.rate:g} of N = {self.population}"


def _groups(record: RunRecord) -> tuple[list[_Group], list[int]]:
    grouped: dict[tuple[float, Sampling | None, int], list[tuple[int, list[int], int | None]]] = {}
    unobserved = []
    for round_, release in sorted(record.declared.central.items()):
        sampled = record.sampled(round_)
        if sampled is None:
            unobserved.append(round_)
            continue
        key = (release.sample_rate, release.sampling, release.population)
        grouped.setdefault(key, []).append((round_, sampled, release.declared_sampled))
    out = [_Group(rate, scheme, population, tuple(r for r, _, _ in rows), tuple(len(s) for _, s, _ in rows),
                  tuple(tuple(s) for _, s, _ in rows), tuple(m for _, _, m in rows))
           for (rate, scheme, population), rows in grouped.items()]
    return out, unobserved


def _two_sided_mc(observed: float, draws: np.ndarray) -> float:
    low = (1 + int(np.sum(draws <= observed + 1e-9))) / (draws.size + 1)
    high = (1 + int(np.sum(draws >= observed - 1e-9))) / (draws.size + 1)
    return float(min(1.0, 2.0 * min(low, high)))


def _binomial_draws(n: int, q: float, shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.binomial(n, q, size=shape)


def count_dispersion(counts: Sequence[int], population: int, rate: float, draws: int = DRAWS, seed: int = SEED) -> tuple[float, float]:
    """(V, two-sided p) of the per-round counts against R independent Binomial(N, q) (module docstring)."""
    mean = population * rate
    v = float(np.sum((np.asarray(counts, dtype=float) - mean) ** 2))
    simulated = _binomial_draws(population, rate, (draws, len(counts)), seed).astype(float)
    return v, _two_sided_mc(v, np.sum((simulated - mean) ** 2, axis=1))


def participation_dispersion(participations: Sequence[int], rounds: int, rate: float, draws: int = DRAWS,
                             seed: int = SEED + 1) -> tuple[float, float]:
    """(W, two-sided p) of the clients' participation counts against independent Binomial(R, q)."""
    mean = rounds * rate
    w = float(np.sum((np.asarray(participations, dtype=float) - mean) ** 2))
    simulated = _binomial_draws(rounds, rate, (draws, len(participations)), seed).astype(float)
    return w, _two_sided_mc(w, np.sum((simulated - mean) ** 2, axis=1))


class SamplingCheck:
    """The sampling check (module docstring)."""

    name = NAME

    def statistical(self, record: RunRecord) -> bool:
        """Whether it takes a share of α on ``record``: only a declared Poisson sample (q < 1) is tested statistically;
        every client or a fixed-size sample is an exact count."""
        groups, _ = _groups(record)
        return any(g.rate < 1 and g.scheme is Sampling.POISSON for g in groups)

    def missing(self, record: RunRecord) -> tuple[str, ...]:
        if not record.declared.central:
            needs = ["a client-level release (central DP) declaring how clients are sampled"]
            if record.declared.record_level:
                needs.append("each DP-SGD step's batch (record-level sampling inside a client is not recorded)")
            return tuple(needs)
        groups, _ = _groups(record)
        if not groups:
            return ("the clients sampled in each round (metrics[r].clients; FederationRecorder.record_round(sampled_clients=...))",)
        return ()

    def run(self, record: RunRecord, level: float) -> CheckResult:
        needs = self.missing(record)
        if needs:
            return not_run(self.name, needs[0], needs)
        groups, unobserved = _groups(record)
        poisson = [g for g in groups if g.rate < 1 and g.scheme is Sampling.POISSON and len(g.rounds) >= 1]
        planned = 3 * len(poisson)
        share = level / planned if planned else 0.0
        tests: list[SubTest] = []
        flagged: set[int] = set()
        for group in groups:
            if group.rate < 1 and group.scheme is Sampling.POISSON:
                found = self._poisson(group, share)
            else:
                found = [self._exact(group)]
            tests += found
            if any(t.rejected for t in found):
                flagged |= set(group.rounds)
        assumptions = [f"{g.label}: {len(g.rounds)} round(s)" for g in groups]
        if planned:
            assumptions.append(f"Poisson tests at α/{planned} = {share:.3g} each (Bonferroni); Monte Carlo with {DRAWS} "
                               f"seeded draws")
        extra = (f"the clients sampled in round(s) {unobserved[:5]}",) if unobserved else ()
        findings = Findings(assumptions, extra, tuple(sorted(flagged)),
                            details={"groups": [{"sampling": g.label, "rounds": list(g.rounds), "counts": list(g.counts)}
                                                for g in groups]},
                            passed_reason="participation fits the declared sampling: " + "; ".join(g.label for g in groups))
        return decide(self.name, "the observed participation follows the declared client sampling", tests,
                      level if planned else 0.0, findings)

    @staticmethod
    def _exact(group: _Group) -> SubTest:
        expected = group.population if group.rate >= 1 else max(math.floor(group.rate * group.population + 1e-9), 1)
        bad = []
        for round_, count, declared in zip(group.rounds, group.counts, group.sampled_declared, strict=True):
            if declared is not None:  # Flower: m configured, fewer may reply
                if count > declared or declared != expected:
                    bad.append((round_, count))
            elif count != expected:
                bad.append((round_, count))
        detail = (f"declared {group.label} ({expected} per round); round {bad[0][0]} trained {bad[0][1]}"
                  + (f" (and {len(bad) - 1} more round(s))" if len(bad) > 1 else "") if bad
                  else f"every round trained {expected} client(s) or fewer replied")
        if bad and group.rate >= 1:
            detail += ("; declaring every client when a subset trains understates ε: with a fixed-size sample an added "
                       "client can displace a sampled one (sensitivity 2C)")
        return SubTest(f"count = {expected}", f"each round trains {expected} client(s) ({group.label})",
                       float(bad[0][1]) if bad else float(expected), None, 0.0, bool(bad), detail)

    @staticmethod
    def _poisson(group: _Group, level: float) -> list[SubTest]:
        n, q, r = group.population, group.rate, len(group.rounds)
        total = sum(group.counts)
        rate_p = float(stats.binomtest(total, r * n, q).pvalue)
        rate = SubTest("rate", f"Σ_r n_r ~ Binomial(R·N, q) ({group.label})", total / (r * n), rate_p, level, rate_p <= level,
                       f"observed rate {total / (r * n):.4g} over {r} round(s) (declared {q:g})")
        v, v_p = count_dispersion(group.counts, n, q)
        expected_v = r * n * q * (1 - q)
        counts = SubTest("counts per round", f"V = Σ_r (n_r − Nq)² of independent Binomial(N, q) counts ({group.label})", v,
                         v_p, level, v_p <= level,
                         f"V = {v:.4g} (expected {expected_v:.4g}); counts {list(group.counts)[:8]}"
                         + ("…" if r > 8 else "")
                         + ("; a constant count: a fixed number sampled each round (its guarantee is the fixed-size one)"
                            if len(set(group.counts)) == 1 and r > 1 else ""))
        participations = [sum(1 for members in group.members if k in members) for k in range(n)]
        w, w_p = participation_dispersion(participations, r, q)
        clients = SubTest("participation per client", f"W = Σ_k (c_k − Rq)² of independent Binomial(R, q) ({group.label})",
                          w, w_p, level, w_p <= level, f"W = {w:.4g} (expected {n * r * q * (1 - q):.4g}); participations "
                          f"range {min(participations)}..{max(participations)} of {r} round(s)")
        return [rate, counts, clients]

