"""PrivateFL's server-side mechanisms: the three CDP variants and their events, Skellam DDP encoding and its events."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.ledger import SERVER
from privaudit.accounting.mechanisms import Composition, Gaussian, Skellam, SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.fl.privacy.central_dp import (
    AdaptiveClipping,
    CentralDP,
    CentralDPConfig,
    adapt_clip,
    central_dp,
)
from privaudit.fl.privacy.distributed_dp import (
    DistributedDP,
    DistributedDPConfig,
    ddp_scale,
    decode_sum,
    encode_update,
    secure_sum,
)
from privaudit.fl.privacy.hadamard import random_signs, rotate, unrotate, walsh_hadamard
from privaudit.papers.privatefl.algorithm import PrivateFL
from privaudit.papers.privatefl.central_dp import PrivateFLCentralDP, reference_release
from privaudit.papers.privatefl.closed_forms import per_tensor_effective_multiplier
from privaudit.papers.privatefl.transform import PersonalAffine, PersonalisedModel
from tests.fl.conftest import make_dataset

torch.set_num_threads(1)


def _model() -> nn.Module:
    def build() -> nn.Module:
        body = nn.Sequential(nn.Linear(5, 6, bias=False), nn.Tanh(), nn.Linear(6, 3, bias=False))
        return PersonalisedModel(body, PersonalAffine((5,)))

    return seeded_torch_global(0, build)


def _run(algorithm, rounds: int = 3, **config):
    settings = {"rounds": rounds, "local": LocalTrainingConfig(epochs=1, batch_size=8, lr=0.1, momentum=0.0), "execution": "sequential", **config}
    return run_federation(make_dataset(), _model(), algorithm, FederationConfig(**settings), progress=False)


# -- CDP ------------------------------------------------------------------------------------------
def test_paper_variant_records_sigma_times_the_median_norm_and_is_not_valid():
    cdp = PrivateFLCentralDP(PrivateFL(), CentralDPConfig("paper", noise_multiplier=3.0, client_rate=1.0, num_clients=6))
    result = _run(cdp)
    events = result.ledger.events
    assert [e.client_id for e in events] == [SERVER] * 3 and [e.round for e in events] == [1, 2, 3]
    for event, record in zip(events, cdp.clip_history, strict=True):
        assert event.mechanism == Gaussian(3.0 * record["zeta"])
        assert not event.valid and "unprivatised median" in event.note
        assert 0 < record["zeta"] < 1 and "ζ < 1" in event.note  # small updates: under-noised
    assert not result.ledger.summary(1e-3, "rdp").all_valid


def test_reference_variant_records_sigma_over_root_l_and_is_not_valid():
    cdp = PrivateFLCentralDP(PrivateFL(), CentralDPConfig("reference", noise_multiplier=6.0, client_rate=1.0, num_clients=6))
    result = _run(cdp, rounds=2)
    tensors = 2  # the two body weights; the transformation is never aggregated
    for event in result.ledger.events:
        assert event.mechanism == Gaussian(6.0 / math.sqrt(tensors)) and not event.valid
        assert "per-tensor clip norms" in event.note
    assert per_tensor_effective_multiplier(6.0, tensors).value == pytest.approx(6.0 / math.sqrt(2))
    assert all(set(h) == {"body.0.weight", "body.2.weight"} for h in cdp.clip_history)
    assert all(0 < v <= 10 for h in cdp.clip_history for v in h.values())


def test_reference_release_noise_per_tensor_is_sigma_times_the_median_norm():
    generator = torch.Generator().manual_seed(0)
    updates = []
    for scale in (1.0, 2.0, 3.0, 5.0, 40.0):  # per-tensor norms scale·‖u‖; medians: 3‖a‖ and 3‖b‖
        updates.append({"a": torch.full((40_000,), scale / 200.0), "b": torch.full((30_000,), 2 * scale / 173.2)})
    sigma, divisor = 1.7, 5.0
    mean, clips = reference_release(updates, sigma, cap=10.0, divisor=divisor, generator=generator)
    for name in ("a", "b"):
        norms = sorted(float(u[name].norm()) for u in updates)
        assert clips[name] == pytest.approx(min(norms[2], 10.0), rel=1e-4)
        clipped_sum = sum(u[name] * min(1.0, clips[name] / float(u[name].norm())) for u in updates)
        noise = mean[name] * divisor - clipped_sum
        assert float(noise.std()) == pytest.approx(sigma * clips[name], rel=0.02)
    # Per-tensor accounting: the privacy loss of one client at its clips is Gaussian with mean √(Σ_t (ζ_t/(σζ_t))²) = √L/σ.
    stds = {n: float((mean[n] * divisor - sum(u[n] * min(1.0, clips[n] / float(u[n].norm())) for u in updates)).std()) for n in ("a", "b")}
    z_effective = 1.0 / math.sqrt(sum((clips[n] / stds[n]) ** 2 for n in ("a", "b")))
    assert z_effective == pytest.approx(per_tensor_effective_multiplier(sigma, 2).value, rel=0.02)


def test_reference_variant_epsilon_is_what_sigma_over_root_l_gives():
    """Claimed ε = 8 at σ calibrated for R Gaussian releases; three tensors make it ≈ 16.6 (audit point P1, MNIST DNN)."""
    from privaudit.accounting.calibrate import calibrate_noise

    sigma = calibrate_noise(lambda s: Composition.of(Gaussian(s), 150), 8.0, 1e-3, accountant="rdp").noise_multiplier
    assert sigma == pytest.approx(6.37, abs=0.02)
    eps = get_accountant("rdp").epsilon(Composition.of(Gaussian(sigma / math.sqrt(3)), 150), 1e-3).epsilon
    assert eps == pytest.approx(16.6, abs=0.1)


def test_dp_fedavg_records_subsampled_gaussians_and_adaptive_clipping_its_quantile_queries():
    config = CentralDPConfig("dp-fedavg", noise_multiplier=1.2, client_rate=0.5, num_clients=6, client_sampling="poisson", clip_norm=0.5)
    result = _run(CentralDP(PrivateFL(), config), rounds=3, clients_per_round=0.5, sampling="poisson")
    assert [e.mechanism for e in result.ledger.events] == [SubsampledGaussian(1.2, 0.5)] * 3
    assert all(e.valid for e in result.ledger.events)
    adaptive = CentralDPConfig("dp-fedavg", 1.2, 0.5, 6, client_sampling="poisson", clip_norm=0.5,
                               adaptive=AdaptiveClipping(target_quantile=0.5, learning_rate=0.2, bit_noise=2.0))
    cdp = CentralDP(PrivateFL(), adaptive)
    result = _run(cdp, rounds=3, clients_per_round=0.5, sampling="poisson")
    mechanisms = [e.mechanism for e in result.ledger.events]
    # the mean (σ = 1.2) and the centred count (2σ_b = 4) are released for the same sampled clients: one Gaussian of
    # multiplier (1.2⁻² + 4⁻²)^(-1/2), subsampled once, per round
    combined = 1.0 / math.sqrt(1.2 ** -2 + 4.0 ** -2)
    assert mechanisms == [SubsampledGaussian(combined, 0.5)] * 3
    # accounting the two releases as separately subsampled events (independent samples) would understate ε
    separate = Composition([(SubsampledGaussian(1.2, 0.5), 3), (SubsampledGaussian(4.0, 0.5), 3)])
    joint = Composition.of(SubsampledGaussian(combined, 0.5), 3)
    accountant = get_accountant("rdp")
    assert accountant.epsilon(joint, 1e-5).epsilon > accountant.epsilon(separate, 1e-5).epsilon
    clips = [h["clip"] for h in cdp.clip_history]
    assert clips[0] == 0.5 and len(set(clips)) == 3  # the clip norm moves


def test_fixed_size_client_sampling_under_a_poisson_analysis_is_flagged():
    config = CentralDPConfig("dp-fedavg", noise_multiplier=1.0, client_rate=0.5, num_clients=6, client_sampling="fixed-size")
    result = _run(CentralDP(PrivateFL(), config), rounds=1, clients_per_round=0.5)
    assert not result.ledger.events[0].valid and "audit point P3" in result.ledger.events[0].note


def test_adaptive_clipping_moves_towards_the_target_quantile():
    generator = torch.Generator().manual_seed(0)
    norms = [0.1] * 50
    assert adapt_clip(1.0, norms, AdaptiveClipping(0.5, 0.2, 1e-6), 50.0, generator) == pytest.approx(math.exp(-0.2 * 0.5))
    assert adapt_clip(0.01, norms, AdaptiveClipping(0.5, 0.2, 1e-6), 50.0, generator) == pytest.approx(0.01 * math.exp(0.2 * 0.5))
    with pytest.raises(InvalidParameterError):
        CentralDPConfig("paper", 1.0, 1.0, 5, adaptive=AdaptiveClipping())
    with pytest.raises(InvalidParameterError, match="unknown CDP variant"):
        CentralDPConfig("median", 1.0, 1.0, 5)


# -- DDP ------------------------------------------------------------------------------------------
def test_walsh_hadamard_rotation_is_orthogonal_and_inverted():
    from scipy.linalg import hadamard

    x = torch.randn(3, 16, dtype=torch.float64)
    assert torch.allclose(walsh_hadamard(x), x @ torch.tensor(hadamard(16), dtype=torch.float64).T)
    signs = random_signs(1024, torch.Generator().manual_seed(1))
    v = torch.randn(1000, dtype=torch.float64)
    assert float(rotate(v, signs).norm()) == pytest.approx(float(v.norm()))
    assert torch.allclose(unrotate(rotate(v, signs), signs, 1000), v)


def _clients(count: int, dimension: int, norm: float, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(dimension, generator=generator, dtype=torch.float64)
    out = []
    for _ in range(count):  # correlated updates, as in FL
        u = base + 0.5 * torch.randn(dimension, generator=generator, dtype=torch.float64)
        out.append(u / u.norm() * norm)
    return out


def _encode_all(updates, config, dimension, seed: int = 0):
    scale = ddp_scale(config, dimension)
    signs = random_signs(scale.padded, torch.Generator().manual_seed(seed))
    encoded = [encode_update(u, scale, config, signs, torch.Generator().manual_seed(100 + i), torch.Generator().manual_seed(200 + i))
               for i, u in enumerate(updates)]
    return scale, signs, encoded


def test_decoding_error_without_noise_is_at_the_rounding_level():
    dimension, count = 3000, 8
    config = DistributedDPConfig(noise_multiplier=0.0, clip_norm=1.0, bits=16, expected_clients=count)
    updates = _clients(count, dimension, norm=0.8)
    scale, signs, encoded = _encode_all(updates, config, dimension)
    decoded = decode_sum(secure_sum([e for e, _, _ in encoded], config.bits), scale, config.bits, signs)
    error = float((decoded - sum(updates)).norm())
    rounding = math.sqrt(count * scale.padded / 4.0) / scale.scale  # each coordinate's rounding error has variance ≤ ¼
    assert 0 < error <= rounding
    assert error / float(sum(updates).norm()) < 1e-2


def test_no_overflow_at_the_default_bit_width_with_noise():
    dimension, count = 20_000, 20
    config = DistributedDPConfig(noise_multiplier=1.0, clip_norm=1.0, expected_clients=count)
    assert config.bits == 16
    updates = _clients(count, dimension, norm=5.0)  # clipped to C = 1
    scale, signs, encoded = _encode_all(updates, config, dimension)
    unreduced = sum(s for _, s, _ in encoded)
    half = 2 ** (config.bits - 1)
    assert int(((unreduced < -half) | (unreduced >= half)).sum()) == 0
    modular = secure_sum([e for e, _, _ in encoded], config.bits)
    signed = torch.where(modular >= half, modular - 2 * half, modular)
    assert torch.equal(signed, unreduced)  # the server's modular sum decodes to the true integer sum
    decoded = decode_sum(modular, scale, config.bits, signs)
    clipped = sum(u / u.norm() for u in updates)
    noise = math.sqrt(scale.central_variance * dimension) / scale.scale  # ‖N(0, z²C²I_d)‖ in update units
    assert float((decoded - clipped).norm()) == pytest.approx(noise, rel=0.05)


def test_bits_too_small_for_the_clients_sum_are_refused():
    with pytest.raises(InvalidParameterError, match="bits cannot hold the sum of 20 clients"):
        ddp_scale(DistributedDPConfig(noise_multiplier=1.0, bits=4, expected_clients=20), 1000)
    with pytest.raises(InvalidParameterError, match="rounding noise"):
        ddp_scale(DistributedDPConfig(noise_multiplier=1.0, bits=10, expected_clients=20), 100_000)
    assert ddp_scale(DistributedDPConfig(noise_multiplier=1.0, bits=10, expected_clients=20), 100_000, check=False).scale > 0


def test_ddp_federation_releases_only_the_modular_sum_and_records_skellam_events():
    config = DistributedDPConfig(noise_multiplier=0.5, clip_norm=1.0, bits=20, expected_clients=6)
    ddp = DistributedDP(PrivateFL(), config)
    result = _run(ddp, rounds=2)
    events = result.ledger.events
    assert [e.client_id for e in events] == [SERVER, SERVER]
    scale = ddp.scale
    assert events[0].mechanism == Skellam(6 * scale.client_variance, scale.l2_sensitivity, scale.l1_sensitivity)
    assert scale.central_variance == pytest.approx((scale.scale * 0.5 * 1.0) ** 2)
    assert all(d["overflow_coordinates"] == 0 and d["clients"] == 6 for d in ddp.diagnostics)
    assert all(d["decoding_error"] == pytest.approx(d["expected_noise_norm"], rel=0.5) for d in ddp.diagnostics)
    assert not torch.equal(result.state["body.0.weight"], _model().state_dict()["body.0.weight"])
    assert torch.equal(result.state["transform.alpha"], torch.ones(1))  # never aggregated
    eps = result.ledger.summary(1e-3, "auto").per_client[SERVER]  # prv and pld decline Skellam; rdp answers
    assert math.isfinite(eps.epsilon) and eps.valid
    assert eps.epsilon == pytest.approx(get_accountant("rdp").epsilon(Composition.of(events[0].mechanism, 2), 1e-3).epsilon)


def test_the_median_variants_are_the_papers_and_central_dp_builds_them():
    """CentralDP itself runs dp-fedavg only; the median variants come from PrivateFL's registered class."""
    with pytest.raises(InvalidParameterError, match="paper variant of central DP is a paper's"):
        CentralDP(PrivateFL(), CentralDPConfig("paper", noise_multiplier=1.0))
    assert type(central_dp(PrivateFL(), CentralDPConfig("reference", noise_multiplier=1.0))) is PrivateFLCentralDP
    assert type(central_dp(PrivateFL(), CentralDPConfig("dp-fedavg", noise_multiplier=1.0))) is CentralDP
