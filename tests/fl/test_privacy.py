"""Privatizers: clipping, noise laws and conventions, clock seeding, and the privacy events they record."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privaudit.accounting.mechanisms import Gaussian, Neighbouring, PureDP
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.algorithms.scaffold import Scaffold
from privaudit.fl.engine.algorithm import ClientContext, SetupContext
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.glm import BinaryLogisticGLM, glm_feature_norms, normalise_rows
from privaudit.fl.engine.local_solver import LocalOutcome
from privaudit.fl.engine.params import global_norm
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy import noise
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from privaudit.fl.privacy.registry import privatize
from privaudit.papers.upcycled.algorithm import Upcycled
from privaudit.papers.upcycled.objective_perturbation import (
    ObjectivePerturbation,
    ObjectivePerturbationConfig,
    objective_round_epsilon,
)
from tests.fl.conftest import make_dataset, tiny_model


def _client(client_id=0, training_round=1, size=40):
    data = make_dataset(sizes=(size,)).clients[0]
    return ClientContext(round=2 * training_round - 1, training_round=training_round, client_id=client_id, data=data, epochs=1, seeds=SeedTree(0))


def _setup(algorithm, state):
    algorithm.setup(
        SetupContext(
            model=torch.nn.Linear(5, 3), initial_state=state, trainable=tuple(state), input_shape=(5,), num_clients=10,
            client_sizes=(40,) * 10, local_lr=0.1, local_momentum=0.0, seeds=SeedTree(0),
        )
    )


def _released_noise(config, *, clock=None, rounds=40, scale=3.0):
    """Release a fixed large model many times; return (clipped model, noise draws)."""
    state = {"w": torch.full((50, 40), scale), "b": torch.linspace(-1, 1, 7)}
    kwargs = {} if clock is None else {"clock": clock}
    wrapper = OutputPerturbation(FedAvg(), config, **kwargs)
    _setup(wrapper, state)
    clipped, _ = noise.clip_to_norm(state, config.clip)
    draws = []
    for r in range(1, rounds + 1):
        outcome = LocalOutcome(client_id=0, state=state, steps=1, epochs=1, mean_loss=0.0)
        result = wrapper.finish(state, _client(training_round=r), outcome)
        draws.append(torch.cat([(result.state[k] - clipped[k]).reshape(-1) for k in state]))
    return clipped, torch.stack(draws)


def test_clipping_to_tau():
    state = {"a": torch.full((3, 4), 2.0), "b": torch.tensor([1.0, -3.0])}
    clipped, norm = noise.clip_to_norm(state, 1.5)
    assert norm == pytest.approx(math.sqrt(12 * 4 + 10))
    assert global_norm(clipped) == pytest.approx(1.5, rel=1e-6)
    small, _ = noise.clip_to_norm(state, 100.0)
    assert all(torch.equal(small[k], state[k]) for k in state)


@pytest.mark.parametrize(("convention", "expected_std"), [("sigma", 0.5), ("sigma-squared", 0.25)])
def test_output_noise_std_follows_the_convention(convention, expected_std):
    clipped, draws = _released_noise(OutputPerturbationConfig(clip=2.0, sigma=0.5, noise_std=convention))
    assert global_norm(clipped) == pytest.approx(2.0, rel=1e-6)
    values = draws.reshape(-1).double()  # 40 × 2007 draws
    assert abs(float(values.mean())) < 4 * expected_std / math.sqrt(values.numel())
    assert float(values.std()) == pytest.approx(expected_std, rel=0.02)
    assert stats.kstest(values.numpy() / expected_std, "norm").pvalue > 1e-3


def test_seeded_noise_differs_between_releases():
    _, draws = _released_noise(OutputPerturbationConfig(clip=2.0, sigma=0.5), rounds=5)
    assert len({tuple(d[:5].tolist()) for d in draws}) == 5


def test_clock_ms_noise_takes_at_most_1000_values():
    times = iter(1_700_000_000.0 + 0.000731 * k for k in range(3000))
    _, draws = _released_noise(OutputPerturbationConfig(clip=2.0, sigma=0.5, rng="clock-ms"), clock=lambda: next(times), rounds=3000, scale=0.01)
    distinct = {d.numpy().tobytes() for d in draws}
    assert len(distinct) <= 1000
    assert len(distinct) > 900  # 3000 readings spread over the milliseconds hit almost every seed


def test_clock_ms_reproduces_the_reference_generator():
    """Seeding torch's global generator with the clock's milliseconds and drawing per tensor gives the same noise."""
    now = 1_700_000_123.4567
    state = {"w": torch.zeros(4, 3), "b": torch.zeros(3)}
    wrapper = OutputPerturbation(FedAvg(), OutputPerturbationConfig(clip=10.0, sigma=0.8, noise_std="sigma-squared", rng="clock-ms"), clock=lambda: now)
    _setup(wrapper, state)
    released = wrapper.finish(state, _client(), LocalOutcome(0, state, 1, 1, 0.0)).state
    assert noise.clock_ms_seed(now) == 456
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(456)
        expected = {k: torch.normal(0, 0.8**2, size=v.size()) for k, v in state.items()}
    assert all(torch.equal(released[k], expected[k]) for k in state)


def test_output_perturbation_events():
    data = make_dataset()
    config = FederationConfig(rounds=3, local=LocalTrainingConfig(epochs=1, batch_size=8), seed=1)
    algorithm = privatize(FedProx(0.1), "output-perturbation", clip=10.0, noise=0.8)  # as the paper registers it
    result = run_federation(data, tiny_model(), algorithm, config, progress=False)
    events = result.ledger.events
    assert len(events) == 3 * 6 and {e.round for e in events} == {1, 2, 3}
    sizes = {str(i): c.num_train for i, c in enumerate(data.clients)}
    for event in events:
        assert event.mechanism == Gaussian(noise_multiplier=0.8, sensitivity=10.0 / sizes[event.client_id])
        assert event.valid and any("τ/|D_i|" in a and "Thm 6.2" in a for a in event.assumptions)
    assert result.ledger.neighbouring is Neighbouring.ADD_REMOVE


def test_output_perturbation_event_variants():
    state = {"w": torch.ones(3)}
    cases = {
        "clock": (OutputPerturbationConfig(clip=1.0, sigma=0.5, rng="clock-ms"), FedAvg()),
        "diameter": (OutputPerturbationConfig(clip=1.0, sigma=0.5, noise_std="sigma-squared", sensitivity="clip-diameter"), FedAvg()),
        "scaffold": (OutputPerturbationConfig(clip=1.0, sigma=0.5), Scaffold()),
    }
    events = {}
    for name, (config, inner) in cases.items():
        wrapper = OutputPerturbation(inner, config, clock=lambda: 12.3456)
        _setup(wrapper, state)
        events[name] = wrapper.finish(state, _client(), LocalOutcome(0, {"w": torch.zeros(3)}, 2, 1, 0.0)).events[-1]
    assert not events["clock"].valid and "U5" in events["clock"].note
    assert events["diameter"].valid and events["diameter"].mechanism == Gaussian(noise_multiplier=0.25, sensitivity=2.0)
    assert any("U1" in a for a in events["diameter"].assumptions)
    assert not events["scaffold"].valid and "control_delta" in events["scaffold"].note


def _paper_law_draw(like, alpha: float, seed: int) -> torch.Tensor:
    """What :func:`noise.objective_noise_paper` must draw for ``seed``: ‖n‖ ~ Gamma(d, rate α), then a standard normal direction."""
    d = sum(v.numel() for v in like.values())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        radius = torch.distributions.Gamma(torch.tensor(float(d), dtype=torch.float64), torch.tensor(float(alpha), dtype=torch.float64)).sample()
        direction = torch.randn(d, dtype=torch.float64)
    return (direction * (radius / direction.norm())).float()


#: Draws of the vectorised law checks below (the old per-seed loops took 1,500 draws at ~1–5 ms each).
LAW_DRAWS = 20_000


def test_objective_noise_norm_is_gamma_d_alpha_and_direction_isotropic():
    like = {"w": torch.zeros(2, 3), "b": torch.zeros(1)}  # d = 7
    # 1. the function is exactly the draw of the stated law, seed by seed (draw order and parameterisation included)
    for seed in range(20):
        drawn = torch.cat([v.reshape(-1) for v in noise.objective_noise_paper(like, 3.0, seed).values()])
        assert torch.equal(drawn, _paper_law_draw(like, 3.0, seed))
    # 2. the law, on LAW_DRAWS vectorised draws of the same sampler calls: ‖n‖ ~ Gamma(7, rate 3), n/‖n‖ uniform on S⁶
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        radii = torch.distributions.Gamma(torch.tensor(7.0, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)).sample((LAW_DRAWS,))
        directions = torch.randn(LAW_DRAWS, 7, dtype=torch.float64)
    draws = directions * (radii / directions.norm(dim=1)).unsqueeze(1)
    norms = draws.norm(dim=1).numpy()
    assert stats.kstest(norms, stats.gamma(a=7, scale=1 / 3.0).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(a=6.5, scale=1 / 3.0).cdf).pvalue < 1e-6  # tells shapes 0.5 apart (1,500 draws: 2 apart)
    assert stats.kstest(norms, stats.gamma(a=3, scale=1 / 7.0).cdf).pvalue < 1e-6  # and a swapped (shape, rate)
    unit = draws / draws.norm(dim=1, keepdim=True)
    # uniform on S^{d−1}: E u_i = 0, Var u_i = 1/d, E u_i² = 1/d, Var u_i² = 3/(d(d+2)) − 1/d²; 5 standard errors of the means
    d, n = 7, LAW_DRAWS
    assert float(unit.mean(dim=0).abs().max()) < 5 * math.sqrt(1 / d / n)  # 0.0085 (was 0.06)
    second_moment_se = math.sqrt((3 / (d * (d + 2)) - 1 / d**2) / n)
    torch.testing.assert_close((unit**2).mean(dim=0), torch.full((7,), 1 / 7, dtype=torch.float64), atol=5 * second_moment_se, rtol=0)


def test_objective_noise_reference_law():
    like = {"w": torch.zeros(2, 20), "b": torch.zeros(2)}
    # 1. the function is exactly the reference code's draw, seed by seed: cube directions per tensor, Gamma(feature_len,
    #    rate α) scaled by the *sum* of the per-tensor direction norms
    for seed in (*range(19), 77):
        drawn = noise.objective_noise_reference(like, 10.0, 20, seed=seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            directions = {k: torch.rand(v.shape) - 0.5 for k, v in like.items()}
            total = sum(torch.norm(d) for d in directions.values())
            radius = torch.distributions.gamma.Gamma(20.0, 10.0).sample()
        for k in like:  # equal up to the order of the float32 products
            torch.testing.assert_close(drawn[k], directions[k] * radius / total)
    # 2. the radius law of that draw, on LAW_DRAWS vectorised calls of the same sampler: Gamma(shape 20, rate 10)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        radii = torch.distributions.gamma.Gamma(20.0, 10.0).sample((LAW_DRAWS,)).double().numpy()
    assert stats.kstest(radii, stats.gamma(a=20, scale=0.1).cdf).pvalue > 1e-3
    assert stats.kstest(radii, stats.gamma(a=19, scale=0.1).cdf).pvalue < 1e-6  # the test tells shapes apart
    assert stats.kstest(radii, stats.gamma(a=10, scale=1 / 20).cdf).pvalue < 1e-6  # and a swapped (shape, rate)


def test_objective_perturbation_events_and_assumption_checks():
    data = make_dataset(sizes=(30, 40), dim=4, num_classes=2)
    config = FederationConfig(rounds=2, local=LocalTrainingConfig(epochs=1, batch_size=8), seed=0)

    def events(inner, objective_config):
        result = run_federation(data, tiny_model(dim=4, num_classes=2), ObjectivePerturbation(inner, objective_config), config, progress=False)
        assert result.ledger.neighbouring is Neighbouring.REPLACE_ONE
        return result.ledger.events

    fedavg = events(FedAvg(), ObjectivePerturbationConfig(alpha=10.0))
    assert len(fedavg) == 4
    assert all(e.mechanism == PureDP(epsilon=math.inf, proven_for=Neighbouring.REPLACE_ONE) and not e.valid for e in fedavg)
    assert all("μ > 0" in e.note for e in fedavg)
    fedprox = events(FedProx(0.5), ObjectivePerturbationConfig(alpha=10.0, noise_law="reference", rng="clock-ms"))
    expected = objective_round_epsilon(10.0, 1.0, 0.25, 0.5, 30)
    assert fedprox[0].mechanism.epsilon == pytest.approx(expected) == pytest.approx((2 * 10 * 0.5 + 0.7) / 15)
    note = fedprox[0].note
    for failure in ("U6a/b", "U6c", "U5", "‖v‖ ≤ 1"):
        assert failure in note
    tiny_mu = events(FedProx(0.001), ObjectivePerturbationConfig(alpha=10.0))
    assert "u₂ ≤ 0.5|D_i|μ" in tiny_mu[0].note


def test_glm_mode_runs_theorem_6_3s_setting():
    data = normalise_rows(make_dataset(sizes=(30, 45), dim=4, num_classes=2))
    norms = glm_feature_norms(BinaryLogisticGLM(4), data.clients[1].x_train)
    assert norms.max() <= 1.0
    algorithm = ObjectivePerturbation(FedProx(1.0), ObjectivePerturbationConfig(alpha=5.0, solver="exact", grad_tol=1e-8))
    result = run_federation(data, BinaryLogisticGLM(4), algorithm, FederationConfig(rounds=2, seed=0), progress=False)
    assert all(e.valid for e in result.ledger.events), result.ledger.events[0].note
    assert all(any("L-BFGS gradient norm" in a and a.startswith("holds") for a in e.assumptions) for e in result.ledger.events)


def test_exact_minimiser_satisfies_the_first_order_condition():
    """∇F_i(ω) + μ(ω − ω̄) + n = 0 at the released model (the condition Thm 6.3's proof inverts)."""
    from privaudit.fl.engine.glm import ExactMinimiser, minimise_exactly
    from privaudit.fl.engine.local_training import LocalObjective

    data = normalise_rows(make_dataset(sizes=(25,), dim=4, num_classes=2)).clients[0]
    model = BinaryLogisticGLM(4)
    anchor = {"weight": torch.tensor([0.3, -0.2, 0.1, 0.0])}
    n = {"weight": torch.tensor([0.05, 0.02, -0.04, 0.01])}
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    objective = LocalObjective(anchor=anchor, prox=0.7, linear=n, solver=ExactMinimiser(grad_tol=1e-8))
    state, info = minimise_exactly(model, ("weight",), anchor, x, y, objective)
    assert info["converged"] and info["grad_norm"] <= 1e-8
    w = state["weight"].double().requires_grad_()
    logits = torch.stack([torch.zeros(len(x), dtype=torch.float64), x.double() @ w], dim=1)
    (grad,) = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, y), w)
    residual = grad + 0.7 * (w.detach() - anchor["weight"].double()) + n["weight"].double()
    assert float(residual.norm()) < 1e-6  # float32 rounding of the returned model


