"""The run's own mechanism as a family of trade-off curves: the ledger's composition with every noise multiplier scaled.

A run's ledger declares its mechanism as a composition of (subsampled) Gaussian releases — e.g. T steps of a
Poisson-subsampled Gaussian with rate q and noise multiplier σ. :class:`LedgerFamily` is that composition with every
noise multiplier multiplied by one factor c > 0: M_c, with M_1 the mechanism as declared. Members lose privacy as c
shrinks (a larger noise multiplier is a post-processing away from a smaller one), and each member's trade-off curve is
the convex conjugate of its privacy profile (:func:`privaudit.stats.curve_family.profile_inverse_blow_up`), the profile
being that of privaudit's ``ctd`` accountant (:meth:`privaudit.accounting.ctd.CtdAccountant.privacy_profile`: a
certified upper bound on δ(ε), exact for plain Gaussians), so each computed curve lies below the member's true one.

The search (:meth:`LedgerFamily.certified_epsilon`) runs over the grid c_k = ρ^{−k}, k ∈ ℤ (ρ = :data:`GRID_RATIO`;
k = 0 is the declared mechanism, so the claim itself is a grid point): from k = 0 it brackets by doubling steps, then
bisects to k*, the first index not rejected, and reports ε(c_{k*−1}, δ), the ε of the least private rejected member.

Validity (Mahloujifar, Melis & Chaudhuri 2024, Thm 9, applied to one member). Let M = M_{c_true} and d the smallest k
with c_k ≤ c_true. M is f-DP for the computed curve of c_d (it lies below the true curve of c_d, which lies below M's),
so the test rejects c_d with probability ≤ α. A reported ε above ε_true needs c_{k*−1} < c_true, i.e. d ≤ k* − 1, i.e.
c_d rejected — assuming rejection is monotone in k between the points the bisection visits, as the ε search of the
other routes does between its scan points (tests/stats/test_one_run_fdp_ledger.py checks that the recursion is
monotone in the curve). The reported ε is the accountant's upper bound of the member's ε, so validity holds up to the
accountant's discretisation (``ctd``'s relative accuracy 10⁻³; exact for plain Gaussians); the grid costs at most a
factor ρ in the noise.

Cost: a member's curve is one ``ctd`` composition (both directions) and one envelope, a few milliseconds; curves are
cached per (composition, k) for the process (:func:`member_curve`), so the guess counts of one audit and the
repetitions of a validity cell share them, and a later guess count starts its search just above the best member
reported so far (``start``: one cached probe when it cannot beat it). The walks look at the floor and the cap
(:data:`EPSILON_FLOOR`, :data:`EPSILON_CAP`; one extra composition each) only once their stride is long.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privaudit.accounting.ctd import CtdAccountant
from privaudit.accounting.mechanisms import Composition, Gaussian, Neighbouring, Sampling, SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.stats.curve_family import CurveTest, profile_inverse_blow_up
from privaudit.stats.trade_off import InverseBlowUp

#: Ratio of consecutive noise scales on the search grid (0.2 %: about 0.2 % of ε at most is lost to the grid).
GRID_RATIO = 1.002
#: Members with ε below this (at the audited δ) count as "no privacy loss": not rejected there means ε_lb = 0.
EPSILON_FLOOR = 1e-3
#: The search stops at members whose ε exceeds this (reported as is: a valid, if capped, lower bound).
EPSILON_CAP = 100.0
#: Where each member's privacy profile is evaluated (the envelope of their lines is its curve): steps of 0.002 up to
#: ε = 0.2, then 1 % of ε up to 4 × the cap (one composition per member); points past δ(ε) ≤ PROFILE_FLOOR are dropped.
PROFILE_EPSILONS = np.concatenate([np.linspace(0.0, 0.2, 100, endpoint=False), np.geomspace(0.2, 4.0 * EPSILON_CAP, 760)])
PROFILE_FLOOR = 1e-13
_ACCOUNTANT = CtdAccountant()
#: (composition, δ, ε reported) → its grid index, so that a later search can start just above a reported member
_REPORTED: dict[tuple[Composition, float, float], int] = {}
_REPORTED_SIZE = 65536
_CHECK_FROM = 64  # the walks look at the floor and the cap (one composition each) only once their stride is this long


def _scaled(mechanism: object, factor: float) -> object:
    if isinstance(mechanism, Gaussian):
        return Gaussian(mechanism.noise_multiplier * factor, mechanism.sensitivity)
    if isinstance(mechanism, SubsampledGaussian):
        return SubsampledGaussian(mechanism.noise_multiplier * factor, mechanism.sample_rate, mechanism.sampling)
    raise InvalidParameterError(f"the ledger family scales Gaussian noise; {mechanism!r} has none")


@functools.lru_cache(maxsize=8192)
def _member(composition: Composition, k: int) -> Composition:
    factor = GRID_RATIO ** (-k)
    return Composition([(_scaled(m, factor), count) for m, count in composition], composition.neighbouring)


@functools.lru_cache(maxsize=4096)
def member_curve(composition: Composition, k: int) -> InverseBlowUp:
    """Inverse blow-up of member k (noise × ρ^{−k}): the conjugate of its ``ctd`` privacy profile (module docstring)."""
    deltas = _ACCOUNTANT.privacy_profile(_member(composition, k), PROFILE_EPSILONS)
    keep = int(np.argmax(deltas <= PROFILE_FLOOR)) + 1 if np.any(deltas <= PROFILE_FLOOR) else deltas.size
    return profile_inverse_blow_up(PROFILE_EPSILONS[:keep], deltas[:keep])


@functools.lru_cache(maxsize=8192)
def member_epsilon(composition: Composition, k: int, delta: float) -> float:
    """ε at δ of member k (``ctd``'s certified upper bound; exact for plain Gaussians)."""
    return float(_ACCOUNTANT.epsilon(_member(composition, k), delta).epsilon)


@dataclass(frozen=True)
class LedgerFamily:
    """The ledger's composition with its noise multipliers scaled by one factor: the run's own trade-off curves.

    ``composition`` holds Gaussian and subsampled-Gaussian releases only (Poisson or fixed-size sampling, either
    neighbouring relation, as the accountant takes them). Build one from a ledger's composition, or with
    :meth:`subsampled_gaussian` from (T, q, σ, sampling).
    """

    composition: Composition

    def __post_init__(self) -> None:
        if not isinstance(self.composition, Composition) or self.composition.is_empty:
            raise InvalidParameterError("the ledger family needs a non-empty Composition of Gaussian releases")
        for mechanism, _ in self.composition:
            _scaled(mechanism, 1.0)
            if math.isinf(mechanism.noise_multiplier):
                raise InvalidParameterError("a release with infinite noise carries no curve to scale")
        reason = _ACCOUNTANT.unsupported_reason(self.composition)
        if reason is not None:
            raise InvalidParameterError(f"the ledger family cannot evaluate this composition: {reason}")

    @classmethod
    def subsampled_gaussian(cls, steps: int, sample_rate: float, noise_multiplier: float = 1.0,
                            sampling: Sampling | str = Sampling.POISSON,
                            neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> LedgerFamily:
        """T = ``steps`` releases of a subsampled Gaussian (rate q, noise multiplier σ; q = 1: plain Gaussian)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InvalidParameterError(f"steps must be a positive integer, got {steps!r}")
        mechanism = SubsampledGaussian(noise_multiplier, sample_rate, sampling)
        return cls(Composition.of(mechanism, steps, neighbouring))

    def claimed_epsilon(self, delta: float) -> float:
        """ε at δ of the mechanism as declared (scale 1)."""
        return member_epsilon(self.composition, 0, float(delta))

    def describe(self) -> str:
        return (f"the run's own mechanism {self.composition.describe()} with its noise scaled by one factor c "
                f"(c = 1 as declared); curves from the ctd accountant's privacy profile")

    def __str__(self) -> str:
        return f"ledger: {self.composition.describe()}"

    def certified_epsilon(self, rejected: CurveTest, delta: float, precise: bool, start: float = 0.0) -> float:
        """ε(c_{k*−1}, δ) for k* the first grid index not rejected (module docstring); 0 when none is rejected.

        With ``start`` the ε of a member this family reported before (another guess count's bound), the search
        begins just above that member and returns 0 when the next member is not rejected (the caller keeps the
        larger bound it already has)."""
        step = 1 if precise else 8
        reject = functools.lru_cache(maxsize=None)(lambda k: rejected(member_curve(self.composition, k)))
        known = _REPORTED.get((self.composition, float(delta), float(start))) if start > 0.0 else None
        if known is not None:
            if not reject(known + 1):
                return 0.0
            return self._record(self._search_up(reject, known + 1, step, delta), delta)
        if reject(0):  # the claim itself is refuted: walk towards less private members
            return self._record(self._search_up(reject, 0, step, delta), delta)
        lo, hi, stride = None, 0, step  # walk towards more private members until one is rejected
        while lo is None:
            k = hi - stride
            if reject(k):
                lo = k
            elif stride >= _CHECK_FROM and member_epsilon(self.composition, k, delta) < EPSILON_FLOOR:
                return 0.0
            else:
                hi, stride = k, 2 * stride
        return self._record(_bisect(reject, lo, hi, step), delta)

    def _record(self, k: int, delta: float) -> float:
        epsilon = member_epsilon(self.composition, k, delta)
        if len(_REPORTED) >= _REPORTED_SIZE:
            _REPORTED.clear()
        _REPORTED[(self.composition, float(delta), epsilon)] = k
        return epsilon

    def _search_up(self, reject: Callable[[int], bool], lo: int, step: int, delta: float) -> int:
        """From a rejected index ``lo``, the last rejected index before the first one that is not (bracket, bisect)."""
        hi, stride = None, step
        while hi is None:
            k = lo + stride
            if not reject(k):
                hi = k
            elif stride >= _CHECK_FROM and member_epsilon(self.composition, k, delta) > EPSILON_CAP:
                return k
            else:
                lo, stride = k, 2 * stride
        return _bisect(reject, lo, hi, step)


def _bisect(reject: Callable[[int], bool], lo: int, hi: int, step: int) -> int:
    """Given reject(lo) and not reject(hi), the rejected end of a bracket no wider than ``step``."""
    while hi - lo > step:
        mid = (lo + hi) // 2
        if reject(mid):
            lo = mid
        else:
            hi = mid
    return lo
