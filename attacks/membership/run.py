"""Run a record-level membership attack on a target and write the ``membership-attack`` result.

Threat models:

* ``final-model`` — the attacker queries the final global model; members are every client's training
  records, non-members the clients' held-out records (:mod:`attacks.membership.examples`);
* ``client-releases`` — the server's view: each client's released model of the last training round is
  attacked on that client's own records (needs the releases, i.e. a checkpoint trained with
  ``--save-client-updates``); the per-client scores are concatenated.

The result file (``privaudit.report.results``, kind ``membership-attack``) holds the empirical ROC, AUC and
TPR at 0.1 % and 1 % FPR; the raw score arrays go to a sidecar ``.npz`` so the auditor can bound ε from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from attacks.metrics import roc_curve
from privaudit.errors import InvalidParameterError
from privaudit.report.results import make_result, write_result

from .base import MembershipAttack
from .examples import client_examples, examples_from_dataset
from .registry import build_attack
from .releases import FederationReleases
from .scores import MembershipScores, concatenate
from .target import TargetModel

THREAT_MODELS = ("final-model", "client-releases")
RESULT_FILE = "membership-attack.json"
SCORES_FILE = "membership-scores.npz"


def run_membership_attack(
    target: TargetModel,
    attack: str | MembershipAttack,
    *,
    options: dict[str, Any] | None = None,
    threat_model: str = "final-model",
    releases: FederationReleases | None = None,
    max_examples: int | None = None,
    seed: int = 0,
) -> MembershipScores:
    """Scores of ``attack`` (a registry name with ``options``, or a built attack) on ``target``'s data."""
    if threat_model not in THREAT_MODELS:
        raise InvalidParameterError(f"unknown threat model {threat_model!r}; use {' or '.join(THREAT_MODELS)}")
    built = build_attack(attack, **(options or {})) if isinstance(attack, str) else attack
    dataset = target.require_dataset(f"the {built.name} attack")
    if threat_model == "final-model":
        examples = examples_from_dataset(dataset, max_per_side=max_examples, seed=seed)
        return built.run(target, examples).with_meta(threat_model=threat_model, examples_per_side_cap=max_examples)
    if "recipe" in built.needs:
        raise InvalidParameterError(f"the {built.name} attack is implemented for the final-model threat model only")
    if releases is None:
        raise InvalidParameterError("the client-releases threat model needs the run's releases (a checkpoint with client updates)")
    if not releases.trained_rounds:
        raise InvalidParameterError(f"{releases.source} has no round that trained clients")
    last = releases.trained_rounds[-1]
    parts = []
    for client, state in sorted(releases.client_releases(last).items()):
        if client >= dataset.num_clients:
            continue
        examples = client_examples(dataset, client).subsample(max_examples, seed + client)
        if examples.n_members == 0 or examples.n_members == len(examples):
            continue
        parts.append(built.run(target.with_state(state, f"{releases.source}, client {client}, round {last}"), examples))
    if not parts:
        raise InvalidParameterError(f"no client released a model with both training and held-out records in round {last}")
    return concatenate(parts, {**parts[0].meta, "target": releases.source, "threat_model": threat_model,
                               "round": last, "clients": len(parts)})


def roc_points(scores: MembershipScores, max_points: int = 2000) -> dict[str, list[float]]:
    """The empirical ROC (``attacks.metrics.roc_curve``), thinned to about ``max_points`` points.

    Every point with FPR ≤ 1 % is kept (the low-FPR region is what matters, Carlini et al. 2022 §III); the
    rest are taken evenly.
    """
    fpr, tpr, _ = roc_curve(scores.in_scores, scores.out_scores)
    if len(fpr) > max_points:
        keep = np.union1d(np.flatnonzero(fpr <= 0.01), np.linspace(0, len(fpr) - 1, max_points).round().astype(np.int64))
        fpr, tpr = fpr[keep], tpr[keep]
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist()}


def membership_attack_data(scores: MembershipScores, *, scores_file: str | None = None,
                           intervals: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``data`` of a ``membership-attack`` result for ``scores`` (``intervals``: bootstrap CIs the auditor adds)."""
    summary = scores.summary()
    meta = {k: v for k, v in scores.meta.items() if k != "config"}
    return {
        **({} if intervals is None else {"intervals": intervals}),
        "attack": scores.meta.get("attack", "?"),
        "threat_model": scores.meta.get("threat_model"),
        "roc": roc_points(scores),
        "auc": summary["auc"],
        "tpr_at_fpr": summary["tpr_at_fpr"],
        "n_in": scores.n_in,
        "n_out": scores.n_out,
        "score_convention": "larger means member",
        "scores_file": scores_file,
        "meta": meta,
    }


def write_membership_attack(out_dir: str | Path, scores: MembershipScores, *, title: str, config: dict[str, Any],
                            command: str | None = None, seed: int | None = None,
                            intervals: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``<out_dir>/membership-attack.json`` and the raw scores ``<out_dir>/membership-scores.npz``."""
    out = Path(out_dir)
    npz = scores.save_npz(out / SCORES_FILE)
    data = membership_attack_data(scores, scores_file=SCORES_FILE, intervals=intervals)
    result = make_result("membership-attack", title, data, config, command=command, seed=seed)
    return write_result(out / RESULT_FILE, result), npz