def test_glm_feature_norms_of_a_two_class_softmax():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3, 2))
    x = np.array([[0.6, 0.0, 0.8]])
    assert glm_feature_norms(model, x)[0] == pytest.approx(math.sqrt(2) * math.sqrt(2))
    assert glm_feature_norms(torch.nn.Sequential(torch.nn.Linear(3, 3)), x) is None


def test_privacy_registry():
    wrapped = privatize(FedProx(0.5), "output-perturbation", clip=10, noise=1.0, noise_std="sigma-squared")
    assert isinstance(wrapped, OutputPerturbation) and wrapped.config.std == 1.0
    assert privatize(FedAvg(), "none").name == "fedavg"
    upcycled = Upcycled(privatize(FedProx(0.1), "objective-perturbation", alpha=20), u=0.7)
    assert upcycled.name == "upcycled-fedprox+objective-perturbation"
    with pytest.raises(InvalidParameterError, match="--clip τ and --noise σ"):
        privatize(FedAvg(), "output-perturbation", clip=10)
    with pytest.raises(InvalidParameterError, match="--alpha does not apply to privacy mechanism output-perturbation"):
        privatize(FedAvg(), "output-perturbation", clip=1, noise=1, alpha=3)
    with pytest.raises(InvalidParameterError, match="noise-std must be one of"):
        privatize(FedAvg(), "output-perturbation", clip=1, noise=1, noise_std="sigma-cubed")
    with pytest.raises(InvalidParameterError, match="unknown privacy mechanism"):
        privatize(FedAvg(), "laplace")
