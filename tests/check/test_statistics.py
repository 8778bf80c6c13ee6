"""The statistics the checks rest on hold their level: χ² p-values and limits, the cosine law, the seed candidates, the
sampling tests and the certified bound (seeded simulations, exact where the law is exact)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.check.bound import lower_epsilon
from privaudit.check.noise import log10_two_sided_chi2, ratio_upper, two_sided_chi2
from privaudit.check.sampling import count_dispersion, participation_dispersion
from privaudit.check.seeds import BLOCK, candidates, cosine_log10_p, cosine_p_values, search


def test_two_sided_chi2_rejects_at_its_level():
    rng = np.random.default_rng(1)
    df = 200
    values = rng.chisquare(df, size=4000)
    rate = np.mean([two_sided_chi2(v, df) <= 0.05 for v in values])
    assert 0.04 < rate < 0.06
    assert two_sided_chi2(df, df) == pytest.approx(1.0, abs=0.05)
    assert -400 < log10_two_sided_chi2(1e-3 * df, df) < -200 and two_sided_chi2(1e-4 * df, df) == 0  # finite where p underflows


def test_the_ratio_upper_limit_covers_at_its_confidence():
    rng = np.random.default_rng(2)
    df, ratio = 500, 0.8
    covered = [ratio_upper(ratio**2 * rng.chisquare(df), df, 0.05) >= ratio for _ in range(4000)]
    assert 0.94 < np.mean(covered) < 0.96


def test_cosines_of_isotropic_vectors_follow_the_beta_law():
    rng = np.random.default_rng(3)
    m = 50
    fixed = rng.normal(size=m)
    fixed /= np.linalg.norm(fixed)
    draws = rng.normal(size=(4000, m))
    cos = draws @ fixed / np.linalg.norm(draws, axis=1)
    assert 0.04 < np.mean(cosine_p_values(cos, m) <= 0.05) < 0.06
    assert cosine_log10_p(1.0, m) == -math.inf or cosine_log10_p(0.999, m) < -30


@pytest.mark.parametrize("shape", [(16, 64), (300,), (10,)])
def test_seed_candidates_are_the_generators_first_draws(shape):
    table = candidates("torch", shape, "float32", 5)
    size = int(np.prod(shape))
    g = torch.Generator().manual_seed(4)
    full = torch.normal(0.0, 0.3, size=shape, generator=g, dtype=torch.float32).reshape(-1)[:BLOCK].double().numpy()
    assert np.allclose(table[4], full / np.linalg.norm(full))
    legacy = candidates("numpy-legacy", shape, "float32", 5)
    draw = np.random.RandomState(2).normal(0, 1, size=shape).reshape(-1)[:min(size, BLOCK)]
    assert np.allclose(legacy[2], draw / np.linalg.norm(draw))


def test_the_search_finds_a_seeded_draw_and_nothing_in_fresh_noise():
    noise = torch.normal(0.0, 0.01, size=(16, 64), generator=torch.Generator().manual_seed(417)).reshape(-1).double().numpy()
    matches, tried = search([(1, noise)], (16, 64), "float32", seeds=1000)
    (best,) = matches
    assert (best.generator, best.seed) == ("torch", 417) and best.cosine > 0.999 and best.p_value * tried < 1e-100
    fresh = np.random.default_rng(123_456_789).normal(size=1024)  # a seed outside the space searched
    (best,) = search([(1, fresh)], (16, 64), "float32", seeds=1000)[0]
    assert best.p_value * tried > 0.01


def test_constant_counts_declared_poisson_are_rejected_and_binomial_ones_are_not():
    v, p = count_dispersion([5] * 6, 10, 0.5)
    assert v == 0 and p < 0.002  # P(all equal) = Σ_c P(c)^6 ≈ 4e-4, two-sided
    rng = np.random.default_rng(6)
    ps = [count_dispersion(rng.binomial(10, 0.5, size=6), 10, 0.5, draws=4000)[1] for _ in range(300)]
    assert np.mean(np.array(ps) <= 0.05) <= 0.07
    _w, p = participation_dispersion([6] * 5 + [0] * 5, 6, 0.5)  # always the same half of the clients
    assert p < 0.001


def test_the_certified_bound_is_the_declared_epsilon_at_ratio_one_and_grows_below():
    ledger = PrivacyLedger()
    ledger.record_all(PrivacyEvent(SERVER, r, Gaussian(0.7), 1) for r in range(1, 7))
    eps, how = lower_epsilon(ledger, range(6), 1.0, 1e-5)
    assert eps == pytest.approx(gaussian_epsilon(math.sqrt(6) / 0.7, 1e-5)) and "exact" in how
    assert lower_epsilon(ledger, range(6), 0.5, 1e-5)[0] > eps
    assert lower_epsilon(ledger, range(6), 0.0, 1e-5)[0] == math.inf
    sampled = PrivacyLedger()
    sampled.record_all(PrivacyEvent(SERVER, r, SubsampledGaussian(0.7, 0.5, Sampling.POISSON), 1) for r in range(1, 7))
    low, how = lower_epsilon(sampled, range(6), 1.0, 1e-5)
    assert "prv" in how and low > 0
    assert low <= sampled.epsilon_for(SERVER, 1e-5, "rdp").epsilon  # a lower end below an upper bound


def test_every_check_implements_the_protocol():
    from privaudit.check.base import Check
    from privaudit.check.run import CHECK_NAMES, CheckRequest, _checks

    checks = _checks(CheckRequest("unused"))
    assert [c.name for c in checks] == list(CHECK_NAMES) and all(isinstance(c, Check) for c in checks)
