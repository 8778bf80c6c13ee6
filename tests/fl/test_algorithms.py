"""The seven base algorithms: each learns on a tiny problem, and each server/client rule is the paper's."""

from __future__ import annotations

import pytest
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.fedavgm import FedAvgM
from privaudit.fl.algorithms.feddyn import FedDyn
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.algorithms.fedyogi import FedYogi
from privaudit.fl.algorithms.pfedme import PFedMe
from privaudit.fl.algorithms.registry import algorithm_specs, make_algorithm
from privaudit.fl.algorithms.scaffold import Scaffold
from privaudit.fl.engine.algorithm import ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.evaluation import Evaluator
from privaudit.fl.engine.local_solver import LocalOutcome
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.papers.upcycled.algorithm import Upcycled
from tests.fl.conftest import make_dataset, tiny_model

ALGORITHMS = {
    "fedavg": FedAvg,
    "fedprox": lambda: FedProx(0.1),
    "fedavgm": FedAvgM,
    "scaffold": Scaffold,
    "feddyn": lambda: FedDyn(0.01),
    "pfedme": lambda: PFedMe(lam=5.0, inner_steps=2, personal_lr=0.05),
    "fedyogi": lambda: FedYogi(server_lr=0.05),
}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_each_algorithm_reduces_training_loss(name):
    data = make_dataset()
    config = FederationConfig(rounds=8, local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.05), clients_per_round=0.5, seed=3, eval_train_loss=True, eval_every=8)
    result = run_federation(data, tiny_model(), ALGORITHMS[name](), config, progress=False)
    initial = Evaluator(result.info.model, data, train_loss=True).evaluate(result.info.initial_state).train_loss
    final = result.history[-1].global_train_loss
    assert final < 0.75 * initial, f"{name}: {initial:.3f} → {final:.3f}"


def _setup(algorithm, state, num_clients=4, lr=0.1, momentum=0.0):
    algorithm.setup(
        SetupContext(
            model=torch.nn.Linear(1, 1),
            initial_state=state,
            trainable=tuple(state),
            input_shape=(1,),
            num_clients=num_clients,
            client_sizes=(1,) * num_clients,
            local_lr=lr,
            local_momentum=momentum,
            seeds=SeedTree(0),
        )
    )


def _result(cid, n, w, **extras):
    return ClientResult(client_id=cid, num_examples=n, state={"w": torch.tensor(w)}, train_loss=0.0, steps=1, epochs=1, extras=extras)


def test_fedavg_weights_by_examples():
    algorithm = FedAvg()
    _setup(algorithm, {"w": torch.tensor([0.0])})
    out = algorithm.aggregate(1, {"w": torch.tensor([0.0])}, [_result(0, 1, [1.0]), _result(1, 3, [5.0])])
    torch.testing.assert_close(out["w"], torch.tensor([4.0]))


def test_fedavgm_server_momentum():
    algorithm = FedAvgM(server_momentum=0.5, server_lr=2.0)
    x0 = {"w": torch.tensor([1.0])}
    _setup(algorithm, x0)
    x1 = algorithm.aggregate(1, x0, [_result(0, 1, [0.0])])  # Δ = 1, v = 1, x = 1 − 2·1
    torch.testing.assert_close(x1["w"], torch.tensor([-1.0]))
    x2 = algorithm.aggregate(2, x1, [_result(0, 1, [-2.0])])  # Δ = 1, v = 0.5 + 1, x = −1 − 3
    torch.testing.assert_close(x2["w"], torch.tensor([-4.0]))


