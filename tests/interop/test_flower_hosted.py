"""privaudit's algorithms hosted in Flower's simulation agree with privaudit's engine (same seeds, same data).

One Flower simulation (Ray on this machine, no network): Upcycled-FedProx under client-level central DP (DP-FedAvg,
Poisson client sampling), which exercises FedProx's local objective in the ClientApps, Upcycled-FL's even rounds
(no message sent, the server extrapolates) and the cdp privatizer's per-round ledger events at the server.
"""

from __future__ import annotations

import pytest

pytest.importorskip("flwr")

from privaudit.fl.engine import params as P
from privaudit.fl.engine.checkpoint import read_manifest
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.run import TrainSpec, run_training
from privaudit.interop.flower import run_spec_in_flower

SPEC = TrainSpec(algorithm="upcycled-fedprox", dataset="digits", rounds=4, model="logreg", num_clients=4,
                 algorithm_options={"mu": 0.1}, clients_per_round=0.5, sampling="poisson",
                 local=LocalTrainingConfig(epochs=1, batch_size=64, lr=0.2), privacy="cdp",
                 privacy_options={"clip": 1.0, "noise": 0.3}, seed=3, execution="sequential")


def test_flower_hosted_run_matches_the_engine(tmp_path):
    engine = run_training(SPEC, progress=False)
    flower = run_spec_in_flower(SPEC, tmp_path / "flower")
    # the same clients in the same rounds; Upcycled-FL's even rounds train nobody in either
    assert [m.clients for m in flower.history] == [m.clients for m in engine.history]
    assert [m.trained for m in flower.history] == [True, False, True, False]
    # the same models (float32 transport, one thread per client: summation order may differ in the last bit)
    assert P.allclose(flower.state, engine.state, rtol=1e-5, atol=1e-6)
    assert not P.allclose(flower.state, flower.info.initial_state)
    for a, b in zip(flower.history, engine.history, strict=True):  # a last-bit difference may flip one test example
        assert a.test_accuracy == pytest.approx(b.test_accuracy, abs=0.005)
        assert a.test_loss == pytest.approx(b.test_loss, rel=1e-4)
    # the same ledger: one client-level Poisson-subsampled Gaussian event per training round, at the server
    assert flower.ledger.to_dict() == engine.ledger.to_dict()
    assert len(flower.ledger.events) == 2 and all(e.client_id == "server" for e in flower.ledger.events)
    assert flower.ledger.summary(1e-5).max_epsilon == engine.ledger.summary(1e-5).max_epsilon
    manifest = read_manifest(tmp_path / "flower")
    assert manifest["flower"]["hosted"] is True and manifest["train_spec"]["algorithm"] == "upcycled-fedprox"
