"""The randomness check: no noise vector repeated across rounds, and no noise drawn from a small seed space.

Null hypothesis H0 (as for the noise check, :mod:`privaudit.check.noise`): the standardised residuals u_r of the
checked rounds are independent isotropic Gaussian vectors. Two sub-tests, each at half the check's level:

* **repeated noise** — for every pair of rounds, the cosine c of u_r and u_r' has (1 + c)/2 ~ Beta((d−1)/2, (d−1)/2)
  exactly (one of two independent isotropic vectors has a uniform direction); two-sided p-values, Bonferroni over the
  pairs. The same seed every round gives c ≈ 1; a shared non-noise component (a deviation the noise check reports)
  shows too;
* **small seed space** — the generic clock-seed test (:mod:`privaudit.check.seeds`): the seeds 0..S−1 of torch's and
  numpy's generators, Bonferroni over every candidate tried.

Both need at least two checked rounds (repeats) or a checked round whose first checked tensor is the first tensor the
model holds (seed search: a generator draws the tensors in model order).

Where the run has no client-level release but its clients' own releases are recorded and declared with a bound on
their data-dependent part (:mod:`privaudit.check.local`: output perturbation, a noised clipped update), the same two
tests run on those releases — across clients and rounds — with conservative p-values: repeated noise leaves
‖x_i − x_j‖ ≤ b_i + b_j where fresh noise gives χ²(d)-sized distances, and a seed's draw gives |⟨x, c⟩| ≈ s·√m where
fresh noise gives |N(0, s²)| + b. This is the Upcycled-FL reference's clock seed (audit point U5) found without knowing
it is a clock.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from privaudit.check.base import CheckResult, Findings, SubTest, decide, not_run
from privaudit.check.local import LocalRelease, local
from privaudit.check.record import RunRecord
from privaudit.check.residuals import residuals
from privaudit.check.seeds import (
    DEFAULT_SEEDS,
    GENERATORS,
    candidates,
    cosine_log10_p,
    cosine_p_values,
    search,
)

NAME = "randomness"
NULL = "the noise of each checked round is a fresh isotropic Gaussian draw, independent of every other round's"
LOCAL_NULL = "each client's release carries a fresh Gaussian draw, independent of every other release's"


class RandomnessCheck:
    """The randomness check (module docstring). ``seeds``: the seed space S searched (0 skips the search)."""

    name = NAME

    def statistical(self, record: RunRecord) -> bool:
        """Whether it takes a share of α on ``record``: its tests are statistical wherever it runs."""
        return True

    def __init__(self, seeds: int = DEFAULT_SEEDS) -> None:
        self.seeds = int(seeds)

    def missing(self, record: RunRecord) -> tuple[str, ...]:
        from privaudit.check.noise import NoiseCheck  # the same residuals: the same needs

        needs = NoiseCheck().missing(record)
        if needs:
            releases = local(record)
            if len(releases) > 1 or (releases and self._searchable(record)):
                return ()  # the clients' own noised releases
            return (*needs, "or record-level releases whose declaration bounds their data (output perturbation, noise on a "
                            "clipped update)") if record.declared.record_level and record.releases_recorded else needs
        found = residuals(record)
        if len(found.rounds) < 2 and not self._searchable(record):
            return ("two or more checked rounds (repeats), or a first model tensor that is noised (seed search)",)
        return ()

    def _searchable(self, record: RunRecord) -> bool:
        return self.seeds > 0 and bool(record.names) and record.parameter_order[:1] == record.names[:1]

    def _not_searched(self, record: RunRecord) -> str | None:
        """Why the seed search does not run on ``record`` (None: it runs)."""
        if self.seeds <= 0:
            return "small seed space: not searched (seed space 0: --seed-space 0)"
        if not self._searchable(record):
            return ("small seed space: the model's first tensor is not a checked (trainable) tensor, and the generators "
                    "draw the first tensor's noise first")
        return None

    def _plan(self, record: RunRecord, samples: int, what: str) -> tuple[bool, bool, list[str], list[str]]:
        """(repeats run, seed search runs, what the skipped sub-tests needed, what the ones that run assume)."""
        repeats, search_ = samples > 1, self._searchable(record)
        needs = [] if repeats else [f"repeated noise: two or more {what} (this run has {samples})"]
        why = self._not_searched(record)
        if why:
            needs.append(why)
        assumptions = [f"seed search: {', '.join(GENERATORS)} generators, seeds 0..{self.seeds - 1}, the first checked "
                       "tensor's first draws in model order"] if search_ else []
        return repeats, search_, needs, assumptions

    def run(self, record: RunRecord, level: float) -> CheckResult:
        found = residuals(record)
        if not found.rounds:
            releases = local(record)
            if len(releases) > 1 or (releases and self._searchable(record)):
                return self._local(record, releases, level)
            return not_run(self.name, found.reason, self.missing(record))
        repeats, search_, needs, assumed = self._plan(record, len(found.rounds), "checked rounds")
        planned = repeats + search_
        if not planned:
            return not_run(self.name, "needs two or more checked rounds, or noise on the model's first tensor", self.missing(record))
        share = level / planned
        tests: list[SubTest] = []
        flagged: set[int] = set()
        if repeats:
            test, rounds = self._repeats(found, share)
            tests.append(test)
            flagged |= rounds if test.rejected else set()
        if search_:
            test, rounds = self._seeds(record, found, share)
            tests.append(test)
            flagged |= rounds if test.rejected else set()
        assumptions = ("the standardised residuals of the noise check (the noise, if the run does what it declares)",
                       f"sub-tests at α/{planned} = {share:.3g} each (Bonferroni)", *assumed)
        searched = " and no seed found" if search_ else ""
        return decide(self.name, NULL, tests, level, Findings(
            assumptions, needs, tuple(sorted(flagged)), details={"rounds": [r.round for r in found.rounds]},
            passed_reason=(f"no repeated noise across {len(found.rounds)} round(s){searched}" if repeats
                           else f"no seed found in round {found.rounds[0].round}")))

    @staticmethod
    def _repeats(found, level: float) -> tuple[SubTest, set[int]]:
        vectors = [(r.round, r.standardised / max(float(np.linalg.norm(r.standardised)), 1e-300)) for r in found.rounds]
        pairs = list(itertools.combinations(vectors, 2))
        cosines = np.array([float(np.dot(a, b)) for (_, a), (_, b) in pairs])
        ps = cosine_p_values(cosines, found.dimension)
        worst = int(np.argmin(ps))
        adjusted = float(min(1.0, ps[worst] * len(pairs)))
        (ra, _), (rb, _) = pairs[worst]
        rejected = adjusted <= level
        flagged: set[int] = set()
        for ((first, _), (second, _)), p in zip(pairs, ps, strict=True):
            if p * len(pairs) <= level:
                flagged |= {first, second}
        detail = f"rounds {ra} and {rb}: cosine {cosines[worst]:.4g}" + (
            " — the same noise drawn again" if abs(cosines[worst]) > 0.9 else
            " — a component the rounds share (not fresh noise; the noise check's deviations say which)")
        test = SubTest("repeated noise", "pairwise cosines of independent isotropic vectors (exact Beta law, Bonferroni "
                       f"over {len(pairs)} pair(s))", float(cosines[worst]), adjusted, level, rejected, detail,
                       cosine_log10_p(float(cosines[worst]), found.dimension, len(pairs)))
        return test, flagged

    def _seeds(self, record: RunRecord, found, level: float) -> tuple[SubTest, set[int]]:
        first = record.names[0]
        part = found.slices[first]
        blocks = [(r.round, r.standardised[part]) for r in found.rounds]
        matches, tried = search(blocks, record.shapes[first], record.dtype(first), self.seeds)
        if not matches:
            return SubTest("small seed space", "no candidate seed's draws match the noise", None, 1.0, level, False,
                           "nothing to compare"), set()
        best = min(matches, key=lambda m: m.p_value)
        adjusted = float(min(1.0, best.p_value * tried))
        rejected = adjusted <= level
        flagged = {m.round for m in matches if m.p_value * tried <= level}
        test = SubTest("small seed space", f"exact cosine law against {tried} fixed candidate draws (Bonferroni)",
                       best.cosine, adjusted, level, rejected,
                       f"round {best.round}: {best.generator} seed {best.seed}, cosine {best.cosine:.4g}"
                       + (" — the noise is that seed's draw: ε = ∞" if rejected else ""),
                       cosine_log10_p(best.cosine, best.block, tried))
        return test, flagged

    # -- the clients' own releases (privaudit.check.local) -----------------------------------------------
    def _local(self, record: RunRecord, releases: list[LocalRelease], level: float) -> CheckResult:
        repeats, search_, needs, assumed = self._plan(record, len(releases), "client releases")
        planned = repeats + search_
        share = level / planned
        tests: list[SubTest] = []
        flagged: set[int] = set()
        if repeats:
            test, events = _local_repeats(releases, share)
            tests.append(test)
            flagged |= events
        if search_:
            test, events = self._local_seeds(record, releases, share)
            tests.append(test)
            flagged |= events
        sources = sorted({r.source for r in releases})
        assumptions = (f"the clients' own releases ({', '.join(sources)}): x = a + n with ‖a‖ ≤ b as declared, n fresh "
                       "N(0, s²I); conservative p-values", f"sub-tests at α/{planned} = {share:.3g} each (Bonferroni)",
                       *assumed)
        by_index = {r.event: r for r in releases}
        searched = " and no seed found" if search_ else ""
        return decide(self.name, LOCAL_NULL, tests, level, Findings(
            assumptions, needs, tuple(sorted({by_index[e].round for e in flagged})), details={"releases": len(releases)},
            passed_reason=(f"no repeated noise across {len(releases)} client release(s){searched}" if repeats
                           else f"no seed found in the release of client {releases[0].client}"),
            events=tuple(sorted(flagged))))

    def _local_seeds(self, record: RunRecord, releases: list[LocalRelease], level: float) -> tuple[SubTest, set[int]]:
        first = record.names[0]
        size = record.sizes[first]
        tried, best, hits = 0, None, []
        tables = [(name, candidates(name, record.shapes[first], record.dtype(first), self.seeds)) for name in GENERATORS]
        for release in releases:
            block = release.vector[:size]
            for name, table in tables:
                m = table.shape[1]
                projections = np.abs(table @ block[:m])
                k = int(np.argmax(projections))
                log_p = _log10_normal_exceed(float(projections[k]) - release.bound, release.noise_std)
                tried += table.shape[0]
                entry = (log_p, release, name, k, float(projections[k]) / max(float(np.linalg.norm(block[:m])), 1e-300))
                hits.append(entry)
                if best is None or log_p < best[0]:
                    best = entry
        log_p, release, name, k, cosine = best  # type: ignore[misc]
        log_adjusted = min(0.0, log_p + math.log10(tried))
        adjusted = 10.0 ** log_adjusted
        rejected = adjusted <= level
        flagged = {h[1].event for h in hits if h[0] + math.log10(tried) <= math.log10(level)} if rejected else set()
        return SubTest("small seed space", f"|⟨x, c⟩| ≤ |N(0, s²)| + b for {tried} fixed candidate draws c (Bonferroni)",
                       cosine, adjusted, level, rejected,
                       f"client {release.client} in round {release.round}: {name} seed {k}, cosine {cosine:.4g}"
                       + (" — the noise is that seed's draw: ε = ∞" if rejected else ""), log_adjusted), flagged


def _log10_normal_exceed(excess: float, std: float) -> float:
    """log₁₀ P(|N(0, std²)| ≥ excess) (0 when excess ≤ 0)."""
    if excess <= 0:
        return 0.0
    return min(0.0, (math.log(2.0) + float(stats.norm.logsf(excess / std))) / math.log(10.0))


def _local_repeats(releases: list[LocalRelease], level: float) -> tuple[SubTest, set[int]]:
    """Pairs of releases whose distance fresh noise would not leave (module docstring): conservative χ² lower tail."""
    d = releases[0].vector.size
    rows = []
    for a, b in itertools.combinations(releases, 2):
        distance = float(np.linalg.norm(a.vector - b.vector))
        scaled = (distance + a.bound + b.bound) ** 2 / (a.noise_std**2 + b.noise_std**2)
        rows.append((float(stats.chi2.logcdf(scaled, d)) / math.log(10.0), a, b, distance))
    pairs = len(rows)
    log_p, a, b, distance = min(rows, key=lambda row: row[0])
    log_adjusted = min(0.0, log_p + math.log10(pairs))
    rejected = 10.0 ** log_adjusted <= level
    flagged = ({e for row in rows if row[0] + math.log10(pairs) <= math.log10(level) for e in (row[1].event, row[2].event)}
               if rejected else set())
    expected = math.sqrt(d * (a.noise_std**2 + b.noise_std**2))
    return SubTest("repeated noise", f"‖x_i − x_j‖ + b_i + b_j ≥ ‖n_i − n_j‖, χ²(d) lower tail (Bonferroni over {pairs} "
                   "pair(s))", distance / expected, 10.0 ** log_adjusted, level, rejected,
                   f"client {a.client} (round {a.round}) and client {b.client} (round {b.round}): distance {distance:.4g}, "
                   f"fresh noise ≈ {expected:.4g}" + (" — the same noise drawn twice" if rejected else ""),
                   log_adjusted), flagged
