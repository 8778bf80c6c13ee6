"""The Upcycled-FL README's private FedAvg run, re-run with privaudit as the reference code runs it.

The reference README's output-perturbation command for the vanilla baseline (osu-srml/Upcycled-FL@4dd7400:README.md)::

    python -u train.py --baseline avg --algorithm Vanilla --seed 2 --dataset synthetic_0.5_0.5 --epochs 80 --frac 1
        --local_ep 10 --lr 7e-2 --upcycled_param 0 --clip 10 --sigma 1 --alpha 0 --local_bs 32 --gpu 0

run here on Synthetic iid (``synthetic_iid``: d = 20, C = 2, 30 clients): FedAvg, all clients every round, no
stragglers, E = 10, B = 32, momentum 0.5 (train.py's default), lr 0.07, 80 rounds, τ = 10, σ = 1 with the noise
drawn as the reference code draws it — std σ² (audit point U1), seeded from the clock's milliseconds with the
simulated clock of :mod:`privaudit.fl.privacy.clock_seed` (audit point U5) — and the reference's double softmax
(its ``LogisticRegression`` ends in ``Softmax`` under ``CrossEntropyLoss``). Reported as the reference's log is
read: test and training accuracy of the global model, each the mean over the last 10 rounds.

The same run from the command line (one seed)::

    privaudit train --algorithm fedavg --dataset synthetic:iid --dataset-option dim=20 --dataset-option num_classes=2
        --rounds 80 --local-epochs 10 --batch-size 32 --lr 0.07 --privacy output-perturbation --clip 10 --noise 1
        --noise-std sigma-squared --noise-rng clock-ms --double-softmax --eval-train-loss --seed 0 --out runs/readme

``python benchmarks/upcycled_readme_run.py --seeds 0 1 2 --data-seeds 0 1`` runs a grid of training and
data seeds (:func:`run_readme` each) and prints one line per run (with Σ p_i², the weight the aggregated noise keeps: see :func:`noise_weight`).
Variants for comparison: ``--noise-rng seeded`` (independent seeded noise), ``--real-clock`` (clock-ms read from
``time.time`` when each release is privatized: privaudit's behaviour before the simulated clock, where a round's
clients, privatized in one loop, share a few milliseconds), ``--no-double-softmax``, ``--no-privacy``, and
``--reference-sizes`` (FedProx's iid procedure with the reference files' client sizes, :func:`reference_sized_iid`).
``--reference-data CHECKOUT`` trains on the reference repository's own ``synthetic_iid`` files (features, labels, clients
and pooled test set, :func:`~privaudit.papers.upcycled.reference_data.load_reference_synthetic`): the data the
reference's README run uses; ``benchmarks/reference_upcycled.py`` runs the reference code beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privaudit.data import load_dataset
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from privaudit.fl.run import TrainSpec, run_training
from privaudit.papers.upcycled.reference_data import load_reference_synthetic
from privaudit.papers.upcycled.specs import SENSITIVITY_SOURCE

#: Rounds averaged for the reported accuracies (the issue's target: mean of the last 10 rounds).
LAST_ROUNDS = 10
#: Training examples per client of the reference's synthetic_iid files, read off
#: osu-srml/Upcycled-FL@4dd7400:data/synthetic_iid/data/train/user_groups.json (6,043 in all; Σ p_i² = 0.0516).
#: The features and labels themselves (``mytrain.pt``, ``mytest.pt``) are in the reference repository too and load with
#: torch 2.13: ``--reference-data CHECKOUT`` trains on them (:mod:`privaudit.papers.upcycled.reference_data`).
REFERENCE_TRAIN_SIZES = (446, 49, 367, 72, 417, 53, 144, 155, 78, 122, 467, 100, 53, 142, 45,
                         399, 296, 69, 385, 221, 117, 76, 189, 467, 482, 198, 133, 60, 68, 173)
#: Test examples per client of the same files (osu-srml/Upcycled-FL@4dd7400:data/synthetic_iid/data/test/user_groups.json;
#: 683 in all, the pooled test set the reference evaluates on). Each client's total n_k satisfies ⌊0.9 n_k⌋ = its training
#: size, but not every total is the smallest that does (clients 3 and 20 have 9 and 14, not 8 and 13).
REFERENCE_TEST_SIZES = (50, 6, 41, 9, 47, 6, 16, 18, 9, 14, 52, 12, 6, 16, 5,
                        45, 33, 8, 43, 25, 14, 9, 21, 52, 54, 22, 15, 7, 8, 20)


def readme_spec(seed: int = 0, data_seed: int = 0, *, rounds: int = 80, double_softmax: bool = True,
                noise_rng: str = "clock-ms", private: bool = True):
    """The README private run as a :class:`~privaudit.fl.run.TrainSpec` (module docstring)."""
    return TrainSpec(
        algorithm="fedavg",
        dataset="synthetic:iid",
        rounds=rounds,
        model="logreg",
        privacy="output-perturbation" if private else "none",
        privacy_options={"clip": 10.0, "noise": 1.0, "noise_std": "sigma-squared", "noise_rng": noise_rng} if private else {},
        local=LocalTrainingConfig(epochs=10, batch_size=32, lr=0.07, momentum=0.5, double_softmax=double_softmax),
        clients_per_round=1.0,
        stragglers=0.0,
        seed=seed,
        data_seed=data_seed,
        dataset_options={"dim": 20, "num_classes": 2},
        eval_train_loss=True,
    )


def reference_sized_iid(seed: int = 0, dim: int = 20, num_classes: int = 2):
    """FedProx's Synthetic iid procedure (:mod:`privaudit.data.synthetic`: x ~ N(0, diag(j^−1.2)), one global W, b,
    y = argmax(xW + b), 90 % / 10 % train/test split per client) with the reference files' client sizes instead of
    drawn ones: client k has :data:`REFERENCE_TRAIN_SIZES`[k] training and :data:`REFERENCE_TEST_SIZES`[k] test
    examples (6,043 and 683). Only the sizes are the reference's; features, model and labels are drawn from ``seed``."""
    import numpy as np


    rng = np.random.default_rng(seed)
    feature_std = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2)
    weights = rng.normal(0.0, 1.0, size=(dim, num_classes))
    bias = rng.normal(0.0, 1.0, size=num_classes)
    clients = []
    for train, test in zip(REFERENCE_TRAIN_SIZES, REFERENCE_TEST_SIZES, strict=True):
        x = rng.standard_normal((train + test, dim)) * feature_std
        y = np.argmax(x @ weights + bias, axis=1)
        clients.append(ClientData(x[:train], y[:train], x[train:], y[train:]))
    everything = np.concatenate([np.concatenate([c.x_train, c.x_test]) for c in clients])
    return FederatedDataset(name="synthetic:iid (reference sizes)", clients=clients, num_classes=num_classes, input_shape=(dim,),
                            data_range=(float(everything.min()), float(everything.max())),
                            metadata={"source": "FedProx Synthetic iid procedure, Upcycled-FL synthetic_iid client sizes",
                                      "iid": True, "dim": dim, "seed": int(seed), "partition": "natural", "input_kind": "features"})


