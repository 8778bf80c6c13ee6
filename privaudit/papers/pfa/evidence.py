"""Evidence for PFA / PFA+ / WeiAvg (004): accuracy of every method, ε really spent, PFA+'s uplink saving.

:func:`run_evidence` (``python benchmarks/evidence_pfa.py [--workers 2] [--quick]``) trains, on the offline
5,000-image MNIST subset (mnist5k: 4,500 training images, 500 pooled test images), the PFA logistic regression
(7,850 parameters) and the PFA CNN (26,010 parameters), IID and label-shard non-IID (10 shards per client, the paper's §5.2 split),
M ∈ {20, 30} clients, MixGauss1 budgets (the paper's Table 1 definition, variance reading, budget seed 0),
every method of the family: NP-FedAvg, Maximum, PFA, PFA+, WeiAvg, public-only FedAvg, FedAvg with
heterogeneous DP, Minimum. Then PFA and FedAvg-HDP again with the reference code's calibration on the logistic
regression. It writes the result file ``reports/evidence/pfa.json`` (kind ``pfa-evidence``: the numbers every table
prints, computed from the runs, and the runs' accuracy and uplink curves) and renders from it
(:func:`privaudit.papers.pfa.pages.page`) ``reports/pfa.md``, ``reports/pfa-accuracy-lr.png``,
``reports/pfa-accuracy-cnn.png`` and ``reports/pfa-uplink.png``; ``privaudit report reports/evidence/pfa.json --out
reports/pfa.md`` re-renders them without training.

Scaled down to fit about 20 minutes on 2 cores (the paper: 100 rounds of τ = 100 steps, 1,200 examples per
client): 15 rounds (logistic regression) and 8 rounds (CNN) of one local Poisson epoch (⌈|D_m|/B⌉ = 29
steps at M = 20, 19 at M = 30), B = 8, lr 0.1 without momentum, C = 1, δ = 1e-5, K/M = 0.8, k = 1, GMM
public/private division of all clients, σ_m calibrated by RDP for T* = ⌊K·R/M⌋ rounds, no learning-rate search.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.fl.engine.seeding import SeedTree
from privaudit.papers.pfa.budget_calibration import (
    ClientPlan,
    calibrate_clients,
    local_schedule,
    plan_client_privacy,
    summarise_privacy,
)
from privaudit.papers.pfa.budget_participation import BudgetedSampler, BudgetGate, recorded_steps
from privaudit.papers.pfa.budgets import draw_budgets
from privaudit.papers.pfa.experiment import PFAConfig, realised_steps, run_privacy, train_pfa
from privaudit.papers.pfa.uplink import full_update_bytes, projected_update_bytes
from privaudit.progress import progress_bar
from privaudit.report.evidence import write_page
from privaudit.report.results import make_result, write_result

REPORTS = Path("reports")
#: The command that runs :func:`run_evidence` (recorded in the result file with its arguments).
COMMAND = "python benchmarks/evidence_pfa.py"
METHODS = ("np-fedavg", "maximum", "pfa", "pfa-plus", "weiavg", "public-only", "fedavg-hdp", "minimum")
DISPLAY = {
    "np-fedavg": "NP-FedAvg", "maximum": "Maximum", "pfa": "PFA", "pfa-plus": "PFA+", "weiavg": "WeiAvg",
    "public-only": "public-only FedAvg", "fedavg-hdp": "FedAvg (HDP)", "minimum": "Minimum",
}
MODELS = {"pfa-lr": ("logistic regression", 7_850), "pfa-cnn": ("CNN", 26_010)}
PARTITIONS = {"iid": "IID", "shards:10": "non-IID (10 label shards per client)"}
DELTA = 1e-5


@dataclass(frozen=True)
class EvidenceRun:
    model: str
    partition: str
    clients: int
    algorithm: str
    rounds: int
    calibration: str = "rdp"
    local_steps: int = 25
    lr: float = 0.1
    seed: int = 0

    @property
    def config_key(self) -> tuple[str, str, int]:
        return (self.model, self.partition, self.clients)


def run_one(run: EvidenceRun) -> dict[str, Any]:
    """Train one run (in a worker process, one torch thread) and keep what the report needs."""
    import warnings

    import torch


    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    torch.set_num_threads(1)
    options: dict[str, Any] = {}
    if run.algorithm != "np-fedavg":
        options["noise_calibration"] = run.calibration
    config = PFAConfig(algorithm=run.algorithm, model=run.model, partition=run.partition, num_clients=run.clients,
                       rounds=run.rounds, local_steps=run.local_steps, lr=run.lr, seed=run.seed, options=options)
    started = time.perf_counter()
    result = train_pfa(config)
    seconds = time.perf_counter() - started
    report = result.report
    out: dict[str, Any] = {
        "run": asdict(run),
        "seconds": seconds,
        "accuracy": [m.test_accuracy for m in result.history],
        "trained": [m.trained for m in result.history],
        "stopped": report["participation"]["stopped"],
        "participation": report["participation"]["participation_per_client"],
        "communication": report["communication"],
        "cumulative_private": result.algorithm.uplink.cumulative("private"),
        "cumulative_all": result.algorithm.uplink.cumulative(None),
        "plan": {k: report["plan"][k] for k in ("clients_per_round", "local_steps_per_round", "operating_epsilons", "population_split")},
        "budgets": report["plan"]["budgets"]["epsilons"],
        "realised_steps": {str(k): v for k, v in realised_steps(result).items()},
    }
    if result.calibrations:
        rows = run_privacy(result, "rdp")
        out["privacy"] = [r.to_dict() for r in rows]
        out["privacy_summary"] = summarise_privacy(rows)
        out["planned_steps"] = result.calibrations[0].planned_steps
    return out


def evidence_runs(quick: bool = False) -> list[EvidenceRun]:
    rounds = {"pfa-lr": 4 if quick else 15, "pfa-cnn": 2 if quick else 8}
    models = ("pfa-lr",) if quick else ("pfa-lr", "pfa-cnn")
    runs = []
    for model in models:
        for partition in PARTITIONS:
            for clients in (20, 30):
                for algorithm in METHODS:
                    runs.append(EvidenceRun(model, partition, clients, algorithm, rounds[model]))
    for partition in PARTITIONS:
        for clients in (20, 30):
            for algorithm in ("pfa", "fedavg-hdp"):
                runs.append(EvidenceRun("pfa-lr", partition, clients, algorithm, rounds["pfa-lr"], calibration="reference"))
    return runs


def _cost(run: EvidenceRun) -> float:
    per_step = 11.0 if run.model == "pfa-cnn" else 2.0
    share = {"np-fedavg": 0.3, "public-only": 0.15}.get(run.algorithm, 1.0)
    return per_step * share * run.rounds


def run_all(runs: Sequence[EvidenceRun], workers: int) -> list[dict[str, Any]]:
    """Every run (costly ones first, in ``workers`` processes) with a progress bar; results in ``runs`` order."""
    order = sorted(range(len(runs)), key=lambda i: -_cost(runs[i]))
    results: dict[int, dict[str, Any]] = {}
    with progress_bar("PFA evidence", len(runs)) as bar:
        if workers <= 1:
            for i in order:
                results[i] = run_one(runs[i])
                bar.advance(status=_label(runs[i]))
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(run_one, runs[i]): i for i in order}
                for future in as_completed(futures):
                    i = futures[future]
                    results[i] = future.result()
                    bar.advance(status=_label(runs[i]))
    return [results[i] for i in range(len(runs))]


def _label(run: EvidenceRun) -> str:
    return f"{run.model} {run.partition} M={run.clients} {run.algorithm} ({run.calibration})"


# -- the result file: the numbers each table of the page prints -----------------------------------------
def _final(accuracy: Sequence[float | None], last: int = 3) -> float:
    values = [a for a in accuracy if a is not None][-last:]
    return statistics.fmean(values)


def _config(run: dict[str, Any]) -> dict[str, Any]:
    return {"model": run["model"], "partition": run["partition"], "clients": run["clients"]}


def paper_scale_uplink() -> list[dict[str, Any]]:
    """The paper's Fig. 7 setting computed from the upload sizes: M = 50, K = 40, 5 public clients, 100 rounds, k = 1."""
    rows = []
    for model, tensors in (("pfa-lr", 2), ("pfa-cnn", 8)):
        p = MODELS[model][1]
        # expected sampled public clients per round: 40·5/50 = 4; private: 36
        rows.append({
            "label": MODELS[model][0], "parameters": p, "tensors": tensors,
            "full_bytes": 100 * 40 * full_update_bytes(p),
            "plus_bytes": 100 * 4 * full_update_bytes(p) + 36 * full_update_bytes(p) + 99 * 36 * projected_update_bytes([1] * tensors),
            "private_full_bytes": 100 * 36 * full_update_bytes(p),
            "private_plus_bytes": 36 * full_update_bytes(p) + 99 * 36 * projected_update_bytes([1] * tensors),
        })
    return rows