def test_fedyogi_update():
    algorithm = FedYogi(server_lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
    x0 = {"w": torch.tensor([0.0, 0.0])}
    _setup(algorithm, x0)
    out = algorithm.aggregate(1, x0, [_result(0, 1, [0.5, -0.2])])
    delta = torch.tensor([0.5, -0.2])
    m = 0.1 * delta
    v = torch.full((2,), 1e-6) - 0.01 * delta**2 * torch.sign(1e-6 - delta**2)
    torch.testing.assert_close(out["w"], 0.1 * m / (v.sqrt() + 1e-3))


def test_scaffold_control_variates():
    algorithm = Scaffold(server_lr=1.0)
    x = {"w": torch.tensor([1.0])}
    _setup(algorithm, x, num_clients=4, lr=0.1, momentum=0.5)
    client = ClientContext(round=1, training_round=1, client_id=2, data=make_dataset(sizes=(3,), dim=1).clients[0], epochs=1, seeds=SeedTree(0))
    assert torch.equal(algorithm.local_objective(x, client).linear["w"], torch.tensor([0.0]))
    outcome = LocalOutcome(client_id=2, state={"w": torch.tensor([0.4])}, steps=3, epochs=1, mean_loss=0.0)
    result = algorithm.finish(x, client, outcome)
    # c_i⁺ = c_i − c + (x − y)/(K η/(1 − m)) = 0 − 0 + 0.6/(3 · 0.2) = 1
    torch.testing.assert_close(result.extras["control_delta"]["w"], torch.tensor([1.0]))
    algorithm.aggregate(1, x, [result])
    torch.testing.assert_close(algorithm.server_control["w"], torch.tensor([0.25]))  # c += (|S|/N)·mean Δc
    torch.testing.assert_close(algorithm.local_objective(x, client).linear["w"], torch.tensor([0.25 - 1.0]))


def test_feddyn_state_and_server_rule():
    algorithm = FedDyn(alpha=0.5)
    theta = {"w": torch.tensor([2.0])}
    _setup(algorithm, theta, num_clients=2)
    client = ClientContext(round=1, training_round=1, client_id=0, data=make_dataset(sizes=(3,), dim=1).clients[0], epochs=1, seeds=SeedTree(0))
    objective = algorithm.local_objective(theta, client)
    assert objective.prox == 0.5 and torch.equal(objective.linear["w"], torch.tensor([0.0]))
    result = algorithm.finish(theta, client, LocalOutcome(0, {"w": torch.tensor([3.0])}, 1, 1, 0.0))
    torch.testing.assert_close(algorithm.local_objective(theta, client).linear["w"], torch.tensor([0.5]))  # −g_i, g_i = −α(3 − 2)
    out = algorithm.aggregate(1, theta, [result])
    # h = 0 − α/N·(3 − 2) = −0.25; θ = 3 − h/α = 3.5
    torch.testing.assert_close(out["w"], torch.tensor([3.5]))


def test_pfedme_server_mixing():
    algorithm = PFedMe(beta=0.5)
    x = {"w": torch.tensor([2.0])}
    _setup(algorithm, x)
    torch.testing.assert_close(algorithm.aggregate(1, x, [_result(0, 1, [4.0])])["w"], torch.tensor([3.0]))


def test_registry_builds_every_algorithm_and_its_upcycled_version():
    specs = algorithm_specs()
    for base in ALGORITHMS:
        assert base in specs and f"upcycled-{base}" in specs
    algorithm = make_algorithm("upcycled-fedprox", {"mu": 0.5, "upcycle": 0.7})
    assert isinstance(algorithm, Upcycled) and algorithm.u == 0.7 and algorithm.inner.mu == 0.5
    assert make_algorithm("upcycled-fedprox", mu=0.1, lam=0.04).u == pytest.approx(0.1 / 0.14)
    assert make_algorithm("pfedme", pfedme_k=3).solver.inner_steps == 3
    with pytest.raises(InvalidParameterError, match="--mu does not apply to algorithm fedavg"):
        make_algorithm("fedavg", mu=0.5)
    with pytest.raises(InvalidParameterError, match="unknown algorithm"):
        make_algorithm("fedsgd")
    with pytest.raises(InvalidParameterError, match="μ > 0"):
        make_algorithm("upcycled-fedavg", lam=0.1)
    with pytest.raises(InvalidParameterError, match="either --upcycle"):
        make_algorithm("upcycled-fedprox", mu=0.1, lam=0.1, upcycle=0.3)


def test_client_update_is_one_clients_round():
    """The architecture's single-client entry point gives what the federation's first round computes."""
    from privaudit.fl.engine.round_loop import RoundObserver

    class FirstRound(RoundObserver):
        def on_round_end(self, round, state, results, metrics):
            if round == 1:
                self.results = {r.client_id: r for r in results}

    data = make_dataset()
    observer = FirstRound()
    config = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=2, batch_size=8, lr=0.05), seed=9, execution="sequential")
    algorithm = FedProx(0.2)
    result = run_federation(data, tiny_model(), algorithm, config, observers=[observer], progress=False)
    initial = result.info.initial_state
    client = ClientContext(round=1, training_round=1, client_id=3, data=data.clients[3], epochs=2, seeds=SeedTree(9))
    single = algorithm.client_update(initial, client)
    assert all(torch.equal(single.state[k], observer.results[3].state[k]) for k in initial)


