"""What ``privaudit attack membership`` asks, as one checked value, and the library function that runs it.

A :class:`MembershipRequest` names a trained federation's checkpoint, a membership-inference attack
(:mod:`attacks.membership.registry`: the threshold attacks of Yeom et al. 2018 and Song & Mittal 2021, or LiRA, Carlini
et al. 2022, with its shadow federations), the threat model (the final global model, or every client release) and
where the work runs. Making it checks every field — the attack, threat model and executor, LiRA's shadows, the worker
and thread counts, ``--out`` (before any work), the device, and that the checkpoint can be attacked (its model can be
rebuilt, its members are known) — each failure one :class:`~privaudit.errors.InvalidParameterError` naming the flag.
:func:`run_request` runs it and returns the scores with what a result records of them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attacks.membership import run as membership_run
from attacks.membership.registry import ATTACKS
from attacks.membership.releases import CheckpointReleases
from attacks.membership.scores import MembershipScores
from attacks.membership.target import TargetModel
from privaudit.device import device_record, resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.architecture import rebuildable
from privaudit.fl.engine.checkpoint import read_manifest
from privaudit.fl.engine.recorded_data import data_problem, is_recorded
from privaudit.request_checks import check_out_folder, check_threads, check_workers
from privaudit.stats.metrics import attack_metrics

#: The files ``--out`` receives (:func:`attacks.membership.run.write_membership_attack`); LiRA keeps its shadow trials
#: in ``--out``/shadows.
OUT_FILES = ("membership-attack.json", "membership-scores.npz")
EXECUTORS = ("in-process", "process", "ray")
#: Bootstrap resamples of the 95 % BCa intervals of AUC and TPR at low FPR.
BOOTSTRAP_RESAMPLES = 1000


@dataclass(frozen=True)
class MembershipRequest:
    """One membership attack on ``checkpoint`` (the global model of ``round``, default the last); LiRA's shadows
    (``shadows``, ``mode``, ``variance``, ``shadow_batch``) train on ``executor`` with ``workers`` (at ``address`` for
    Ray) on ``device``; ``max_examples`` members and non-members at most; ``trust_factory`` names the model factory a
    recorded checkpoint may import. Checked when made."""

    checkpoint: Path
    attack: str = "loss"
    shadows: int = 16
    mode: str = "online"
    variance: str = "auto"
    executor: str = "in-process"
    shadow_batch: bool = True
    workers: int | None = None
    address: str | None = None
    threat_model: str = "final-model"
    round: int | None = None
    max_examples: int | None = None
    seed: int = 0
    out: Path | None = None
    threads: int = 1
    device: str = "cpu"
    trust_factory: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "attack", self.attack.strip().lower())
        self._check_settings()
        if self.out is not None:
            check_out_folder(self.out, OUT_FILES)
            if (self.out / "shadows").is_file():
                raise InvalidParameterError(f"--out {self.out}: {self.out / 'shadows'} is a file; LiRA keeps its shadow trials in "
                                            "that folder")
        self._check_checkpoint()
        resolved = resolve_device(self.device)  # an absent device is one line, before any work
        if self.attack != "lira" and resolved.type != "cpu":
            raise InvalidParameterError(f"--device applies to LiRA's shadow training; the {self.attack} attack scores the "
                                        "target on the CPU")
        if self.attack == "lira" and resolved.type != "cpu":
            raise InvalidParameterError(f"LiRA's shadows train on the CPU only in this version; --device {self.device} is not "
                                        "supported")

    def _check_settings(self) -> None:
        if self.attack not in ATTACKS:
            raise InvalidParameterError(f"unknown membership attack {self.attack!r}; choose one of: {', '.join(ATTACKS)}")
        if self.threat_model not in membership_run.THREAT_MODELS:
            raise InvalidParameterError(f"unknown threat model {self.threat_model!r}; use {' or '.join(membership_run.THREAT_MODELS)}")
        if self.executor not in EXECUTORS:
            raise InvalidParameterError(f"unknown executor {self.executor!r}; choose one of: {', '.join(EXECUTORS)}")
        if self.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise InvalidParameterError("the ray executor needs Ray, which is not installed: pip install 'privaudit[ray]'")
        if self.attack == "lira" and self.shadows < 2:
            raise InvalidParameterError(f"LiRA needs at least 2 shadow models (--shadows), got {self.shadows}")
        if self.attack == "lira" and self.threat_model != "final-model":
            raise InvalidParameterError("LiRA is implemented for the final-model threat model only")
        if self.max_examples is not None and self.max_examples < 1:
            raise InvalidParameterError(f"--max-examples must be at least 1, got {self.max_examples}")
        check_threads(self.threads)
        check_workers(self.workers, local=self.executor != "ray")  # as audit and train: a local pool no larger than the cores

    def _check_checkpoint(self) -> None:
        """The checkpoint can be attacked: its model rebuilt, its members known (torch-free, nothing trained)."""
        checkpoint, trust_factory = self.checkpoint, self.trust_factory
        manifest = read_manifest(checkpoint)  # a missing or tampered checkpoint fails here
        described = manifest["model"].get("architecture")
        if trust_factory is not None and (described.get("factory") if isinstance(described, dict) else None) != trust_factory:
            raise InvalidParameterError(f"--trust-factory {trust_factory}: {checkpoint} is not built by that factory")
        if not manifest["model"].get("name"):
            problem = rebuildable(manifest["model"], trust_factory) if described else "it was trained with a custom module"
            if problem:
                raise InvalidParameterError(f"{checkpoint}: {problem}; the attack rebuilds the model from the checkpoint")
        if not manifest.get("train_spec"):
            if self.attack == "lira":
                raise InvalidParameterError(f"{checkpoint} records no training recipe (train_spec): LiRA retrains its federation, "
                                            "which only checkpoints of privaudit train allow; use a threshold attack (--attack loss)")
            if not is_recorded(manifest):
                raise InvalidParameterError(f"{checkpoint} records no training recipe (train_spec), so its members are unknown; "
                                            "train it with privaudit train")
            problem = data_problem(manifest)
            if problem:
                raise InvalidParameterError(f"{checkpoint}: {problem}")
        if self.threat_model == "client-releases" and not manifest.get("save_client_updates"):
            raise InvalidParameterError(f"{checkpoint} holds no client releases: the client-releases threat model needs a "
                                        "checkpoint trained with --save-client-updates")

    def lira_options(self, progress: bool) -> dict[str, Any]:
        """LiRA's configuration (:class:`attacks.membership.lira_attack.LiRAConfig`); none for a threshold attack."""
        if self.attack != "lira":
            return {}
        return {"shadows": self.shadows, "mode": self.mode, "variance": self.variance, "executor": self.executor,
                "workers": self.workers, "address": self.address, "seed": self.seed, "progress": progress,
                "shadow_batch": self.shadow_batch, "out_dir": None if self.out is None else str(self.out / "shadows")}