def claim_table(rounds: int) -> dict[str, Any]:
    """σ and real ε of the reference closed form vs RDP calibration at this evidence's logistic-regression plan (M = 20)."""
    claimed = [0.1, 0.5, 1.0, 3.0, 5.0, 10.0]
    plan = ClientPlan(batch_size=8, clients_per_round=16, rounds=rounds, local_steps=25, delta=DELTA, num_clients=20)
    ref = plan_client_privacy(claimed, [225] * 6, plan, calibration="reference")
    real = plan_client_privacy(claimed, [225] * 6, plan, calibration="rdp")
    return {"rounds": rounds, "planned_steps_rdp": real[0].planned_steps, "planned_steps_reference": ref[0].planned_steps,
            "rows": [{"claimed": e, "sigma_reference": r.noise_multiplier, "epsilon_reference": r.epsilon_realised,
                      "sigma_rdp": q.noise_multiplier, "epsilon_rdp": q.epsilon_realised}
                     for e, r, q in zip(claimed, ref, real, strict=True)]}


def plan_tables(lr_rounds: int) -> dict[str, Any]:
    """The page's tables that need no training: the calibration claim, the participation simulation, the paper-scale uplink."""
    participation = [participation_simulation(clients, rounds, policy)
                     for clients in (20, 30) for rounds in (lr_rounds, 100) for policy in ("exclude", "record")]
    return {"claim_table": claim_table(lr_rounds), "participation": participation, "paper_scale_uplink": paper_scale_uplink()}


