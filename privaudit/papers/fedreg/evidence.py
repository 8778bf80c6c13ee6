"""Evidence for FedReg (Xu et al., ICLR 2022): convergence (the paper's R_a, Table 1) and accuracy vs DP-SGD (Table 4).

Run ``python benchmarks/evidence_fedreg.py`` (seeded, CPU, one torch thread). It trains, writes the result file
``reports/evidence/fedreg.json`` (kind ``fedreg-evidence``: the settings, every run's configuration, accuracy curve,
ε and wall time, and the derived tables) and renders from it, with :func:`privaudit.papers.fedreg.pages.page`,

* ``reports/fedreg.md`` — the scale of the runs, the R_a table per partition, final accuracies with ε, the
  Table 4 analogue and the audit notes;
* ``reports/fedreg-convergence.png`` — test accuracy per round, every method, both partitions;
* ``reports/fedreg-accuracy.png`` — final accuracy of FedAvg+DP-SGD against ε, with FedAvg, FedReg, FedReg+MG.

The result file declares its two inputs, which the page joins and which must exist: the inversion evidence
(``reports/evidence/inversion.json``, ``python benchmarks/evidence_inversion.py``) and the claims
audit (``reports/claims-audit/results.json``, ``make claims``). ``privaudit report reports/evidence/fedreg.json
--out reports/fedreg.md`` re-renders the page without training (e.g. after either input changed).

(a) R_a (paper Table 1): SGD (FedSGD: one full-batch step per client and round), FedAvg, FedProx, FedCurv and
FedReg train the same federation for the same rounds; R_a is the first round whose test accuracy reaches
a × SGD's final accuracy, for a ∈ {0.5, 0.9, 1.0} ("—": never within the rounds run).
(b) Final test accuracy of FedAvg, FedAvg + local DP-SGD at σ ∈ {1e-3, 1e-2, 1e-1, 1} (C = 1, Poisson rate
batch/|D_i|; ε at δ = 1e-5 from the run's ledger by the RDP accountant, max over clients), FedReg and
FedReg+MG (no DP guarantee: ε = ∞) on one federation.

:func:`~privaudit.papers.fedreg.table4.table4` joins (b) with the PSNR per defence measured by the inversion
experiments (the paper's Table 4 compares accuracy at "similar PSNR", not at matched ε).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from privaudit.data import load_dataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import RoundObserver, run_federation
from privaudit.fl.privacy.registry import privatize
from privaudit.papers.fedreg.table4 import DP_METHOD
from privaudit.progress import progress_bar
from privaudit.report.evidence import write_page
from privaudit.report.results import make_result, write_result

__all__ = ["EvidenceConfig", "derive_tables", "r_a", "run_evidence", "write_evidence"]

RA_LEVELS = (0.5, 0.9, 1.0)
#: The command that runs this module's experiment (recorded in the result file with its arguments).
COMMAND = "python benchmarks/evidence_fedreg.py"


@dataclass(frozen=True)
class EvidenceConfig:
    """The scaled-down setting (defaults: MNIST-like, one- and two-class clients, the paper's MNIST hyper-parameters)."""

    dataset: str = "mnist5k"
    model: str = "fedreg-mlp"
    num_clients: int = 100
    clients_per_round: float = 0.1
    rounds: int = 40
    local_epochs: int = 5
    batch_size: int = 10
    lr: float = 0.1
    seed: int = 0
    data_seed: int = 0
    #: (label, partition spec, FedProx μ, FedReg γ) — paper App. B.2 MNIST: one class μ 0.01 γ 0.3; two classes μ 0.001 γ 0.4.
    partitions: tuple[tuple[str, str, float, float], ...] = (
        ("one class per client", "shards:1", 0.01, 0.3),
        ("two classes per client", "shards:2", 0.001, 0.4),
    )
    convergence_methods: tuple[str, ...] = ("sgd", "fedavg", "fedprox", "fedcurv", "fedreg")
    fedreg_eta_s: float = 0.2
    fedcurv_lambda: float = 1e-4
    fgsm_steps: int = 10
    #: FedReg+MG: η_s of App. B.4 (EMNIST), γ and learning rate as FedReg.
    mg_eta_s: float = 0.03
    #: (b) runs on this partition (index into ``partitions``); the paper's Table 4 EMNIST clients hold one class.
    privacy_partition: int = 0
    sigmas: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)
    clip: float = 1.0
    delta: float = 1e-5
    accountant: str = "rdp"
    out_dir: str = "reports"
    threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def r_a(curve: Sequence[float | None], reference: float, a: float) -> int | None:
    """The first (1-based) round whose accuracy is ≥ a·reference (FedReg Table 1's R_a); ``None`` if never."""
    target = a * reference
    for index, value in enumerate(curve):
        if value is not None and value >= target - 1e-12:
            return index + 1
    return None