def noise_weight(sizes: Sequence[int]) -> float:
    """Σ p_i² with p_i = |D_i|/Σ|D_j|: the example-weighted average of the clients' releases carries noise of
    variance (σ²)²·Σ p_i² per coordinate, so this is what the data's client sizes do to the released model's noise
    (the reference's synthetic_iid files: 0.0516, from the sizes in their ``user_groups.json``)."""
    total = float(sum(sizes))
    return sum((s / total) ** 2 for s in sizes)


@dataclass(frozen=True)
class ReadmeRun:
    seed: int
    data_seed: int
    test_accuracy: float  # mean of the last LAST_ROUNDS rounds
    train_accuracy: float
    noise_weight: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _tail_mean(values: Sequence[float | None]) -> float:
    kept = [float(v) for v in values if v is not None][-LAST_ROUNDS:]
    return statistics.fmean(kept)


def _with_real_clock(spec, dataset):
    """``spec`` run with clock-ms read from ``time.time`` at each release (the behaviour the simulated clock replaced)."""
    import time


    options = spec.privacy_options
    config = OutputPerturbationConfig(clip=options["clip"], sigma=options["noise"], noise_std=options["noise_std"], rng="clock-ms")
    algorithm = make_algorithm(spec.algorithm, {}, privatizer=lambda inner: OutputPerturbation(
        inner, config, clock=time.time, sensitivity_source=SENSITIVITY_SOURCE))
    return run_federation(dataset, spec.model, algorithm, spec.federation_config(), progress=False)


def run_readme(seed: int = 0, data_seed: int = 0, *, real_clock: bool = False, reference_sizes: bool = False,
               reference_data: str | None = None, **options: Any) -> ReadmeRun:
    """Train one README private run; accuracies are means over the last :data:`LAST_ROUNDS` rounds. ``reference_sizes``
    trains on :func:`reference_sized_iid` instead of ``synthetic:iid``, ``reference_data`` (a checkout of the reference
    repository) on its own ``synthetic_iid`` files (``data_seed`` then plays no part)."""
    spec = readme_spec(seed, data_seed, **options)
    if reference_data is not None:
        dataset = load_reference_synthetic(reference_data, "synthetic_iid")
    elif reference_sizes:
        dataset = reference_sized_iid(data_seed)
    else:
        dataset = load_dataset(spec.dataset, seed=spec.data_seed, **spec.dataset_options)
    if real_clock:
        result = _with_real_clock(spec, dataset)
    else:
        result = run_training(spec, dataset=dataset, progress=False)
    return ReadmeRun(seed, data_seed, _tail_mean([m.test_accuracy for m in result.history]),
                     _tail_mean([m.global_train_accuracy for m in result.history]),
                     noise_weight([int(n) for n in dataset.client_sizes]), result.seconds)