def evidence_data(outcomes: Sequence[dict[str, Any]], wall_seconds: float, workers: int) -> dict[str, Any]:
    """The ``pfa-evidence`` result's data, computed from the runs' outcomes (:func:`run_one`) and :func:`plan_tables`."""
    real = [o for o in outcomes if o["run"]["calibration"] == "rdp"]
    configs = list(dict.fromkeys(tuple(o["run"][k] for k in ("model", "partition", "clients")) for o in real))
    by = {(o["run"]["model"], o["run"]["partition"], o["run"]["clients"], o["run"]["algorithm"], o["run"]["calibration"]): o
          for o in outcomes}
    first = real[0]
    accuracy = [{**_config(o["run"]), "algorithm": o["run"]["algorithm"], "calibration": o["run"]["calibration"],
                 "final": _final(o["accuracy"]), "stop": o["stopped"]["round"] if o["stopped"] else None, "curve": o["accuracy"]}
                for o in outcomes]
    comparisons = []
    for key in configs:
        pfa, public_only, weiavg, fedavg = (by.get((*key, m, "rdp")) for m in ("pfa", "public-only", "weiavg", "fedavg-hdp"))
        if pfa and public_only and weiavg and fedavg:
            comparisons.append({"model": key[0], "partition": key[1], "clients": key[2],
                                "pfa_minus_public_only": _final(pfa["accuracy"]) - _final(public_only["accuracy"])})
    privacy = []
    for o in outcomes:
        run = o["run"]
        if run["model"] != "pfa-lr" or run["algorithm"] not in ("pfa", "fedavg-hdp") or "privacy" not in o:
            continue
        rows = [r for r in o["privacy"] if r["realised_steps"] > 0]
        public = set(o["plan"]["population_split"]["public"]) if o["plan"]["population_split"] else set()
        pri = [r["ratio"] for r in rows if r["client_id"] not in public]
        pub = [r["ratio"] for r in rows if r["client_id"] in public]
        summary = o["privacy_summary"]
        privacy.append({**_config(run), "algorithm": run["algorithm"], "calibration": run["calibration"],
                        "max_epsilon": summary["max_epsilon"], "mean_epsilon": summary["mean_epsilon"],
                        "private_ratio": statistics.fmean(pri) if pri else None, "public_ratio": statistics.fmean(pub) if pub else None,
                        "over_budget": len(summary["over_budget"]),
                        "fill": max(r["realised_steps"] / r["planned_steps"] for r in o["privacy"])})
    uplink = []
    for key in configs:
        pfa, plus = by.get((*key, "pfa", "rdp")), by.get((*key, "pfa-plus", "rdp"))
        if not pfa or not plus:
            continue
        cp, cq = pfa["communication"], plus["communication"]
        uplink.append({"model": key[0], "partition": key[1], "clients": key[2],
                       "pfa_private_bytes": cp["by_role"].get("private", {}).get("bytes", 0),
                       "plus_private_bytes": cq["by_role"].get("private", {}).get("bytes", 0),
                       "reduction_private": cq["reduction_private"], "reduction_all": cq["reduction_all"],
                       "accuracy_gap": _final(plus["accuracy"]) - _final(pfa["accuracy"]),
                       "cumulative": {name: {"all": o["cumulative_all"], "private": o["cumulative_private"]}
                                      for name, o in (("pfa", pfa), ("pfa-plus", plus))}})
    rounds = {model: next(o["run"]["rounds"] for o in real if o["run"]["model"] == model)
              for model in dict.fromkeys(o["run"]["model"] for o in real)}
    settings = {
        "configs": [list(k) for k in configs], "methods": list(METHODS), "display": DISPLAY, "delta": DELTA, "rounds": rounds,
        "model_names": {m: MODELS[m][0] for m in MODELS}, "model_parameters": {m: MODELS[m][1] for m in MODELS},
        "partition_names": PARTITIONS, "budgets": first["budgets"], "public": (first["plan"]["population_split"] or {}).get("public"),
    }
    return {"settings": settings, "wall_seconds": wall_seconds, "workers": workers,
            "training_seconds": sum(o["seconds"] for o in outcomes), "accuracy": accuracy, "comparisons": comparisons,
            "privacy": privacy, "uplink": uplink, **plan_tables(rounds.get("pfa-lr", 15))}