# -- runs ----------------------------------------------------------------------------------------------
def _build(method: str, cfg: EvidenceConfig, mu: float, gamma: float, sigma: float | None):
    if method == "sgd":
        return make_algorithm("sgd")
    if method == "fedavg":
        return make_algorithm("fedavg")
    if method == "fedprox":
        return make_algorithm("fedprox", {"mu": mu})
    if method == "fedcurv":
        return make_algorithm("fedcurv", {"fedcurv_lambda": cfg.fedcurv_lambda})
    if method == "fedreg":
        return make_algorithm("fedreg", {"fedreg_gamma": gamma, "fedreg_eta_s": cfg.fedreg_eta_s, "fgsm_steps": cfg.fgsm_steps})
    if method == "fedreg-mg":
        return make_algorithm("fedreg-mg", {"fedreg_gamma": gamma, "fedreg_eta_s": cfg.mg_eta_s, "fgsm_steps": cfg.fgsm_steps})
    if method == DP_METHOD:
        return make_algorithm("fedavg", privatizer=lambda a: privatize(a, "dp-sgd", {"clip": cfg.clip, "noise": sigma}))
    raise InvalidParameterError(f"unknown evidence method {method!r}")


def _epsilon(result, cfg: EvidenceConfig) -> tuple[float, str]:
    """(max over clients of ε at δ, guarantee) from the run's ledger; ε = ∞ when the run has no DP guarantee."""
    if not result.ledger.events:
        return math.inf, "no DP guarantee (no privacy mechanism)"
    summary = result.ledger.summary(cfg.delta, accountant=cfg.accountant)
    eps = summary.max_epsilon
    if math.isinf(eps):
        return eps, "no DP guarantee (ε = ∞ in the ledger)"
    return eps, f"record-level ({eps:.4g}, {cfg.delta:g})-DP per client ({summary.accountant}, max over clients)"


def run_evidence(cfg: EvidenceConfig, *, progress: bool = True) -> dict[str, Any]:
    """Run every training of (a) and (b); returns the runs and the derived tables (nothing written)."""
    import torch


    torch.set_num_threads(cfg.threads)
    plan: list[tuple[int, str, float | None]] = []
    for p in range(len(cfg.partitions)):
        plan += [(p, m, None) for m in cfg.convergence_methods]
    plan += [(cfg.privacy_partition, DP_METHOD, s) for s in cfg.sigmas]
    plan.append((cfg.privacy_partition, "fedreg-mg", None))
    for needed in ("fedavg", "fedreg"):  # (b) reuses (a)'s runs of these on the privacy partition
        if needed not in cfg.convergence_methods:
            plan.append((cfg.privacy_partition, needed, None))

    federation = FederationConfig(
        rounds=cfg.rounds,
        local=LocalTrainingConfig(epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.lr, momentum=0.0),
        clients_per_round=cfg.clients_per_round,
        seed=cfg.seed,
    )
    datasets = {}
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    class Ticker(RoundObserver):
        def __init__(self, label: str) -> None:
            self.label = label

        def on_round_end(self, round, state, results, metrics) -> None:
            acc = "" if metrics.test_accuracy is None else f"acc {metrics.test_accuracy:.3f}"
            bar.advance(status=f"{self.label} r{round} {acc}")

    with progress_bar("FedReg evidence", len(plan) * cfg.rounds, enabled=progress) as bar:
        for index, method, sigma in plan:
            label, partition, mu, gamma = cfg.partitions[index]
            if partition not in datasets:
                datasets[partition] = load_dataset(cfg.dataset, num_clients=cfg.num_clients, partition=partition, seed=cfg.data_seed)
            algorithm = _build(method, cfg, mu, gamma, sigma)
            name = method if sigma is None else f"{method} σ={sigma:g}"
            result = run_federation(datasets[partition], cfg.model, algorithm, federation,
                                    observers=[Ticker(f"{label}: {name}")], progress=False)
            eps, guarantee = _epsilon(result, cfg)
            runs.append({
                "partition": label,
                "partition_spec": partition,
                "method": method,
                "sigma": sigma,
                "algorithm": result.info.algorithm,
                "curve": [m.test_accuracy for m in result.history],
                "final_accuracy": result.final_accuracy,
                "epsilon": eps,
                "delta": cfg.delta,
                "guarantee": guarantee,
                "seconds": result.seconds,
                "dataset": result.info.dataset,
            })
    wall = time.perf_counter() - started
    return {"config": asdict(cfg), "runs": runs, "seconds": wall, **derive_tables(cfg, runs)}