def test_wrappers_pass_every_capability_through_and_a_wrapper_overrides_its_own():
    from privaudit.accounting.mechanisms import Neighbouring
    from privaudit.fl.engine.capabilities import (
        ClientSelection,
        LocalStepForm,
        ModelChoice,
        NeighbouringRelation,
        OwnPrivacyAccounting,
        ProximalTerm,
        ReleaseBound,
        RunReport,
    )
    from privaudit.fl.privacy.registry import privatize

    plain = make_algorithm("upcycled-fedprox", mu=0.4, privatizer=lambda a: privatize(a, "none"))
    assert ProximalTerm.of(plain).proximal_mu == 0.4 and NeighbouringRelation.of(plain).neighbouring is Neighbouring.ADD_REMOVE
    assert plain.capability(OwnPrivacyAccounting) is None and ReleaseBound.of(plain).release_clip is None
    assert ClientSelection.of(plain).select_clients(1, None) is None
    assert RunReport.of(plain).manifest_sections() == {} and ModelChoice.of(plain).model_for("logreg") == "logreg"
    clipped = make_algorithm("upcycled-fedprox", mu=0.4, privatizer=lambda a: privatize(a, "output-perturbation", clip=3.0, noise=1.0))
    assert ReleaseBound.of(clipped).release_clip == 3.0 and ProximalTerm.of(clipped).proximal_mu == 0.4
    objective = make_algorithm("upcycled-fedprox", mu=0.4, privatizer=lambda a: privatize(a, "objective-perturbation", alpha=2.0))
    # the privatizer's own relation, seen through Upcycled
    assert NeighbouringRelation.of(objective).neighbouring is Neighbouring.REPLACE_ONE
    pfa = make_algorithm("pfa", privatizer=lambda a: privatize(a, "none"))
    assert pfa.capability(OwnPrivacyAccounting) is pfa.inner  # PFA's, through NoPrivacy
    assert not LocalStepForm.of(make_algorithm("pfedme", privatizer=lambda a: privatize(a, "none"))).dp_sgd_compatible
    assert not hasattr(plain, "find")  # capabilities are declared, not looked up by name


def test_an_algorithm_with_its_own_privacy_modes_takes_privacy_itself():
    from privaudit.fl.algorithms.registry import algorithm_spec
    from privaudit.fl.privacy.registry import privatize

    assert algorithm_spec("upcycled-privatefl").privacy_modes == ("none", "ldp", "cdp", "ddp")
    assert make_algorithm("privatefl", epsilon=4.0, privacy="ldp").name == "privatefl"  # the mechanism is built at start
    with pytest.raises(InvalidParameterError, match="runs its own privacy modes"):
        make_algorithm("privatefl", privatizer=lambda a: privatize(a, "none"))
    with pytest.raises(InvalidParameterError, match="no privacy modes of its own"):
        make_algorithm("fedavg", privacy="ldp")
    assert algorithm_spec("pfa").defaults("none") == {"batch_size": 8, "momentum": 0.0, "lr": 0.1, "model": "pfa-lr"}
    assert algorithm_spec("privatefl").defaults("cdp", {"cdp_variant": "dp-fedavg"})["sampling"] == "poisson"
    assert algorithm_spec("fedavg").defaults("none") == {}