def write_evidence(data: dict[str, Any], out: Path, command: str, *, inputs: dict[str, str] | None = None,
                   origin: dict[str, Any] | None = None) -> Path:
    """Write ``out/evidence/pfa.json``, then render ``out/pfa.md`` and its figures from it."""
    result = make_result("pfa-evidence", "PFA, PFA+ and WeiAvg with heterogeneous per-client budgets", data, {"workers": data["workers"]},
                         command=command, seed=0, inputs=inputs, extra={"origin": origin} if origin else None)
    path = write_result(out / "evidence" / "pfa.json", result)
    return write_page(path, out / "pfa.md").markdown


def participation_simulation(clients: int, rounds: int, policy: str, seed: int = 0) -> dict[str, Any]:
    """Uniform K-of-M sampling with (``exclude``) or without (``record``) the pre-check, no training needed.

    Privacy depends on participation only, so the ledger of a run is simulated exactly: the logistic-regression
    plan (mnist5k IID, B = 8, one Poisson epoch per round), MixGauss1 budgets (seed 0), σ_m by RDP for T*.
    """
    size = 4_500 // clients
    per_round = int(0.8 * clients)
    budgets = draw_budgets("mixgauss1", clients, seed=0, delta=DELTA).epsilons
    q, _, tau = local_schedule(size, 8, 25)
    calibrations = calibrate_clients(budgets, [q] * clients, [tau] * clients, delta=DELTA, clients_per_round=per_round,
                                     rounds=rounds, method="rdp")
    ledger = PrivacyLedger()
    for c, e in enumerate(budgets):
        ledger.set_budget(c, e, DELTA)
    sampler = BudgetedSampler(clients, per_round, BudgetGate(calibrations, ledger), lambda ids: ((), tuple(ids)), policy=policy)
    seeds = SeedTree(seed)
    for round_ in range(1, rounds + 1):
        if sampler.can_train(round_):
            for c in sampler.sample(round_, seeds.numpy("sampling", round_)):
                ledger.record(PrivacyEvent(c, round_, calibrations[c].mechanism, tau))
    summary = ledger.summary(DELTA, accountant="rdp")
    ratios = [summary.per_client[str(c)].epsilon / budgets[c] for c in range(clients)]
    return {
        "clients": clients, "rounds": rounds, "policy": policy, "planned_rounds": calibrations[0].planned_rounds,
        "max_rounds": max(recorded_steps(ledger, c) for c in range(clients)) // tau,
        "stopped": None if sampler.stopped is None else sampler.stopped.round,
        "over_budget": sum(1 for c in summary.per_client.values() if c.over_budget), "max_ratio": max(ratios),
    }


def run_evidence(out: Path, command: str, *, workers: int = 2, quick: bool = False) -> str:
    """Train every run (``quick``: the logistic regression only, a few rounds — a smoke test), write
    ``out/evidence/pfa.json`` and render ``out/pfa.md`` and its figures from it; returns what was written, in one line."""
    runs = evidence_runs(quick)
    started = time.perf_counter()
    outcomes = run_all(runs, workers)
    data = evidence_data(outcomes, time.perf_counter() - started, workers)
    page = write_evidence(data, out, command)
    return f"wrote {out / 'evidence' / 'pfa.json'} and {page} ({len(outcomes)} runs, {data['wall_seconds'] / 60:.1f} min)"