def derive_tables(cfg: EvidenceConfig, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """R_a per partition and method, and the (b) accuracy records."""
    ra: dict[str, list[dict[str, Any]]] = {}
    for label, *_ in cfg.partitions:
        here = [r for r in runs if r["partition"] == label and r["method"] in cfg.convergence_methods and r["sigma"] is None]
        sgd = next((r for r in here if r["method"] == "sgd"), None)
        reference = sgd["final_accuracy"] if sgd else None
        rows = []
        for r in here:
            levels = {f"R_{a:.1f}": (r_a(r["curve"], reference, a) if reference is not None else None) for a in RA_LEVELS}
            rows.append({"method": r["method"], **levels, "accuracy": r["final_accuracy"], "seconds": r["seconds"]})
        ra[label] = rows
    privacy_label = cfg.partitions[cfg.privacy_partition][0]
    accuracy = []
    order = ["fedavg", DP_METHOD, "fedreg", "fedreg-mg"]
    chosen = [r for r in runs if r["partition"] == privacy_label and r["method"] in order]
    chosen.sort(key=lambda r: (order.index(r["method"]), r["sigma"] or 0.0))
    for r in chosen:
        accuracy.append({
            "method": r["method"],
            "sigma": r["sigma"],
            "epsilon": r["epsilon"] if math.isfinite(r["epsilon"]) else "inf",
            "delta": r["delta"],
            "accuracy": r["final_accuracy"],
            "guarantee": r["guarantee"],
        })
    reference = {label: next((r["final_accuracy"] for r in runs if r["partition"] == label and r["method"] == "sgd"), None)
                 for label, *_ in cfg.partitions}
    return {"r_a": ra, "sgd_reference": reference, "accuracy": accuracy}


# -- the result file -----------------------------------------------------------------------------------
def evidence_data(evidence: Mapping[str, Any], cfg: EvidenceConfig) -> dict[str, Any]:
    """The ``fedreg-evidence`` result's data: settings, every run, the wall time and the derived R_a / accuracy tables."""
    settings = asdict(cfg)
    settings.pop("out_dir")  # where it was written, not how it was run
    return {"settings": settings, "runs": list(evidence["runs"]), "seconds": evidence["seconds"],
            "r_a": evidence["r_a"], "sgd_reference": evidence["sgd_reference"], "accuracy": list(evidence["accuracy"])}


def write_evidence(evidence: Mapping[str, Any], cfg: EvidenceConfig, *, inversion: str | Path | None = None,
                   claims_audit: str | Path | None = None, command: str = COMMAND,
                   origin: dict[str, Any] | None = None) -> Path:
    """Write ``<out_dir>/evidence/fedreg.json`` declaring its two inputs, then render ``<out_dir>/fedreg.md`` from it.

    ``inversion`` (default ``<out_dir>/evidence/inversion.json``, written by
    ``python benchmarks/evidence_inversion.py``) and ``claims_audit`` (default
    ``<out_dir>/claims-audit/results.json``, written by ``make claims``) are declared relative to the result file;
    rendering fails with one error naming the file if either is missing. ``origin`` marks a result file made from
    an earlier run's committed output (recorded in its provenance and shown on the page).
    """
    out = Path(cfg.out_dir)
    result_path = out / "evidence" / "fedreg.json"
    declared = {"inversion": Path(inversion) if inversion is not None else out / "evidence" / "inversion.json",
                "claims_audit": Path(claims_audit) if claims_audit is not None else out / "claims-audit" / "results.json"}
    inputs = {name: os.path.relpath(path.resolve(), result_path.parent.resolve()) for name, path in declared.items()}
    result = make_result("fedreg-evidence", "FedReg evidence: convergence (R_a) and accuracy vs DP-SGD", evidence_data(evidence, cfg),
                         {"threads": cfg.threads}, command=command, seed=cfg.seed, inputs=inputs,
                         extra={"origin": origin} if origin else None)
    write_result(result_path, result)
    return write_page(result_path, out / "fedreg.md").markdown