@dataclass(frozen=True)
class MembershipOutcome:
    """The attack's scores, the configuration a result records, and bootstrap intervals (``None``: too few scores)."""

    scores: MembershipScores
    config: dict[str, Any]
    intervals: dict[str, Any] | None


def run_request(request: MembershipRequest, *, progress: bool = True) -> MembershipOutcome:
    """Score the checkpoint's members and non-members with the requested attack (``progress``: LiRA's bar)."""
    torch.set_num_threads(request.threads)
    options = request.lira_options(progress)
    target = TargetModel.from_checkpoint(request.checkpoint, request.round, trust_factory=request.trust_factory)
    releases = CheckpointReleases(request.checkpoint) if request.threat_model == "client-releases" else None
    scores = membership_run.run_membership_attack(target, request.attack, options=options, threat_model=request.threat_model,
                                                  releases=releases, max_examples=request.max_examples, seed=request.seed)
    config = {"checkpoint": str(request.checkpoint), "attack": request.attack, "threat_model": request.threat_model,
              "round": request.round, "max_examples": request.max_examples, "seed": request.seed,
              **device_record(resolve_device(request.device)),
              **({"lira": {k: v for k, v in options.items() if k != "progress"}} if options else {})}
    return MembershipOutcome(scores, config, bootstrap_intervals(scores, request.seed))


def bootstrap_intervals(scores: MembershipScores, seed: int) -> dict[str, Any] | None:
    """95 % BCa bootstrap intervals (seeded, stratified) for AUC and TPR at 0.1 % / 1 % FPR; None with < 2 scores a side."""
    if scores.n_in < 2 or scores.n_out < 2:
        return None
    metrics = attack_metrics(scores.in_scores, scores.out_scores, n_resamples=BOOTSTRAP_RESAMPLES, seed=seed)
    tprs = {format(f, "g"): interval.to_dict() for f, interval in zip((0.001, 0.01), metrics.tpr_at_fpr, strict=True)}
    return {"auc": metrics.auc.to_dict(), "tpr_at_fpr": tprs}
